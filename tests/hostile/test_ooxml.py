"""X: OOXML and XML (X1–X9): entity tricks, depth, size, and the XML hardening itself.

Bombs that a size or ratio cap catches are refused at stage ``archive``
(plain pool); the rest reach the worker's pre-flight or the real parser and
need the production pool.
"""

from __future__ import annotations

import pytest

from capsa.errors import ExtractionFailed
from capsa.guard import (
    Attachment,
    Extracted,
    ExtractionLimits,
    IsolatedExtractor,
    Omission,
    extract_attachment,
)
from capsa.guard.samples import (
    docx_billion_laughs,
    docx_bytes,
    docx_deep_nesting,
    docx_document_xml,
    docx_embedded_bomb,
    docx_many_paragraphs,
    docx_with_main_part,
    docx_xxe,
    paragraphs_xml,
    pptx_with_slides,
    xlsx_huge_shared_strings,
    xlsx_sparse_corners,
)

from .conftest import (
    LIMITS,
    PARSE_LIMITS,
    Good,
    assert_omitted,
    good_for,
    run_among_good,
)

_ENTITY_BODY = b"<w:body><w:p><w:r><w:t>visible &inj; text</w:t></w:r></w:p></w:body>"
_ENTITY_DTD = '<!DOCTYPE w:document [<!ENTITY inj "INJECTED">]>'


def _docx_neighbours() -> list[Good]:
    return [good_for("docx"), good_for("text")]


def _run_docx(pool: IsolatedExtractor, label: str, payload: bytes,
              limits: ExtractionLimits = PARSE_LIMITS) -> Extracted | Omission:
    return run_among_good(pool, Attachment(label=label, payload=payload), limits,
                          good=_docx_neighbours(), next_file=good_for("docx"))


@pytest.mark.slow
def test_x1_billion_laughs_is_refused_before_parsing(real_pool: IsolatedExtractor) -> None:
    outcome = _run_docx(real_pool, "laughs.docx", docx_billion_laughs())
    assert_omitted(outcome, stage="preflight", reason="forbidden_xml")


@pytest.mark.slow
def test_x2_external_entity_is_refused_and_nothing_leaks(real_pool: IsolatedExtractor) -> None:
    outcome = _run_docx(real_pool, "xxe.docx", docx_xxe("file:///etc/hostname"))
    omission = assert_omitted(outcome, stage="preflight", reason="forbidden_xml")
    assert "LEAK" not in omission.detail


@pytest.mark.slow
def test_x3_deep_nesting_is_refused_as_corrupt(real_pool: IsolatedExtractor) -> None:
    outcome = _run_docx(real_pool, "deep.docx", docx_deep_nesting(5000))
    omission = assert_omitted(outcome, stage="preflight", reason="corrupt")
    assert "XMLSyntaxError" in omission.detail


@pytest.mark.slow
def test_x4_many_paragraphs_are_dropped_whole_over_the_text_ceiling(
        real_pool: IsolatedExtractor) -> None:
    limits = PARSE_LIMITS.model_copy(update={"max_text_chars": 2000})
    outcome = _run_docx(real_pool, "long.docx", docx_many_paragraphs(400), limits)
    omission = assert_omitted(outcome, stage="text", reason="text_too_long")
    assert "never truncated" in omission.detail


def test_x5_unreferenced_media_bomb_is_refused_from_the_directory(
        plain_pool: IsolatedExtractor) -> None:
    outcome = run_among_good(plain_pool, Attachment(label="media.docx",
                                                    payload=docx_embedded_bomb()))
    omission = assert_omitted(outcome, stage="archive", reason="archive_ratio")
    assert "word/media/blob.bin" in omission.detail


@pytest.mark.slow
def test_x6_sparse_corner_cells_are_read_without_materialising_the_sheet(
        real_pool: IsolatedExtractor) -> None:
    # A1 and XFD1048576 declare 17 billion cells; only the two present ones
    # may be read, within the 256 MiB the child is allowed.
    outcome = run_among_good(real_pool, Attachment(label="corners.xlsx",
                                                   payload=xlsx_sparse_corners()), PARSE_LIMITS,
                             good=[good_for("xlsx"), good_for("text")], next_file=good_for("xlsx"))
    assert isinstance(outcome, Extracted)
    assert "top left corner" in outcome.text
    assert "bottom right corner" in outcome.text


def test_x7_huge_shared_strings_table_is_refused_for_its_ratio(
        plain_pool: IsolatedExtractor) -> None:
    outcome = run_among_good(plain_pool, Attachment(label="strings.xlsx",
                                                    payload=xlsx_huge_shared_strings()))
    omission = assert_omitted(outcome, stage="archive", reason="archive_ratio")
    assert "sharedStrings.xml" in omission.detail


