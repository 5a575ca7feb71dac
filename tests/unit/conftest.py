"""What the benchmark smoke tests (``test_bench_*.py``) share: load a script, run it once.

Each of those files runs one script of ``benchmarks/`` end to end, usually in
its quick mode, and checks the JSON it wrote and the tables it printed. The
`bench_scripts` fixture does the loading and running the same way for all of
them, so a test file holds only what it asserts.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
_INSIDE = f"{BENCHMARKS}{os.sep}"


@contextlib.contextmanager
def _imports_restored() -> Iterator[None]:
    """Leave ``sys.path`` and the benchmark modules in ``sys.modules`` as they were.

    Some scripts put ``benchmarks/`` first on the path and import a sibling by its
    bare name (``import compression``); neither may outlive the run, or another
    test would import the sibling instead of a package of the same name.
    """
    path, before = list(sys.path), set(sys.modules)
    try:
        yield
    finally:
        sys.path[:] = path
        for name in set(sys.modules) - before:
            if str(getattr(sys.modules[name], "__file__", None)).startswith(_INSIDE):
                del sys.modules[name]


def _load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"capsa_bench_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(sys.modules, spec.name, module)
        spec.loader.exec_module(module)
    return module


class BenchScripts:
    """Loads scripts of ``benchmarks/`` and runs them into a fresh temporary folder."""

    def __init__(self, scratch: pytest.TempPathFactory) -> None:
        self._scratch = scratch

    def load(self, name: str, path: Path | None = None) -> ModuleType:
        """``benchmarks/<name>.py`` (or `path`) as a module named ``capsa_bench_<name>``.

        The module is in ``sys.modules`` only while it runs its top level, where
        dataclasses look their module up.
        """
        with _imports_restored():
            return _load(name, path or BENCHMARKS / f"{name}.py")

    def run(self, script: str | ModuleType, *args: str, out_dir: bool = False,
            process: bool = False) -> tuple[dict[str, Any], str]:
        """Run a script with `args` and ``--out`` in a new folder; its JSON and its stdout.

        `script` is a name in ``benchmarks/`` or a module from `load`. The script
        writes ``<name>.json``, or with `out_dir` is given the folder and writes
        that file in it. With `process` it runs in a fresh interpreter (for
        scripts that import what this process should not, or plot), else its
        ``main(argv)`` is called here; either way it must succeed.
        """
        name = script if isinstance(script, str) else script.__name__.removeprefix(
            "capsa_bench_")
        folder = self._scratch.mktemp(f"bench-{name}")
        written = folder / f"{name}.json"
        argv = [*args, "--out", str(folder if out_dir else written)]
        if process:
            assert isinstance(script, str), "a process runs the script by its name"
            done = subprocess.run([sys.executable, str(BENCHMARKS / f"{name}.py"), *argv],
                                  capture_output=True, text=True, check=False)
            assert done.returncode == 0, done.stderr[-4000:]
            printed = done.stdout
        else:
            stdout = io.StringIO()
            with _imports_restored():  # over both: a script may import a sibling as it runs
                module = _load(name, BENCHMARKS / f"{name}.py") if isinstance(script, str) \
                    else script
                with contextlib.redirect_stdout(stdout):
                    assert module.main(argv) == 0
            printed = stdout.getvalue()
        return json.loads(written.read_text("utf-8")), printed


@pytest.fixture(scope="session")
def bench_scripts(tmp_path_factory: pytest.TempPathFactory) -> BenchScripts:
    """Loads and runs the scripts of ``benchmarks/`` for their smoke tests."""
    return BenchScripts(tmp_path_factory)
