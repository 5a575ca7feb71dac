"""Word's embedded foreign content (``w:altChunk``) is read where it stands.

Word imports an HTML page, a web archive (MHT) or plain text that a DOCX
embeds and places with ``w:altChunk``; python-docx yields nothing for it, so
unstructured read html-docx-js's documents (one MHT chunk) as empty. The
documents here are python-docx's, with the parts such generators write put in.
"""

from __future__ import annotations

import io
import quopri
import re
import zipfile

import pytest

from capsa.errors import IngestionRejected
from capsa.guard import Attachment, extract_attachment

pytest.importorskip("unstructured")
docx = pytest.importorskip("docx")

MARKER = re.compile(r"\b(?:shown|hidden)\d+\b")
READ = "read {} embedded HTML or text part(s) (w:altChunk) where they stand, as Word imports them"
UNREAD = ("left out {} embedded part(s) (w:altChunk) in a format capsa does not read inside a "
          "DOCX (RTF, another DOCX) or that is missing: Word shows them")
RELATIONSHIP = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/aFChunk"


def document(chunks: dict[str, tuple[str, bytes]], body: str) -> bytes:
    """A DOCX whose body is `body` (``{chunk:ID}`` marks a ``w:altChunk``), with `chunks`
    (id -> (content type, bytes)) as parts of the main document."""
    made = docx.Document()
    made.add_paragraph("BODY")
    saved = io.BytesIO()
    made.save(saved)
    source = zipfile.ZipFile(io.BytesIO(saved.getvalue()))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target:
        for info in source.infolist():
            data = source.read(info)
            if info.filename == "word/document.xml":
                xml = re.sub(r"\{chunk:(\w+)\}", r'<w:altChunk r:id="\1"/>', body)
                data = re.sub(rb"<w:p>(?:(?!<w:p>).)*?BODY.*?</w:p>", xml.encode(), data,
                              flags=re.S)
            elif info.filename == "word/_rels/document.xml.rels":
                links = "".join(f'<Relationship Id="{ident}" Type="{RELATIONSHIP}" '
                                f'Target="chunk-{ident}.bin"/>' for ident in chunks)
                data = data.replace(b"</Relationships>", links.encode() + b"</Relationships>")
            elif info.filename == "[Content_Types].xml":
                kinds = "".join(f'<Override PartName="/word/chunk-{ident}.bin" '
                                f'ContentType="{kind}"/>' for ident, (kind, _) in chunks.items())
                data = data.replace(b"</Types>", kinds.encode() + b"</Types>")
            target.writestr(info, data)
        for ident, (_, payload) in chunks.items():
            target.writestr(f"word/chunk-{ident}.bin", payload)
    return out.getvalue()


def paragraph(text: str) -> str:
    return f"<w:p><w:r><w:t>{text}</w:t></w:r></w:p>"


def read(payload: bytes) -> tuple[str, tuple[str, ...]]:
    result = extract_attachment(Attachment(label="merged.docx", payload=payload))
    return result.text, result.notes


def mht(page: str, charset: str = "utf-8") -> bytes:
    """A web archive as html-docx-js writes one: the page quoted-printable in a
    multipart/related message."""
    body = quopri.encodestring(page.encode(charset)).decode("ascii")
    return ("MIME-Version: 1.0\r\nContent-Type: multipart/related;\r\n"
            '    type="text/html";\r\n    boundary="----=mhtDocumentPart"\r\n\r\n\r\n'
            "------=mhtDocumentPart\r\n"
            f'Content-Type: text/html;\r\n    charset="{charset}"\r\n'
            "Content-Transfer-Encoding: quoted-printable\r\n"
            "Content-Location: file:///C:/fake/document.html\r\n\r\n"
            f"{body}\r\n\r\n------=mhtDocumentPart--\r\n").encode("ascii")


PAGE = ("<html><head><title>t</title></head><body><h1>shown2 heading</h1>"
        "<p>shown3 words.</p><p style='display:none'>hidden1 instructions</p>"
        "<ul><li>shown4 item</li></ul></body></html>")


def test_an_html_chunk_is_read_where_it_stands_and_its_hidden_elements_stay_out() -> None:
    text, notes = read(document({"rId90": ("text/html", PAGE.encode())},
                                paragraph("shown1 before.") + "{chunk:rId90}"
                                + paragraph("shown5 after.")))
    assert MARKER.findall(text) == ["shown1", "shown2", "shown3", "shown4", "shown5"]
    assert READ.format(1) in notes
    assert any("element(s) the page marks hidden" in note for note in notes)


