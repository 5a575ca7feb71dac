"""The view bound's steps: replayed from ended questions, so the cached prefix moves rarely."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from capsa.capsule import group_sizes, groups_to_drop, view_cut


def _chat(ended: list[int], peak: int, live: list[list[int]], bound: float, low: float):
    """The start of every request of a chat: question n sent at each size in ``live[n]``."""
    starts: list[list[int]] = []
    for n, sizes in enumerate(live):
        peaks = [peak] * (n + 1)
        starts.append(
            [groups_to_drop([*ended[:n], s], int(bound), low_water=low, peaks=peaks) for s in sizes]
        )
    return starts


@settings(max_examples=200, deadline=None)
@given(
    st.integers(min_value=200, max_value=5000),
    st.sampled_from([0.4, 0.5, 0.6, 0.75]),
    st.data(),
)
def test_moves_are_at_least_the_headroom_over_a_question_apart(bound, low_water, data):
    low = int(bound * low_water)
    q = data.draw(st.integers(min_value=5, max_value=min(300, low)), label="largest ended")
    peak = data.draw(st.integers(min_value=q, max_value=low), label="peak")
    questions = data.draw(st.integers(min_value=2, max_value=40), label="questions")
    ended = data.draw(st.lists(st.integers(1, q), min_size=questions, max_size=questions))
    live = [
        sorted(data.draw(st.lists(st.integers(1, peak), min_size=1, max_size=4)))
        for _ in range(questions)
    ]
    starts = _chat(ended, peak, live, bound, low_water)
    flat = [s for question in starts for s in question]
    assert flat == sorted(flat)  # the start never moves back
    for n, (question, sizes) in enumerate(zip(starts, live, strict=True)):
        assert len(set(question)) == 1  # never within a question: room was kept for it
        assert all(sum(ended[d:n]) + s <= bound for d, s in zip(question, sizes, strict=True))
    moves = [n for n in range(1, questions) if starts[n][0] != starts[n - 1][0]]
    apart = (bound - low) // q  # headroom after a step over the largest ended question
    assert all(b - a >= apart for a, b in itertools.pairwise(moves))


def test_the_replay_keeps_room_for_the_largest_question_as_it_was_sent():
    # ended questions compact to 50; each was 200 while it ran
    sizes = [50, 50, 50, 50, 10]
    assert groups_to_drop(sizes, 300, low_water=0.6) == 0
    assert groups_to_drop(sizes, 300, low_water=0.6, peaks=[200] * 5) == 3
    # the next question starts where the last one did
    assert groups_to_drop([*sizes[:4], 50, 10], 300, low_water=0.6, peaks=[200] * 6) == 3


def test_a_question_larger_than_the_room_kept_still_fits_the_bound():
    sizes = [50, 50, 50, 400]
    dropped = groups_to_drop(sizes, 500, low_water=0.6, peaks=[60, 60, 60, 400])
    assert sum(sizes[dropped:]) <= 500 and dropped == 3


def test_peaks_must_name_every_group():
    with pytest.raises(ValueError, match="peaks has 2 groups, sizes 3"):
        groups_to_drop([1, 2, 3], 10, peaks=[1, 2])


def test_view_cut_counts_the_head_apart_from_the_groups():
    roles = ["system", "user", "ai", "user", "ai", "user"]
    assert group_sizes(roles, [7, 1, 2, 3, 4, 5]) == [3, 7, 5]
    cut = view_cut(roles, [7, 100, 100, 100, 100, 5], 450, peaks=[200, 200, 5])
    assert cut.dropped == 2 and cut.start == 5
