"""Exactly-once credit: finishing an episode credits its reward once, whatever happens around it.

- 8 processes (and 8 threads) finish the same episode at the same moment, 20 times over: every
  episode is credited exactly once, and every caller gets the same outcome.
- A process finishing episodes is killed with SIGKILL 30+ times (embedded store): after each kill
  every episode is either open with its memories untouched (the retry credits it) or finished
  with its memories credited once (the retry replays the outcome).
- Neo4j is killed with SIGKILL during a finish-heavy run and restarted: every episode is credited
  exactly once, including the one whose transaction the kill interrupted.

Each episode retrieves memories of its own, so "credited once" reads directly off the memories:
``uses == 1`` and ``q == Q0 + α(R − Q0)``.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import random
import signal
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from graphmem.config import MemoryConfig
from graphmem.embedding import HashingEmbedder
from graphmem.errors import StoreError
from graphmem.memory import GraphMemory
from graphmem.models import Edge, EdgeKind, Episode, EpisodeStatus, Note
from graphmem.stores.base import MemoryStore
from graphmem.stores.embedded import EmbeddedStore

from ._retrying import RetryingClient
from ._workers import DIM, fork_all, open_store, store_spec

if TYPE_CHECKING:
    from graphmem.stores.neo4j import Neo4jStore

pytestmark = [pytest.mark.reliability]

ALPHA, Q0, REWARD = 0.1, 0.5, 1.0
CREDITED_Q = Q0 + ALPHA * (REWARD - Q0)
PER_EPISODE = 2
"""Memories each episode retrieved (its own: no other episode credits them)."""


def vector(seed: str) -> list[float]:
    rng = random.Random(seed)
    values = [float(rng.randint(-8, 8)) for _ in range(DIM)]
    values[0] = 9.0
    return values


def seed_episodes(store: MemoryStore, namespace: str, n: int, tag: str = "e") -> list[str]:
    """``n`` open episodes, each with RETRIEVED edges to ``PER_EPISODE`` fresh notes."""
    nodes: list[Any] = []
    edges: list[Edge] = []
    episode_ids = []
    for i in range(n):
        episode = Episode(id=f"{tag}{i}", namespace=namespace, task_text=f"task {tag}{i}")
        nodes.append(episode)
        episode_ids.append(episode.id)
        for j in range(PER_EPISODE):
            note_id = f"{tag}{i}-m{j}"
            nodes.append(
                Note(
                    id=note_id,
                    namespace=namespace,
                    content=f"note {note_id}",
                    embedding=vector(note_id),
                    q=Q0,
                )
            )
            edges.append(
                Edge(
                    namespace=namespace,
                    kind=EdgeKind.RETRIEVED,
                    src=episode.id,
                    dst=note_id,
                    props={"rank": j, "q": Q0},
                )
            )
    for start in range(0, len(nodes), 300):
        store.upsert(nodes[start : start + 300])
    store.upsert((), edges)
    return episode_ids


def memory_over(store: MemoryStore) -> GraphMemory:
    return GraphMemory(store, embedder=HashingEmbedder(DIM), config=MemoryConfig(alpha=ALPHA))


def credit_state(store: MemoryStore, namespace: str, episode_id: str) -> str:
    """'open' (nothing of the finish happened) or 'credited' (all of it did); else fails."""
    episode = store.get(namespace, episode_id)
    assert isinstance(episode, Episode)
    notes = store.get_many(namespace, [f"{episode_id}-m{j}" for j in range(PER_EPISODE)])
    assert len(notes) == PER_EPISODE
    edges = store.edges(namespace, episode_id, kinds=[EdgeKind.RETRIEVED], direction="out")
    if episode.status is EpisodeStatus.OPEN:
        assert episode.reward is None and episode.finished_at is None
        assert [(m.q, m.uses, m.q_updates) for m in notes] == [(Q0, 0, 0)] * PER_EPISODE, (
            f"{episode_id} is open but its memories moved: {[(m.q, m.uses) for m in notes]}"
        )
        assert all("q_after" not in e.props for e in edges)
        return "open"
    assert episode.reward == REWARD and episode.success is True
    assert [(m.q, m.uses, m.q_updates) for m in notes] == [(CREDITED_Q, 1, 1)] * PER_EPISODE, (
        f"{episode_id} is finished but credited {[(m.q, m.uses) for m in notes]}"
    )
    assert sorted(e.props.get("q_after") for e in edges) == [CREDITED_Q] * PER_EPISODE
    return "credited"


# ---- concurrent finishes -------------------------------------------------------------------

PROCESSES, TRIALS = 8, 20


def racing_finisher(
    spec: dict[str, Any],
    namespace: str,
    episode_ids: list[str],
    barrier: Any,
    out: Path,
) -> None:
    """Open a store of its own, then finish each episode when all racers are at the barrier."""
    store = open_store(spec)
    mem = memory_over(store)
    rows = []
    try:
        for episode_id in episode_ids:
            barrier.wait(timeout=120)
            outcome = mem.finish_episode(namespace, episode_id, REWARD)
            rows.append({"episode": episode_id, "replayed": outcome.replayed, "q": outcome.q})
    finally:
        store.close()
        out.write_text(json.dumps(rows), encoding="utf-8")


@pytest.mark.slow
def test_eight_processes_finishing_the_same_episode_credit_it_once(
    store: MemoryStore, namespace: str, tmp_path: Path
) -> None:
    episode_ids = seed_episodes(store, namespace, TRIALS)
    barrier = multiprocessing.get_context("fork").Barrier(PROCESSES)
    spec = store_spec(store)
    outs = [tmp_path / f"racer-{i}.json" for i in range(PROCESSES)]
    codes = fork_all(
        PROCESSES,
        lambda i: racing_finisher(spec, namespace, episode_ids, barrier, outs[i]),
        timeout=300,
    )
    assert codes == [0] * PROCESSES, f"racer exit codes {codes}"

    rows = [row for out in outs for row in json.loads(out.read_text(encoding="utf-8"))]
    assert len(rows) == PROCESSES * TRIALS
    for episode_id in episode_ids:
        mine = [r for r in rows if r["episode"] == episode_id]
        first = [r for r in mine if not r["replayed"]]
        assert len(first) == 1, f"{episode_id} was credited {len(first)} times"
        assert all(r["q"] == first[0]["q"] for r in mine), "callers saw different outcomes"
        assert credit_state(store, namespace, episode_id) == "credited"


def test_eight_threads_finishing_the_same_episode_credit_it_once(
    store: MemoryStore, namespace: str
) -> None:
    trials = 30 if isinstance(store, EmbeddedStore) else 10
    episode_ids = seed_episodes(store, namespace, trials)
    mem = memory_over(store)
    for episode_id in episode_ids:
        barrier = threading.Barrier(8)
        outcomes: list[Any] = []
        errors: list[BaseException] = []

        def finish(
            episode_id: str = episode_id,
            barrier: threading.Barrier = barrier,
            outcomes: list[Any] = outcomes,
            errors: list[BaseException] = errors,
        ) -> None:
            try:
                barrier.wait(timeout=30)
                outcomes.append(mem.finish_episode(namespace, episode_id, REWARD))
            except BaseException as e:
                errors.append(e)

        threads = [threading.Thread(target=finish) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert errors == []
        assert sum(not o.replayed for o in outcomes) == 1, f"{episode_id} credited more than once"
        assert len({json.dumps(o.q, sort_keys=True) for o in outcomes}) == 1
        assert credit_state(store, namespace, episode_id) == "credited"


# ---- kill -9 in the middle of finishing (embedded) ------------------------------------------

KILLS = 32
BATCH = 16
"""Episodes a finisher is given: more than it gets through before the kill."""


def finisher(path: str, namespace: str, episode_ids: list[str], ready: int) -> None:
    """Finish the episodes one after another until killed (small log: compactions happen too)."""
    store = EmbeddedStore.open(path, compact_bytes=32 * 1024)
    mem = memory_over(store)
    os.write(ready, b"r")
    for episode_id in episode_ids:
        mem.finish_episode(namespace, episode_id, REWARD)
        os.write(ready, b"f")  # one acknowledged finish
    store.close()


@pytest.mark.slow
def test_finish_survives_kill_9_at_random_points_exactly_once(tmp_path: Path) -> None:
    path = tmp_path / "store"
    namespace = "kill"
    with EmbeddedStore.open(path) as store:
        episode_ids = seed_episodes(store, namespace, BATCH * KILLS)
    rng = random.Random(14)
    pending = list(episode_ids)
    states = {"open": 0, "credited": 0}
    killed_mid = 0
    for _ in range(KILLS):
        batch, pending = pending[:BATCH], pending[BATCH:]
        ready_r, ready_w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: finish until killed
            code = 1
            try:
                os.close(ready_r)
                finisher(str(path), namespace, batch, ready_w)
                code = 0
            finally:
                os._exit(code)
        os.close(ready_w)
        os.read(ready_r, 1)
        for _ in range(rng.randint(0, 4)):  # let a few finishes through, then kill mid-finish
            os.read(ready_r, 1)
        time.sleep(rng.uniform(0.0, 0.004))
        os.kill(pid, signal.SIGKILL)
        os.close(ready_r)
        _, status = os.waitpid(pid, 0)
        killed_mid += os.WIFSIGNALED(status)

        with EmbeddedStore.open(path) as store:
            seen = {i: credit_state(store, namespace, i) for i in batch}
            for state in seen.values():
                states[state] += 1
            mem = memory_over(store)
            # The retry: open episodes are credited now, finished ones replay their outcome.
            for episode_id in batch:
                outcome = mem.finish_episode(namespace, episode_id, REWARD)
                assert outcome.replayed == (seen[episode_id] == "credited")
                assert outcome.q == {f"{episode_id}-m{j}": CREDITED_Q for j in range(PER_EPISODE)}
                assert credit_state(store, namespace, episode_id) == "credited"
    assert killed_mid >= 30, f"only {killed_mid} children were killed before finishing"
    assert states["open"] and states["credited"], states  # the kills landed mid-batch
    print(f"\nkill -9 while finishing: {killed_mid} kills, episodes found {states}")


# ---- Neo4j killed while finishing -----------------------------------------------------------


class RetryingFinisher(RetryingClient):
    """Finishes episodes on a server that may vanish, retrying each until it is acknowledged."""

    def __init__(self, uri: str, password: str, namespace: str, episode_ids: list[str]) -> None:
        super().__init__(uri, password, namespace, time.monotonic() + 420)
        self.episode_ids = episode_ids
        self.replayed: list[str] = []

    def work(self, store: Neo4jStore) -> None:
        mem = memory_over(store)
        for episode_id in self.episode_ids:
            outcome = self.retry(lambda e=episode_id: mem.finish_episode(self.ns, e, REWARD))
            self.acked.append(episode_id)
            if outcome.replayed:
                self.replayed.append(episode_id)


@pytest.mark.slow
@pytest.mark.neo4j
def test_neo4j_killed_while_finishing_credits_every_episode_exactly_once(
    private_neo4j: Any, namespace: str
) -> None:
    from graphmem.stores.neo4j import Neo4jStore

    server: Any = private_neo4j.server
    seeding = Neo4jStore.from_uri(private_neo4j.uri, "neo4j", private_neo4j.password)
    try:
        episode_ids = seed_episodes(seeding, namespace, 150)
    finally:
        seeding.close()
    worker = RetryingFinisher(private_neo4j.uri, private_neo4j.password, namespace, episode_ids)
    worker.start()
    while len(worker.acked) < 40 and worker.is_alive():
        assert time.monotonic() < worker.deadline, "the finisher made no progress"
        time.sleep(0.005)
    assert worker.error is None, worker.error
    pid = server.running_pid()
    assert pid is not None
    os.kill(pid, signal.SIGKILL)  # mid-finish: the finisher runs on and retries
    while server.running_pid() is not None:
        time.sleep(0.05)
    time.sleep(1.0)
    server.start(private_neo4j.password, timeout=300)
    worker.join(timeout=max(1.0, worker.deadline - time.monotonic()))
    assert not worker.is_alive(), "the finisher did not finish after the restart"
    assert worker.error is None, f"the finisher gave up: {worker.error!r}"
    assert worker.failures, "the kill never reached the finisher (nothing was retried)"
    assert worker.acked == episode_ids

    store = Neo4jStore.from_uri(private_neo4j.uri, "neo4j", private_neo4j.password)
    try:
        for episode_id in episode_ids:
            assert credit_state(store, namespace, episode_id) == "credited"
        print(
            f"\nneo4j kill -9 while finishing: {len(episode_ids)} episodes credited once each, "
            f"{len(worker.failures)} failed attempts retried, "
            f"{len(worker.replayed)} retries replayed"
        )
    finally:
        with contextlib.suppress(StoreError):
            ids = [m.id for m in store.iter_nodes(namespace)]
            store.delete(namespace, ids)
        store.close()


# ---- a LangGraph node retried by its RetryPolicy ---------------------------------------------


def test_a_langgraph_node_retried_by_its_retry_policy_credits_once(
    store: MemoryStore, namespace: str
) -> None:
    from typing import TypedDict

    from langgraph.graph import END, START, StateGraph
    from langgraph.types import RetryPolicy

    class State(TypedDict, total=False):
        episode_id: str
        q: dict[str, float]
        replayed: bool

    (episode_id,) = seed_episodes(store, namespace, 1)
    mem = memory_over(store)
    attempts: list[int] = []

    def finish(state: State) -> State:
        outcome = mem.finish_episode(namespace, state["episode_id"], REWARD)
        attempts.append(1)
        if len(attempts) < 3:  # the credit is durable, then the node fails after it
            raise ConnectionError("the agent's next call timed out")
        return {"q": outcome.q, "replayed": outcome.replayed}

    builder = StateGraph(State)
    builder.add_node(
        "finish", finish, retry_policy=RetryPolicy(max_attempts=3, initial_interval=0.01)
    )
    builder.add_edge(START, "finish")
    builder.add_edge("finish", END)
    out = builder.compile().invoke({"episode_id": episode_id})
    assert len(attempts) == 3
    assert out["replayed"] is True
    assert out["q"] == {f"{episode_id}-m{j}": CREDITED_Q for j in range(PER_EPISODE)}
    assert credit_state(store, namespace, episode_id) == "credited"
