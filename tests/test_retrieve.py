"""Two-phase retrieval (MemRL): ranking invariants, policies, filters, config, prompt text."""

from __future__ import annotations

import itertools
import json
import math
import uuid
from collections.abc import Sequence

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from graphmem import GraphMemory, HashingEmbedder
from graphmem.config import MEMP_RANDOM, RetrievalConfig, RetrievePolicy
from graphmem.errors import ConfigError, InvalidInput, InvalidNamespace
from graphmem.models import (
    CORRECTION_SOURCE,
    Edge,
    EdgeKind,
    Note,
    Procedure,
    Step,
    Tip,
    TipPolarity,
)
from graphmem.ops.retrieve import QPrior, Retrieval, prior_q, rank_candidates, retrieve, zscores
from graphmem.stores.base import MemoryStore

DIM = 384


class TableEmbedder:
    """Embeds known texts as hand-made vectors (so tests control every similarity)."""

    def __init__(self, table: dict[str, Sequence[float]] | None = None) -> None:
        self.table = dict(table or {})
        self._fallback = HashingEmbedder(DIM)

    name = "table"
    dimension = DIM

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        rows = [
            np.asarray(self.table[t], dtype=np.float32)
            if t in self.table
            else self._fallback.embed([t])[0]
            for t in texts
        ]
        return np.stack(rows) if rows else np.zeros((0, DIM), dtype=np.float32)


def basis(i: int) -> np.ndarray:
    v = np.zeros(DIM)
    v[i] = 1.0
    return v


def at_sim(s: float, axis: int) -> list[float]:
    """A unit vector whose cosine with ``basis(0)`` is exactly ``s`` (up to float32)."""
    return list(s * basis(0) + math.sqrt(max(0.0, 1.0 - s * s)) * basis(axis))


def proc(
    namespace: str, name: str, vector: Sequence[float], q: float = 0.5, **kw: object
) -> Procedure:
    return Procedure(
        namespace=namespace,
        task_text=name,
        key=name,
        granularity="trajectory",
        embedding=list(vector),
        q=q,
        **kw,  # type: ignore[arg-type]
    )


QUERY = "the query"


def memory_with(store: MemoryStore) -> GraphMemory:
    return GraphMemory(store, embedder=TableEmbedder({QUERY: basis(0)}))


# ---- z-scores ----------------------------------------------------------------------------


def test_zscores_of_small_pools() -> None:
    assert zscores([]) == []
    assert zscores([0.7]) == [0.0]
    assert zscores([0.3, 0.3, 0.3]) == [0.0, 0.0, 0.0]
    assert zscores([0.0, 1.0]) == pytest.approx([-1.0, 1.0])


@given(st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=30))
def test_zscores_are_standardised_or_zero(values: list[float]) -> None:
    z = zscores(values)
    assert len(z) == len(values)
    assert all(math.isfinite(v) for v in z)
    if max(values) - min(values) <= 1e-12 * max(1.0, *map(abs, values)):
        assert z == [0.0] * len(values)
    else:
        assert sum(z) / len(z) == pytest.approx(0.0, abs=1e-6)
        assert math.sqrt(sum(v * v for v in z) / len(z)) == pytest.approx(1.0, abs=1e-6)
        # z-scoring preserves order
        order = sorted(range(len(values)), key=lambda i: values[i])
        assert all(z[a] <= z[b] + 1e-12 for a, b in itertools.pairwise(order))


def test_two_candidates_at_half_lambda_tie_and_sim_breaks_it() -> None:
    """In a pool of two, z-scores are ±1: at λ=0.5 disagreeing sim and q tie; sim decides."""
    a = proc("x", "a", basis(1), q=0.1)
    b = proc("x", "b", basis(2), q=0.9)
    hits = rank_candidates([(a, 0.9), (b, 0.8)], lam=0.5, k2=2)
    assert [h.memory.task_text for h in hits] == ["a", "b"]
    assert hits[0].score == pytest.approx(hits[1].score)
    assert [h.memory.task_text for h in rank_candidates([(a, 0.9), (b, 0.8)], 0.6, 2)] == [
        "b",
        "a",
    ]


