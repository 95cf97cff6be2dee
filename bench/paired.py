"""Paired comparisons of two conditions that played the same episodes.

Two conditions of a stream play the same (family, seed) episodes in the same order, so their
outcomes pair up episode by episode. :func:`compare` gives the difference of the means, an
exact two-sided sign test on the episodes where they differ (McNemar's exact test for 0/1
outcomes), and a percentile bootstrap confidence interval of the mean difference.

>>> r = compare([1, 1, 1, 0, 1, 1, 1, 1], [0, 0, 0, 0, 1, 0, 0, 1])
>>> r.diff, r.better, r.worse, round(r.p_sign, 4)
(0.625, 5, 0, 0.0625)
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Paired:
    """``a`` against ``b``, episode by episode."""

    n: int
    diff: float
    """mean(a) − mean(b)."""
    better: int
    """Episodes where a scored higher."""
    worse: int
    """Episodes where b scored higher."""
    p_sign: float
    """Exact two-sided sign test on the episodes that differ (1.0 when none differ)."""
    ci_low: float
    ci_high: float
    """95 % percentile bootstrap interval of the mean difference."""


def sign_test(better: int, worse: int) -> float:
    """Two-sided exact binomial test of ``better`` against ``worse`` at p = 1/2."""
    n = better + worse
    if n == 0:
        return 1.0
    k = min(better, worse)
    tail: float = sum(math.comb(n, i) for i in range(k + 1)) / 2**n
    return min(1.0, 2 * tail)


def compare(
    a: Sequence[float], b: Sequence[float], *, resamples: int = 2000, seed: int = 0
) -> Paired:
    """Compare paired outcomes ``a`` and ``b`` (same length, same episode order)."""
    if len(a) != len(b):
        raise ValueError(f"paired outcomes differ in length: {len(a)} and {len(b)}")
    n = len(a)
    if n == 0:
        return Paired(0, 0.0, 0, 0, 1.0, 0.0, 0.0)
    d = [float(x) - float(y) for x, y in zip(a, b, strict=True)]
    better = sum(1 for x in d if x > 0)
    worse = sum(1 for x in d if x < 0)
    rng = random.Random(seed)
    means = sorted(sum(d[rng.randrange(n)] for _ in range(n)) / n for _ in range(resamples))
    low = means[int(0.025 * (resamples - 1))]
    high = means[int(0.975 * (resamples - 1))]
    return Paired(n, sum(d) / n, better, worse, sign_test(better, worse), low, high)
