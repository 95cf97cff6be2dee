"""The embedded-store crash harness: a writer child doing a random mix of operations, a model of
what its acknowledged operations must have left, and a consistency checker.

The child announces each operation (``B <json>``) before calling the store and acknowledges it
(``A``) after the call returned, on a pipe. The parent replays announced operations on a pure
Python model, so after a SIGKILL the reopened store must equal the model of the acknowledged
operations, or that model plus the one operation that was in flight (it may or may not have
become durable; all-or-nothing either way).
"""

from __future__ import annotations

import copy
import json
import os
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from graphmem.models import Edge, EdgeKind, Granularity, Note, Procedure, Step
from graphmem.stores.embedded import EmbeddedStore

NS = "crash"
DIM = 8
ALPHA = 0.25


def vector_of(memory_id: str) -> list[float]:
    """A distinct, exactly float32-representable vector per id (small integers)."""
    rng = random.Random(memory_id)
    values = [float(rng.randint(-8, 8)) for _ in range(DIM)]
    values[rng.randrange(DIM)] = 9.0  # never all zeros
    return values


@dataclass
class Model:
    """What the store must hold: nodes by id, and edges as (kind, src, dst)."""

    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)
    edges: set[tuple[str, str, str]] = field(default_factory=set)

    def apply(self, op: dict[str, Any]) -> None:
        kind = op["op"]
        if kind == "add":
            self.nodes[op["id"]] = _node("Note", op["content"], vector_of(op["id"]))
            if op["link"] is not None:
                self.edges.add(("LINKS_TO", op["id"], op["link"]))
        elif kind == "chain":
            pid = op["id"]
            self.nodes[pid] = _node("Procedure", f"task {pid}", vector_of(pid))
            previous = pid
            for i in range(op["steps"]):
                sid = f"{pid}-s{i}"
                self.nodes[sid] = _node("Step", f"act {i}", None)
                self.edges.add(("FIRST_STEP" if i == 0 else "NEXT", previous, sid))
                previous = sid
        elif kind == "patch":
            self.nodes[op["id"]]["content"] = op["content"]
        elif kind == "util":
            for i in op["ids"]:
                node = self.nodes[i]
                node["q"] = node["q"] + ALPHA * (op["reward"] - node["q"])
                node["uses"] += 1
                node["q_updates"] += 1
                node["successes"] += 1 if op["success"] else 0
        elif kind == "delete":
            gone = set(op["ids"])
            for i in op["ids"]:
                if self.nodes[i]["kind"] == "Procedure":
                    gone |= {s for s in self.nodes if s.startswith(f"{i}-s")}
            for i in gone:
                del self.nodes[i]
            self.edges = {e for e in self.edges if e[1] not in gone and e[2] not in gone}
        else:  # pragma: no cover - the writer only sends the kinds above
            raise AssertionError(f"unknown op {kind}")

    def after(self, op: dict[str, Any]) -> Model:
        out = copy.deepcopy(self)
        out.apply(op)
        return out


def _node(kind: str, content: str, vector: list[float] | None) -> dict[str, Any]:
    return {
        "kind": kind,
        "content": content,
        "vector": vector,
        "q": 0.5,
        "uses": 0,
        "q_updates": 0,
        "successes": 0,
    }


def observe(store: EmbeddedStore) -> Model:
    """The store's namespace as a Model (same fields as the model tracks)."""
    out = Model()
    for m in store.iter_nodes(NS):
        content = m.content if isinstance(m, Note) else m.key if isinstance(m, Procedure) else ""
        if isinstance(m, Step):
            content = m.action
        out.nodes[m.id] = {
            "kind": m.kind,
            "content": content,
            "vector": m.embedding,
            "q": m.q,
            "uses": m.uses,
            "q_updates": m.q_updates,
            "successes": m.successes,
        }
    out.edges = {(e.kind.value, e.src, e.dst) for e in store.iter_edges(NS)}
    return out


# ---- the writer child ----------------------------------------------------------------------


