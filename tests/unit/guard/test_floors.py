"""Pre-parse counts: a floor never refuses what the parser accepts, and refuses before it runs."""

from __future__ import annotations

import io
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from capsa.errors import IngestionRejected
from capsa.guard import samples
from capsa.guard.extractors import UnstructuredExtractor, _floors
from capsa.guard.extractors import unstructured as unstructured_module
from capsa.guard.limits import ExtractionLimits
from capsa.guard.normalize import normalize

REALDOCS = Path(__file__).parents[2] / "realdocs" / "files"
PARSES = settings(max_examples=12, deadline=None,
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

words = st.text(alphabet=st.characters(categories=("L", "M", "N", "P", "S", "Zs")),
                min_size=1, max_size=30)


def floor_of(kind: str, payload: bytes) -> int:
    """The pre-parse count of `payload`: the smallest `max_text_chars` it is not refused at."""
    if kind == "html":
        return _smallest_passing(len(payload) + 1,
                                 lambda limit: _floors.check_html_text_floor(payload, limit))
    with zipfile.ZipFile(io.BytesIO(payload)) as archive:
        if kind == "docx":
            return _smallest_passing(sum(info.file_size for info in archive.infolist()) + 1,
                                     lambda limit: _floors.check_docx_text_floor(archive, limit))
        return _smallest_passing(sum(info.file_size for info in archive.infolist()) + 1,
                                 lambda limit: _floors.check_text_floor(kind, archive, limit))


def _smallest_passing(high: int, check: Callable[[int], None]) -> int:
    low = 0
    while low < high:
        middle = (low + high) // 2
        try:
            check(middle)
        except IngestionRejected:
            low = middle + 1
        else:
            high = middle
    return low


def parsed_text(kind: str, payload: bytes) -> str:
    """What the guard keeps of the real parser's text, with no text limit."""
    parsed = UnstructuredExtractor().extract(kind, None, payload, max_pages=10_000)
    return normalize(parsed if isinstance(parsed, str) else parsed.text)


def assert_floor_is_sound(kind: str, payload: bytes) -> int:
    """The floor is at most the parsed length, and a limit of exactly that length passes."""
    text = parsed_text(kind, payload)
    floor = floor_of(kind, payload)
    assert floor <= len(text)
    exact = ExtractionLimits(max_text_chars=max(1, len(text)))
    again = UnstructuredExtractor().with_limits(exact).extract(kind, None, payload,
                                                               max_pages=10_000)
    assert normalize(again if isinstance(again, str) else again.text) == text
    return floor


@pytest.fixture
def no_parser(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every partitioner fails the test if it is ever called."""
    def partitioner(kind: str) -> Callable[[bytes], list[Any]]:
        def parse(payload: bytes) -> list[Any]:
            raise AssertionError(f"the {kind} partitioner ran; the floor should have refused")
        return parse

    monkeypatch.setattr(unstructured_module, "_partitioner", partitioner)


# ------------------------------------------------------------------------- visible_chars


@given(st.text(), st.text())
def test_visible_chars_never_exceeds_the_normalised_length_of_any_join(left: str,
                                                                      right: str) -> None:
    for joined in (left + right, left + "\n\n" + right, left + "\t" + right):
        assert _floors.visible_chars(left) + _floors.visible_chars(right) <= len(
            normalize(joined))


def test_visible_chars_leaves_out_what_normalisation_may_fold() -> None:
    assert _floors.visible_chars("e\u0301") == 1  # NFC makes one é of the two
    assert _floors.visible_chars("\u1100\u1161\u11a8") == 1  # conjoining jamo make one syllable
    assert _floors.visible_chars("a\u200bb\u00adc \x07") == 3


# ---------------------------------------------------------------------------------- PPTX


@PARSES
@given(st.lists(st.lists(words, max_size=4), min_size=1, max_size=4),
       st.lists(st.lists(words, min_size=1, max_size=3), max_size=3), words, words)
def test_pptx_floor_counts_every_shape_unstructured_keeps_and_no_more(
        slides: list[list[str]], table: list[list[str]], grouped: str, off_slide: str) -> None:
    payload = samples.pptx_with_texts(slides, table=table, grouped=grouped, off_slide=off_slide)

    floor = assert_floor_is_sound("pptx", payload)

    kept = [text for slide in slides for text in slide] + [
        text for row in table for text in row] + [grouped]
    assert floor == _floors.visible_chars("".join(kept))  # the off-slide box is not counted


def test_pptx_over_the_limit_is_refused_before_python_pptx_reads_it(no_parser: None) -> None:
    deck = samples.pptx_with_texts([[f"Berth {n} schedule", "cranes " * 40] for n in range(15)])
    extractor = UnstructuredExtractor().with_limits(ExtractionLimits(max_text_chars=1_000))

    with pytest.raises(IngestionRejected) as caught:
        extractor.extract("pptx", None, deck, max_pages=20)

    assert (caught.value.stage, caught.value.reason) == ("text", "text_too_long")
    assert "of 15 slides holds at least" in caught.value.detail
    assert "over the limit of 1000 (max_text_chars)" in caught.value.detail


def test_pptx_placeholder_counts_only_when_no_master_places_shapes_off_the_slide() -> None:
    deck = samples.pptx_with_slides(2, "Harbor schedule")
    with zipfile.ZipFile(io.BytesIO(deck)) as archive:
        master = archive.read("ppt/slideMasters/slideMaster1.xml")
    title_above_the_slide = samples.replace_members(deck, {
        "ppt/slideMasters/slideMaster1.xml": master.replace(
            b'<a:off x="457200" y="274638"/>', b'<a:off x="457200" y="-274638"/>')})

    assert floor_of("pptx", deck) == 2 * len("Harborschedule1")
    assert floor_of("pptx", title_above_the_slide) == 0
    assert "Harbor" not in parsed_text("pptx", title_above_the_slide)  # unstructured skips it


# ---------------------------------------------------------------------------------- XLSX


cells = st.one_of(words, st.integers(-10**6, 10**6), st.none(),
                  st.floats(allow_nan=False, allow_infinity=False, width=32),
                  st.sampled_from(["007", "1e5", "TRUE", "nan", "NA", " 12 ", "-3.5"]))


@PARSES
@given(st.lists(st.lists(cells, min_size=1, max_size=5), min_size=1, max_size=8))
def test_xlsx_floor_never_exceeds_what_pandas_and_unstructured_print(
        rows: list[list[object]]) -> None:
    rows = [[cell for cell in row if not (isinstance(cell, str) and cell.startswith("="))]
            for row in rows]

    assert_floor_is_sound("xlsx", samples.xlsx_with_cells(rows))


def test_xlsx_floor_counts_text_cells_once_per_reference_and_skips_number_like_text() -> None:
    rows = [["berth", "vessels"], ["north quay", 142], ["north quay", 97], ["007", "TRUE"]]

    floor = assert_floor_is_sound("xlsx", samples.xlsx_with_cells(rows))

    assert floor == len("berthvesselsnorthquaynorthquay")


def test_xlsx_counts_inline_strings_and_skips_rows_openpyxl_would_skip() -> None:
    book = samples.xlsx_with_cells([["placeholder"]])
    sheet = (b'<?xml version="1.0" encoding="UTF-8"?><worksheet xmlns="http://schemas.'
             b'openxmlformats.org/spreadsheetml/2006/main"><sheetData>'
             b'<row r="1"><c r="A1" t="inlineStr"><is><t>inline words</t></is></c></row>'
             b'<row r="2"><c r="B2" t="inlineStr"><is><t>kept</t></is></c>'
             b'<c r="A2" t="inlineStr"><is><t>left of it</t></is></c></row>'
             b'<row r="1"><c r="A1" t="inlineStr"><is><t>row one again</t></is></c></row>'
             b"</sheetData></worksheet>")
    payload = samples.replace_members(book, {"xl/worksheets/sheet1.xml": sheet})

    floor = assert_floor_is_sound("xlsx", payload)

    assert floor == len("inlinewords")


def test_xlsx_over_the_limit_is_refused_before_pandas_reads_it(no_parser: None) -> None:
    book = samples.xlsx_with_cells([[f"vessel {n}", "berth north quay", n] for n in range(400)])
    extractor = UnstructuredExtractor().with_limits(ExtractionLimits(max_text_chars=2_000))

    with pytest.raises(IngestionRejected) as caught:
        extractor.extract("xlsx", None, book, max_pages=20)

    assert (caught.value.stage, caught.value.reason) == ("text", "text_too_long")
    assert "the text cells of the first 1 of 1 sheets holds at least" in caught.value.detail
    assert "over the limit of 2000 (max_text_chars)" in caught.value.detail


# ---------------------------------------------------------------------------------- EPUB


@PARSES
@given(st.lists(st.lists(words, min_size=1, max_size=5), min_size=1, max_size=3))
def test_epub_floor_never_exceeds_what_pandoc_and_unstructured_return(
        chapters: list[list[str]]) -> None:
    payload = samples.epub_chapters(chapters)

    floor = assert_floor_is_sound("epub", payload)

    counted = [_floors.visible_chars(text) for chapter in chapters for text in chapter]
    assert floor >= sum(count - 1 for count in counted if count > 1)


def test_epub_over_the_limit_is_refused_before_pandoc_runs(no_parser: None) -> None:
    book = samples.epub_chapters([["Chapter", *["The tide turned at noon. " * 20] * 10]] * 5)
    extractor = UnstructuredExtractor().with_limits(ExtractionLimits(max_text_chars=5_000))

    with pytest.raises(IngestionRejected) as caught:
        extractor.extract("epub", None, book, max_pages=20)

    assert (caught.value.stage, caught.value.reason) == ("text", "text_too_long")
    assert "the first 2 of 5 chapters holds at least" in caught.value.detail


def test_epub_chapter_that_is_not_well_formed_is_not_counted() -> None:
    book = samples.epub_with(samples.epub_book(), {"c.xhtml": (
        b'<html xmlns="http://www.w3.org/1999/xhtml"><body><p>caf&eacute; words</p>'
        b"</body></html>")})

    assert floor_of("epub", book) == 0
    assert "café words" in parsed_text("epub", book)


# ---------------------------------------------------------------------------------- HTML


@PARSES
@given(st.lists(words, min_size=1, max_size=8), st.booleans())
def test_html_floor_never_exceeds_what_unstructured_returns(paragraphs: list[str],
                                                            main: bool) -> None:
    payload = samples.html_page(paragraphs, main=main)

    floor = assert_floor_is_sound("html", payload)

    counted = [_floors.visible_chars(text) for text in paragraphs]
    assert floor >= sum(count - 1 for count in counted if count > 1)


def test_html_floor_leaves_out_what_unstructured_drops() -> None:
    payload = samples.html_page(["Harbor notes", "tides and berths"], main=True)

    floor = assert_floor_is_sound("html", payload)

    assert floor == len("Harbornotestidesandberths")
    assert "Outside" not in parsed_text("html", payload)


def test_html_in_a_legacy_code_page_is_not_counted() -> None:
    page = ("<html><body><p>Caf\u00e9 cr\u00e8me, th\u00e9 et g\u00e2teau pour "
            "l'\u00e9quipage.</p></body></html>")
    payload = page.encode("cp1252")

    # unstructured would guess the code page; the floor counts only what it decodes for sure
    assert floor_of("html", payload) == 0
    assert floor_of("html", page.encode("utf-8")) > 0


def test_html_over_the_limit_is_refused_before_unstructured_reads_it(no_parser: None) -> None:
    page = samples.html_page(["Harbor log", *["The tide turned at noon. " * 10] * 60])
    extractor = UnstructuredExtractor().with_limits(ExtractionLimits(max_text_chars=5_000))

    with pytest.raises(IngestionRejected) as caught:
        extractor.extract("html", None, page, max_pages=20)

    assert (caught.value.stage, caught.value.reason) == ("text", "text_too_long")
    assert "paragraphs and headings of the page holds at least" in caught.value.detail
    assert "over the limit of 5000 (max_text_chars)" in caught.value.detail


# ---------------------------------------------------------------------------------- DOCX


@PARSES
@given(st.lists(words, min_size=1, max_size=8))
@example(["*"])  # unstructured strips a list item's bullet and drops the empty paragraph
@example(["\u2022 item", "plain"])
def test_docx_floor_never_exceeds_what_unstructured_returns(paragraphs: list[str]) -> None:
    floor = assert_floor_is_sound("docx", samples.docx_written_by_python_docx(paragraphs))

    led_by_a_bullet = sum(1 for p in paragraphs
                          if _floors.visible_chars(p) and p.lstrip()[:1] in _floors.BULLETS)
    assert floor == _floors.visible_chars("".join(paragraphs)) - led_by_a_bullet


def test_docx_over_the_limit_is_refused_before_python_docx_reads_it(no_parser: None) -> None:
    document = samples.docx_written_by_python_docx(["The tide turned at noon. " * 10] * 100)
    extractor = UnstructuredExtractor().with_limits(ExtractionLimits(max_text_chars=5_000))

    with pytest.raises(IngestionRejected) as caught:
        extractor.extract("docx", None, document, max_pages=20)

    assert "the document body holds at least" in caught.value.detail


# ------------------------------------------------------------------ real producers' files


@pytest.mark.parametrize("name", ["report.docx", "annual-review.docx", "slides.pptx",
                                  "berths.xlsx", "report.epub", "report-writer.html",
                                  "rota-pandoc.html", "rota-handwritten.html"])
def test_floor_is_sound_on_files_from_pandoc_and_libreoffice(name: str) -> None:
    payload = (REALDOCS / name).read_bytes()

    floor = assert_floor_is_sound(name.rsplit(".", 1)[1], payload)

    assert floor > 0


@pytest.fixture(scope="module")
def libreoffice_files() -> Path:
    """Files LibreOffice 7.4 headless wrote (``tests/realdocs/make_fixtures.sh``): a deck
    re-saved by Impress, two books exported by Writer, a document converted from RTF, a
    large workbook from CSV. Committed, so the checks run where LibreOffice is absent."""
    return REALDOCS / "libreoffice"


@pytest.mark.slow
@pytest.mark.parametrize("name", ["slides.pptx", "report.epub", "annual-review.epub",
                                  "report.docx", "manifest.xlsx"])
def test_floor_is_sound_on_files_libreoffice_writes(libreoffice_files: Path, name: str) -> None:
    payload = (libreoffice_files / name).read_bytes()

    floor = assert_floor_is_sound(name.rsplit(".", 1)[1], payload)

    assert floor > 0


@pytest.mark.slow
def test_a_large_libreoffice_workbook_is_refused_before_it_is_parsed(
        libreoffice_files: Path, no_parser: None) -> None:
    payload = (libreoffice_files / "manifest.xlsx").read_bytes()
    extractor = UnstructuredExtractor().with_limits(ExtractionLimits.for_attachments())

    with pytest.raises(IngestionRejected) as caught:
        extractor.extract("xlsx", None, payload, max_pages=20)

    assert caught.value.reason == "text_too_long"
    assert "over the limit of 50000 (max_text_chars)" in caught.value.detail


def test_xlsx_string_table_is_read_only_as_far_as_the_limit_allows() -> None:
    table = (b'<?xml version="1.0" encoding="UTF-8"?><sst xmlns="http://schemas.openxmlformats.'
             b'org/spreadsheetml/2006/main">' + b"<si><t>same string</t></si>" * 5000
             + b"</sst>")
    sheet = (b'<?xml version="1.0" encoding="UTF-8"?><worksheet xmlns="http://schemas.'
             b'openxmlformats.org/spreadsheetml/2006/main"><sheetData>'
             b'<row r="1"><c r="A1" t="s"><v>0</v></c><c r="B1" t="s"><v>4999</v></c></row>'
             b"</sheetData></worksheet>")
    book = samples.xlsx_with_cells([["a"]])  # openpyxl writes inline strings, and no table
    with zipfile.ZipFile(io.BytesIO(book)) as archive:
        types = archive.read("[Content_Types].xml").replace(b"</Types>", (
            b'<Override PartName="/xl/sharedStrings.xml" ContentType="application/vnd.'
            b'openxmlformats-officedocument.spreadsheetml.sharedStrings+xml"/></Types>'))
    payload = samples.replace_members(
        book, {"[Content_Types].xml": types, "xl/worksheets/sheet1.xml": sheet},
        extra={"xl/sharedStrings.xml": table})
    with zipfile.ZipFile(io.BytesIO(payload)) as archive:
        strings = _floors._SharedStrings(archive, "xl/sharedStrings.xml", budget=100)
        assert strings.count(0) == len("samestring")
        assert strings.count(4999) == 0  # past the budget: not read, not counted

    # at limits near 10, the table is read 1,034 strings deep: B1's string 4999 is not counted
    assert assert_floor_is_sound("xlsx", payload) == len("samestring")
