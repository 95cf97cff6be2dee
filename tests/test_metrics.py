"""Learning metrics: hand-computed cases and invariants."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from showcase.metrics import EpisodeRecord, blocks, summarise


def rec(task: str, epoch: int, success: bool, steps: int = 10) -> EpisodeRecord:
    return EpisodeRecord(task=task, epoch=epoch, success=success, steps=steps)


def test_hand_computed_stream() -> None:
    records = [
        rec("a", 0, True, 4),
        rec("b", 0, False, 10),
        rec("a", 1, False, 10),
        rec("b", 1, True, 6),
        rec("c", 1, False, 10),
    ]
    s = summarise(records)
    assert s.episodes == 5
    assert s.success_rate == 2 / 5
    assert s.success_per_epoch == [0.5, 1 / 3]
    assert s.cumulative_success == [0.5, 2 / 3]
    assert s.steps_per_epoch == [7.0, 26 / 3]
    # a: solved then failed (forgot); b: solved only last; c: never solved.
    assert s.forgetting_rate == 1.0


def test_no_forgetting_when_success_sticks() -> None:
    s = summarise([rec("a", 0, True), rec("a", 1, True), rec("b", 0, True), rec("b", 1, True)])
    assert s.forgetting_rate == 0.0
    assert s.cumulative_success == [1.0, 1.0]


def test_empty_stream() -> None:
    assert summarise([]).episodes == 0


def test_blocks_cut_evenly() -> None:
    assert blocks(10, 5) == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]
    assert max(blocks(300, 6)) == 5


@given(st.lists(st.tuples(st.sampled_from("abcde"), st.integers(0, 4), st.booleans()), max_size=60))
def test_invariants(items: list[tuple[str, int, bool]]) -> None:
    s = summarise([rec(t, e, ok) for t, e, ok in items])
    assert 0.0 <= s.success_rate <= 1.0
    assert 0.0 <= s.forgetting_rate <= 1.0
    # cumulative success can only be computed over tasks seen; it never exceeds 1
    assert all(0.0 <= c <= 1.0 for c in s.cumulative_success)
    if items:
        solved_any = {t for t, _, ok in items if ok}
        assert (
            abs(s.cumulative_success[-1] - len(solved_any) / len({t for t, _, _ in items})) < 1e-12
        )
