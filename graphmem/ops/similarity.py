"""Cosine similarity of a query vector to memories' embeddings, for the candidates phase A
gets without a store-computed similarity (graph expansion, keyword-only hybrid hits, the
random policy)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def cosines(query: Sequence[float], vectors: Sequence[Sequence[float] | None]) -> list[float]:
    """:func:`cosine` of ``query`` with each of ``vectors`` (one matrix product for the
    well-formed ones).

    >>> [round(c, 4) for c in cosines([1.0, 0.0], [[2.0, 0.0], None, [0.0, 3.0], [1.0]])]
    [1.0, 0.0, 0.0, 0.0]
    """
    q = np.asarray(query, dtype=np.float64)
    width = len(q)
    rows = [i for i, v in enumerate(vectors) if v is not None and len(v) == width]
    out = [0.0] * len(vectors)
    if not rows or not np.isfinite(q).all():
        return out
    m = np.asarray([vectors[i] for i in rows], dtype=np.float64)
    with np.errstate(all="ignore"):
        norms = np.linalg.norm(m, axis=1) * float(np.linalg.norm(q))
        # Row by row (einsum, not a BLAS product, whose last bits depend on the batch): a
        # memory's cosine is the same whichever others are scored with it.
        sims = np.einsum("ij,j->i", m, q) / norms
    for i, sim, ok in zip(rows, sims.tolist(), np.isfinite(sims).tolist(), strict=True):
        # Rows that overflow or have no norm go the careful way.
        out[i] = float(np.clip(sim, -1.0, 1.0)) if ok else cosine(query, vectors[i])
    return out


def cosine(a: Sequence[float], b: Sequence[float] | None) -> float:
    """Cosine of two vectors, 0.0 when it is undefined (no vector, other width, zero norm).

    >>> round(cosine([1.0, 0.0], [1.0, 1.0]), 4)
    0.7071
    >>> cosine([1.0, 0.0], None)
    0.0
    """
    if b is None or len(a) != len(b):
        return 0.0
    va, vb = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if not (np.isfinite(va).all() and np.isfinite(vb).all()):
        return 0.0
    # Scaled to unit max-abs first so no product overflows.
    ma, mb = float(np.abs(va).max(initial=0.0)), float(np.abs(vb).max(initial=0.0))
    if ma == 0.0 or mb == 0.0:
        return 0.0
    va, vb = va / ma, vb / mb
    denom = float(np.linalg.norm(va) * np.linalg.norm(vb))
    return float(np.clip(float(va @ vb) / denom, -1.0, 1.0)) if denom > 0 else 0.0
