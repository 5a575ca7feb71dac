"""benchmarks/ingestion_workers.py: a one-copy run reports every mode, consistently.

No test here asserts on time: the run is checked for shape (every mode, every
document in and out) and for ratios that agree with the seconds they come from.
"""

from __future__ import annotations

from typing import Any

import pytest

from capsa.demo.corpus_source import DOCUMENTS

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def test_ingestion_workers_reports_every_mode_with_consistent_ratios(bench_scripts: Any) -> None:
    # in its own interpreter: its main() reads sys.argv
    result, _ = bench_scripts.run("ingestion_workers", "--copies", "1", process=True)
    rows = result["rows"]
    assert set(rows) == {"single", "workers", "workers_twice"}
    for row in rows.values():
        assert row["documents_in"] == row["documents_out"] == len(DOCUMENTS)
        assert row["ratio_to_single"] == pytest.approx(
            row["seconds"] / rows["single"]["seconds"], abs=0.02)
