"""An ODT loses the text it hides from its reader before pandoc converts it.

pandoc, which turns an ``.odt`` into the DOCX unstructured reads, keeps the text
of hidden sections, hidden paragraphs and hidden character styles and drops the
mark. `capsa.guard.extractors._odt_hidden` prunes ``content.xml`` first. The
expectations are what LibreOffice 7.4 shows when it prints each document (and,
where it and the OpenDocument standard disagree, the hiding one); these run
pandoc in this process, through `OfficeExtractor`; the documents are built here.
"""

from __future__ import annotations

import io
import zipfile

import pytest

from capsa.errors import IngestionRejected
from capsa.guard.archive import open_inspected
from capsa.guard.extractors import OfficeExtractor
from capsa.guard.extractors._odt_hidden import PrunedDocument, drop_hidden_text, hidden_note
from capsa.guard.limits import ExtractionLimits
from capsa.guard.port import Parsed

pytest.importorskip("pypandoc")

NS = ('xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
      'xmlns:style="urn:oasis:names:tc:opendocument:xmlns:style:1.0" '
      'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" '
      'xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" '
      'xmlns:fo="urn:oasis:names:tc:opendocument:xmlns:xsl-fo-compatible:1.0" '
      'xmlns:xlink="http://www.w3.org/1999/xlink" '
      'xmlns:ooow="http://openoffice.org/2004/writer"')
HIDES = '<style:text-properties text:display="none"/>'