def test_utility_ranks_experience_not_notes_by_default() -> None:
    """Q re-ranks procedures and tips; a note's usefulness depends on the question, so by
    default notes rank by similarity alone (utility_kinds), and opting Note in restores Q."""
    low = Note(namespace="x", content="the descaler is under the sink", embedding=list(basis(3)))
    high = Note(namespace="x", content="the descaler is in the garage", embedding=list(basis(4)))
    low, high = low.model_copy(update={"q": 0.0}), high.model_copy(update={"q": 1.0})
    pool = [(low, 0.9), (high, 0.8)]
    cfg = RetrievalConfig()
    assert set(cfg.utility_kinds) == {"Procedure", "Tip"}
    by_default = rank_candidates(pool, 0.9, 2, utility_kinds=cfg.utility_kinds)
    assert [h.memory.content for h in by_default] == [low.content, high.content]
    assert [h.z_q for h in by_default] == [0.0, 0.0]
    with_notes = rank_candidates(pool, 0.9, 2, utility_kinds=("Note",))
    assert [h.memory.content for h in with_notes] == [high.content, low.content]
    # Mixed pools: a procedure's Q still counts beside notes that carry none.
    a, b = proc("x", "a", basis(1), q=0.0), proc("x", "b", basis(2), q=1.0)
    pool3 = [(a, 0.9), (b, 0.8), (low, 0.85)]
    mixed = rank_candidates(pool3, 0.9, 3, utility_kinds=("Procedure",))
    assert mixed[0].memory.id == b.id and mixed[-1].memory.id == a.id


def test_source_prior_counts_the_game_a_procedure_came_from_as_its_first_use() -> None:
    """q_prior='source': a procedure built from a won game starts above one from a lost game
    (both untried, Q = Q0); the stored Q is reported unchanged."""
    won = proc("x", "won", basis(1), reward=1.0, success=True)
    lost = proc("x", "lost", basis(2), reward=0.0)
    pool = [(lost, 0.9), (won, 0.8)]
    plain = rank_candidates(pool, 0.5, 2)
    assert [h.memory.task_text for h in plain] == ["lost", "won"]  # equal Q: sim decides
    prior = QPrior(q0=0.5, alpha=0.1, source=True, pool=False)
    seeded = rank_candidates(pool, 0.6, 2, q_prior=prior)
    assert [h.memory.task_text for h in seeded] == ["won", "lost"]
    assert [h.q for h in seeded] == [0.5, 0.5]
    # A note has no source episode: it keeps its stored Q.
    assert prior_q([0.5], [0], [None], prior) == [0.5]


def test_a_correction_carries_no_source_outcome() -> None:
    """update's corrections (source='adjustment') were never played as they stand: the reward
    they carry (a reference's, or none) is no outcome of their steps, so the source prior
    leaves them at Q0. Before, a correction copied from a won reference started above a gold
    procedure whose Q one poor replay had moved down."""
    gold = proc("x", "gold", basis(1), reward=1.0, success=True)
    gold = gold.model_copy(update={"q": 0.47, "q_updates": 1, "uses": 1})  # one poor replay
    fix = proc("x", "fix", basis(2), reward=1.0, success=True)
    fix = fix.model_copy(update={"source": CORRECTION_SOURCE})
    prior = QPrior(q0=0.5, alpha=0.1, source=True, pool=False)
    ranked = rank_candidates([(fix, 0.9), (gold, 0.9)], 1.0, 2, q_prior=prior)
    assert [h.memory.task_text for h in ranked] == ["gold", "fix"]
    # The gold one: 0.47 + 0.9 * 0.1 * (1.0 - 0.5) = 0.515 > the correction's 0.5.
    assert prior_q([0.47, 0.5], [1, 0], [1.0, None], prior) == pytest.approx([0.515, 0.5])


