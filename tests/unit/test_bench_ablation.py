"""benchmarks/ablation.py: a quick run adds up, and leaves the packer's rules as it found them.

No test here asserts on retention: a rule's worth is the script's output, not
something a test can fix in advance.
"""

from __future__ import annotations

from typing import Any

import pytest

import capsa.budget.compress as compress
import capsa.budget.evidence as evidence

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

SAME = f"capsa.budget.compress._LEAD_BONUS={compress._LEAD_BONUS}"
OFF = "capsa.budget.compress._LEAD_BONUS=0,capsa.budget.evidence._CUE_WEIGHT=0"


def rules() -> tuple[float, float]:
    return compress._LEAD_BONUS, evidence._CUE_WEIGHT


@pytest.fixture(scope="module")
def quick_run(bench_scripts: Any) -> tuple[dict[str, Any], str, tuple[float, float]]:
    before = rules()
    result, printed = bench_scripts.run("ablation", "--limit", "4", "--change", SAME,
                                        "--change", OFF)
    return result, printed, before


def test_a_change_to_the_value_in_force_changes_nothing(quick_run) -> None:
    # the same answers under the same rules: nothing leaks from one change into the next
    result, _, _ = quick_run
    same = result["changes"][SAME]
    assert all(values == [0, 0, 0] for values in same["totals"].values())
    assert same["dev_sets_gaining"] == same["dev_sets_losing"] == [[], [], []]


def test_the_halves_add_up_to_the_development_part(quick_run) -> None:
    result, printed, _ = quick_run
    for change in result["changes"].values():
        totals = change["totals"]
        assert [a + b for a, b in zip(totals["dev-a"], totals["dev-b"], strict=True)] \
            == totals["dev"]
        by_set = [sum(s["dev"][n] for s in change["sets"].values()) for n in range(3)]
        assert by_set == totals["dev"]
    counts = result["questions"]
    assert counts["dev-a"] + counts["dev-b"] == counts["dev"]
    assert "compress._LEAD_BONUS=0,evidence._CUE_WEIGHT=0" in printed


def test_the_rules_are_restored_after_the_run(quick_run) -> None:
    _, _, before = quick_run
    assert rules() == before


def test_a_constant_that_does_not_exist_is_refused(bench_scripts: Any) -> None:
    module = bench_scripts.load("ablation")
    with pytest.raises(SystemExit, match="has no _NO_SUCH_RULE"), \
            module.changed("capsa.budget.compress._NO_SUCH_RULE=1"):
        pass


def test_a_changed_splitting_rule_is_not_hidden_by_remembered_readings(
        bench_scripts: Any) -> None:
    """Packing remembers each passage's sentences by its text; a rule changed in the same
    process must still reach them (the script forgets the readings around a change)."""
    from capsa.budget import Budget, Passage, pack

    ablation = bench_scripts.load("ablation")
    text = " ".join(f"word{n} and more words" for n in range(60))  # one clause, no stops
    passages = [Passage(id="a", text=text)]

    def sentences() -> int:
        return len(compress._read(text).spans)

    pack("word59", passages, Budget(max_tokens=40))
    before = sentences()
    with ablation.changed("capsa.budget.sentences._LONGEST_CLAUSE=40"):
        during = sentences()
    after = sentences()

    assert during > before == after