def test_a_document_that_is_one_web_archive_reads_as_its_page() -> None:
    # html-docx-js writes the whole document as one MHT chunk: it read as nothing at all
    page = PAGE.replace("shown3 words.", "shown3 caf\u00e9 na\u00efve words.")
    text, notes = read(document({"htmlChunk": ("message/rfc822", mht(page))},
                                "{chunk:htmlChunk}"))
    assert MARKER.findall(text) == ["shown2", "shown3", "shown4"]
    assert "café naïve" in text
    assert READ.format(1) in notes


def test_an_archive_in_a_legacy_charset_is_decoded_as_it_declares() -> None:
    page = "<html><body><p>shown1 se\u00f1or \u00e0 la cr\u00e8me</p></body></html>"
    text, _ = read(document({"c1": ("message/rfc822", mht(page, "windows-1252"))},
                            "{chunk:c1}"))
    assert "señor à la crème" in text


def test_a_plain_text_chunk_reads_a_paragraph_a_line() -> None:
    text, notes = read(document({"t1": ("text/plain", b"shown2 first line\n\nshown3 second\n")},
                                paragraph("shown1") + "{chunk:t1}"))
    assert MARKER.findall(text) == ["shown1", "shown2", "shown3"]
    assert READ.format(1) in notes


def test_a_chunk_in_a_table_cell_is_read_in_the_cell() -> None:
    table = ("<w:tbl><w:tr><w:tc>{chunk:c1}</w:tc><w:tc>" + paragraph("shown2") + "</w:tc>"
             "</w:tr></w:tbl>")
    text, _ = read(document({"c1": ("text/html", b"<p>shown1 cell</p>")}, table))
    assert MARKER.findall(text) == ["shown1", "shown2"]


@pytest.mark.parametrize(("chunks", "body"), [
    ({"r1": ("application/rtf", rb"{\rtf1 shown9}")}, "{chunk:r1}"),
    ({}, "{chunk:missing}"),
    ({"d1": ("application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml",
             b'<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"/>')},
     "{chunk:d1}"),
])
def test_a_chunk_capsa_cannot_read_is_named_in_a_note(chunks: dict[str, tuple[str, bytes]],
                                                      body: str) -> None:
    text, notes = read(document(chunks, paragraph("shown1 body") + body))
    assert MARKER.findall(text) == ["shown1"]
    assert UNREAD.format(1) in notes


def test_an_undecodable_html_chunk_is_left_out_not_the_document() -> None:
    garbage = bytes(range(128, 256)) * 40
    text, notes = read(document({"c1": ("text/html", garbage)}, paragraph("shown1") +
                                "{chunk:c1}"))
    assert MARKER.findall(text) == ["shown1"]
    assert UNREAD.format(1) in notes


def test_a_document_of_only_an_empty_chunk_is_no_text() -> None:
    with pytest.raises(IngestionRejected) as refused:
        read(document({"c1": ("text/html", b"<html><body></body></html>")}, "{chunk:c1}"))
    assert refused.value.reason == "no_text"


def test_a_document_without_chunks_says_nothing_new() -> None:
    _, notes = read(document({}, paragraph("shown1 only")))
    assert not any("altChunk" in note for note in notes)


def test_an_html_chunk_declaring_a_doctype_refuses_the_file_as_any_such_part_does() -> None:
    # every part an XML parser could read is scanned for a DTD before anything parses
    # (the threat model); an embedded page is no exception
    with pytest.raises(IngestionRejected) as refused:
        read(document({"c1": ("text/html", b"<!DOCTYPE html><p>shown1</p>")}, "{chunk:c1}"))
    assert refused.value.reason == "forbidden_xml"


@pytest.mark.parametrize("wrapped", [
    '{p}<mc:AlternateContent xmlns:mc="http://schemas.openxmlformats.org/markup-compatibility/'
    '2006"><mc:Choice Requires="w14" xmlns:w14="http://schemas.microsoft.com/office/word/2010/'
    'wordml"><w:p/></mc:Choice><mc:Fallback>{chunk:c1}</mc:Fallback></mc:AlternateContent>',
    "<w:del w:id=\"1\" w:author=\"a\">{chunk:c1}</w:del>{p}",
    # in an element's properties: no place for content, and nothing is read or counted
    "<w:p><w:pPr>{chunk:c1}</w:pPr></w:p>{p}",
    "<w:sdt><w:sdtPr>{chunk:c1}</w:sdtPr><w:sdtContent>{p}</w:sdtContent></w:sdt>",
])
def test_a_chunk_word_does_not_import_is_not_read(wrapped: str) -> None:
    body = wrapped.replace("{p}", paragraph("shown1"))
    text, notes = read(document({"c1": ("text/html", b"<p>hidden1 copy</p>")}, body))
    assert "hidden1" not in text
    assert not any("altChunk" in note for note in notes)
