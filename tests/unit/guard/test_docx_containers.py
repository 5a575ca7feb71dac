"""Word text a reader sees inside containers python-docx does not yield reaches the text.

Tracked insertions, content controls, simple fields, smart tags, custom XML
and text boxes each hold text Word shows; unstructured 0.27 dropped all of it
without a word (`capsa.guard.extractors._docx_containers`). Documents are
built part by part and read by the real `unstructured` partitioner.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.unit.guard.test_office_hidden import (
    HIDING_STYLES,
    MARKER,
    REALDOCS,
    RUNS_NOTE,
    docx,
    extract,
    libreoffice_convert,
    needs_soffice,
    paragraph,
    run,
)

from capsa.guard.extractors import OfficeExtractor

pytest.importorskip("unstructured")

MC = "http://schemas.openxmlformats.org/markup-compatibility/2006"
WPS = "http://schemas.microsoft.com/office/word/2010/wordprocessingShape"
CHANGES = ("read {} tracked change(s) as accepted, as Word shows them by default: "
           "{} insertion(s) kept, {} deletion(s) left out")


def control(content: str) -> str:
    """A content control (a form field, a template's placeholder) around `content`."""
    return (f'<w:sdt><w:sdtPr><w:alias w:val="Client"/><w:tag w:val="client"/></w:sdtPr>'
            f"<w:sdtContent>{content}</w:sdtContent></w:sdt>")


def inserted(content: str, tag: str = "ins") -> str:
    return (f'<w:{tag} w:id="7" w:author="Reviewer" w:date="2026-01-01T00:00:00Z">{content}'
            f"</w:{tag}>")


def deleted(text: str, tag: str = "del") -> str:
    return (f'<w:{tag} w:id="8" w:author="Reviewer"><w:r><w:delText xml:space="preserve">{text}'
            f"</w:delText></w:r></w:{tag}>")


def cell_table(cell: str) -> str:
    return ('<w:tbl><w:tblPr/><w:tblGrid><w:gridCol w:w="2000"/></w:tblGrid>'
            f"<w:tr><w:tc><w:tcPr/>{cell}</w:tc></w:tr></w:tbl>")


def text_box(content: str, *, vml_only: bool = False) -> str:
    """A run holding a floating text box, written twice as Word writes it (a drawing, and a
    VML fallback for older readers), or as VML alone (as Word 2007 wrote it)."""
    vml = ('<w:pict><v:shape xmlns:v="urn:schemas-microsoft-com:vml"><v:textbox>'
           f"<w:txbxContent>{content}</w:txbxContent></v:textbox></v:shape></w:pict>")
    if vml_only:
        return f"<w:r>{vml}</w:r>"
    drawing = (f'<w:drawing><wp:anchor xmlns:wp="http://schemas.openxmlformats.org/drawingml/'
               '2006/wordprocessingDrawing"><wp:docPr id="1" name="Box"/><a:graphic xmlns:a='
               '"http://schemas.openxmlformats.org/drawingml/2006/main"><a:graphicData uri='
               f'"{WPS}"><wps:wsp xmlns:wps="{WPS}"><wps:txbx><w:txbxContent>{content}'
               "</w:txbxContent></wps:txbx></wps:wsp></a:graphicData></a:graphic></wp:anchor>"
               "</w:drawing>")
    return (f'<w:r><mc:AlternateContent xmlns:mc="{MC}" xmlns:wps="{WPS}"><mc:Choice '
            f'Requires="wps">{drawing}'
            f"</mc:Choice><mc:Fallback>{vml}</mc:Fallback></mc:AlternateContent></w:r>")


# ---------------------------------------------------------------------- tracked changes


def test_a_tracked_insertion_is_read_and_the_change_named() -> None:
    parsed = extract("docx", docx(paragraph(
        run("The tenant pays "), inserted(run("no more than EUR 900 ")), run("each month."))))

    assert parsed.text == "The tenant pays no more than EUR 900 each month."
    assert parsed.notes == (CHANGES.format(1, 1, 0),)


def test_a_redline_reads_as_accepted_insertions_kept_deletions_left_out() -> None:
    parsed = extract("docx", docx(paragraph(
        run("shown1 "), deleted("hidden2 "), inserted(run("shown3 ")),
        deleted("hidden4 ", "moveFrom"), inserted(run("shown5"), "moveTo"))))

    assert MARKER.findall(parsed.text) == ["shown1", "shown3", "shown5"]
    assert parsed.notes == (CHANGES.format(4, 2, 2),)


def test_an_inserted_paragraph_mark_is_no_change_of_text() -> None:
    # w:ins inside a run's properties marks the paragraph mark inserted: no text in it
    mark = '<w:rPr><w:ins w:id="3" w:author="Reviewer"/></w:rPr>'
    parsed = extract("docx", docx(paragraph(run("shown1"), properties=mark)))

    assert parsed.text == "shown1"
    assert parsed.notes == ()


def test_a_hidden_run_inside_an_insertion_is_still_left_out() -> None:
    parsed = extract("docx", docx(paragraph(
        run("shown1 "), inserted(run("hidden2 ", "<w:vanish/>") + run("shown3")))))

    assert MARKER.findall(parsed.text) == ["shown1", "shown3"]
    assert parsed.notes == (RUNS_NOTE.format(1), CHANGES.format(1, 1, 0))


# --------------------------------------------------------------------- content controls


def test_content_controls_in_a_paragraph_a_body_a_cell_and_a_row_are_read() -> None:
    body = (paragraph(run("Client: "), control(run("shown1")))
            + control(paragraph(run("shown2 on a cover page.")))
            + cell_table(control(paragraph(run("shown3"))))
            + '<w:tbl><w:tblPr/><w:tblGrid><w:gridCol w:w="2000"/></w:tblGrid>'
            + control('<w:tr><w:tc><w:tcPr/>' + paragraph(run("shown4")) + "</w:tc></w:tr>")
            + "</w:tbl>")

    parsed = extract("docx", docx(body))

    assert MARKER.findall(parsed.text) == ["shown1", "shown2", "shown3", "shown4"]
    assert "client" not in parsed.text.replace("Client:", "")  # the control's own settings
    assert parsed.notes == ()


def test_nested_containers_open_all_the_way_down() -> None:
    body = control(paragraph(control(inserted(
        '<w:smartTag w:uri="urn:places" w:element="place"><w:smartTagPr/>'
        + run("shown1") + "</w:smartTag>"))))

    parsed = extract("docx", docx(body))

    assert MARKER.findall(parsed.text) == ["shown1"]


def test_fields_smart_tags_and_custom_xml_are_read() -> None:
    body = (paragraph(run("Page "), '<w:fldSimple w:instr=" PAGE ">' + run("shown1")
                      + "</w:fldSimple>")
            + paragraph('<w:smartTag w:uri="urn:places" w:element="City">' + run("shown2")
                        + "</w:smartTag>", run(" harbour."))
            + paragraph('<w:customXml w:element="clause"><w:customXmlPr/>' + run("shown3")
                        + "</w:customXml>")
            + '<w:customXml w:element="section">' + paragraph(run("shown4")) + "</w:customXml>"
            + paragraph('<w:dir w:val="rtl">' + run("shown5") + "</w:dir>"))

    parsed = extract("docx", docx(body))

    assert MARKER.findall(parsed.text) == ["shown1", "shown2", "shown3", "shown4", "shown5"]
    assert parsed.notes == ()


def test_containers_in_headers_are_read() -> None:
    parsed = extract("docx", docx(paragraph(run("shown1")),
                                  header=paragraph(control(run("shown2")))))

    assert set(MARKER.findall(parsed.text)) == {"shown1", "shown2"}


# --------------------------------------------------------------------------- text boxes


def test_a_text_box_is_read_once_after_its_paragraph() -> None:
    body = (paragraph(run("shown1 "), text_box(paragraph(run("shown2 in a sidebar."))),
                      run("shown3")) + paragraph(run("shown4")))

    parsed = extract("docx", docx(body))

    assert MARKER.findall(parsed.text) == ["shown1", "shown3", "shown2", "shown4"]
    assert parsed.notes == ()


def test_a_text_box_written_for_old_readers_only_is_read() -> None:
    body = paragraph(run("shown1 "), text_box(paragraph(run("shown2")), vml_only=True))

    assert MARKER.findall(extract("docx", docx(body)).text) == ["shown1", "shown2"]


def test_a_text_box_in_a_hidden_run_goes_with_its_run() -> None:
    box = text_box(paragraph(run("hidden2")))
    hidden_run = box.replace("<w:r>", "<w:r><w:rPr><w:vanish/></w:rPr>", 1)
    parsed = extract("docx", docx(paragraph(run("shown1"), hidden_run)))

    assert MARKER.findall(parsed.text) == ["shown1"]


def test_hidden_text_inside_a_text_box_is_left_out() -> None:
    box = text_box(paragraph(run("shown2 "), run("hidden3", "<w:vanish/>")))
    parsed = extract("docx", docx(paragraph(run("shown1"), box), styles=HIDING_STYLES))

    assert MARKER.findall(parsed.text) == ["shown1", "shown2"]


# ------------------------------------------------------------------- every word, any mix


WRAPS = ["plain", "inserted", "control", "field", "smart", "custom"]


def _wrapped(text: str, wrap: str) -> str:
    inner = run(text)
    return {"plain": inner, "inserted": inserted(inner), "control": control(inner),
            "field": f'<w:fldSimple w:instr=" DATE ">{inner}</w:fldSimple>',
            "smart": f'<w:smartTag w:uri="u" w:element="e">{inner}</w:smartTag>',
            "custom": f'<w:customXml w:element="e">{inner}</w:customXml>'}[wrap]


@settings(max_examples=25, deadline=None)
@given(st.lists(st.sampled_from(WRAPS), min_size=1, max_size=8))
def test_every_wrapped_word_is_read_in_order(wraps: list[str]) -> None:
    body = paragraph(*(_wrapped(f"shown{n} ", wrap) for n, wrap in enumerate(wraps)))

    parsed = extract("docx", docx(body))

    assert MARKER.findall(parsed.text) == [f"shown{n}" for n in range(len(wraps))]


# --------------------------------------------------------------- real files, and a .doc


@pytest.mark.parametrize("name", ["report.docx", "annual-review.docx",
                                  "libreoffice/report.docx"])
def test_real_documents_without_containers_read_as_before(name: str) -> None:
    parsed = extract("docx", (REALDOCS / name).read_bytes())

    assert not [note for note in parsed.notes if "tracked change" in note]


@needs_soffice
def test_a_redlined_doc_reads_as_accepted_after_libreoffice_converts_it(tmp_path: Path) -> None:
    source = tmp_path / "redline.docx"
    source.write_bytes(docx(paragraph(run("shown1 "), deleted("hidden2 "),
                                      inserted(run("shown3")))))
    converted = libreoffice_convert(source, "doc")

    parsed = OfficeExtractor().extract("doc", None, converted.read_bytes(),
                                       max_pages=5)

    assert MARKER.findall(parsed.text) == ["shown1", "shown3"]
    assert any("tracked change" in note for note in parsed.notes)


# A flat ODT with a tracked insertion and deletion and a text frame: LibreOffice writes it out
# as a DOCX as Word would read it (w:ins, w:del, a drawing's text box with a VML fallback).
ODF = "urn:oasis:names:tc:opendocument:xmlns"
CHANGE_INFO = ("<office:change-info><dc:creator>Reviewer</dc:creator>"
               "<dc:date>2026-01-01T00:00:00</dc:date></office:change-info>")
REDLINED_FODT = (
    f'<?xml version="1.0" encoding="UTF-8"?><office:document xmlns:office="{ODF}:office:1.0" '
    f'xmlns:text="{ODF}:text:1.0" xmlns:draw="{ODF}:drawing:1.0" '
    f'xmlns:svg="{ODF}:svg-compatible:1.0" xmlns:dc="http://purl.org/dc/elements/1.1/" '
    'office:version="1.3" office:mimetype="application/vnd.oasis.opendocument.text">'
    '<office:body><office:text><text:tracked-changes text:track-changes="true">'
    f'<text:changed-region text:id="ct1"><text:insertion>{CHANGE_INFO}</text:insertion>'
    f'</text:changed-region><text:changed-region text:id="ct2"><text:deletion>{CHANGE_INFO}'
    "<text:p>thirty days</text:p></text:deletion></text:changed-region></text:tracked-changes>"
    '<text:p>The tenant pays <text:change-start text:change-id="ct1"/>no more than EUR 900 '
    '<text:change-end text:change-id="ct1"/>each month, within '
    '<text:change text:change-id="ct2"/>fourteen days.</text:p>'
    '<text:p>Anchor paragraph for the box.<draw:frame draw:name="Box" '
    'text:anchor-type="paragraph" svg:width="5cm" svg:height="2cm" svg:x="1cm" svg:y="1cm">'
    "<draw:text-box><text:p>Sidebar: quay six closes at dusk.</text:p></draw:text-box>"
    "</draw:frame></text:p></office:text></office:body></office:document>")


@needs_soffice
def test_a_docx_libreoffice_wrote_reads_as_word_shows_it(tmp_path: Path) -> None:
    source = tmp_path / "lease.fodt"
    source.write_text(REDLINED_FODT, encoding="utf-8")
    converted = libreoffice_convert(source, "docx")

    parsed = extract("docx", converted.read_bytes())

    assert "The tenant pays no more than EUR 900 each month, within fourteen days." in parsed.text
    assert "thirty" not in parsed.text
    assert parsed.text.count("Sidebar: quay six closes at dusk.") == 1
    assert parsed.notes == (CHANGES.format(2, 1, 1),)
