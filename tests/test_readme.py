"""Every Python snippet in the README and the docs runs, so none can rot."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("**/*.md"))]
SNIPPETS = [
    pytest.param(code, id=f"{page.relative_to(ROOT)}#{number}")
    for page in PAGES if page.exists()
    for number, code in enumerate(_BLOCK.findall(page.read_text(encoding="utf-8")), start=1)
]


@pytest.mark.slow
@pytest.mark.parametrize("code", SNIPPETS)
def test_markdown_snippet_runs(code: str) -> None:
    namespace: dict[str, object] = {"__name__": "__snippet__"}
    exec(compile(code, "<snippet>", "exec", dont_inherit=True), namespace)
    assert namespace  # the snippet ran to its end; its own asserts pin behaviour
