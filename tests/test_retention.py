"""Retention (issue 45.3): a capacity per namespace, on both stores.

Fails if enforcement leaves more live memories than the capacity, deletes without being told
to, picks another victim than its policy says, leaves an archived memory recallable, or touches
another namespace or the memories it does not count.
"""

from __future__ import annotations

import importlib
import json
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import game_envs
import pytest

from graphmem import GraphMemory, HashingEmbedder
from graphmem.config import MemoryConfig, RetentionConfig
from graphmem.errors import ConfigError
from graphmem.models import Episode, MemoryKind, Note, Procedure, Step, Task
from graphmem.ops.obsolescence import restore
from graphmem.ops.retention import (
    EVICTED,
    check_capacity,
    enforce_capacity,
    eviction_order,
    is_evicted,
    live_units,
)
from graphmem.stores.base import MemoryStore
from graphmem.testing.helpers import unique_namespace

DIM = 384
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def memory(store: MemoryStore, retention: RetentionConfig | None = None) -> GraphMemory:
    config = MemoryConfig(retention=retention or RetentionConfig())
    return GraphMemory(store, embedder=HashingEmbedder(DIM), config=config)


def live_ids(store: MemoryStore, namespace: str) -> set[str]:
    return {m.id for m in live_units(store, namespace, RetentionConfig().kinds)}


def put_note(mem: GraphMemory, namespace: str, name: str, **fields: Any) -> Note:
    """A note with its utility and times as given (written as an import would)."""
    note = Note(
        namespace=namespace,
        id=name,
        content=f"note {name}",
        embedding=mem.embed(f"note {name}", namespace=namespace),
        **fields,
    )
    mem.store.upsert([note], keep_utility=False)
    return note


def days(n: float) -> datetime:
    return T0 + timedelta(days=n)


def episodes(mem: GraphMemory, namespace: str, n: int, at: datetime) -> None:
    eps = [
        Episode(
            namespace=namespace,
            task_text=f"task {i}",
            created_at=at + timedelta(seconds=i),
            updated_at=at + timedelta(seconds=i),
        )
        for i in range(n)
    ]
    mem.store.upsert(eps)


def trajectory(i: int, success: bool = True) -> dict[str, Any]:
    return {
        "task": f"put the item {i} in box {i}",
        "reward": 1.0 if success else 0.0,
        "success": success,
        "steps": [{"action": f"take item {i}"}, {"action": f"put item {i} in box {i}"}],
    }


# ---- capacity is never exceeded, and archive deletes nothing ------------------------------


def test_writes_never_leave_more_than_capacity_and_archive_keeps_everything(
    store: MemoryStore, namespace: str
) -> None:
    mem = memory(store, RetentionConfig(max_memories=3))
    written = []
    for i in range(7):
        written.append(mem.add_note(namespace, f"fact number {i} about the kitchen").id)
        assert len(live_ids(store, namespace)) <= 3
    assert len(live_ids(store, namespace)) == 3
    everything = {m.id: m for m in store.iter_nodes(namespace)}
    assert set(written) <= set(everything), "archive mode deleted a memory"
    evicted = [m for m in everything.values() if is_evicted(m)]
    assert len(evicted) == 4
    for m in evicted:
        assert m.obsolete and (m.obsolete_reason or "").startswith(EVICTED)
        assert "policy utility" in (m.obsolete_reason or "")
    assert check_capacity(store, mem.config.retention, [namespace]) == []


def test_builds_keep_capacity_and_a_procedure_goes_with_its_parts(
    store: MemoryStore, namespace: str
) -> None:
    mem = memory(store, RetentionConfig(max_memories=2, policy="fifo"))
    first = mem.build(namespace, trajectory(0))
    for i in range(1, 4):
        mem.build(namespace, trajectory(i))
        assert len(live_ids(store, namespace)) <= 2
    # fifo: the first build went first, with the trajectory it was distilled from
    top, part = (store.get(namespace, p.id) for p in first.procedures)
    assert top.obsolete and part.obsolete
    assert (top.obsolete_reason or "").startswith(EVICTED)
    assert (part.obsolete_reason or "").startswith(EVICTED)
    # archived: its steps and task are still in the graph
    assert store.get_many(namespace, [s.id for s in first.steps]) != []
    assert store.get(namespace, first.task.id).kind == MemoryKind.TASK
    assert check_capacity(store, mem.config.retention, [namespace]) == []