def test_x8_openpyxl_runs_with_defusedxml_here() -> None:
    openpyxl_xml = pytest.importorskip("openpyxl.xml")
    assert openpyxl_xml.DEFUSEDXML is True


@pytest.mark.slow
def test_x8_xlsx_is_refused_when_openpyxl_lacks_defusedxml(
        monkeypatch: pytest.MonkeyPatch) -> None:
    openpyxl_xml = pytest.importorskip("openpyxl.xml")
    from capsa.guard.extractors import UnstructuredExtractor

    monkeypatch.setattr(openpyxl_xml, "DEFUSEDXML", False)
    workbook = Attachment(label="book.xlsx", payload=good_for("xlsx").attachment.payload)
    with pytest.raises(ExtractionFailed) as failed:
        extract_attachment(workbook, UnstructuredExtractor(), LIMITS)
    assert failed.value.cause == "raised"
    assert "defusedxml" in failed.value.detail


@pytest.mark.slow
def test_x9_deck_over_the_page_limit_is_refused_before_parsing(
        real_pool: IsolatedExtractor) -> None:
    outcome = run_among_good(real_pool, Attachment(label="deck.pptx",
                                                   payload=pptx_with_slides(25)), PARSE_LIMITS,
                             good=[good_for("pptx"), good_for("text")], next_file=good_for("pptx"))
    omission = assert_omitted(outcome, stage="preflight", reason="too_many_pages")
    assert "25 slides" in omission.detail


def _hidden(encoding: str, codec: str, *, bom: bytes = b"") -> bytes:
    """A DOCX whose document part, in `codec`, declares the entity DTD."""
    return docx_with_main_part(docx_document_xml(_ENTITY_BODY, prolog=_ENTITY_DTD,
                                                 encoding=encoding, codec=codec, bom=bom))




@pytest.mark.slow
@pytest.mark.parametrize(
    "payload",
    [
        pytest.param(docx_bytes(_ENTITY_BODY, prolog=b"<!--" + b"p" * 70_000 + b"-->"
                                + _ENTITY_DTD.encode()), id="dtd-after-70k"),
        pytest.param(docx_bytes(_ENTITY_BODY, prolog=b" " * 70_000 + _ENTITY_DTD.encode()),
                     id="dtd-after-70k-spaces"),
        pytest.param(_hidden("UTF-16", "utf-16"), id="utf16-part"),
        pytest.param(_hidden("UTF-16", "utf-16-le"), id="utf16-le-no-bom"),
        pytest.param(_hidden("UTF-16", "utf-16-be"), id="utf16-be-no-bom"),
        pytest.param(_hidden("UTF-32", "utf-32-be", bom=b"\x00\x00\xfe\xff"), id="utf32-be-bom"),
        pytest.param(_hidden("UTF-32", "utf-32-be"), id="utf32-be-no-bom"),
        pytest.param(_hidden("UTF-32", "utf-32-le", bom=b"\xff\xfe\x00\x00"), id="utf32-le-bom"),
        pytest.param(_hidden("UTF-32", "utf-32-le"), id="utf32-le-no-bom"),
        pytest.param(_hidden("UTF-7", "utf-7"), id="utf7-declared"),
    ],
)
def test_x1_doctype_hidden_from_the_prescan_is_still_refused(
        real_pool: IsolatedExtractor, payload: bytes) -> None:
    outcome = _run_docx(real_pool, "hidden-dtd.docx", payload)
    omission = assert_omitted(outcome, stage="preflight", reason="forbidden_xml")
    assert omission.label


@pytest.mark.slow
def test_x1_utf16_document_without_a_dtd_is_extracted(real_pool: IsolatedExtractor) -> None:
    # Decoding the parts to scan them must not refuse honest UTF-16.
    document = docx_document_xml(paragraphs_xml(["Northwind Harbor, wide"]), encoding="UTF-16",
                                 codec="utf-16")
    outcome = _run_docx(real_pool, "wide.docx", docx_with_main_part(document))
    assert isinstance(outcome, Extracted)
    assert outcome.text == "Northwind Harbor, wide"


@pytest.mark.slow
def test_x1_doctype_in_a_part_not_named_like_xml_is_still_refused(
        real_pool: IsolatedExtractor) -> None:
    payload = docx_with_main_part(docx_document_xml(_ENTITY_BODY, prolog=_ENTITY_DTD),
                                  part="word/main.bin")
    outcome = _run_docx(real_pool, "renamed.docx", payload)
    omission = assert_omitted(outcome, stage="preflight", reason="forbidden_xml")
    assert omission.label
