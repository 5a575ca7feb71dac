"""Pre-scans that parse like the parser: DTDs wherever XML allows them, slides as python-pptx
finds them, PDF page trees as pypdf walks them, HTML as deep as libxml2 reads it.

Each hostile file sits between good files of its kind on the production pool.
"""

from __future__ import annotations

import codecs
import io
import zipfile

import pytest

from capsa.guard import Attachment, Extracted, IsolatedExtractor, Omission
from capsa.guard.samples import (
    docx_document_xml,
    docx_with_main_part,
    epub_book,
    epub_with,
    html_nested,
    pdf_deep_page_tree,
    pptx_repeating_slide_id,
    pptx_slides_elsewhere,
    pptx_with_slides,
    replace_members,
    xlsx_with_cells,
)

from .conftest import (
    PARSE_LIMITS,
    Good,
    assert_omitted,
    good_for,
    good_text,
)

_DTD = '<!DOCTYPE w:document [<!ENTITY inj "INJECTED">]>'
_BODY = b"<w:body><w:p><w:r><w:t>visible &inj; text</w:t></w:r></w:p></w:body>"
_W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"


def _run(pool: IsolatedExtractor, kind: str, label: str, payload: bytes) -> Extracted | Omission:
    return run_kind(pool, kind, Attachment(label=label, payload=payload))


def run_kind(pool: IsolatedExtractor, kind: str, hostile: Attachment) -> Extracted | Omission:
    from .conftest import run_among_good

    neighbours: list[Good] = [good_for(kind), good_text()]
    return run_among_good(pool, hostile, PARSE_LIMITS, good=neighbours, next_file=good_for(kind))


def _document(prefix: str, codec: str, bom: bytes = b"") -> bytes:
    """A ``word/document.xml`` with no XML declaration: `prefix`, the DTD, the root."""
    xml = f'{prefix}{_DTD}<w:document xmlns:w="{_W}">{_BODY.decode()}</w:document>'
    return bom + xml.encode(codec)


@pytest.mark.slow
@pytest.mark.parametrize("document", [
    pytest.param(_document(" \n" * 100, "utf-8"), id="after-200-bytes-of-white-space"),
    pytest.param(_document("<!-- a comment -->\n<?capsa pi?>\n", "utf-8"),
                 id="after-a-comment-and-a-processing-instruction"),
    pytest.param(_document("   ", "utf-8", codecs.BOM_UTF8), id="after-a-bom-and-spaces"),
    pytest.param(_document(" " * 80, "utf-16-le"), id="utf16-le-no-bom-after-spaces"),
    pytest.param(_document(" " * 80, "utf-16-be"), id="utf16-be-no-bom-after-spaces"),
    pytest.param(_document(" " * 80, "utf-16-le", codecs.BOM_UTF16_LE), id="utf16-le-bom"),
    pytest.param(_document(" " * 80, "utf-16-be", codecs.BOM_UTF16_BE), id="utf16-be-bom"),
    pytest.param(docx_document_xml(_BODY, prolog="<!--x-->" + _DTD, encoding="UTF-16",
                                   codec="utf-16"), id="utf16-declared-after-a-comment"),
])
def test_docx_dtd_is_found_wherever_the_xml_parser_would_read_it(
        real_pool: IsolatedExtractor, document: bytes) -> None:
    outcome = _run(real_pool, "docx", "dtd.docx", docx_with_main_part(document))
    assert_omitted(outcome, stage="preflight", reason="forbidden_xml")


@pytest.mark.slow
@pytest.mark.parametrize("encoding", ["EBCDIC-CP-US", "UTF-7", "x-unknown"])
def test_docx_part_in_an_encoding_the_scan_cannot_read_is_refused(
        real_pool: IsolatedExtractor, encoding: str) -> None:
    document = docx_document_xml(b"<w:body/>", encoding=encoding)
    outcome = _run(real_pool, "docx", "odd.docx", docx_with_main_part(document))
    omission = assert_omitted(outcome, stage="preflight", reason="forbidden_xml")
    assert encoding in omission.detail


@pytest.mark.slow
def test_xlsx_part_with_white_space_before_its_dtd_is_refused(
        real_pool: IsolatedExtractor) -> None:
    book = xlsx_with_cells([["Northwind Harbor", 1]])
    with zipfile.ZipFile(io.BytesIO(book)) as source:
        sheet = source.read("xl/worksheets/sheet1.xml")
    root = sheet.split(b"?>", 1)[1] if sheet.startswith(b"<?xml") else sheet
    hostile = b" \n" * 100 + b'<!DOCTYPE worksheet [<!ENTITY a "b">]>' + root
    payload = replace_members(book, {"xl/worksheets/sheet1.xml": hostile})
    outcome = _run(real_pool, "xlsx", "sheet.xlsx", payload)
    assert_omitted(outcome, stage="preflight", reason="forbidden_xml")


