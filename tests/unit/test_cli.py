"""`capsa extract` and `capsa demo` as a user runs them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from capsa.cli import main
from capsa.demo.corpus_source import CORPUS_DIR, DOCUMENTS

pytestmark = pytest.mark.slow


def test_extract_writes_json_lines_and_reports_omissions(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "docs.jsonl"
    status = main(["extract", str(CORPUS_DIR / "handbook.html"),
                   str(CORPUS_DIR / "invoice.pdf"), "--out", str(out)])
    assert status == 0
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["label"] for r in records] == ["handbook.html"]
    assert records[0]["kind"] == "html" and "Incident" in records[0]["text"]
    err = capsys.readouterr().err
    assert "invoice.pdf" in err and "type_mismatch" in err


def test_extract_strict_exits_2_when_anything_was_omitted(tmp_path: Path) -> None:
    status = main(["extract", str(CORPUS_DIR / "invoice.pdf"), "--strict",
                   "--out", str(tmp_path / "x.jsonl")])
    assert status == 2


def test_extract_limit_flags_reach_the_guard(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["extract", str(CORPUS_DIR / "remote-work.md"), "--max-bytes", "100",
                   "--out", str(tmp_path / "x.jsonl")])
    assert status == 0
    assert "too_large" in capsys.readouterr().err


def test_extract_walks_directories(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a.txt").write_text("alpha")
    assert main(["extract", str(tmp_path)]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    assert json.loads(line)["text"] == "alpha"


def test_demo_json_reports_every_corpus_file(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert sorted(e["label"] for e in report["extracted"]) == sorted(d.name for d in DOCUMENTS)
    assert {o["reason"] for o in report["omitted"]} == {"archive_ratio", "type_mismatch"}
