"""benchmarks/legacy_encodings.py: its quick run reports every figure, and the figures agree.

Nothing here asserts what the detector gets right: the quick run is checked for
shape and accounting (every file and text counted once per path), and for the
two facts the thresholds rest on where the labelled files are on the machine.
"""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture(scope="module")
def quick_run(bench_scripts: Any) -> tuple[dict[str, Any], str]:
    return bench_scripts.run("legacy_encodings", "--quick")


@pytest.mark.slow
def test_quick_run_counts_every_labelled_file_once_per_path(quick_run) -> None:
    result, printed = quick_run
    for group, row in result["labelled"]["summary"].items():
        for path in ("capsa", "alone"):
            assert sum(row[f"{path}_{kind}"] for kind in ("right", "refused", "wrong")) == (
                row["files"]), (group, path)
    assert len(result["labelled"]["rows"]) == sum(
        row["files"] for row in result["labelled"]["summary"].values())
    assert "1. Labelled files" in printed and "5. Korean chat" in printed


@pytest.mark.slow
def test_quick_run_gives_back_at_most_every_sentence(quick_run) -> None:
    result, _ = quick_run
    assert {row["language"] for row in result["sentences"]} == {
        "Chinese", "Traditional", "Japanese", "Korean"}
    for row in result["sentences"]:
        assert 0 <= row["alone_right"] <= row["texts"] and 0 <= row["capsa_right"] <= row["texts"]
    for codec in ("euc_kr", "johab"):
        chat = result["jamo_chat"][codec]
        assert chat["capsa_right"] - chat["only_capsa_right"] == (
            chat["alone_right"] - chat["only_alone_right"])


@pytest.mark.slow
def test_quick_run_measures_what_the_thresholds_rest_on(quick_run) -> None:
    result, _ = quick_run
    if not result["machine"]["chardet_tests_found"]:
        pytest.skip("chardet's labelled test files are not on this machine")
    readings, pieces = result["readings"], result["non_cjk_pieces"]
    assert readings["wrong_highest_share"][0] < 0.07 < readings["right_lowest_share"][0]
    assert 2 * pieces["highest_evidence"] < pieces["override_evidence"]