def test_delete_only_when_configured(store: MemoryStore, namespace: str) -> None:
    mem = memory(store, RetentionConfig(max_memories=2, policy="fifo", on_evict="delete"))
    first = mem.build(namespace, trajectory(0))
    mem.build(namespace, trajectory(1))
    mem.build(namespace, trajectory(2))
    gone = [p.id for p in first.procedures] + [s.id for s in first.steps] + [first.task.id]
    assert store.get_many(namespace, gone) == [], "delete mode left the unit or its parts"
    kinds = [m.kind for m in store.iter_nodes(namespace)]
    assert kinds.count(MemoryKind.PROCEDURE) == 4  # two builds, script + trajectory each
    assert kinds.count(MemoryKind.TASK) == 2
    assert kinds.count(MemoryKind.STEP) == 4


def test_other_namespaces_and_uncounted_kinds_are_untouched(
    store: MemoryStore, namespace: str
) -> None:
    other = f"{namespace}-other"
    plain = memory(store)
    for i in range(4):
        plain.add_note(other, f"other namespace note {i}")
    episodes(plain, namespace, 3, days(0))
    mem = memory(store, RetentionConfig(max_memories=1, kinds=(MemoryKind.NOTE,)))
    built = mem.build(namespace, trajectory(0))  # procedures are not counted here
    for i in range(4):
        mem.add_note(namespace, f"note {i}")
    assert len(live_ids(store, other)) == 4
    assert all(not m.obsolete for m in store.iter_nodes(other))
    assert not store.get(namespace, built.procedure.id).obsolete
    eps = list(store.iter_nodes(namespace, [MemoryKind.EPISODE]))
    assert len(eps) == 3 and not any(e.obsolete for e in eps)
    notes = [m for m in store.iter_nodes(namespace, [MemoryKind.NOTE]) if not m.obsolete]
    assert len(notes) == 1


def test_an_archived_memory_is_not_recalled(store: MemoryStore, namespace: str) -> None:
    mem = memory(store, RetentionConfig(max_memories=1, policy="fifo"))
    old = mem.add_note(namespace, "the red key opens the cellar door")
    new = mem.add_note(namespace, "the blue key opens the attic door")
    hits = mem.retrieve(namespace, "the red key opens the cellar door", kinds=("Note",), k1=5)
    assert [h.memory.id for h in hits.hits] == [new.id]
    vector = mem.embed("the red key opens the cellar door", namespace=namespace)
    assert old.id not in {r.memory.id for r in store.recall(namespace, vector, 5)}
    # restore brings it back, and the next enforcement takes the capacity again
    assert not restore(mem, namespace, old.id).obsolete
    assert len(live_ids(store, namespace)) == 2
    mem.enforce_retention(namespace)
    assert len(live_ids(store, namespace)) == 1


# ---- each policy picks its victim -----------------------------------------------------------


def victims(mem: GraphMemory, namespace: str, retention: RetentionConfig) -> set[str]:
    result = enforce_capacity(mem, namespace, retention)
    return {e.memory_id for e in result.evicted}


def test_utility_evicts_the_lowest_bound(store: MemoryStore, namespace: str) -> None:
    mem = memory(store)
    put_note(mem, namespace, "good", q=0.8, uses=10, created_at=days(0), updated_at=days(0))
    put_note(mem, namespace, "bad", q=0.3, uses=10, created_at=days(1), updated_at=days(9))
    put_note(mem, namespace, "fair", q=0.55, uses=10, created_at=days(2), updated_at=days(2))
    cfg = RetentionConfig(max_memories=2, grace_episodes=0)
    assert victims(mem, namespace, cfg) == {"bad"}
    assert check_capacity(store, cfg, [namespace]) == []


