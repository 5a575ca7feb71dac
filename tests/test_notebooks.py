"""The committed notebooks are exactly what their sources in notebooks/src/ produce.

`make test` executes the notebooks themselves (nbmake); this test keeps a
notebook from drifting away from its reviewable source.
"""

from __future__ import annotations

from pathlib import Path

import jupytext
import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted((ROOT / "notebooks" / "src").glob("*.py"))


@pytest.mark.parametrize("source", SOURCES, ids=[s.stem for s in SOURCES])
def test_notebook_matches_its_source(source: Path) -> None:
    expected = jupytext.read(source)
    committed = nbformat.read(ROOT / "notebooks" / f"{source.stem}.ipynb", as_version=4)
    assert [(c.cell_type, c.source) for c in committed.cells] == [
        (c.cell_type, c.source) for c in expected.cells]
    assert all(not c.get("outputs") for c in committed.cells if c.cell_type == "code")
