"""benchmarks/versus.py: an earlier commit's packing and today's, question by question.

No test asserts on retention; these check that the comparison adds up. The
script itself refuses a run whose earlier side imported any capsa but the
archived one (`kept_with`).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def _question(qid: str) -> Any:
    return SimpleNamespace(id=qid)


def test_a_cell_that_keeps_fewer_is_named_even_when_the_totals_rise(bench_scripts: Any) -> None:
    versus = bench_scripts.load("versus")
    part = versus.compression.part
    ids = [f"q{n}" for n in range(40)]
    dev = [q for q in ids if part(q)[0] == "dev"][:2]
    questions = {"a": [_question(dev[0])], "b": [_question(dev[1])]}
    then = {"a": [[True, True, False]], "b": [[False, False, False]]}
    now = {"a": [[True, False, False]], "b": [[True, True, True]]}
    result = versus.compare(questions, then, now)
    assert result["sets"]["a"]["dev"]["lost"] == [0, 1, 0]
    assert result["sets"]["b"]["dev"]["gained"] == [1, 1, 1]
    assert result["totals"]["dev"]["then"] == [1, 1, 0]
    assert result["totals"]["dev"]["now"] == [2, 1, 1]
    assert result["worse"] == ["a dev 25%"]


def test_a_quick_run_against_head_adds_up(
        bench_scripts: Any) -> None:
    result, printed = bench_scripts.run("versus", "HEAD", "--limit", "2", process=True)
    assert "capsa at " in printed and "keeping fewer now" in printed
    for part in ("dev", "aside"):
        totals = result["totals"][part]
        cells = [c[part] for c in result["sets"].values()]
        for n in range(3):
            assert totals["then"][n] == sum(c["then"][n] for c in cells)
            assert (totals["now"][n] - totals["then"][n]
                    == totals["gained"][n] - totals["lost"][n])
    assert result["rev"]
