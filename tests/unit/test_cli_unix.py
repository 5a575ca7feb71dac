"""The `capsa` command behaves like a Unix tool: version, closed pipes, missing extras."""

from __future__ import annotations

import subprocess
import sys

import pytest

import capsa
import capsa.demo.run
from capsa.cli import main


def test_version_prints_the_package_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"capsa {capsa.__version__}\n"


def test_version_works_as_a_command(tmp_path) -> None:
    done = subprocess.run([sys.executable, "-m", "capsa.cli", "--version"],
                          capture_output=True, text=True, check=False, cwd=tmp_path)
    assert (done.returncode, done.stdout, done.stderr) == (0, f"capsa {capsa.__version__}\n", "")


def test_a_closed_pipe_ends_doctor_quietly(tmp_path) -> None:
    child = subprocess.Popen([sys.executable, "-m", "capsa.cli", "doctor", "--json"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path)
    assert child.stdout is not None and child.stderr is not None
    child.stdout.close()  # the reader is gone before the first line, as `| head -0` would be
    with child.stderr:
        err = child.stderr.read().decode()
    assert child.wait() == 141
    assert "Traceback" not in err and "BrokenPipe" not in err


class _ClosedPipe:
    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    def flush(self) -> None:
        raise BrokenPipeError(32, "Broken pipe")


def test_a_closed_pipe_in_process_returns_the_sigpipe_status(monkeypatch) -> None:
    monkeypatch.setattr(sys, "stdout", _ClosedPipe())
    assert main(["--version"]) == 141


def _demo_must_not_start(**kwargs: object) -> int:
    raise AssertionError("the demo started without its extras")


def test_demo_names_the_missing_extra_before_starting(monkeypatch, capsys) -> None:
    monkeypatch.setitem(sys.modules, "llama_index", None)
    monkeypatch.setitem(sys.modules, "llama_index.core", None)
    monkeypatch.setattr(capsa.demo.run, "main", _demo_must_not_start)
    assert main(["demo"]) == 1
    err = capsys.readouterr().err
    assert "pip install 'capsa[llama-index]'" in err and "llama_index.core" in err
    assert "langchain" not in err.split("pip install")[0]


def test_demo_names_every_missing_extra(monkeypatch, capsys) -> None:
    for module in ("langchain_core", "llama_index", "llama_index.core"):
        monkeypatch.setitem(sys.modules, module, None)
    monkeypatch.setattr(capsa.demo.run, "main", _demo_must_not_start)
    assert main(["demo", "--json"]) == 1
    assert "pip install 'capsa[langchain,llama-index]'" in capsys.readouterr().err
