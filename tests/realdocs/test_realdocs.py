"""The real-document set through `extract_many` with its defaults (the ingestion preset).

Real files from real producers (see README.md beside this file): every file
ends in one typed outcome, every file with a text layer agrees with its raw
parser, and nothing ordinary is refused. The set and the raw parsers live in
``benchmarks/realdocs.py``, which the benchmark uses for the same figures.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from capsa.guard import Extracted, IsolatedExtractor, Omission, extract_many

pytestmark = [pytest.mark.slow, pytest.mark.ocr]

FILES = Path(__file__).resolve().parent / "files"


def _load_set() -> ModuleType:
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "realdocs.py"
    spec = importlib.util.spec_from_file_location("capsa_bench_realdocs", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


realdocs = _load_set()


@pytest.fixture(scope="module")
def rows(pool: IsolatedExtractor) -> list[Any]:
    if realdocs.shared_dir() is None:
        pytest.skip("shared/realdocs is not beside the repository (set CAPSA_REALDOCS)")
    return list(realdocs.run_set(realdocs.realdoc_paths(), extractor=pool))


@pytest.fixture(scope="module")
def mail(pool: IsolatedExtractor) -> dict[str, Extracted | Omission]:
    outcomes = extract_many([FILES / "quarterly-with-attachments.eml"], extractor=pool)
    found: dict[str, Extracted | Omission] = {}
    for outcome in outcomes:
        assert isinstance(outcome, Extracted | Omission)
        found[outcome.label] = outcome
    return found


@pytest.fixture(scope="module")
def one(pool: IsolatedExtractor) -> Callable[[str], Extracted | Omission]:
    def run(name: str) -> Extracted | Omission:
        return _one(pool, name)

    return run


def _one(pool: IsolatedExtractor, name: str) -> Extracted | Omission:
    outcomes = [o for o in extract_many([FILES / name], extractor=pool)
                if getattr(o, "parent", None) is None]
    assert len(outcomes) == 1
    outcome = outcomes[0]
    assert isinstance(outcome, Extracted | Omission)
    return outcome


def test_realdocs_every_file_ends_in_its_expected_typed_outcome(rows: list[Any]) -> None:
    unexpected = [(r.name, r.outcome, r.expected) for r in rows if r.outcome != r.expected]

    assert unexpected == []
    assert len(rows) == len(realdocs.realdoc_paths())


def test_realdocs_files_with_a_text_layer_agree_with_their_raw_parser(rows: list[Any]) -> None:
    compared = [r for r in rows if r.agreement is not None]
    disagreeing = [(r.name, r.agreement) for r in compared
                   if r.agreement < realdocs.AGREEMENT_FLOOR]

    assert disagreeing == []
    assert len(compared) >= 40


def test_realdocs_extract_every_file_the_raw_parsers_extract(rows: list[Any]) -> None:
    lost = [r.name for r in rows if r.raw_chars and r.outcome != "extracted"]

    assert lost == []


def test_realdocs_scanned_pdf_is_read_by_ocr_and_says_so(
        one: Callable[[str], Extracted | Omission]) -> None:
    outcome = one("scanned-notice.pdf")

    assert isinstance(outcome, Extracted)
    assert "inspection notice" in outcome.text.lower()
    assert any("OCR (Tesseract) ran on 1 of 1 pages" in note for note in outcome.notes)


def test_realdocs_mixed_pdf_keeps_its_text_layer_and_reads_the_scanned_page(
        one: Callable[[str], Extracted | Omission]) -> None:
    outcome = one("mixed-text-and-scan.pdf")

    assert isinstance(outcome, Extracted)
    assert "Harbour Operations Report" in outcome.text
    assert "manifest before entering" in outcome.text


def test_realdocs_copy_protected_pdf_opens_with_the_empty_user_password(
        one: Callable[[str], Extracted | Omission]) -> None:
    outcome = one("copy-protected.pdf")

    assert isinstance(outcome, Extracted)
    assert "Harbour Operations Report" in outcome.text


def test_realdocs_password_protected_xlsx_is_encrypted_not_a_type_mismatch(
        one: Callable[[str], Extracted | Omission]) -> None:
    outcome = one("protected.xlsx")

    assert isinstance(outcome, Omission)
    assert (outcome.stage, outcome.reason) == ("sniff", "encrypted")


@pytest.mark.parametrize(("name", "encoding", "fragment"), [
    ("legacy-cp1252.txt", "cp1252", "naïve façade"),
    ("legacy-gbk.txt", "gb18030", "集装箱吞吐量"),
    ("legacy-shift-jis.txt", "cp932", "コンテナ"),
    ("legacy-cp1256.txt", "cp1256", "الحاويات"),
    ("utf16-no-bom-chinese.txt", "utf-16-le", "集装箱吞吐量"),
    ("utf16-bom.txt", "utf-16-le", "byte-order mark"),
])
def test_realdocs_legacy_and_utf16_text_is_decoded_with_its_encoding_recorded(
        name: str, encoding: str, fragment: str,
        one: Callable[[str], Extracted | Omission]) -> None:
    outcome = one(name)

    assert isinstance(outcome, Extracted)
    assert fragment in outcome.text
    assert outcome.encoding == encoding


def test_realdocs_persian_zwnj_and_emoji_zwj_survive_normalisation(
        one: Callable[[str], Extracted | Omission]) -> None:
    outcome = one("persian-zwnj.txt")

    assert isinstance(outcome, Extracted)
    assert "می\u200cخواهم" in outcome.text
    assert "👨\u200d👩\u200d👧" in outcome.text


@pytest.mark.parametrize("name", ["rota-handwritten.html", "rota-pandoc.html"])
def test_realdocs_table_cells_keep_their_line_breaks_as_spaces(
        name: str, one: Callable[[str], Extracted | Omission]) -> None:
    outcome = one(name)

    assert isinstance(outcome, Extracted)
    assert "answer questions" in outcome.text
    assert "file reports" in outcome.text


def test_realdocs_mail_attachments_are_extracted_as_files_of_their_own(
        mail: dict[str, Extracted | Omission]) -> None:
    parent = "quarterly-with-attachments.eml"

    assert sorted(mail) == [parent, f"{parent}/Inspection rules.eml",
                            f"{parent}/Inspection rules.eml/berths.csv",
                            f"{parent}/report.docx", f"{parent}/report.pdf"]
    assert all(isinstance(o, Extracted) for o in mail.values())
    assert mail[f"{parent}/report.pdf"].parent == parent
    assert mail[f"{parent}/Inspection rules.eml/berths.csv"].parent == (
        f"{parent}/Inspection rules.eml")
    assert {o.source for o in mail.values()} == {str(FILES / parent)}


def test_realdocs_mail_text_says_what_was_attached(
        mail: dict[str, Extracted | Omission]) -> None:
    parent = mail["quarterly-with-attachments.eml"]

    assert isinstance(parent, Extracted)
    assert "Attached:\n- report.docx (10438 bytes" in parent.text
    assert "- Inspection rules.eml (" in parent.text


def test_realdocs_mail_html_table_cells_keep_their_line_breaks(
        mail: dict[str, Extracted | Omission]) -> None:
    parent = mail["quarterly-with-attachments.eml"]

    assert isinstance(parent, Extracted)
    assert "answer questions" in parent.text
    assert "approve budget" in parent.text


# ------------------------------------------------------------------------ structure

PAGED = frozenset({"pdf", "pptx", "xlsx", "png", "jpeg", "tiff"})


@pytest.fixture(scope="module")
def structured(pool: IsolatedExtractor) -> list[Extracted]:
    paths = sorted(p for p in FILES.iterdir() if p.is_file())
    shared = realdocs.shared_dir()
    pdfs = sorted(shared.rglob("*.pdf")) if shared is not None else []
    return [o for o in extract_many([*paths, *pdfs], extractor=pool)
            if isinstance(o, Extracted)]


def test_realdocs_every_extracted_file_has_elements_covering_its_text(
        structured: list[Extracted]) -> None:
    uncovered = [d.label for d in structured
                 if " ".join(d.element_text(e) for e in d.elements).split() != d.text.split()]

    assert len(structured) >= 25
    assert uncovered == []


def test_realdocs_every_kind_with_pages_reports_them(structured: list[Extracted]) -> None:
    kinds = {d.kind for d in structured}
    pageless = [d.label for d in structured if d.kind in PAGED and not d.pages]

    assert {"pdf", "pptx", "xlsx", "png"} <= kinds
    assert pageless == []


def test_realdocs_pdf_pages_match_the_page_count_pypdf_reads(
        structured: list[Extracted]) -> None:
    from pypdf import PdfReader

    mixed = next(d for d in structured if d.label == "mixed-text-and-scan.pdf")
    count = len(PdfReader(FILES / "mixed-text-and-scan.pdf").pages)

    assert [p.number for p in mixed.pages] == list(range(1, count + 1))
    assert "manifest before entering" in mixed.text[mixed.pages[-1].start:mixed.pages[-1].end]


def test_realdocs_docx_keeps_titles_tables_and_the_heading_each_block_sits_under(
        structured: list[Extracted]) -> None:
    report = next(d for d in structured if d.label == "report.docx")
    table = next(e for e in report.elements if e.category == "Table")

    assert [report.element_text(e) for e in report.elements if e.category == "Title"][:2] == [
        "Harbour Operations Report", "Summary"]
    assert table.parent is not None
    assert report.element_text(report.elements[table.parent]) == "Berth figures"
    assert report.element_text(table).split("\n")[0] == "Berth\tVessels\tNotes"


def test_realdocs_mail_keeps_its_headers(mail: dict[str, Extracted | Omission]) -> None:
    parent = mail["quarterly-with-attachments.eml"]

    assert isinstance(parent, Extracted) and parent.mail is not None
    assert parent.mail.sent_from == ("ops@northwind.example",)
    assert parent.mail.sent_to == ("board@northwind.example",)
    assert parent.mail.subject == "Quarterly report"