def test_utility_counts_uncertainty(store: MemoryStore, namespace: str) -> None:
    """Same Q: the memory tried once is less certain than the one tried twenty times."""
    mem = memory(store)
    put_note(mem, namespace, "tried", q=0.6, uses=20, created_at=days(0), updated_at=days(0))
    put_note(mem, namespace, "once", q=0.6, uses=1, created_at=days(1), updated_at=days(1))
    cfg = RetentionConfig(max_memories=1, grace_episodes=0, confidence=1.0)
    assert victims(mem, namespace, cfg) == {"once"}


def test_utility_by_default_ranks_by_q_alone(store: MemoryStore, namespace: str) -> None:
    """confidence=0 (the default): the higher Q stays, however few its uses; the bound
    (confidence=1) would keep the one tried more."""
    mem = memory(store)
    put_note(mem, namespace, "tried", q=0.6, uses=20, created_at=days(0), updated_at=days(0))
    put_note(mem, namespace, "once", q=0.65, uses=1, created_at=days(1), updated_at=days(1))
    units = live_units(store, namespace, [MemoryKind.NOTE])
    bound = RetentionConfig(max_memories=1, grace_episodes=0, confidence=1.0)
    assert eviction_order(units, bound, mem.config)[0][0].id == "once"
    assert victims(mem, namespace, RetentionConfig(max_memories=1, grace_episodes=0)) == {"tried"}


def test_utility_spares_the_young(store: MemoryStore, namespace: str) -> None:
    mem = memory(store)
    put_note(mem, namespace, "bad", q=0.3, uses=10, created_at=days(0), updated_at=days(0))
    put_note(mem, namespace, "good", q=0.8, uses=10, created_at=days(0), updated_at=days(0))
    episodes(mem, namespace, 5, days(1))
    put_note(mem, namespace, "new", q=0.5, uses=0, created_at=days(2), updated_at=days(2))
    cfg = RetentionConfig(max_memories=2, grace_episodes=5)
    # "new" has the lowest bound, but fewer than 5 episodes have started since it was written
    assert victims(mem, namespace, cfg) == {"bad"}
    # the old go first, then the young (the older of two equal ones): capacity still holds
    put_note(mem, namespace, "newer", q=0.5, uses=0, created_at=days(3), updated_at=days(3))
    smaller = cfg.model_copy(update={"max_memories": 1})
    assert victims(mem, namespace, smaller) == {"good", "new"}
    assert live_ids(store, namespace) == {"newer"}


def test_utility_counts_a_procedure_source_game(store: MemoryStore, namespace: str) -> None:
    mem = memory(store)
    won = mem.build(namespace, trajectory(0, success=True)).procedure
    lost = mem.build(namespace, trajectory(1, success=False)).procedure
    cfg = RetentionConfig(max_memories=1, grace_episodes=0)
    assert victims(mem, namespace, cfg) == {lost.id}
    assert not store.get(namespace, won.id).obsolete


def test_recency_evicts_the_weakest_trace(store: MemoryStore, namespace: str) -> None:
    mem = memory(store)
    # long unused but used often / recently used once / long unused, used once: the last goes
    put_note(mem, namespace, "habit", q=0.5, uses=30, created_at=days(0), updated_at=days(1))
    put_note(mem, namespace, "fresh", q=0.5, uses=1, created_at=days(0), updated_at=days(9))
    put_note(mem, namespace, "faded", q=0.9, uses=1, created_at=days(5), updated_at=days(5))
    cfg = RetentionConfig(max_memories=2, policy="recency")
    assert victims(mem, namespace, cfg) == {"faded"}


def test_lru_evicts_the_least_recently_used(store: MemoryStore, namespace: str) -> None:
    mem = memory(store)
    put_note(mem, namespace, "a", q=0.9, uses=30, created_at=days(5), updated_at=days(6))
    put_note(mem, namespace, "b", q=0.1, uses=1, created_at=days(0), updated_at=days(8))
    put_note(mem, namespace, "c", q=0.5, uses=5, created_at=days(1), updated_at=days(7))
    assert victims(mem, namespace, RetentionConfig(max_memories=2, policy="lru")) == {"a"}