def test_pool_prior_ranks_an_untried_memory_like_the_tried_ones_beside_it() -> None:
    """Rewards {0, 1}, Q0 = 0.5, α = 0.1. In a pool where memories mostly fail, one that won
    1 of 3 uses has Q < Q0, so with the stored Q an untried memory outranks it; with
    q_prior='pool' the untried one is valued at the pool's mean reward instead."""
    alpha, q0 = 0.1, 0.5

    def after(rewards: Sequence[float]) -> float:
        q = q0
        for r in rewards:
            q += alpha * (r - q)
        return q

    some = proc("x", "some", basis(1), q=after([1, 0, 0]), uses=3)
    never = proc("x", "never", basis(2), q=after([0, 0, 0]), uses=3)
    untried = proc("x", "untried", basis(3))
    pool = [(untried, 0.8), (some, 0.8), (never, 0.8)]
    assert [h.memory.task_text for h in rank_candidates(pool, 0.5, 3)] == [
        "untried",
        "some",
        "never",
    ]
    prior = QPrior(q0=q0, alpha=alpha, source=False, pool=True)
    ranked = rank_candidates(pool, 0.5, 3, q_prior=prior)
    assert [h.memory.task_text for h in ranked] == ["some", "untried", "never"]
    valued = prior_q([untried.q, some.q, never.q], [0, 3, 3], [None] * 3, prior)
    # "some" earned 1, 0, 0: as its Q weighs them (the oldest by α(1 − α)²), a mean of
    # 0.081 / (1 − 0.9³); "never" earned 0. Weighted by uses, μ is half of that.
    assert valued[0] == pytest.approx(0.5 * 0.081 / (1 - 0.9**3))
    # A pool with no tried memory keeps the stored Q.
    assert prior_q([0.5, 0.5], [0, 0], [None, None], prior) == [0.5, 0.5]


def test_retrieve_applies_the_configured_q_prior(namespace: str, store: MemoryStore) -> None:
    store.upsert(
        [
            proc(namespace, "lost", at_sim(0.9, 1), reward=0.0),
            proc(namespace, "won", at_sim(0.8, 2), reward=1.0, success=True),
        ]
    )
    mem = memory_with(store)
    cfg = RetrievalConfig(k1=2, k2=1, lam=0.6, q_prior="q0")
    assert [h.memory.task_text for h in mem.retrieve(namespace, QUERY, cfg).hits] == ["lost"]
    seeded = cfg.model_copy(update={"q_prior": "source"})
    assert [h.memory.task_text for h in mem.retrieve(namespace, QUERY, seeded).hits] == ["won"]
    # 'source' is the default: a procedure from a won game outranks a nearer one from a lost game.
    default = RetrievalConfig(k1=2, k2=1, lam=0.6)
    assert default.q_prior == "source"
    assert [h.memory.task_text for h in mem.retrieve(namespace, QUERY, default).hits] == ["won"]
    with pytest.raises(ValueError):
        RetrievalConfig(q_prior="optimistic")  # type: ignore[arg-type]


# ---- ranking invariants on a real store ----------------------------------------------------

pools = st.lists(
    st.tuples(st.integers(-90, 99), st.integers(-100, 200)),
    min_size=1,
    max_size=10,
    unique_by=lambda t: t[0],
)


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    pool=pools,
    k1=st.integers(1, 8),
    k2=st.integers(1, 8),
    lam=st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.0]),
    floor=st.sampled_from([-1.0, 0.0, 0.3]),
)
def test_ranking_invariants(
    namespace: str,
    store: MemoryStore,
    pool: list[tuple[int, int]],
    k1: int,
    k2: int,
    lam: float,
    floor: float,
) -> None:
    namespace = f"{namespace}-{uuid.uuid4().hex[:8]}"
    sims = {f"m{i}": s / 100 for i, (s, _) in enumerate(pool)}
    qs = {f"m{i}": q / 100 for i, (_, q) in enumerate(pool)}
    store.upsert(
        [proc(namespace, name, at_sim(sims[name], i + 1), qs[name]) for i, name in enumerate(sims)]
    )
    mem = memory_with(store)

    r = mem.retrieve(namespace, QUERY, k1=k1, k2=k2, lam=lam, floor=floor)

    eligible = sorted((n for n in sims if sims[n] >= floor - 1e-6), key=lambda n: -sims[n])
    candidates = eligible[:k1]
    got = [h.memory.task_text for h in r.hits]
    assert len(got) == min(k2, len(candidates)) <= k1
    assert set(got) <= set(candidates)
    assert [h.rank for h in r.hits] == list(range(len(got)))
    for h in r.hits:
        name = h.memory.task_text
        assert h.sim == pytest.approx(sims[name], abs=1e-5)
        assert h.q == pytest.approx(qs[name])
        assert all(math.isfinite(v) for v in (h.sim, h.q, h.z_sim, h.z_q, h.score))
        assert h.score == pytest.approx((1 - lam) * h.z_sim + lam * h.z_q)
    scores = [h.score for h in r.hits]
    assert (
        scores == sorted(scores, reverse=True)
        or max(abs(a - b) for a, b in zip(scores, sorted(scores, reverse=True), strict=True)) < 1e-8
    )
    if lam == 0.0:  # plain semantic retrieval
        assert got == candidates[: len(got)]
    if lam == 1.0:  # utility decides among the candidates
        best_q = sorted((qs[n] for n in candidates), reverse=True)[: len(got)]
        assert [qs[n] for n in got] == pytest.approx(best_q)
    if len({qs[n] for n in candidates}) == 1:
        assert all(h.z_q == 0.0 for h in r.hits)
    if len(candidates) == 1:
        assert all(h.z_sim == 0.0 and h.score == 0.0 for h in r.hits)


