"""The package's public surface and its independence from the frameworks."""

from __future__ import annotations

import subprocess
import sys
import types

import capsa.capsule


def test_all_lists_exactly_the_public_names():
    public = {
        name
        for name, value in vars(capsa.capsule).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }
    assert sorted(capsa.capsule.__all__) == sorted(public)


def test_importing_the_core_imports_no_framework():
    code = (
        "import sys, capsa.capsule\n"
        "loaded = [m for m in sys.modules if m.split('.')[0] in "
        "{'langchain', 'langchain_core', 'langgraph', 'llama_index'}]\n"
        "print(loaded)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"
