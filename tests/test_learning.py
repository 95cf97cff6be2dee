"""The learning test: on a stream where look-alike memories mislead, value-aware retrieval
(λ=0.5) learns to pick the memories that work, and similarity alone (λ=0) does not.

Each task family has two procedures whose keys differ by one word: the "bad" key repeats the
task's wording exactly (so it is the more similar one for every query) but using it fails; the
"good" key says "then" for "and" and using it succeeds. The environment rewards 1 when the
top-ranked memory is a good one, else 0 (rewards {0, 1}, neutral Q0 = 0.5, docs/design.md §6).
Everything is seeded, so the outcome is the same on every run and every store.
"""

from __future__ import annotations

from collections.abc import Iterable

from graphmem import GraphMemory, HashingEmbedder, MemoryConfig
from graphmem.config import RetrievalConfig
from graphmem.models import Procedure
from graphmem.stores.base import MemoryStore

FAMILIES = [
    ("heat", "mug", "coffee machine"),
    ("cool", "apple", "dining table"),
    ("clean", "plate", "shelf"),
    ("slice", "bread", "counter"),
    ("wash", "cup", "cabinet"),
    ("warm", "egg", "stove"),
    ("chill", "lettuce", "fridge"),
    ("rinse", "bowl", "sink"),
]
PREFIXES = ["please", "now", "carefully", "you should", "go and", "quickly", "try to", "first"]
SUFFIXES = ["in the kitchen", "before dinner", "for the guest", "right away", "today", "at home"]

LEARN = RetrievalConfig(k1=5, k2=1, lam=0.5, epsilon=0.1, seed=7, choose_kinds=False)
"""Q-learning alone: the kind choice (tests/test_choose_kinds.py) would make some training
episodes probes that hand nothing over."""


def bad_key(verb: str, obj: str, target: str) -> str:
    return f"{verb} the {obj} and put it on the {target}"


def good_key(verb: str, obj: str, target: str) -> str:
    return f"{verb} the {obj} then put it on the {target}"


def queries(family: tuple[str, str, str], pairs: Iterable[tuple[int, int]]) -> list[str]:
    return [f"{PREFIXES[p]} {bad_key(*family)} {SUFFIXES[s]}" for p, s in pairs]


TRAIN = [(i, i % len(SUFFIXES)) for i in range(5)]  # 5 phrasings per family
EVAL = [(5, 1), (6, 3), (7, 5), (2, 4)]  # 4 unseen phrasings per family


def setup(store: MemoryStore, namespace: str, q0: float = 0.5) -> tuple[GraphMemory, set[str]]:
    embedder = HashingEmbedder(384)
    procs, good = [], set()
    for family in FAMILIES:
        for key, works in ((good_key(*family), True), (bad_key(*family), False)):
            vector = [float(x) for x in embedder.embed([key])[0]]
            p = Procedure(
                namespace=namespace,
                task_text=key,
                key=key,
                granularity="script",
                script=f"1. {key}",
                embedding=vector,
                q=q0,
            )
            procs.append(p)
            if works:
                good.add(p.id)
    store.upsert(procs)
    return GraphMemory(store, embedder=embedder, config=MemoryConfig(q0=q0)), good


def train(mem: GraphMemory, namespace: str, good: set[str], config: RetrievalConfig) -> list[float]:
    """Run one episode per training query (interleaved families); return the rewards."""
    stream = [q for pair in TRAIN for family in FAMILIES for q in queries(family, [pair])]
    rewards = []
    for query in stream:
        r = mem.retrieve(namespace, query, config, open_episode=True)
        assert r.episode_id is not None
        reward = 1.0 if r.hits and r.hits[0].memory.id in good else 0.0  # act with the top-1
        mem.finish_episode(namespace, r.episode_id, reward)
        rewards.append(reward)
    return rewards


def good_rate(mem: GraphMemory, namespace: str, good: set[str], lam: float) -> float:
    """Share of unseen queries whose top-1 memory is a good one (no exploration, no learning;
    ranking alone: the kind choice, which may hand nothing over, is off)."""
    picks = [
        mem.retrieve(namespace, q, k1=5, k2=1, lam=lam, epsilon=0.0, choose_kinds=False)
        .hits[0]
        .memory.id
        in good
        for family in FAMILIES
        for q in queries(family, EVAL)
    ]
    return sum(picks) / len(picks)


def test_value_aware_retrieval_learns_what_similarity_cannot(
    store: MemoryStore, namespace: str
) -> None:
    mem, good = setup(store, namespace)
    assert good_rate(mem, namespace, good, lam=0.5) <= 0.1  # before learning both are misled

    rewards = train(mem, namespace, good, LEARN)

    similarity_only = good_rate(mem, namespace, good, lam=0.0)
    value_aware = good_rate(mem, namespace, good, lam=0.5)
    assert similarity_only <= 0.1  # the stream really misleads plain semantic retrieval
    assert value_aware >= 0.9
    assert value_aware - similarity_only >= 0.3
    # and the agent itself got better while learning
    n = len(FAMILIES)
    assert sum(rewards[:n]) / n <= 0.25 < 0.75 <= sum(rewards[-n:]) / n
    # Q separates good from bad memories that were used
    qs = {m.id: m.q for m in store.iter_nodes(namespace, kinds=["Procedure"])}  # type: ignore[list-item]
    assert min(qs[i] for i in good) > 0.5 > max(q for i, q in qs.items() if i not in good)


def test_a_neutral_q0_is_what_lets_failures_teach(store: MemoryStore, namespace: str) -> None:
    """With rewards {0, 1}, Q0 = 0 means a failure moves nothing (docs/design.md §6)."""
    greedy = LEARN.model_copy(update={"epsilon": 0.0})
    results = {}
    for q0 in (0.0, 0.5):
        ns = f"{namespace}-q{q0:g}".replace(".", "")
        mem, good = setup(store, ns, q0=q0)
        train(mem, ns, good, greedy)
        results[q0] = good_rate(mem, ns, good, lam=0.5)
    assert results[0.0] <= 0.1  # the bad look-alike keeps q = 0 = everyone else's: never beaten
    assert results[0.5] >= 0.9  # one failure pushes it below neutral; the good one wins next