def test_namespace_isolation(namespace: str, store: MemoryStore) -> None:
    a, b = f"{namespace}-a", f"{namespace}-b"
    store.upsert([proc(a, f"a{i}", at_sim(0.9 - i / 10, i + 1)) for i in range(3)])
    store.upsert([proc(b, f"b{i}", at_sim(0.95 - i / 10, i + 1)) for i in range(3)])
    mem = memory_with(store)
    got = mem.retrieve(a, QUERY, k1=10, k2=10)
    assert [h.memory.task_text for h in got.hits] == ["a0", "a1", "a2"]
    assert {h.memory.namespace for h in got.hits} == {a}
    assert mem.retrieve(f"{namespace}-other", QUERY).hits == []


def test_obsolete_and_superseded_memories_are_skipped(namespace: str, store: MemoryStore) -> None:
    old = proc(namespace, "old", at_sim(0.99, 1), obsolete=True)
    replaced = proc(namespace, "replaced", at_sim(0.98, 2))
    new = proc(namespace, "new", at_sim(0.90, 3))
    rest = [proc(namespace, f"r{i}", at_sim(0.8 - i / 10, 4 + i)) for i in range(3)]
    store.upsert(
        [old, replaced, new, *rest],
        [Edge(namespace=namespace, kind=EdgeKind.SUPERSEDES, src=new.id, dst=replaced.id)],
    )
    mem = memory_with(store)
    r = mem.retrieve(namespace, QUERY, k1=3, k2=3, lam=0.0)
    # k1 live candidates even though two better-matching memories were skipped
    assert [h.memory.task_text for h in r.hits] == ["new", "r0", "r1"]


def test_kinds_override_and_default_config(namespace: str, store: MemoryStore) -> None:
    note = Note(namespace=namespace, content="a note", embedding=at_sim(0.99, 1))
    p = proc(namespace, "p", at_sim(0.5, 2))
    store.upsert([note, p])
    mem = memory_with(store)
    # By default procedures, notes and tips are ranked together (one hand-over, issue 52).
    assert [h.memory.id for h in mem.retrieve(namespace, QUERY).hits] == [note.id, p.id]
    only = mem.retrieve(namespace, QUERY, kinds=("Procedure",))
    assert [h.memory.id for h in only.hits] == [p.id]
    assert [h.memory.id for h in mem.retrieve(namespace, QUERY, kinds=("Note",)).hits] == [note.id]
    both = mem.retrieve(namespace, QUERY, kinds=("Note", "Procedure"), lam=0)
    assert [h.memory.id for h in both.hits] == [note.id, p.id]
    assert both.memories == [h.memory for h in both.hits]
    assert both.config.lam == 0 and mem.config.retrieval.lam == 0.5


