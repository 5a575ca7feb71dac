"""benchmarks/static_scorer.py: a quick run reports every set's halves, gains and footprint.

No test here asserts on time or on retention: the quick run is checked for
shape (every set, both halves, every method) and for its own arithmetic.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def quick_run(bench_scripts: Any) -> tuple[dict[str, Any], str]:
    pytest.importorskip("numpy")
    # the script puts benchmarks/ first on the path and imports compression.py by name;
    # the run takes both back afterwards
    return bench_scripts.run("static_scorer", "--limit", "6", "--no-embeddings")


def test_quick_run_reports_both_halves_of_every_local_set(quick_run) -> None:
    result, _ = quick_run
    data = ROOT / "benchmarks" / "data"
    local = {path.name.removesuffix("-qa.jsonl") for path in data.glob("*-qa.jsonl")}
    seen = {(row["set"], row["half"]) for row in result["rows"]}
    assert {name for name, _ in seen} >= local
    assert all(sum(1 for r in result["rows"] if (r["set"], r["half"]) == pair
                   and r["method"] in {"capsa", "capsa-static"}) == 2 for pair in seen)


def test_quick_run_gain_is_static_minus_lexical_at_ten_percent(quick_run) -> None:
    result, printed = quick_run
    rows = {(r["set"], r["half"], r["method"]): r for r in result["rows"]}
    for key, gain in result["gain_at_10"].items():
        name, part = key.split("/")
        expected = rows[name, part, "capsa-static"]["0.10"] - rows[name, part, "capsa"]["0.10"]
        assert gain == round(expected, 1)
    assert "capsa-static minus capsa at 10 %" in printed


def test_quick_run_measures_the_models_footprint(quick_run) -> None:
    result, _ = quick_run
    size = result["footprint"]
    assert size["model_file"] == "static-minilm-128.npz"
    assert 0 < size["model_file_mb"] < 10
    assert size["first_score_s"] > 0 and size["numpy_installed_mb"] > 0
