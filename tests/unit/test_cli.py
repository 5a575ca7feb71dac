"""`capsa extract` and `capsa demo` as a user runs them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

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


@pytest.fixture(scope="module")
def demo_report() -> dict[str, Any]:
    from capsa.demo.run import run_demo

    return run_demo()


def test_demo_json_prints_the_whole_report(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert set(report) >= {"extraction", "rag_chain", "agent", "llama_index", "shadow"}


def test_demo_extracts_every_corpus_file_and_refuses_the_hostile_ones(
        demo_report: dict[str, Any]) -> None:
    extraction = demo_report["extraction"]
    assert sorted(e["label"] for e in extraction["extracted"]) == sorted(
        d.name for d in DOCUMENTS)
    assert {o["reason"] for o in extraction["omitted"]} == {"archive_ratio", "type_mismatch"}


def test_demo_rag_chain_answers_inside_the_budget(demo_report: dict[str, Any]) -> None:
    for row in demo_report["rag_chain"]:
        assert row["found"], row
        assert row["context_tokens_packed"] <= row["budget"] < row["context_tokens_raw"]


def test_demo_agent_sends_fewer_tokens_with_the_capsule_and_stores_the_same(
        demo_report: dict[str, Any]) -> None:
    agent = demo_report["agent"]
    without, with_capsule = agent["without capsule"], agent["with capsule"]
    assert with_capsule["tokens_per_question"][-1] < without["tokens_per_question"][-1]
    assert with_capsule["stored_messages"] == without["stored_messages"]
    assert all("[" in answer for answer in with_capsule["answers"])  # answers cite chunks


def test_demo_llama_index_query_engine_keeps_the_answer_in_context(
        demo_report: dict[str, Any]) -> None:
    llama = demo_report["llama_index"]
    assert all(row["answer_in_context"] for row in llama["query_engine"])
    assert llama["chat"]["cited_chunks"] >= 1


def test_demo_shadow_comparison_pairs_every_query(demo_report: dict[str, Any]) -> None:
    shadow = demo_report["shadow"]
    assert shadow["invalidated"] == 0
    assert shadow["rows"] > shadow["queries"]