def test_fifo_evicts_the_oldest(store: MemoryStore, namespace: str) -> None:
    mem = memory(store)
    put_note(mem, namespace, "a", q=0.9, uses=30, created_at=days(1), updated_at=days(9))
    put_note(mem, namespace, "b", q=0.1, uses=1, created_at=days(3), updated_at=days(3))
    put_note(mem, namespace, "c", q=0.5, uses=5, created_at=days(2), updated_at=days(2))
    assert victims(mem, namespace, RetentionConfig(max_memories=1, policy="fifo")) == {"a", "c"}


def test_random_is_a_fixed_order_per_seed(store: MemoryStore, namespace: str) -> None:
    mem = memory(store)
    for i in range(6):
        put_note(mem, namespace, f"n{i}", created_at=days(i), updated_at=days(i))
    units = live_units(store, namespace, [MemoryKind.NOTE])
    cfg = RetentionConfig(max_memories=3, policy="random", seed=7)
    order = [m.id for m, _ in eviction_order(units, cfg, mem.config)]
    assert order == [m.id for m, _ in eviction_order(list(reversed(units)), cfg, mem.config)]
    others = {
        tuple(
            m.id
            for m, _ in eviction_order(units, cfg.model_copy(update={"seed": s}), MemoryConfig())
        )
        for s in range(5)
    }
    assert len(others) > 1, "the seed does not change the order"
    assert victims(mem, namespace, cfg) == set(order[:3])


def test_per_kind_caps(store: MemoryStore, namespace: str) -> None:
    cfg = RetentionConfig(max_memories=10, max_per_kind={MemoryKind.NOTE: 2}, policy="fifo")
    mem = memory(store, cfg)
    built = mem.build(namespace, trajectory(0))
    for i in range(4):
        mem.add_note(namespace, f"note {i}")
    notes = [m for m in store.iter_nodes(namespace, [MemoryKind.NOTE]) if not m.obsolete]
    assert len(notes) == 2
    assert not store.get(namespace, built.procedure.id).obsolete


# ---- concurrency, check, config ------------------------------------------------------------


def test_two_enforcements_at_once_evict_the_surplus_once(
    store: MemoryStore, namespace: str
) -> None:
    mem = memory(store)
    for i in range(12):
        put_note(mem, namespace, f"n{i}", q=0.1 * (i % 7), uses=i, created_at=days(i))
    cfg = RetentionConfig(max_memories=5, grace_episodes=0)
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []

    def enforce() -> None:
        try:
            barrier.wait()
            enforce_capacity(mem, namespace, cfg)
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=enforce) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(live_ids(store, namespace)) == 5, "over- or under-evicted"
    assert len(list(store.iter_nodes(namespace))) == 12


def test_check_finds_a_namespace_over_capacity(store: MemoryStore, namespace: str) -> None:
    mem = memory(store)
    for i in range(4):
        mem.add_note(namespace, f"note {i}")
    cfg = RetentionConfig(max_memories=2)
    problems = check_capacity(store, cfg, [namespace])
    assert [p.namespace for p in problems] == [namespace]
    assert "4 live memories, capacity 2" in problems[0].problem
    enforce_capacity(mem, namespace, cfg)
    assert check_capacity(store, cfg, [namespace]) == []


def test_check_finds_an_eviction_cut_short(store: MemoryStore, namespace: str) -> None:
    mem = memory(store)
    built = mem.build(namespace, trajectory(0))
    store.patch(namespace, built.procedure.id, {"obsolete": True, "obsolete_reason": EVICTED})
    problems = check_capacity(store, RetentionConfig(max_memories=5), [namespace])
    assert len(problems) == 1 and built.procedures[1].id in problems[0].problem


