"""The public surface of `capsa.shadow`, and the core's independence from frameworks."""

from __future__ import annotations

import subprocess
import sys
import types

import capsa.shadow


def test_all_lists_exactly_the_public_names() -> None:
    public = {
        name for name, value in vars(capsa.shadow).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }
    assert sorted(capsa.shadow.__all__) == sorted(public)


def test_shadow_core_imports_no_framework_and_nothing_above_it() -> None:
    code = (
        "import sys, capsa.shadow, capsa.shadow._cli\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('langchain', 'langchain_core', 'llama_index', 'matplotlib') "
        "or m.startswith(('capsa.demo', 'capsa.langchain', 'capsa.llama_index')))\n"
        "print(bad)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True)
    assert result.stdout.strip() == "[]"