def writer(path: Path, round_no: int, seed: int, fd: int, compact_bytes: int) -> None:
    """Random operations until killed; announce each before the call, acknowledge after."""
    rng = random.Random(seed)
    store = EmbeddedStore.open(path, compact_bytes=compact_bytes)
    live = {m.id: m.kind for m in store.iter_nodes(NS) if m.kind in ("Note", "Procedure")}
    notes = sorted(i for i, k in live.items() if k == "Note")
    for k in range(100_000):
        roll = rng.random()
        op: dict[str, Any]
        if roll < 0.35 or len(notes) < 3:
            new = f"r{round_no}-{k}"
            op = {
                "op": "add",
                "id": new,
                "content": f"note {new} " + "x" * rng.randint(0, 300),
                "link": rng.choice(notes) if notes else None,
            }
        elif roll < 0.45:
            op = {"op": "chain", "id": f"p{round_no}-{k}", "steps": rng.randint(1, 4)}
        elif roll < 0.6:
            op = {"op": "patch", "id": rng.choice(notes), "content": f"patched {round_no}.{k}"}
        elif roll < 0.85:
            ids = rng.sample(sorted(live), min(len(live), rng.randint(1, 3)))
            reward = rng.choice([0.0, 1.0, 0.3])
            op = {"op": "util", "ids": ids, "reward": reward, "success": reward == 1.0}
        else:
            op = {"op": "delete", "ids": [rng.choice(sorted(live))]}
        os.write(fd, b"B " + json.dumps(op).encode() + b"\n")
        _execute(store, op)
        os.write(fd, b"A\n")
        if op["op"] == "add":
            live[op["id"]] = "Note"
            notes.append(op["id"])
        elif op["op"] == "chain":
            live[op["id"]] = "Procedure"
        elif op["op"] == "delete":
            for i in op["ids"]:
                live.pop(i, None)
            notes = [n for n in notes if n in live]


def _execute(store: EmbeddedStore, op: dict[str, Any]) -> None:
    kind = op["op"]
    if kind == "add":
        note = Note(id=op["id"], namespace=NS, content=op["content"], embedding=vector_of(op["id"]))
        edges = []
        if op["link"] is not None:
            edges = [Edge(namespace=NS, kind=EdgeKind.LINKS_TO, src=op["id"], dst=op["link"])]
        store.upsert([note], edges)
    elif kind == "chain":
        pid = op["id"]
        nodes: list[Any] = [
            Procedure(
                id=pid,
                namespace=NS,
                task_text=f"task {pid}",
                key=f"task {pid}",
                granularity=Granularity.TRAJECTORY,
                n_steps=op["steps"],
                embedding=vector_of(pid),
            )
        ]
        edges = []
        previous = pid
        for i in range(op["steps"]):
            sid = f"{pid}-s{i}"
            nodes.append(Step(id=sid, namespace=NS, procedure_id=pid, index=i, action=f"act {i}"))
            kind_i = EdgeKind.FIRST_STEP if i == 0 else EdgeKind.NEXT
            edges.append(Edge(namespace=NS, kind=kind_i, src=previous, dst=sid))
            previous = sid
        store.upsert(nodes, edges)
    elif kind == "patch":
        store.patch(NS, op["id"], {"content": op["content"]})
    elif kind == "util":
        store.update_utility(NS, op["ids"], op["reward"], ALPHA, success=op["success"])
    elif kind == "delete":
        store.delete(NS, op["ids"])


# ---- the checker ---------------------------------------------------------------------------


def check_structure(store: EmbeddedStore, seen: Model, rng: random.Random) -> None:
    """Every edge joins existing nodes; the vector index holds exactly the nodes with vectors."""
    for _, src, dst in seen.edges:
        assert src in seen.nodes and dst in seen.nodes, f"dangling edge {src}->{dst}"
    with_vectors = {i for i, n in seen.nodes.items() if n["vector"] is not None}
    if not with_vectors:
        return
    probe = vector_of("probe")
    everything = store.recall(NS, probe, len(seen.nodes) + 10, include_obsolete=True)
    assert {r.memory.id for r in everything} == with_vectors, "vector index and nodes differ"
    for memory_id in rng.sample(sorted(with_vectors), min(15, len(with_vectors))):
        top = store.recall(NS, seen.nodes[memory_id]["vector"], 3)
        assert top and top[0].sim > 0.999_999, f"{memory_id}'s own vector is not recalled"
        assert memory_id in {r.memory.id for r in top if r.sim > 0.999_999}


def export_text(store: EmbeddedStore) -> str:
    import io

    buf = io.StringIO()
    store.export_jsonl(buf)
    return buf.getvalue()