def odt(body: str, *, automatic: str = "", named: str = "") -> bytes:
    """An ODT whose body is `body`, with `automatic` styles in ``content.xml`` and `named`
    ones in ``styles.xml``; ``mimetype`` first and stored, as LibreOffice writes it."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as package:
        package.writestr("mimetype", "application/vnd.oasis.opendocument.text",
                         compress_type=zipfile.ZIP_STORED)
        package.writestr("content.xml", (
            f'<?xml version="1.0" encoding="UTF-8"?><office:document-content {NS} '
            f'office:version="1.3"><office:automatic-styles>{automatic}'
            "</office:automatic-styles><office:body><office:text>"
            f"<text:p>Opening line.</text:p>{body}<text:p>Closing line.</text:p>"
            "</office:text></office:body></office:document-content>"))
        package.writestr("styles.xml", (
            f'<?xml version="1.0" encoding="UTF-8"?><office:document-styles {NS} '
            f'office:version="1.3"><office:styles>{named}</office:styles>'
            "</office:document-styles>"))
        package.writestr("META-INF/manifest.xml", (
            '<?xml version="1.0" encoding="UTF-8"?><manifest:manifest xmlns:manifest='
            '"urn:oasis:names:tc:opendocument:xmlns:manifest:1.0" manifest:version="1.3">'
            '<manifest:file-entry manifest:full-path="/" manifest:media-type='
            '"application/vnd.oasis.opendocument.text"/><manifest:file-entry '
            'manifest:full-path="content.xml" manifest:media-type="text/xml"/>'
            '<manifest:file-entry manifest:full-path="styles.xml" '
            'manifest:media-type="text/xml"/></manifest:manifest>'))
    return buffer.getvalue()


def style(name: str, family: str, properties: str = HIDES, parent: str = "") -> str:
    inherits = f' style:parent-style-name="{parent}"' if parent else ""
    return (f'<style:style style:name="{name}" style:family="{family}"{inherits}>'
            f"{properties}</style:style>")


def extract(payload: bytes) -> Parsed:
    parsed = OfficeExtractor(ExtractionLimits(timeout_s=60, cpu_s=60)).extract(
        "odt", None, payload, max_pages=5)
    assert isinstance(parsed, Parsed)
    return parsed


def hidden_notes(parsed: Parsed) -> tuple[str, ...]:
    return tuple(note for note in parsed.notes if not note.startswith("converted from"))


def pruned(payload: bytes, *, max_bytes: int = 10_000_000) -> PrunedDocument:
    with open_inspected(payload, ExtractionLimits(), label="d.odt") as archive:
        return drop_hidden_text(payload, archive, max_bytes=max_bytes)


SPAN = '<text:p>Before <text:span text:style-name="{}">hidden1</text:span> after.</text:p>'
LINK = ('<text:p>Before <text:a xlink:href="https://example.org" text:style-name="{}">hidden1'
        "</text:a> after.</text:p>")
BOTH_LINES = "Opening line.\n\nClosing line."
WITH_TAIL = "Opening line.\n\nBefore after.\n\nClosing line."


@pytest.mark.parametrize(("body", "automatic", "named", "expected"), [
    ('<text:section text:name="S" text:display="none"><text:p>hidden1</text:p></text:section>',
     "", "", BOTH_LINES),
    ('<text:section text:name="S" text:display="condition" text:condition="ooow:1==1">'
     "<text:p>hidden1</text:p></text:section>", "", "", BOTH_LINES),
    ('<text:p><text:hidden-paragraph text:condition="ooow:1==1" text:is-hidden="true"/>'
     "hidden1</text:p>", "", "", BOTH_LINES),
    ('<text:p>a <text:span><text:hidden-paragraph text:condition="ooow:1==1"/></text:span> '
     "hidden1</text:p>", "", "", BOTH_LINES),
    ('<text:h text:outline-level="1"><text:hidden-paragraph text:is-hidden="true"/>hidden1'
     "</text:h>", "", "", BOTH_LINES),
    (SPAN.format("T1"), style("T1", "text"), "", WITH_TAIL),
    (SPAN.format("Hid"), "", style("Hid", "text"), WITH_TAIL),
    (SPAN.format("T1"), style("T1", "text", "", parent="Hid"), style("Hid", "text"), WITH_TAIL),
    (SPAN.format("T1"), style("T1", "text", '<style:text-properties text:display="condition" '
                                            'text:condition="ooow:1==1"/>'), "", WITH_TAIL),
    (LINK.format("Hid"), "", style("Hid", "text"), WITH_TAIL),
    ('<text:p text:style-name="P1">hidden1</text:p>', style("P1", "paragraph"), "", BOTH_LINES),
    ('<text:p text:style-name="P1">hidden1</text:p>',
     style("P1", "paragraph", "", parent="HidP"), style("HidP", "paragraph"), BOTH_LINES),
    ('<text:h text:outline-level="1" text:style-name="P1">hidden1</text:h>',
     style("P1", "paragraph"), "", BOTH_LINES),
    ('<table:table table:name="T"><table:table-column/><table:table-row><table:table-cell>'
     '<text:p text:style-name="P1">hidden1</text:p></table:table-cell></table:table-row>'
     "</table:table>", style("P1", "paragraph"), "", BOTH_LINES),
    ('<table:table table:name="T"><table:table-column/><table:table-row><table:table-cell '
     'table:style-name="C1"><text:p>hidden1</text:p></table:table-cell></table:table-row>'
     "</table:table>", style("C1", "table-cell"), "", BOTH_LINES),
])
def test_odt_text_hidden_from_its_reader_is_left_out_and_its_tail_kept(
        body: str, automatic: str, named: str, expected: str) -> None:
    parsed = extract(odt(body, automatic=automatic, named=named))

    assert parsed.text == expected
    assert hidden_notes(parsed) == (hidden_note(1),)


@pytest.mark.parametrize(("body", "automatic"), [
    ('<text:section text:name="S" text:condition="ooow:1==1"><text:p>shown1</text:p>'
     "</text:section>", ""),
    ('<text:section text:name="S" text:display="true"><text:p>shown1</text:p></text:section>',
     ""),
    ("<text:p><text:hidden-paragraph/>shown1</text:p>", ""),
    (SPAN.replace("hidden1", "shown1").format("T1"),
     style("T1", "text", '<style:text-properties text:display="true"/>')),
    (SPAN.replace("hidden1", "shown1").format("T1"),
     style("T1", "text", '<style:text-properties text:display="condition" '
                         'text:condition="none"/>')),
    (SPAN.replace("hidden1", "shown1").format("Missing"), ""),
])
def test_odt_text_its_reader_sees_is_kept(body: str, automatic: str) -> None:
    parsed = extract(odt(body, automatic=automatic))

    assert "shown1" in parsed.text
    assert hidden_notes(parsed) == ()


def test_odt_span_shown_again_inside_a_hidden_paragraph_is_kept() -> None:
    parsed = extract(odt('<text:p text:style-name="P1">hidden1 <text:span text:style-name="T1">'
                         "shown1</text:span> hidden2</text:p>",
                         automatic=style("P1", "paragraph") + style(
                             "T1", "text", '<style:text-properties text:display="true"/>')))

    assert parsed.text == "Opening line.\n\nshown1\n\nClosing line."
    assert hidden_notes(parsed) == (hidden_note(1),)


def test_odt_hidden_span_whose_text_is_all_shown_again_takes_nothing_out() -> None:
    payload = odt('<text:p>Before <text:span text:style-name="T1"><text:span '
                  'text:style-name="T2">shown1</text:span></text:span> after.</text:p>',
                  automatic=style("T1", "text") + style(
                      "T2", "text", '<style:text-properties text:display="true"/>'))

    assert pruned(payload).payload is payload
    assert "Before shown1 after." in extract(payload).text


def test_odt_hidden_parts_inside_hidden_parts_are_counted_once() -> None:
    parsed = extract(odt('<text:section text:name="S" text:display="none"><text:p '
                         'text:style-name="P1">hidden1</text:p></text:section>'
                         '<text:p text:style-name="P1">hidden2 <text:span text:style-name="T1">'
                         "hidden3</text:span></text:p>",
                         automatic=style("P1", "paragraph") + style("T1", "text")))

    assert parsed.text == BOTH_LINES
    assert hidden_notes(parsed) == (hidden_note(2),)


def test_odt_hidden_default_paragraph_style_hides_every_paragraph() -> None:
    """LibreOffice ignores a hiding default style; the standard applies it, and capsa hides."""
    parsed = extract(odt("<text:p>hidden1</text:p>", named='<style:default-style '
                         f'style:family="paragraph">{HIDES}</style:default-style>'))

    assert parsed.text == ""
    assert hidden_notes(parsed) == (hidden_note(3),)


def test_odt_hidden_text_and_conditional_text_fields_never_reach_the_text() -> None:
    """pandoc drops both fields' text whatever their condition, so capsa leaves them be."""
    payload = odt('<text:p>Before <text:hidden-text text:condition="ooow:1==1" '
                  'text:string-value="hidden1" text:is-hidden="true">hidden1</text:hidden-text>'
                  ' <text:conditional-text text:condition="ooow:1==1" text:string-value-if-true='
                  '"x" text:string-value-if-false="hidden2" text:current-value="true">hidden2'
                  "</text:conditional-text> after.</text:p>")

    parsed = extract(payload)

    assert "hidden" not in parsed.text
    assert pruned(payload).payload is payload


