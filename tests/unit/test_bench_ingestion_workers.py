"""benchmarks/ingestion_workers.py: a one-copy run reports every mode, consistently.

No test here asserts on time: the run is checked for shape (every mode, every
document in and out) and for ratios that agree with the seconds they come from.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from capsa.demo.corpus_source import DOCUMENTS

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "ingestion_workers.py"

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def test_ingestion_workers_reports_every_mode_with_consistent_ratios(tmp_path: Path) -> None:
    out = tmp_path / "result.json"
    subprocess.run([sys.executable, str(SCRIPT), "--copies", "1", "--out", str(out)],
                   check=True, capture_output=True)
    result = json.loads(out.read_text())
    rows = result["rows"]
    assert set(rows) == {"single", "workers", "workers_twice"}
    for row in rows.values():
        assert row["documents_in"] == row["documents_out"] == len(DOCUMENTS)
        assert row["ratio_to_single"] == pytest.approx(
            row["seconds"] / rows["single"]["seconds"], abs=0.02)
