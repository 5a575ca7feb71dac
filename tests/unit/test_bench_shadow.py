"""benchmarks/shadow.py: its quick run reports every figure, and the figures agree.

No test here asserts on time: the quick run is checked for shape and for
accounting (every shadowed request compared or dropped, every captured query
paired, rows per query as the routes return).
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "shadow.py"


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], str]:
    spec = importlib.util.spec_from_file_location("capsa_bench_shadow", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(sys.modules, spec.name, module)
        spec.loader.exec_module(module)
    out = tmp_path_factory.mktemp("bench") / "shadow.json"
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert module.main(["--quick", "--baseline-ms", "2", "--out", str(out)]) == 0
    return json.loads(out.read_text("utf-8")), printed.getvalue()


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
