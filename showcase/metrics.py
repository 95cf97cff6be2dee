"""Learning metrics as the papers report them (MemRL, Mem^p, Evo-Memory).

An agent works through a stream of episodes; each :class:`EpisodeRecord` says which task it was,
in which epoch (a pass over the task set, or a block of a one-pass stream), whether it succeeded
and how many steps it took.

>>> recs = [EpisodeRecord(task="a", epoch=0, success=True, steps=5),
...         EpisodeRecord(task="a", epoch=1, success=False, steps=9)]
>>> summarise(recs).forgetting_rate
1.0
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class EpisodeRecord:
    task: str
    epoch: int
    success: bool
    steps: int
    llm_calls: int = 0
    llm_tokens: int = 0


@dataclass(frozen=True)
class LearningSummary:
    episodes: int
    success_rate: float
    mean_steps: float
    success_per_epoch: list[float] = field(default_factory=list)
    cumulative_success: list[float] = field(default_factory=list)
    steps_per_epoch: list[float] = field(default_factory=list)
    forgetting_rate: float = 0.0
    llm_calls: int = 0
    llm_tokens: int = 0


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def blocks(n_episodes: int, n_blocks: int) -> list[int]:
    """Epoch numbers that cut a one-pass stream of ``n_episodes`` into ``n_blocks`` blocks."""
    if n_blocks <= 0:
        raise ValueError("n_blocks must be positive")
    size = max(1, -(-n_episodes // n_blocks))
    return [i // size for i in range(n_episodes)]


def summarise(records: Sequence[EpisodeRecord]) -> LearningSummary:
    """Success per epoch, cumulative success, mean steps and forgetting rate.

    - cumulative success after epoch e: share of the tasks seen so far solved at least once;
    - forgetting rate: share of tasks solved in some epoch and failed in a later one (over the
      tasks that were solved at least once before their last attempt).
    """
    if not records:
        return LearningSummary(episodes=0, success_rate=0.0, mean_steps=0.0)
    epochs = sorted({r.epoch for r in records})
    by_epoch: dict[int, list[EpisodeRecord]] = defaultdict(list)
    for r in records:
        by_epoch[r.epoch].append(r)
    seen: set[str] = set()
    solved: set[str] = set()
    cumulative = []
    for e in epochs:
        for r in by_epoch[e]:
            seen.add(r.task)
            if r.success:
                solved.add(r.task)
        cumulative.append(len(solved) / len(seen))
    history: dict[str, list[tuple[int, bool]]] = defaultdict(list)
    for r in sorted(records, key=lambda r: r.epoch):
        history[r.task].append((r.epoch, r.success))
    could_forget = forgot = 0
    for attempts in history.values():
        first_success = next((i for i, (_, ok) in enumerate(attempts) if ok), None)
        if first_success is None or first_success == len(attempts) - 1:
            continue
        could_forget += 1
        if any(not ok for _, ok in attempts[first_success + 1 :]):
            forgot += 1
    return LearningSummary(
        episodes=len(records),
        success_rate=_mean([float(r.success) for r in records]),
        mean_steps=_mean([float(r.steps) for r in records]),
        success_per_epoch=[_mean([float(r.success) for r in by_epoch[e]]) for e in epochs],
        cumulative_success=cumulative,
        steps_per_epoch=[_mean([float(r.steps) for r in by_epoch[e]]) for e in epochs],
        forgetting_rate=forgot / could_forget if could_forget else 0.0,
        llm_calls=sum(r.llm_calls for r in records),
        llm_tokens=sum(r.llm_tokens for r in records),
    )
