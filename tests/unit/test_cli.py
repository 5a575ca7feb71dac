"""`capsa extract` and `capsa demo` as a user runs them."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from capsa import cli
from capsa.cli import main
from capsa.demo.corpus_source import CORPUS_DIR, DOCUMENTS
from capsa.guard import ExtractionLimits
from capsa.guard.bulk import default_width
from capsa.guard.extractors import PlainTextExtractor
from capsa.guard.samples import pdf_with_text

pytestmark = pytest.mark.slow


def test_extract_writes_json_lines_and_reports_omissions(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "docs.jsonl"
    status = main(["extract", str(CORPUS_DIR / "handbook.html"),
                   str(CORPUS_DIR / "invoice.pdf"), "--out", str(out)])
    assert status == 0
    records = [json.loads(line) for line in out.read_text().splitlines()]
    extracted = [r for r in records if r["outcome"] == "extracted"]
    assert [r["label"] for r in extracted] == ["handbook.html"]
    assert extracted[0]["kind"] == "html" and "Incident" in extracted[0]["text"]
    err = capsys.readouterr().err
    assert "invoice.pdf" in err and "type_mismatch" in err


def test_omissions_print_one_unbroken_line_each_whatever_the_path_length(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    deep = tmp_path.joinpath(*(["a-rather-long-directory-name"] * 6))
    deep.mkdir(parents=True)
    refused = deep / "quarterly-invoice-from-the-supplier.pdf"
    refused.write_bytes((CORPUS_DIR / "invoice.pdf").read_bytes())
    assert main(["extract", str(refused), "--out", str(tmp_path / "x.jsonl")]) == 0
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("omitted ")]
    assert len(lines) == 1
    assert lines[0].startswith(f"omitted {refused}: ")
    assert "type_mismatch" in lines[0]


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


def test_extract_leaves_dot_files_out_of_a_walk_unless_hidden_is_given(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "config").write_text("url = https://user:token@example.com/r.git")
    (tmp_path / ".env").write_text("API_KEY=sk-secret")
    (tmp_path / "a.txt").write_text("alpha")

    assert main(["extract", str(tmp_path)]) == 0
    walked = capsys.readouterr()
    assert main(["extract", "--hidden", str(tmp_path)]) == 0
    everything = capsys.readouterr()

    assert [json.loads(line)["text"] for line in walked.out.splitlines()] == ["alpha"]
    assert "extracted 1 of 1 files" in walked.err
    assert len(everything.out.splitlines()) == 3


class _Blocking(PlainTextExtractor):
    """Plain text, but each file waits until `parties` files are being parsed at once."""

    def __init__(self, parties: int) -> None:
        self.barrier = threading.Barrier(parties, timeout=30)

    def extract(self, kind: str, media_type: str | None, payload: bytes, *,
                max_pages: int) -> str:
        self.barrier.wait()  # BrokenBarrierError (an omission) unless all run at once
        return super().extract(kind, media_type, payload, max_pages=max_pages)


class _Raising(PlainTextExtractor):
    def extract(self, kind: str, media_type: str | None, payload: bytes, *,
                max_pages: int) -> str:
        raise ValueError("closing tag [/x] and [bold]markup[/bold]")


def _in_process(monkeypatch: pytest.MonkeyPatch, extractor: PlainTextExtractor
                ) -> list[int]:
    """Make `capsa extract` use `extractor` in this process; returns the pool sizes asked."""
    asked: list[int] = []

    def pool(workers: int, limits: ExtractionLimits) -> PlainTextExtractor:
        asked.append(workers)
        return extractor

    monkeypatch.setattr(cli, "_pool", pool)
    return asked


def _lines(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.read_text().splitlines()]


@pytest.fixture
def wide(monkeypatch: pytest.MonkeyPatch) -> None:
    """A console wide enough that no table cell wraps."""
    monkeypatch.setenv("COLUMNS", "400")


def test_extract_writes_omissions_as_json_lines_with_their_source(tmp_path: Path) -> None:
    (tmp_path / "good.txt").write_text("alpha")
    (tmp_path / "empty.txt").write_bytes(b"")
    out = tmp_path.parent / f"{tmp_path.name}.jsonl"
    assert main(["extract", str(tmp_path), "--out", str(out)]) == 0
    by_label = {line["label"]: line for line in _lines(out)}
    assert by_label["good.txt"]["outcome"] == "extracted"
    assert by_label["empty.txt"] == {"outcome": "omitted", "source": str(tmp_path / "empty.txt"),
                                     "label": "empty.txt", "parent": None, "stage": "size",
                                     "reason": "empty", "detail": "the file is empty"}


def test_extract_reports_a_missing_path_and_carries_on(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("alpha")
    out = tmp_path / "out.jsonl"
    status = main(["extract", str(tmp_path / "gone.txt"), str(tmp_path / "a.txt"),
                   "--out", str(out), "--strict"])
    assert status == 2
    lines = {line["label"]: line for line in _lines(out)}
    assert lines["a.txt"]["text"] == "alpha"
    assert (lines["gone.txt"]["outcome"], lines["gone.txt"]["reason"]) == ("omitted", "corrupt")


def test_extract_defaults_to_the_ingestion_limits(tmp_path: Path) -> None:
    long_text = tmp_path / "long.txt"
    long_text.write_text("word " * 20_000)  # 100,000 characters: over the attachment preset
    assert len(long_text.read_text()) > ExtractionLimits.for_attachments().max_text_chars
    out = tmp_path / "out.jsonl"
    assert main(["extract", str(long_text), "--out", str(out)]) == 0
    (line,) = _lines(out)
    assert line["outcome"] == "extracted"


def test_extract_max_total_chars_omits_files_past_the_set_ceiling(tmp_path: Path) -> None:
    for name in ("a.txt", "b.txt", "c.txt"):
        (tmp_path / name).write_text("x" * 40)
    out = tmp_path.parent / f"{tmp_path.name}.jsonl"
    status = main(["extract", str(tmp_path), "--max-total-chars", "100", "--workers", "1",
                   "--out", str(out)])
    assert status == 0
    outcomes = [(line["label"], line["outcome"], line.get("reason")) for line in _lines(out)]
    assert outcomes == [("a.txt", "extracted", None), ("b.txt", "extracted", None),
                        ("c.txt", "omitted", "set_ceiling")]
    assert "100" in _lines(out)[2]["detail"]


def test_extract_rejects_an_impossible_limit_before_reading_anything(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["extract", str(tmp_path), "--max-pages", "0"])
    assert "--max-pages" in str(stopped.value.code)


def test_extract_workers_parses_that_many_files_at_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    asked = _in_process(monkeypatch, _Blocking(parties=3))
    for name in ("a.txt", "b.txt", "c.txt"):
        (tmp_path / name).write_text(name)
    out = tmp_path.parent / f"{tmp_path.name}.jsonl"
    assert main(["extract", str(tmp_path), "--workers", "3", "--out", str(out)]) == 0
    assert asked == [3]
    assert sorted(line["outcome"] for line in _lines(out)) == ["extracted"] * 3


def test_extract_pool_has_as_many_workers_as_asked() -> None:
    pool = cli._pool(3, ExtractionLimits.for_ingestion())
    try:
        assert pool.workers == 3  # type: ignore[attr-defined]
    finally:
        pool.close()  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", ["[link=mailto:a@b]invoice.txt", "[conceal]x.txt",
                                  "report[draft].txt", ":smile: [bold]b.txt"])
def test_extract_prints_file_names_as_given_never_as_markup(
        name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], wide: None) -> None:
    (tmp_path / name).write_bytes(b"")
    assert main(["extract", str(tmp_path / name), "--out", str(tmp_path / "o.jsonl")]) == 0
    assert name in capsys.readouterr().err


def test_extract_prints_a_detail_with_closing_markup_and_strict_exits_2(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        wide: None) -> None:
    _in_process(monkeypatch, _Raising())
    (tmp_path / "a.txt").write_text("alpha")
    status = main(["extract", str(tmp_path / "a.txt"), "--strict",
                   "--out", str(tmp_path / "o.jsonl")])
    assert status == 2
    assert "closing tag [/x] and [bold]markup[/bold]" in capsys.readouterr().err


def test_extract_strips_terminal_sequences_and_bidi_from_names(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], wide: None) -> None:
    name = "a\x1b]8;;evil.example\x07click\x1b]8;;\x07\u202eb\x1b[31mred.txt"
    (tmp_path / name).write_bytes(b"")
    assert main(["extract", str(tmp_path / name), "--out", str(tmp_path / "o.jsonl")]) == 0
    err = capsys.readouterr().err
    assert "aclickbred.txt" in err
    assert "evil.example" not in err
    assert not any(ch in err for ch in "\x1b\x07\x9b\x9d\u202e")


def test_extract_progress_counts_both_outcomes() -> None:
    report = cli._Report()
    report.write(cli.Omission(label="a", stage="size", reason="empty", detail="d"),
                 __import__("io").StringIO(), ExtractionLimits.for_ingestion())
    assert report.counts() == "0 extracted, 1 omitted"


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


def test_extract_help_shows_the_ingestion_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["extract", "--help"])
    pages = ExtractionLimits.for_ingestion().max_pages
    assert f"(default: {pages})" in " ".join(capsys.readouterr().out.split())


def test_extract_never_reads_its_own_output_file(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "a.txt").write_text("alpha")
    out = tmp_path / "docs.jsonl"
    assert main(["extract", str(tmp_path), "--out", str(out), "--workers", "1"]) == 0
    assert [line["label"] for line in _lines(out)] == ["a.txt"]
    assert "extracted 1 of 1 files" in capsys.readouterr().err


def test_extract_counts_files_found_inside_others_apart_and_names_them(
        tmp_path: Path, photo_eml: bytes, capsys: pytest.CaptureFixture[str]) -> None:
    mail = tmp_path / "message.eml"
    mail.write_bytes(photo_eml)
    (tmp_path / "notes.txt").write_text("alpha")
    out = tmp_path.parent / f"{tmp_path.name}.jsonl"
    assert main(["extract", str(tmp_path), "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert ("extracted 2 of 2 files; omitted 0; found 1 file inside them: extracted 0, "
            "omitted 1") in err
    assert f"omitted profilephoto.png in {mail}: text/no_text" in err
    lines = {line["label"]: line for line in _lines(out)}
    assert lines["message.eml/profilephoto.png"]["parent"] == "message.eml"


def test_extract_summary_counts_only_the_files_given_when_nothing_is_inside(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, photo_mail: Any,
        capsys: pytest.CaptureFixture[str]) -> None:
    _in_process(monkeypatch, photo_mail)
    (tmp_path / "a.txt").write_text("alpha")
    (tmp_path / "b.txt").write_text("MAIL:with a photo")
    assert main(["extract", str(tmp_path), "--out", str(tmp_path.parent / "o.jsonl")]) == 0
    err = capsys.readouterr().err
    assert "extracted 2 of 2 files; omitted 0; found 1 file inside them" in err
    assert "omitted profilephoto.png in " in err and "b.txt: text/no_text" in err


def test_extract_workers_default_to_the_default_pools_width(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    asked = _in_process(monkeypatch, PlainTextExtractor())
    (tmp_path / "a.txt").write_text("alpha")
    assert main(["extract", str(tmp_path / "a.txt"), "--out", str(tmp_path / "o.jsonl")]) == 0
    assert asked == [default_width()]


def test_extract_ordered_writes_lines_in_input_order_behind_a_slow_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gated: Any) -> None:
    _in_process(monkeypatch, gated)
    for name, data in (("0-slow.txt", "slow"), ("a.txt", "alpha"), ("b.txt", "beta")):
        (tmp_path / name).write_text(data)
    threading.Timer(0.3, gated.release.set).start()
    out = tmp_path.parent / f"{tmp_path.name}.jsonl"
    assert main(["extract", str(tmp_path), "--ordered", "--workers", "2", "--out",
                 str(out)]) == 0
    assert [line["label"] for line in _lines(out)] == ["0-slow.txt", "a.txt", "b.txt"]


def test_extract_writes_each_line_as_its_file_finishes_by_default(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gated: Any) -> None:
    _in_process(monkeypatch, gated)
    for name, data in (("0-slow.txt", "slow"), ("a.txt", "alpha"), ("b.txt", "beta")):
        (tmp_path / name).write_text(data)
    gated.release_after = 2  # the slow file ends only after a and b were parsed
    out = tmp_path.parent / f"{tmp_path.name}.jsonl"
    assert main(["extract", str(tmp_path), "--workers", "2", "--out", str(out)]) == 0
    assert [line["label"] for line in _lines(out)] == ["a.txt", "b.txt", "0-slow.txt"]


REALDOCS = Path(__file__).resolve().parents[1] / "realdocs" / "files"


def test_extract_shape_page_writes_a_line_per_page_and_counts_files_as_files(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    policy = tmp_path / "policy.pdf"
    policy.write_bytes(pdf_with_text(["Flights are economy.", "Hotels cap at EUR 165."]))
    mail = REALDOCS / "quarterly-with-attachments.eml"
    out = tmp_path / "parts.jsonl"
    assert main(["extract", str(policy), str(mail), "--shape", "page", "--ordered",
                 "--out", str(out)]) == 0
    lines = _lines(out)
    pages = [line for line in lines if line["label"] == "policy.pdf"]
    attached = [line for line in lines if line["label"].endswith("/report.pdf")]
    err = " ".join(capsys.readouterr().err.split())

    assert [(p["part"], p["metadata"]["page_number"], p["text"]) for p in pages] == [
        (0, 1, "Flights are economy."), (1, 2, "Hotels cap at EUR 165.")]
    assert pages[0]["id"].endswith("-p1") and pages[0]["sha256"] == pages[1]["sha256"]
    assert pages[0]["metadata"]["source"] == str(policy)
    assert attached and {a["parent"] for a in attached} == {mail.name}
    assert attached[0]["metadata"]["capsa_parent"] == mail.name
    assert attached[0]["metadata"]["page_number"] == 1
    assert (f"extracted 2 of 2 files; omitted 0; found 4 files inside them: extracted 4, "
            f"omitted 0; {len(lines)} parts written, one per page") in err


def test_extract_shape_element_writes_the_loaders_metadata_keys(tmp_path: Path) -> None:
    out = tmp_path / "parts.jsonl"
    assert main(["extract", str(REALDOCS / "report.docx"), "--shape", "element",
                 "--out", str(out)]) == 0
    lines = _lines(out)
    table = next(line for line in lines if line["metadata"]["category"] == "Table")
    heading = next(line for line in lines if line["id"] == table["metadata"]["parent_id"])

    assert heading["text"] == "Berth figures" == table["metadata"]["capsa_heading"]
    assert table["metadata"]["text_as_html"].startswith("<table><tr><td>Berth</td>")
    assert {"element_id", "filename", "filetype", "languages", "capsa_label",
            "capsa_sha256", "capsa_kind", "capsa_bytes"} <= set(table["metadata"])
    assert [line["part"] for line in lines] == list(range(len(lines)))


def test_extract_shape_takes_or_omits_each_file_whole_under_the_set_ceiling(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    _in_process(monkeypatch, PlainTextExtractor())
    for name in ("a.txt", "b.txt", "c.txt"):
        (tmp_path / name).write_text("x" * 20 + "\n\n" + "y" * 20)
    out = tmp_path.parent / f"{tmp_path.name}.jsonl"
    assert main(["extract", str(tmp_path), "--shape", "element", "--max-total-chars", "100",
                 "--workers", "1", "--out", str(out)]) == 0
    outcomes = [(line["label"], line["outcome"], line.get("part")) for line in _lines(out)]

    assert outcomes == [("a.txt", "extracted", 0), ("a.txt", "extracted", 1),
                        ("b.txt", "extracted", 0), ("b.txt", "extracted", 1),
                        ("c.txt", "omitted", None)]
    assert ("extracted 2 of 3 files; omitted 1; 4 parts written, one per element"
            in capsys.readouterr().err)


def test_extract_shape_file_lines_are_unchanged(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    _in_process(monkeypatch, PlainTextExtractor())
    (tmp_path / "a.txt").write_text("one\n\ntwo")
    out = tmp_path.parent / f"{tmp_path.name}.jsonl"
    assert main(["extract", str(tmp_path), "--shape", "file", "--out", str(out)]) == 0
    (line,) = _lines(out)
    assert set(line) == {"outcome", "id", "source", "label", "parent", "kind", "bytes",
                         "sha256", "text"}


def test_extract_help_documents_the_shapes(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["extract", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "--shape {file,page,element}" in help_text
    assert "page_number, category, element_id" in help_text


def test_extract_refuses_an_unknown_shape(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["extract", "x.txt", "--shape", "paragraph"])
    assert stopped.value.code == 2
    assert "invalid choice: 'paragraph'" in capsys.readouterr().err
