"""benchmarks/capsule_sensitivity.py: its own billing agrees with capsule.py's.

The script re-implements the three goal rules before it bills other rules and
shapes, and its figures mean something only if the two agree to the token.
"""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def sensitivity(bench_scripts: Any) -> Any:
    return bench_scripts.load("capsule_sensitivity")


@pytest.fixture(scope="module")
def wide(sensitivity: Any) -> Any:
    """The wide chats, played once for the module: each test only reads them."""
    return sensitivity.chats("wide")


def test_the_goal_rules_bill_as_capsule_py_does(sensitivity: Any, wide: Any) -> None:
    rows = wide
    sensitivity.check_reproduction(rows)  # raises SystemExit on any difference
    assert set(rows) == {"full history", "capsa", "budget 150"}


def test_every_rule_and_shape_gives_a_ratio_for_every_row(sensitivity: Any, wide: Any) -> None:
    rows = wide
    rules = {*sensitivity.GOAL_RULES, *sensitivity.OTHER_RULES}
    for shape in sensitivity.SHAPES.values():
        table = sensitivity.ratios(rows, shape)
        assert set(table) == {"capsa", "budget 150"}
        assert all(set(row) == rules and all(0 < v < 2 for v in row.values())
                   for row in table.values())


def test_counting_by_a_real_tokenizer_changes_the_counts_and_restores_them(
        sensitivity: Any, wide: Any) -> None:
    rows = wide
    before = sensitivity.ratios(rows, {})

    with sensitivity.counted_by(lambda text: len(text)) as count:  # a token per character
        _, requests, tools = rows["capsa"]
        counted = sensitivity.GOAL_RULES["idealised 0.1 / 1.25"](requests, tools)
        assert count(requests[0][0]) == len(requests[0][0].text) + 4

    sensitivity.check_reproduction(rows)  # the approximate counts are back
    assert sensitivity.ratios(rows, {}) == before
    assert counted > 3 * sensitivity.GOAL_RULES["idealised 0.1 / 1.25"](requests, tools)
