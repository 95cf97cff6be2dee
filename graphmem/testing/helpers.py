"""Small builders and assertions shared by the conformance suite and graphmem's own tests."""

from __future__ import annotations

import math
import uuid
from collections.abc import Iterable

from graphmem.models import AnyMemory, Edge, EdgeKind, Granularity, Note, Procedure, Step

HOSTILE_TEXTS: tuple[str, ...] = (
    'She said "hello" and left; it\'s \\ back\\slashed',
    "ünïcödé 漢字 العربية עברית 🚀🧠 e\u0301 \u2028line\u2029para",
    "null\x00byte and bell\x07 and escape\x1b[31m",
    "new\nline\r\nand\ttab",
    "'); MATCH (n) DETACH DELETE n //",
    '{"type": "node", "kind": "Note"}',
    "  padded  ",
    "x" * 10_000,
)
"""Text that breaks naive escaping, encoding or query building; each must round-trip exactly."""


def unique_namespace(prefix: str = "t") -> str:
    """A namespace no other test uses."""
    return f"{prefix}-{uuid.uuid4().hex[:16]}"


def vec(dim: int, *weights: float) -> list[float]:
    """A ``dim``-dim vector with ``weights`` in its first coordinates and zeros after."""
    if len(weights) > dim:
        raise ValueError(f"{len(weights)} weights do not fit in {dim} dimensions")
    return [float(w) for w in weights] + [0.0] * (dim - len(weights))


def angled(dim: int, angle: float) -> list[float]:
    """A unit vector at ``angle`` radians from the first axis, in the plane of the first two."""
    return vec(dim, math.cos(angle), math.sin(angle))


def note(
    namespace: str, memory_id: str, content: str, embedding: list[float] | None = None
) -> Note:
    return Note(id=memory_id, namespace=namespace, content=content, embedding=embedding)


def chain(
    namespace: str, procedure_id: str, n_steps: int, dim: int
) -> tuple[list[AnyMemory], list[Edge]]:
    """A Procedure and its Step chain (``<id>-s0`` …) joined by FIRST_STEP / NEXT edges."""
    procedure = Procedure(
        id=procedure_id,
        namespace=namespace,
        task_text=f"task of {procedure_id}",
        key=f"task of {procedure_id}",
        granularity=Granularity.TRAJECTORY,
        n_steps=n_steps,
        embedding=vec(dim, 1, 1),
    )
    steps = [
        Step(
            id=f"{procedure_id}-s{i}",
            namespace=namespace,
            procedure_id=procedure_id,
            index=i,
            action=f"action {i}",
            observation=f"observation {i}",
        )
        for i in range(n_steps)
    ]
    edges = [
        Edge(
            namespace=namespace,
            kind=EdgeKind.FIRST_STEP if i == 0 else EdgeKind.NEXT,
            src=procedure_id if i == 0 else steps[i - 1].id,
            dst=step.id,
        )
        for i, step in enumerate(steps)
    ]
    return [procedure, *steps], edges


def assert_same_memory(got: AnyMemory, want: AnyMemory, *, ignore: Iterable[str] = ()) -> None:
    """Equal in every field (embeddings to float32 precision), except those in ``ignore``."""
    skip = {"embedding", *ignore}
    assert got.model_dump(exclude=skip) == want.model_dump(exclude=skip)
    if want.embedding is None:
        assert got.embedding is None
    else:
        assert got.embedding is not None and len(got.embedding) == len(want.embedding)
        for a, b in zip(got.embedding, want.embedding, strict=True):
            assert math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-7)