@pytest.mark.slow
def test_pptx_part_in_utf16_with_a_dtd_is_refused(real_pool: IsolatedExtractor) -> None:
    deck = pptx_with_slides(1)
    with zipfile.ZipFile(io.BytesIO(deck)) as source:
        slide = source.read("ppt/slides/slide1.xml").decode()
    root = slide[slide.index("?>") + 2:]
    hostile = (" " * 40 + '<!DOCTYPE p:sld [<!ENTITY a "b">]>' + root).encode("utf-16-le")
    payload = replace_members(deck, {"ppt/slides/slide1.xml": hostile})
    outcome = _run(real_pool, "pptx", "deck.pptx", payload)
    assert_omitted(outcome, stage="preflight", reason="forbidden_xml")


@pytest.mark.slow
def test_epub_chapter_with_an_entity_after_white_space_is_refused(
        real_pool: IsolatedExtractor) -> None:
    book = epub_book()
    chapter = (" \n" * 100 + '<!DOCTYPE html [<!ENTITY a "INJECTED">]>'
               '<html xmlns="http://www.w3.org/1999/xhtml"><body><p>&a;</p></body></html>')
    payload = epub_with(book, {"c.xhtml": chapter.encode()})
    outcome = run_kind(real_pool, "text", Attachment(label="book.epub", payload=payload))
    assert_omitted(outcome, stage="preflight", reason="forbidden_xml")


@pytest.mark.slow
@pytest.mark.parametrize(("payload", "slides"), [
    pytest.param(pptx_repeating_slide_id(3000), 3000, id="3000-ids-naming-one-slide"),
    pytest.param(pptx_slides_elsewhere(25), 25, id="slides-outside-ppt-slides"),
])
def test_slides_are_counted_the_way_python_pptx_finds_them(
        real_pool: IsolatedExtractor, payload: bytes, slides: int) -> None:
    outcome = _run(real_pool, "pptx", "deck.pptx", payload)
    omission = assert_omitted(outcome, stage="preflight", reason="too_many_pages")
    assert f"{slides} slides" in omission.detail


@pytest.mark.slow
def test_slides_outside_ppt_slides_within_the_limit_are_extracted(
        real_pool: IsolatedExtractor) -> None:
    outcome = _run(real_pool, "pptx", "deck.pptx", pptx_slides_elsewhere(3))
    assert isinstance(outcome, Extracted)
    assert [f"Northwind Harbor {n}" in outcome.text for n in (1, 2, 3)] == [True] * 3


@pytest.mark.slow
def test_page_tree_past_pypdfs_depth_limit_is_too_many_pages(
        real_pool: IsolatedExtractor) -> None:
    outcome = _run(real_pool, "pdf", "tree.pdf", pdf_deep_page_tree(150))
    omission = assert_omitted(outcome, stage="preflight", reason="too_many_pages")
    assert "page tree depth" in omission.detail


@pytest.mark.slow
def test_page_tree_within_pypdfs_limits_is_extracted(real_pool: IsolatedExtractor) -> None:
    outcome = _run(real_pool, "pdf", "tree.pdf", pdf_deep_page_tree(50))
    assert isinstance(outcome, Extracted)
    assert outcome.text == "Northwind Harbor, deep down"


@pytest.mark.slow
def test_html_nested_past_the_parsers_depth_limit_is_omitted_not_cut(
        real_pool: IsolatedExtractor) -> None:
    # Measured on libxml2 2.14: 255 nested divs inside <html><body> stop the
    # parser with no exception, and every word from the deep point on is lost.
    outcome = _run(real_pool, "html", "deep.html", html_nested(255))
    omission = assert_omitted(outcome, stage="preflight", reason="nested_too_deep")
    assert "256 levels" in omission.detail


@pytest.mark.slow
def test_html_nested_just_under_the_limit_is_extracted_whole(
        real_pool: IsolatedExtractor) -> None:
    outcome = _run(real_pool, "html", "nested.html", html_nested(254))
    assert isinstance(outcome, Extracted)
    assert outcome.text.split("\n\n") == ["Northwind Harbor opening.",
                                          "Northwind Harbor at the bottom.",
                                          "Northwind Harbor closing."]



@pytest.mark.slow
def test_epub_chapter_nested_past_the_parsers_depth_limit_is_omitted_not_cut(
        real_pool: IsolatedExtractor) -> None:
    # EPUB chapters reach libxml2 as HTML (through pandoc), so they are cut the same way.
    nest = "<div>" * 300 + "<p>Northwind Harbor deep</p>" + "</div>" * 300
    chapter = ('<?xml version="1.0"?><html xmlns="http://www.w3.org/1999/xhtml"><head>'
               f"<title>t</title></head><body><p>Northwind Harbor start</p>{nest}"
               "<p>Northwind Harbor end</p></body></html>")
    payload = epub_with(epub_book(), {"c.xhtml": chapter.encode()})
    outcome = run_kind(real_pool, "text", Attachment(label="deep.epub", payload=payload))
    assert_omitted(outcome, stage="preflight", reason="nested_too_deep")
