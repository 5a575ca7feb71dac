"""benchmarks/chunk_overlap.py: the repetition it reports is counted as it says."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def test_a_run_said_twice_counts_once_over_every_run(bench_scripts: Any) -> None:
    module = bench_scripts.load("chunk_overlap")
    said = "one two three four five six"
    assert module.repeated_share([said, said]) == (1, 2)
    assert module.repeated_share([f"{said} seven", "eight nine"]) == (0, 2)


def test_a_quick_run_reports_both_splits_of_every_set(bench_scripts: Any) -> None:
    result, printed = bench_scripts.run("chunk_overlap", "--limit", "3")
    for name in ("squad-open", "docstrings-long", "covid", "manpages"):
        entry = result["sets"][name]
        for split in ("1000/200", "1000/0"):
            for row in entry[split].values():
                assert 0.0 <= row["repeated_share"] <= 1.0
                assert 0 <= row["answers_kept"] <= entry["questions"]
        assert name in printed