def test_odt_with_nothing_hidden_reaches_pandoc_as_the_same_bytes() -> None:
    payload = odt('<text:p>Middle <text:span text:style-name="T1">line</text:span>.</text:p>'
                  '<text:section text:name="Index" text:display="none"><text:p/></text:section>',
                  automatic=style("T1", "text", '<style:text-properties fo:font-weight="bold"/>'))

    assert pruned(payload).payload is payload
    assert extract(payload).text == "Opening line.\n\nMiddle line.\n\nClosing line."


def test_odt_rewritten_document_keeps_mimetype_first_and_stored() -> None:
    payload = pruned(odt('<text:section text:name="S" text:display="none"><text:p>hidden1'
                         "</text:p></text:section>")).payload

    with zipfile.ZipFile(io.BytesIO(payload)) as rewritten:
        first = rewritten.infolist()[0]
        assert (first.filename, first.compress_type) == ("mimetype", zipfile.ZIP_STORED)
        assert b"hidden1" not in rewritten.read("content.xml")


# ------------------------------------------------------------------------------ hostile


def test_odt_content_not_well_formed_is_refused_as_corrupt() -> None:
    payload = odt("<text:p>unclosed")

    with pytest.raises(IngestionRejected) as refused:
        extract(payload)

    assert refused.value.reason == "corrupt"
    assert "'content.xml' is not well-formed XML" in refused.value.detail


def test_odt_style_whose_parents_loop_is_read_without_hanging() -> None:
    parsed = extract(odt(SPAN.format("A"), named=style("A", "text", "", parent="B")
                         + style("B", "text", "", parent="A")))

    assert "hidden1" in parsed.text
    assert hidden_notes(parsed) == ()


def test_odt_rewrite_longer_than_the_uncompressed_limit_is_refused() -> None:
    payload = odt('<text:section text:name="S" text:display="none"><text:p>hidden1</text:p>'
                  "</text:section><text:p>" + ">" * 10_000 + "</text:p>")
    declared = sum(i.file_size for i in zipfile.ZipFile(io.BytesIO(payload)).infolist())

    with pytest.raises(IngestionRejected) as refused:
        pruned(payload, max_bytes=declared + 100)  # "&gt;" is four bytes for one

    assert refused.value.reason == "archive_too_large"
