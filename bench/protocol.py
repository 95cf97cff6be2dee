"""Where the learning benchmarks may be tuned, and where their reported figures come from.

This module is the one place that lists folds and seed ranges. The rule:

- **Tuning** (choosing parameters, writing agent rules, trying designs) uses only the ``train``
  and ``dev`` folds, on the ranges in :data:`TUNING`. Tests use these too.
- **Reported figures** (README, bench/results) come from ``--heldout`` runs on the ``test``
  fold, on the range in :data:`HELDOUT`, which no commit message, test or comment names
  otherwise, and which is run only once a design is frozen. Older commits tuned on test-fold
  seeds 0-299 and 1000-1099 (and ScienceWorld's test variations 0-1); those ranges are
  therefore not held out and are not reused for reported figures.

A run records which of the two it was (``protocol`` in its JSON) so a table can be traced to it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SeedRange:
    """A fold and the first seed of a stream drawn from it (seeds run upward from ``start``)."""

    fold: str
    start: int
    purpose: str


TUNING = SeedRange("dev", 0, "tuning: agent rules, retrieval parameters, design choices")
"""TextWorldExpress tuning stream (dev fold)."""

TRAIN = SeedRange("train", 0, "tuning on the train fold (e.g. procedure retrieval parameters)")

HELDOUT = SeedRange("test", 100_000, "the next learning report: fresh, not yet played")
"""TextWorldExpress held-out stream: test fold, seeds from 100,000 up, never played. Once a
result from it changes a default it joins :data:`SPENT` and the next report takes a new range
(70,000 up was issue 45's report at K = 1 and 3; 80,000 up is retention's; 90,000 up was
issue 52's report at K = 5, which set choose_kinds on)."""

RETENTION_HELDOUT = SeedRange("test", 80_000, "the next retention report: fresh, not yet played")
"""Held out for ``bench.retention`` (its own range, so its decision spends no other)."""


@dataclass(frozen=True)
class Spent:
    """A range that informed a decision: from then on it is a dev range, never reported as
    held out again."""

    fold: str
    start: int
    stop: int | None
    decision: str


SPENT: tuple[Spent, ...] = (
    Spent("test", 0, 300, "early agent rules and retrieval parameters were tuned on it"),
    Spent("test", 1000, 1100, "early agent rules were tuned on it"),
    Spent(
        "test",
        40_000,
        None,
        "issue 28: played with q_prior='q0', the default then changed to 'source' and the same "
        "seeds were played again; from then on a dev range",
    ),
    Spent(
        "test",
        50_000,
        60_000,
        "issue 45: abstention on vs off at K = 5 (200 games); it set abstention's default to off",
    ),
    Spent(
        "test",
        60_000,
        70_000,
        "issue 45: the retention sweep (300 games); retention stayed off by default",
    ),
    Spent(
        "test",
        70_000,
        80_000,
        "issue 45's report at K = 1 and K = 3 (200 games): no default changed, but it has been "
        "played and read, so it is not held out again",
    ),
    Spent(
        "test",
        90_000,
        100_000,
        "issue 52: both kinds at K = 5 (800 games); utility choosing the kind per cluster "
        "(choose_kinds) was set on by default from it",
    ),
)
"""Every test-fold range that informed a decision (TextWorldExpress). A held-out range must not
overlap any of them (tests/test_learning_mixed.py checks it)."""


def overlaps(seeds: SeedRange, spent: Spent, length: int = 10_000) -> bool:
    """Whether a stream of ``length`` seeds per family from ``seeds`` touches ``spent``."""
    if seeds.fold != spent.fold:
        return False
    stop = spent.stop if spent.stop is not None else spent.start + 10_000
    return seeds.start < stop and spent.start < seeds.start + length


SCIENCEWORLD_TUNING = SeedRange("dev", 0, "ScienceWorld tuning: dev-fold variations by position")
SCIENCEWORLD_HELDOUT = SeedRange(
    "test", 30, "ScienceWorld reported figures: test-fold variations from position 30"
)
"""Earlier replay rules were developed on test positions 0-1, so those are not held out;
positions 20-24 were the held-out range of issues 28-44 (played more than once), 25-29 issue
45's mixed-stream report (``--fold test --test-start 25``). The next report starts at 30."""


def stream_range(*, heldout: bool) -> SeedRange:
    """The range a mixed stream draws its seeds from."""
    return HELDOUT if heldout else TUNING


RETRIEVAL_SPLITS: dict[str, tuple[int, ...]] = {
    "dev": (0, 1),
    "heldout": (100, 101),
    "heldout2": (300, 301),
}
"""``bench.retrieval_quality --dataset conversations``: the generator seeds (``bench.
conversations``, one user's history each, 38 questions a seed) whose questions hybrid recall's
settings were chosen on (dev), and those that only report (held out). Issue 53: adaptive
fusion's first setting (span 1) was chosen on dev and confirmed on held out (100-101), then
failed on the 16 LongMemEval-S questions (below keyword-only); LongMemEval-S informed that one
decision (span 0.5) and is a dev set for fusion since; ``heldout2`` (300-301), generated
afresh, reported the revised setting once."""


UPDATES_SPLITS: dict[str, tuple[int, ...]] = {
    "dev": (0, 1, 2),
    "heldout": (700, 701, 702, 703, 704),
    "heldout2": (710, 711, 712, 713, 714),
}
"""``bench.updates``: the generator seeds (one user's history each: the user's four facts in
the first person, eight friends' two facts each, every fact said two or three times as it
changes) whose questions fact updates' settings were chosen on (dev; seeds 0-2 also measured
the baseline before fact updates existed), and those that only report (held out). ``heldout``
(700-704) reported the first design once (commit b804e64: 94 % newest first); the ranking gate
(``rank_margin``) was then added for LongMemEval-S turns (a dev set), so 700-704 is a dev range
since and ``heldout2`` (710-714) reports the design as shipped."""
