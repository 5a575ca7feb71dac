from __future__ import annotations

import subprocess
import sys
import types

import capsa.budget


def test_all_lists_exactly_the_public_names() -> None:
    public = {name for name, value in vars(capsa.budget).items()
              if not name.startswith("_") and not isinstance(value, types.ModuleType)}
    public.discard("annotations")
    assert sorted(capsa.budget.__all__) == capsa.budget.__all__
    assert set(capsa.budget.__all__) == public


def test_budget_imports_no_framework() -> None:
    code = ("import sys, capsa.budget; "
            "print([m for m in sys.modules if m.split('.')[0] in ('langchain', 'langchain_core', "
            "'llama_index')])")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True)
    assert result.stdout.strip() == "[]"
