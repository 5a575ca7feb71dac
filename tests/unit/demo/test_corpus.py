"""The sample corpus: reproducible from its script, readable, and true to its source.

Covers `capsa.demo.corpus_source` (the ground truth) and `scripts/make_corpus.py`
(the renderer). Each good file is read back with the plain format library, not
with capsa, so these tests say the corpus is right before capsa's extractors are
judged against it.
"""

from __future__ import annotations

import difflib
import email
import email.policy
import importlib.util
import shutil
import sys
import zipfile
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from types import ModuleType

import pytest

from capsa.demo.corpus_source import (
    CORPUS_DIR,
    DOCUMENTS,
    HOSTILE_FILES,
    QUESTIONS,
    SampleQuestion,
    SourceDocument,
    document,
)

REPO = Path(__file__).resolve().parents[3]
SCRIPT = REPO / "scripts" / "make_corpus.py"
ALL_NAMES = [d.name for d in DOCUMENTS] + [h.name for h in HOSTILE_FILES]


def _squash(text: str) -> str:
    """Collapse every run of whitespace to one space: layout may rewrap lines."""
    return " ".join(text.split())


def _load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("_capsa_make_corpus", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def make_corpus() -> Iterator[ModuleType]:
    module = _load_script()
    yield module
    sys.modules.pop(module.__name__, None)


@pytest.fixture(scope="module")
def two_runs(
    make_corpus: ModuleType, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, Path]:
    first, second = tmp_path_factory.mktemp("first"), tmp_path_factory.mktemp("second")
    make_corpus.write_corpus(first)
    make_corpus.write_corpus(second)
    return first, second


# ------------------------------------------------------------------ reproducibility


@pytest.mark.parametrize("name", ALL_NAMES)
def test_make_corpus_writes_identical_bytes_on_every_run(
    two_runs: tuple[Path, Path], name: str
) -> None:
    first, second = two_runs
    assert (first / name).read_bytes() == (second / name).read_bytes()


@pytest.mark.parametrize("name", ALL_NAMES)
def test_committed_file_matches_a_fresh_run_of_make_corpus(
    make_corpus: ModuleType, two_runs: tuple[Path, Path], name: str
) -> None:
    if name.endswith(".png") and not make_corpus.FONT_PATH.exists():
        pytest.skip(f"{make_corpus.FONT_PATH} missing: the fallback font draws other pixels")
    fresh = (two_runs[0] / name).read_bytes()
    assert fresh == (CORPUS_DIR / name).read_bytes(), f"{name} is stale: run `make corpus`"


def test_corpus_dir_holds_exactly_the_listed_files_and_readme() -> None:
    on_disk = {p.name for p in CORPUS_DIR.iterdir()}
    assert on_disk == {*ALL_NAMES, "README.md"}


def test_corpus_stays_under_200_kb() -> None:
    assert sum((CORPUS_DIR / name).stat().st_size for name in ALL_NAMES) < 200_000


# ------------------------------------------------------------ source ground truth


def test_documents_have_150_to_600_words_each() -> None:
    counts = {d.name: len(d.text.split()) for d in DOCUMENTS}
    assert all(150 <= n <= 600 for n in counts.values()), counts


def test_document_kinds_match_their_file_extensions() -> None:
    assert all(d.name.endswith(f".{d.kind}") for d in DOCUMENTS)


def test_documents_are_plain_ascii_so_every_format_can_carry_them() -> None:
    assert all(d.text.isascii() and d.title.isascii() for d in DOCUMENTS)


def test_document_lookup_raises_key_error_for_an_unknown_name() -> None:
    with pytest.raises(KeyError):
        document("missing.pdf")


@pytest.mark.parametrize("question", QUESTIONS, ids=lambda q: q.answer)
def test_answer_occurs_in_its_own_document_only(question: SampleQuestion) -> None:
    holders = [d.name for d in DOCUMENTS if question.answer in d.text]
    assert holders == [question.document_name]


def test_questions_cover_every_document() -> None:
    assert {q.document_name for q in QUESTIONS} == {d.name for d in DOCUMENTS}


def test_questions_number_about_a_dozen_and_are_distinct() -> None:
    assert 12 <= len(QUESTIONS) <= 20
    assert len({q.question for q in QUESTIONS}) == len(QUESTIONS)


# ------------------------------------------------------------------ good files


def _doc(name: str) -> SourceDocument:
    return document(name)


def test_pdf_text_reads_back_with_pypdf() -> None:
    pypdf = pytest.importorskip("pypdf")
    reader = pypdf.PdfReader(CORPUS_DIR / "travel-policy.pdf")
    text = "\n".join(page.extract_text() for page in reader.pages)
    assert _squash(text) == _squash(_doc("travel-policy.pdf").text)


def test_pdf_spans_two_pages_and_carries_its_title() -> None:
    pypdf = pytest.importorskip("pypdf")
    reader = pypdf.PdfReader(CORPUS_DIR / "travel-policy.pdf")
    assert len(reader.pages) == 2
    assert reader.metadata is not None
    assert reader.metadata.title == "Travel and Expense Policy"


def test_docx_paragraphs_read_back_with_python_docx() -> None:
    docx = pytest.importorskip("docx")
    paragraphs = docx.Document(str(CORPUS_DIR / "data-retention.docx")).paragraphs
    assert "\n\n".join(p.text for p in paragraphs) == _doc("data-retention.docx").text


def test_docx_core_properties_are_fixed_not_now() -> None:
    docx = pytest.importorskip("docx")
    props = docx.Document(str(CORPUS_DIR / "data-retention.docx")).core_properties
    assert (props.created.year, props.modified.year, props.title) == (
        2025,
        2025,
        "Data Retention Schedule",
    )


def test_xlsx_table_reads_back_with_openpyxl() -> None:
    openpyxl = pytest.importorskip("openpyxl")
    sheet = openpyxl.load_workbook(CORPUS_DIR / "equipment-prices.xlsx").active
    rows = ["\t".join(str(v) for v in row) for row in sheet.iter_rows(values_only=True)]
    assert "\n".join(rows) == _doc("equipment-prices.xlsx").text


def test_xlsx_prices_are_numbers_under_a_header_row() -> None:
    openpyxl = pytest.importorskip("openpyxl")
    sheet = openpyxl.load_workbook(CORPUS_DIR / "equipment-prices.xlsx").active
    header, *rows = list(sheet.iter_rows(values_only=True))
    price = header.index("Unit price (EUR)")
    assert all(isinstance(row[price], int) for row in rows)
    assert "PriceList2025" in sheet.tables


class _BodyText(HTMLParser):
    """Collects the text of each h1, h2 and p element, in document order."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks: list[str] = []
        self._open = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in {"h1", "h2", "p"}:
            self.blocks.append("")
            self._open = True

    def handle_endtag(self, tag: str) -> None:
        if tag in {"h1", "h2", "p"}:
            self._open = False

    def handle_data(self, data: str) -> None:
        if self._open:
            self.blocks[-1] += data


def test_html_body_reads_back_with_html_parser() -> None:
    parser = _BodyText()
    parser.feed((CORPUS_DIR / "handbook.html").read_text(encoding="utf-8"))
    assert "\n\n".join(parser.blocks) == _doc("handbook.html").text


def test_eml_plain_part_reads_back_with_the_email_package() -> None:
    raw = (CORPUS_DIR / "policy-change.eml").read_bytes()
    message = email.message_from_bytes(raw, policy=email.policy.default)
    body = message.get_body(("plain",))
    assert body is not None
    assert body.get_content() == _doc("policy-change.eml").text + "\n"


def test_eml_html_part_carries_the_same_prose() -> None:
    raw = (CORPUS_DIR / "policy-change.eml").read_bytes()
    message = email.message_from_bytes(raw, policy=email.policy.default)
    body = message.get_body(("html",))
    assert body is not None
    parser = _BodyText()
    parser.feed(body.get_content())
    assert "\n\n".join(parser.blocks) == _doc("policy-change.eml").text


def test_eml_subject_is_the_document_title() -> None:
    raw = (CORPUS_DIR / "policy-change.eml").read_bytes()
    message = email.message_from_bytes(raw, policy=email.policy.default)
    assert message["Subject"] == _doc("policy-change.eml").title


def test_markdown_file_is_its_source_text() -> None:
    text = (CORPUS_DIR / "remote-work.md").read_text(encoding="utf-8")
    assert text == _doc("remote-work.md").text.rstrip("\n") + "\n"


@pytest.fixture(scope="module")
def notice_ocr() -> str:
    if shutil.which("tesseract") is None:
        pytest.skip("the tesseract binary is not installed")
    pytesseract = pytest.importorskip("pytesseract")
    image_module = pytest.importorskip("PIL.Image")
    with image_module.open(CORPUS_DIR / "office-notice.png") as image:
        return str(pytesseract.image_to_string(image))


@pytest.mark.ocr
def test_png_notice_reads_back_nearly_verbatim_with_tesseract(notice_ocr: str) -> None:
    expected = _squash(_doc("office-notice.png").text)
    ratio = difflib.SequenceMatcher(None, expected, _squash(notice_ocr)).ratio()
    assert ratio >= 0.97


@pytest.mark.ocr
def test_png_notice_answers_survive_ocr(notice_ocr: str) -> None:
    answers = [q.answer for q in QUESTIONS if q.document_name == "office-notice.png"]
    assert answers
    assert all(answer in _squash(notice_ocr) for answer in answers)


# ---------------------------------------------------------------- hostile files


def test_zip_bomb_is_a_small_valid_zip_declaring_a_huge_high_ratio_member() -> None:
    path = CORPUS_DIR / "quarterly-report.docx"
    with zipfile.ZipFile(path) as archive:  # reads the central directory only
        member = archive.getinfo("word/document.xml")
        names = archive.namelist()
    assert "[Content_Types].xml" in names
    assert path.stat().st_size < 50_000
    assert member.file_size > 16 * 1024 * 1024
    assert member.file_size > 500 * member.compress_size


def test_invoice_pdf_is_really_a_png() -> None:
    payload = (CORPUS_DIR / "invoice.pdf").read_bytes()
    assert payload.startswith(b"\x89PNG\r\n\x1a\n")
    assert b"%PDF" not in payload[:1024]


def test_hostile_file_names_carry_the_kind_they_claim() -> None:
    assert all(h.name.endswith(f".{h.claimed_kind}") for h in HOSTILE_FILES)
