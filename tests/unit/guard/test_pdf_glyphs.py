"""PDF pages whose text layer maps its glyphs to no characters are read as pages without one.

pypdf returns such a layer as glyph names (``/g21/g22``) or raw codes, and the
page counted as having text, so OCR never ran on it
(`capsa.guard.extractors._pdf_glyphs`). PDFs are built object by object and
read by the real reader; the page PDFium draws is read by Tesseract.
"""

from __future__ import annotations

import io
import shutil

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pypdf import PdfReader

from capsa.errors import IngestionRejected
from capsa.guard.extractors import UnstructuredExtractor
from capsa.guard.extractors._pdf_glyphs import undecodable
from capsa.guard.port import Parsed
from capsa.guard.samples import build_pdf, stream

needs_tesseract = pytest.mark.skipif(shutil.which("tesseract") is None,
                                     reason="tesseract not installed")
GARBLED = ("{} of {} pages have a text layer whose fonts map to no characters (unmapped glyph "
           "names, control or private-use codes): read as pages without one")

HELVETICA = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"
NAMED_GLYPHS = (b"<< /Type /Font /Subtype /Type1 /BaseFont /ABCDEF+Subset /Encoding << /Type "
                b"/Encoding /Differences [65 /g21 /g22 /g23 /g24 /g25 /g26] >> >>")
# Helvetica as drawn, with a ToUnicode map that sends every code into the private-use area
MAPPED_AWAY = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /ToUnicode %d 0 R >>"
CMAP = (b"/CIDInit /ProcSet findresource begin 12 dict begin begincmap /CMapName /Broken def "
        b"1 begincodespacerange <00> <FF> endcodespacerange 1 beginbfrange <20> <7E> <E020> "
        b"endbfrange endcmap CMapName currentdict /CMap defineresource pop end end")


def pdf(pages: list[tuple[bytes, bytes]]) -> bytes:
    """One page per (font, text): the text drawn large in that font."""
    kids = " ".join(f"{3 + 4 * i} 0 R" for i in range(len(pages)))
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>",
               f"<< /Type /Pages /Kids [{kids}] /Count {len(pages)} >>".encode()]
    for index, (font, text) in enumerate(pages):
        first = 3 + 4 * index  # the page, its font, its content, the font's map
        objects.append(b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << "
                       b"/Font << /F1 %d 0 R >> >> /Contents %d 0 R >>" % (first + 1, first + 2))
        objects.append(font % (first + 3) if b"%d" in font else font)
        objects.append(stream(b"BT /F1 36 Tf 60 600 Td (%s) Tj ET" % text))
        objects.append(stream(CMAP) if b"%d" in font else b"<< >>")
    return build_pdf(objects)


def read(payload: bytes, *, ocr: bool = True) -> Parsed:
    parsed = UnstructuredExtractor(ocr_pdf=ocr).extract("pdf", None, payload, max_pages=10)
    assert isinstance(parsed, Parsed)
    return parsed


# ----------------------------------------------------------------------------- the rule


@pytest.mark.parametrize("text", [
    "/g21/g22/g23/g24", "/G3/G4 /G5/G6", "\x01\x02\x03\x04", "\ue020\ue021\ue022", "\ufffd\ufffd",
    "/glyph12/glyph13 ab",
])
def test_a_layer_that_says_nothing_is_undecodable(text: str) -> None:
    assert undecodable(text)


@pytest.mark.parametrize("text", [
    "", "   ", "Invoice total: 230 EUR", "see /usr/bin/env and /etc/hosts",
    "bullet \uf0b7 item one, item two, item three", "/g21/g22 in a sentence of real words here",
    "version /v2 of the API", "Persian: می\u200cخواهم",
])
def test_real_text_is_not(text: str) -> None:
    assert not undecodable(text)


@given(st.text(alphabet=st.characters(categories=("L", "N", "P", "Zs")), max_size=200))
def test_letters_numbers_and_punctuation_are_never_undecodable(text: str) -> None:
    assert not undecodable(text)


# ------------------------------------------------------------------------- through pypdf


def test_a_page_of_unmapped_glyph_names_is_dropped_and_the_good_page_kept() -> None:
    parsed = read(pdf([(HELVETICA, b"Harbour report"), (NAMED_GLYPHS, b"ABCDEF")]), ocr=False)

    assert parsed.text == "Harbour report"
    assert GARBLED.format(1, 2) in parsed.notes
    assert any("pages have no text layer and were not read" in note for note in parsed.notes)


def test_a_document_whose_only_layer_says_nothing_is_no_text() -> None:
    with pytest.raises(IngestionRejected) as refused:
        read(pdf([(NAMED_GLYPHS, b"ABCDEF")]), ocr=False)

    assert refused.value.reason == "no_text"


@pytest.mark.slow
@pytest.mark.ocr
@needs_tesseract
def test_ocr_reads_what_a_page_with_a_broken_map_draws() -> None:
    payload = pdf([(MAPPED_AWAY, b"INVOICE TOTAL 230")])


    assert undecodable(PdfReader(io.BytesIO(payload)).pages[0].extract_text())

    parsed = read(payload)

    assert "INVOICE TOTAL 230" in parsed.text
    assert GARBLED.format(1, 1) in parsed.notes