def test_off_by_default_and_config_guards() -> None:
    assert not MemoryConfig().retention.enabled
    with pytest.raises(ConfigError):
        RetentionConfig(kinds=(MemoryKind.EPISODE,))
    with pytest.raises(ConfigError):
        RetentionConfig(max_per_kind={MemoryKind.TASK: 3})
    with pytest.raises(ConfigError):
        RetentionConfig(max_per_kind={MemoryKind.NOTE: 0})


def test_no_capacity_changes_nothing(store: MemoryStore, namespace: str) -> None:
    mem = memory(store)
    for i in range(5):
        mem.add_note(namespace, f"note {i}")
    assert mem.enforce_retention(namespace).evicted == []
    assert len(live_ids(store, namespace)) == 5


def test_kinds_in_models_are_what_build_writes() -> None:
    """The unit rule relies on build embedding the script procedure only."""
    mem = memory(__import__("graphmem").EmbeddedStore.in_memory())
    ns = unique_namespace()
    built = mem.build(ns, trajectory(0))
    top, part = built.procedures
    assert isinstance(top, Procedure) and top.embedding is not None
    assert isinstance(part, Procedure) and part.embedding is None
    assert all(isinstance(s, Step) and s.embedding is None for s in built.steps)
    assert isinstance(built.task, Task)
    assert live_ids(mem.store, ns) == {top.id}


# ---- the command line ----------------------------------------------------------------------


def test_cli_retain_and_check(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from graphmem.cli import main
    from graphmem.stores.embedded import EmbeddedStore

    root = tmp_path / "store"
    with EmbeddedStore.open(root) as store:
        mem = memory(store)
        for i in range(5):
            mem.add_note("a", f"note {i}")
        mem.add_note("b", "the only note of b")
    assert main(["store", "check", str(root), "--max-memories", "3"]) == 1
    assert "a: 5 live memories, capacity 3" in capsys.readouterr().out
    assert main(["store", "retain", str(root), "--max-memories", "3", "--dry-run"]) == 0
    assert "a: 5 live, would evict 2" in capsys.readouterr().out
    assert main(["store", "check", str(root), "--max-memories", "3"]) == 1  # dry run: unchanged
    capsys.readouterr()
    assert main(["store", "retain", str(root), "--max-memories", "3", "--policy", "fifo"]) == 0
    assert "a: 5 live, archived 2, 3 left" in capsys.readouterr().out
    assert main(["store", "check", str(root), "--max-memories", "3"]) == 0
    assert "within it" in capsys.readouterr().out
    with EmbeddedStore.open(root) as store:
        assert len(list(store.iter_nodes("a"))) == 5  # archived, not deleted
        assert sum(is_evicted(m) for m in store.iter_nodes("a")) == 2
    assert main(["store", "retain", str(root), "--max-per-kind", "Episode=3"]) == 2
    assert "Episode" in capsys.readouterr().err


# ---- the benchmark, tiny (Java 17) ---------------------------------------------------------


@pytest.mark.java
@game_envs.requires_java("textworld_express", reason="needs Java 17 and the envs extra")
def test_bench_retention_smoke(tmp_path: Path) -> None:
    retention = importlib.import_module("bench.retention")
    argv = ["--episodes", "8", "--embedder", "hashing", "--policies", "utility,fifo"]
    assert retention.main([*argv, "--capacities", "25", "--out", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "retention_dev.json").read_text(encoding="utf-8"))
    rows = {r["condition"]: r for r in data["results"]}
    assert set(rows) == {"keep-all", "utility-c25", "fifo-c25"}
    assert rows["keep-all"]["evictions"] == 0 and rows["keep-all"]["capacity"] is None
    for name in ("utility-c25", "fifo-c25"):
        assert rows[name]["capacity"] == 2
        assert (
            rows[name]["memory_items"] <= 2 < rows[name]["memory_items"] + rows[name]["evictions"]
        )
    for episodes in data["episodes"].values():  # the same games, in the same order
        assert [(e["family"], e["seed"]) for e in episodes] == [tuple(p) for p in data["plan"]]
    markdown = (tmp_path / "retention_dev.md").read_text(encoding="utf-8")
    assert "utility-c25 vs keep-all" in markdown
