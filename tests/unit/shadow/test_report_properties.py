"""Invariants of `spearman`, the rank correlation behind `ShadowReport`."""

from __future__ import annotations

from hypothesis import assume, given
from hypothesis import strategies as st

from capsa.shadow import spearman

_scores = st.lists(st.floats(0.0, 1.0), min_size=2, max_size=30)


@st.composite
def _pairs(draw: st.DrawFn) -> tuple[list[float], list[float]]:
    xs = draw(_scores)
    ys = draw(st.lists(st.floats(0.0, 1.0), min_size=len(xs), max_size=len(xs)))
    return xs, ys


@given(_pairs())
def test_spearman_lies_in_minus_one_to_one(pairs: tuple[list[float], list[float]]) -> None:
    value = spearman(*pairs)
    assert value is None or -1.0 <= value <= 1.0


@given(_pairs())
def test_spearman_is_symmetric(pairs: tuple[list[float], list[float]]) -> None:
    xs, ys = pairs
    assert spearman(xs, ys) == spearman(ys, xs)


@given(_scores)
def test_spearman_of_a_list_with_itself_is_one_unless_all_equal(xs: list[float]) -> None:
    assert spearman(xs, xs) == (1.0 if len(set(xs)) > 1 else None)


@given(st.lists(st.tuples(st.integers(-50, 50), st.integers(-50, 50)), min_size=2))
def test_spearman_ignores_a_monotone_transform(pairs: list[tuple[int, int]]) -> None:
    xs, ys = [float(x) for x, _ in pairs], [float(y) for _, y in pairs]
    cubed = [float(int(x) ** 3 + 7) for x in xs]  # exact in floats for these integers
    assert spearman(cubed, ys) == spearman(xs, ys)


@given(_pairs())
def test_spearman_flips_sign_when_one_side_is_negated(
    pairs: tuple[list[float], list[float]],
) -> None:
    xs, ys = pairs
    value = spearman(xs, ys)
    assume(value is not None)
    flipped = spearman([-x for x in xs], ys)
    assert flipped is not None
    assert abs(flipped + value) < 1e-12
