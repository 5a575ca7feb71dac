"""benchmarks/shadow.py: its quick run reports every figure, and the figures agree.

No test here asserts on time: the quick run is checked for shape and for
accounting (every shadowed request compared or dropped, every captured query
paired, rows per query as the routes return).
"""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture(scope="module")
def quick_run(bench_scripts: Any) -> tuple[dict[str, Any], str]:
    return bench_scripts.run("shadow", "--quick", "--baseline-ms", "2")


@pytest.mark.slow
def test_quick_run_measures_both_paths_and_accounts_for_every_request(quick_run) -> None:
    result, _ = quick_run
    paths = {r["path"]: r for r in result["served_latency"]}
    assert set(paths) == {"sync", "async"}
    for run in paths.values():
        assert run["candidate_ms"] == 10 * run["baseline_ms"]
        assert run["compared"] + run["dropped_busy"] + run["invalidated"] == run["requests"]
        for series in ("alone", "shadowed"):
            assert 0 < run[series]["p50_ms"] <= run[series]["p95_ms"]
        assert run["p50_ratio"] == run["shadowed"]["p50_ms"] / run["alone"]["p50_ms"]


@pytest.mark.slow
def test_quick_run_captures_every_query_with_a_row_per_document(quick_run) -> None:
    result, printed = quick_run
    for rate in result["capture_rate"]:
        assert rate["paired"] == rate["queries"]
        assert rate["rows"] == rate["queries"] * rate["documents_per_query"]
        assert rate["rows_per_s"] == pytest.approx(rate["queries_per_s"] * 20)
    assert "Served latency" in printed and "Capture rate" in printed
