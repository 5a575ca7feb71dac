"""benchmarks/mail_repeats.py: every rendering is left out, every addition handed back.

The script's generated renderings and additions are the shapes the thresholds
of `capsa.guard.extractors._repeats` were chosen on; this pins that they still
fall on the right side, and that the run reports its figures.
"""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture(scope="module")
def run(bench_scripts: Any) -> tuple[dict[str, Any], str]:
    return bench_scripts.run("mail_repeats")


def test_every_generated_rendering_is_left_out_and_every_addition_kept(run) -> None:
    result, _ = run
    summary = result["summary"]

    assert summary["renderings_left_out"] == summary["renderings"] == 42
    assert (summary["additions_left_out"], summary["additions"]) == (0, 45)
    cjk = summary["cjk"]  # the CJK rows alone, wrapped at three widths
    assert cjk["renderings_left_out"] == cjk["renderings"] == 24
    assert (cjk["additions_left_out"], cjk["additions"]) == (0, 21)


def test_the_thresholds_sit_between_the_measured_extremes(run) -> None:
    summary = run[0]["summary"]

    assert summary["highest_addition_share_with_cover"] < summary["duplicate_share"]
    assert summary["duplicate_share"] <= summary["lowest_rendering_share"]
    assert summary["highest_kept_cover_at_share"] < summary["cover_share"]
    assert summary["cover_share"] <= summary["lowest_rendering_cover"]


def test_the_run_prints_one_line_per_case_and_the_summary(run) -> None:
    result, printed = run

    for row in result["rows"]:
        assert row["case"] in printed
    assert '"renderings_left_out": 42' in printed
