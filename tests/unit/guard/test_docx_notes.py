"""A DOCX's footnotes and endnotes reach the text after the body, numbered where cited.

unstructured reads no notes part, so every footnote was lost without a word
(`capsa.guard.extractors._docx_notes`). Documents are built part by part, or
written by LibreOffice, and read by the real `unstructured` partitioner.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from tests.unit.guard.test_office_hidden import (
    MARKER,
    RUNS_NOTE,
    WML,
    W,
    docx,
    extract,
    libreoffice_convert,
    needs_soffice,
    paragraph,
    run,
)

pytest.importorskip("unstructured")

NOTES = ("read {} footnote(s) and {} endnote(s) after the body, each numbered in brackets "
         "where the text cites it ([1], [i])")


def cite(kind: str, ident: int) -> str:
    return (f'<w:r><w:rPr><w:rStyle w:val="{kind.capitalize()}Reference"/></w:rPr>'
            f'<w:{kind}Reference w:id="{ident}"/></w:r>')


def notes_part(kind: str, notes: dict[int, str]) -> dict[str, tuple[str, str, str]]:
    """A footnotes or endnotes part with Word's two separators and `notes` by id."""
    separators = (f'<w:{kind} w:type="separator" w:id="-1">{paragraph(run("----"))}</w:{kind}>'
                  f'<w:{kind} w:type="continuationSeparator" w:id="0">{paragraph(run("--"))}'
                  f"</w:{kind}>")
    body = "".join(f'<w:{kind} w:id="{ident}">{text}</w:{kind}>' for ident, text in notes.items())
    return {f"{kind}s": (f"{kind}s.xml", f"{WML}{kind}s+xml",
                         f'<w:{kind}s xmlns:w="{W}">{separators}{body}</w:{kind}s>')}


def test_footnotes_follow_the_body_numbered_where_they_are_cited() -> None:
    body = (paragraph(run("The cap is EUR 230"), cite("footnote", 2), run(" in London."))
            + paragraph(run("Trains are standard class"), cite("footnote", 1), run(".")))
    parts = notes_part("footnote", {1: paragraph(run("shown2 rail policy.")),
                                    2: paragraph(run("shown1 since 2019."))})

    parsed = extract("docx", docx(body, parts=parts))

    assert parsed.text.startswith("The cap is EUR 230[1] in London.")
    assert "Trains are standard class[2]." in parsed.text
    assert parsed.text.endswith("[1] shown1 since 2019.\n\n[2] shown2 rail policy.")
    assert "----" not in parsed.text  # the separators are not notes
    assert parsed.notes == (NOTES.format(2, 0),)


def test_endnotes_are_numbered_in_roman_and_a_note_cited_twice_is_written_once() -> None:
    body = paragraph(run("Alpha"), cite("endnote", 5), run(" beta"), cite("endnote", 5),
                     run(" gamma"), cite("endnote", 6))
    parts = notes_part("endnote", {5: paragraph(run("shown1")), 6: paragraph(run("shown2")),
                                   7: paragraph(run("uncited"))})

    parsed = extract("docx", docx(body, parts=parts))

    assert parsed.text.startswith("Alpha[i] beta[i] gamma[ii]")
    assert MARKER.findall(parsed.text) == ["shown1", "shown2"]
    assert "uncited" not in parsed.text  # a note nothing cites is not shown by Word either
    assert parsed.notes == (NOTES.format(0, 2),)


def test_a_reference_inside_a_tracked_deletion_cites_nothing() -> None:
    body = paragraph(run("Kept"), '<w:del w:id="9" w:author="a">' + cite("footnote", 1)
                     + "</w:del>")
    parts = notes_part("footnote", {1: paragraph(run("deleted1"))})

    parsed = extract("docx", docx(body, parts=parts))

    assert "deleted1" not in parsed.text and "[1]" not in parsed.text


def test_hidden_text_in_a_footnote_and_a_hidden_reference_stay_out() -> None:
    body = paragraph(run("Kept"), cite("footnote", 1),
                     '<w:r><w:rPr><w:vanish/></w:rPr><w:footnoteReference w:id="2"/></w:r>')
    parts = notes_part("footnote", {
        1: paragraph(run("shown1 "), run("hidden2", "<w:vanish/>")),
        2: paragraph(run("hidden3"))})

    parsed = extract("docx", docx(body, parts=parts))

    assert MARKER.findall(parsed.text) == ["shown1"]
    assert RUNS_NOTE.format(1) in parsed.notes and NOTES.format(1, 0) in parsed.notes


def test_a_footnote_holding_a_table_and_two_paragraphs_is_read_whole() -> None:
    table = ('<w:tbl><w:tblPr/><w:tblGrid><w:gridCol w:w="2000"/></w:tblGrid><w:tr><w:tc>'
             f"<w:tcPr/>{paragraph(run('shown3'))}</w:tc></w:tr></w:tbl>")
    parts = notes_part("footnote", {1: paragraph(run("shown1")) + paragraph(run("shown2"))
                                    + table})

    parsed = extract("docx", docx(paragraph(run("Text"), cite("footnote", 1)), parts=parts))

    assert MARKER.findall(parsed.text) == ["shown1", "shown2", "shown3"]


def test_a_document_without_notes_is_unchanged() -> None:
    parsed = extract("docx", docx(paragraph(run("Berth four opens at dawn."))))

    assert parsed.text == "Berth four opens at dawn." and parsed.notes == ()


ODF = "urn:oasis:names:tc:opendocument:xmlns"
FOOTNOTED_FODT = (
    f'<?xml version="1.0" encoding="UTF-8"?><office:document xmlns:office="{ODF}:office:1.0" '
    f'xmlns:text="{ODF}:text:1.0" office:version="1.3" '
    'office:mimetype="application/vnd.oasis.opendocument.text"><office:body><office:text>'
    '<text:p>The cap is EUR 230<text:note text:id="n1" text:note-class="footnote">'
    "<text:note-citation>1</text:note-citation><text:note-body><text:p>Set by the board in "
    "2019.</text:p></text:note-body></text:note> in London.</text:p>"
    '<text:p>Trains are standard class<text:note text:id="n2" text:note-class="endnote">'
    "<text:note-citation>i</text:note-citation><text:note-body><text:p>Except sleeper "
    "trains.</text:p></text:note-body></text:note>.</text:p>"
    "</office:text></office:body></office:document>")


@needs_soffice
def test_notes_of_a_docx_libreoffice_wrote_are_read(tmp_path: Path) -> None:
    source = tmp_path / "policy.fodt"
    source.write_text(FOOTNOTED_FODT, encoding="utf-8")
    converted = libreoffice_convert(source, "docx")

    parsed = extract("docx", converted.read_bytes())

    assert "The cap is EUR 230[1] in London." in parsed.text
    assert "Trains are standard class[i]." in parsed.text
    assert re.search(r"^\[1\]\s+Set by the board in 2019\.$", parsed.text, re.MULTILINE)
    assert re.search(r"^\[i\]\s+Except sleeper trains\.$", parsed.text, re.MULTILINE)
    assert parsed.notes == (NOTES.format(1, 1),)