@pytest.mark.parametrize(
    ("overrides", "error"),
    [
        ({"lam": 1.5}, InvalidInput),
        ({"k1": 0}, InvalidInput),
        ({"epsilon": -0.1}, InvalidInput),
        ({"kinds": ()}, InvalidInput),
        ({"kinds": ("Nope",)}, InvalidInput),
        ({"policy": "telepathy"}, InvalidInput),
        ({"lambda": 0.5}, ConfigError),
    ],
)
def test_invalid_options_are_refused(
    namespace: str, store: MemoryStore, overrides: dict[str, object], error: type[Exception]
) -> None:
    mem = memory_with(store)
    with pytest.raises(error):
        mem.retrieve(f"{namespace}-other", QUERY, **overrides)


def test_invalid_query_namespace_and_combination(namespace: str, store: MemoryStore) -> None:
    mem = memory_with(store)
    with pytest.raises(InvalidInput):
        mem.retrieve(f"{namespace}-other", "   ")
    with pytest.raises(InvalidNamespace):
        mem.retrieve("bad namespace!", QUERY)
    with pytest.raises(ConfigError):
        retrieve(mem, f"{namespace}-other", QUERY, config="memrl")  # type: ignore[arg-type]
    with pytest.raises(InvalidInput):
        mem.retrieve(f"{namespace}-other", QUERY, open_episode=True, episode_id="abc")


def test_random_policy_is_seeded_and_ignores_similarity(namespace: str, store: MemoryStore) -> None:
    store.upsert([proc(namespace, f"m{i:02d}", at_sim(0.9 - i / 50, i + 1)) for i in range(20)])

    def run() -> list[list[str]]:
        mem = memory_with(store)
        return [
            [h.memory.task_text for h in mem.retrieve(namespace, QUERY, MEMP_RANDOM, seed=5).hits]
            for _ in range(6)
        ]

    first, second = run(), run()
    assert first == second  # same seed, same call sequence: same picks
    assert all(len(picks) == 3 for picks in first)
    assert len({tuple(p) for p in first}) > 1  # successive calls do not repeat one draw
    # similarity does not rank a random sample: some pick is not among the 3 most similar
    assert any(set(p) != {"m00", "m01", "m02"} for p in first)


def test_epsilon_greedy_explores_among_candidates(namespace: str, store: MemoryStore) -> None:
    store.upsert([proc(namespace, f"m{i}", at_sim(0.9 - i / 10, i + 1)) for i in range(8)])
    mem = memory_with(store)
    greedy = mem.retrieve(namespace, QUERY, k1=5, k2=2, lam=0, epsilon=0.0)
    assert not greedy.explored and [h.memory.task_text for h in greedy.hits] == ["m0", "m1"]
    explored = [
        mem.retrieve(namespace, QUERY, k1=5, k2=2, lam=0, epsilon=1.0, seed=3) for _ in range(10)
    ]
    assert all(r.explored for r in explored)
    picked = {h.memory.task_text for r in explored for h in r.hits}
    assert picked <= {"m0", "m1", "m2", "m3", "m4"}  # only candidates of phase A
    assert picked - {"m0", "m1"}  # and not only the greedy ones
    for r in explored:
        assert [h.rank for h in r.hits] == [0, 1]


def test_keywords_policy_embeds_the_keywords(namespace: str, store: MemoryStore) -> None:
    emb = HashingEmbedder(DIM)
    key = "cool, apple, fridge"
    store.upsert([proc(namespace, key, [float(x) for x in emb.embed([key])[0]])])
    mem = GraphMemory(store, embedder=emb)
    query = "Please could you cool the apple using the fridge, then tell me when it is done?"
    by_query = mem.retrieve(namespace, query, lam=0)
    by_keywords = mem.retrieve(namespace, query, lam=0, policy=RetrievePolicy.KEYWORDS)
    assert by_keywords.hits[0].sim > by_query.hits[0].sim + 0.1


# ---- prompt text ---------------------------------------------------------------------------


def test_as_prompt_renders_steps_scripts_notes_and_tips(namespace: str, store: MemoryStore) -> None:
    p = proc(
        namespace,
        "heat the mug",
        at_sim(0.95, 1),
        script="Find the mug.\nHeat it in the microwave.",
        success=True,
        reward=1.0,
        n_steps=3,
    )
    steps = [
        Step(namespace=namespace, procedure_id=p.id, index=i, action=a, observation=o)
        for i, (a, o) in enumerate(
            [("go to cabinet 1", "you see a mug"), ("take mug 1", ""), ("heat mug 1", "done")]
        )
    ]
    chain = [Edge(namespace=namespace, kind=EdgeKind.FIRST_STEP, src=p.id, dst=steps[0].id)] + [
        Edge(namespace=namespace, kind=EdgeKind.NEXT, src=a.id, dst=b.id)
        for a, b in itertools.pairwise(steps)
    ]
    note = Note(
        namespace=namespace,
        content="Mugs live in cabinets.",
        context="Kitchen layout.",
        embedding=at_sim(0.9, 2),
    )
    tip = Tip(
        namespace=namespace,
        text="Do not heat metal cups.",
        polarity=TipPolarity.AVOID,
        embedding=at_sim(0.85, 3),
    )
    store.upsert([p, *steps, note, tip], chain)
    mem = memory_with(store)
    r = mem.retrieve(namespace, QUERY, kinds=("Procedure", "Note", "Tip"), lam=0)
    text = r.as_prompt()
    assert text.splitlines()[2] == "1. Procedure for: heat the mug (succeeded, reward 1)"
    assert "Heat it in the microwave." in text
    i1, i2, i3 = (
        text.index(f"{n}. {a}")
        for n, a in [(1, "go to cabinet 1 -> you see a mug"), (2, "take mug 1"), (3, "heat mug 1")]
    )
    assert i1 < i2 < i3
    assert "2. Note: Mugs live in cabinets." in text and "Context: Kitchen layout." in text
    assert "3. Tip (avoid): Do not heat metal cups." in text
    assert mem.retrieve(f"{namespace}-other", QUERY).as_prompt() == ""
    # a Retrieval rebuilt from JSON has no store: the prompt still shows scripts
    rebuilt = Retrieval.model_validate(json.loads(r.model_dump_json()))
    assert "Heat it in the microwave." in rebuilt.as_prompt()
    assert "take mug 1" not in rebuilt.as_prompt()


def test_config_object_and_overrides_compose(namespace: str, store: MemoryStore) -> None:
    store.upsert([proc(namespace, f"m{i}", at_sim(0.9 - i / 10, i + 1)) for i in range(6)])
    mem = memory_with(store)
    cfg = RetrievalConfig(k1=4, k2=4, lam=0.0)
    r = mem.retrieve(namespace, QUERY, cfg, k2=2)
    assert (r.config.k1, r.config.k2) == (4, 2) and len(r.hits) == 2
    assert cfg.k2 == 4  # the caller's config is not mutated


def test_as_prompt_shows_a_distilled_scripts_trajectory_steps(
    namespace: str, store: MemoryStore
) -> None:
    script = Procedure(
        namespace=namespace,
        task_text="cool the apple",
        key="cool the apple",
        granularity="proceduralized",
        script="Cool it in the fridge.",
        embedding=at_sim(0.9, 1),
    )
    trajectory = Procedure(
        namespace=namespace,
        task_text="cool the apple",
        key="cool the apple",
        granularity="trajectory",
        n_steps=2,
    )
    steps = [
        Step(namespace=namespace, procedure_id=trajectory.id, index=i, action=a)
        for i, a in enumerate(["open fridge 1", "put apple 1 in fridge 1"])
    ]
    store.upsert(
        [script, trajectory, *steps],
        [
            Edge(
                namespace=namespace, kind=EdgeKind.DISTILLED_FROM, src=script.id, dst=trajectory.id
            ),
            Edge(namespace=namespace, kind=EdgeKind.FIRST_STEP, src=trajectory.id, dst=steps[0].id),
            Edge(namespace=namespace, kind=EdgeKind.NEXT, src=steps[0].id, dst=steps[1].id),
        ],
    )
    text = memory_with(store).retrieve(namespace, QUERY).as_prompt()
    assert "Cool it in the fridge." in text
    assert text.index("1. open fridge 1") < text.index("2. put apple 1 in fridge 1")
