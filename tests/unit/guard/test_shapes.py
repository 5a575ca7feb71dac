"""One extracted file as one document, one per page or one per element."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from capsa.guard import (
    Attachment,
    Element,
    Extracted,
    MailHeaders,
    document_parts,
    extract_attachment,
)
from capsa.guard.elements import Piece, assemble
from capsa.guard.extractors import PlainTextExtractor
from capsa.guard.shapes import SHAPES, Shape, check_shape


def make_extracted(pieces: list[Piece], **fields: object) -> Extracted:
    text, elements = assemble(pieces)
    payload = text.encode()
    return Extracted(label="r.pdf", kind="pdf", media_type=None, text=text,
                     byte_size=len(payload), sha256=hashlib.sha256(payload).hexdigest(),
                     elements=elements, **fields)  # type: ignore[arg-type]


REPORT = [Piece("Title", "Summary", page=1, key="t", languages=("eng",)),
          Piece("NarrativeText", "Traffic grew.", page=1, parent_key="t"),
          Piece("Table", "Berth\tShips\n<b>North</b>\t142", page=2, parent_key="t"),
          Piece("NarrativeText", "Outlook steady.", page=3)]


def test_file_shape_is_one_document_with_the_whole_text() -> None:
    item = make_extracted(REPORT)

    [part] = document_parts(item, "file")

    assert (part.id, part.text) == (item.sha256, item.text)
    assert part.metadata == {"filename": "r.pdf", "filetype": "application/pdf",
                             "languages": ["eng"]}


def test_page_shape_gives_one_document_per_page_with_its_number() -> None:
    parts = document_parts(make_extracted(REPORT), "page")

    assert [(p.metadata["page_number"], p.text) for p in parts] == [
        (1, "Summary\n\nTraffic grew."), (2, "Berth\tShips\n<b>North</b>\t142"),
        (3, "Outlook steady.")]


def test_page_shape_keeps_text_without_a_page_as_a_part_of_its_own() -> None:
    item = make_extracted([Piece("NarrativeText", "on page one", page=1),
                           Piece("ListItem", "Attached: a.pdf")])

    parts = document_parts(item, "page")

    assert [p.text for p in parts] == ["on page one", "Attached: a.pdf"]
    assert "page_number" not in parts[1].metadata


def test_element_shape_names_category_heading_and_parent_as_unstructured_does() -> None:
    item = make_extracted(REPORT)

    parts = document_parts(item, "element")

    assert [p.metadata["category"] for p in parts] == [
        "Title", "NarrativeText", "Table", "NarrativeText"]
    assert parts[1].metadata["parent_id"] == parts[0].metadata["element_id"] == parts[0].id
    assert parts[1].metadata["capsa_heading"] == "Summary"
    assert "parent_id" not in parts[3].metadata


def test_element_shape_gives_a_table_escaped_html_rebuilt_from_its_cells() -> None:
    table = document_parts(make_extracted(REPORT), "element")[2]

    assert table.metadata["text_as_html"] == (
        "<table><tr><td>Berth</td><td>Ships</td></tr>"
        "<tr><td>&lt;b&gt;North&lt;/b&gt;</td><td>142</td></tr></table>")


def test_every_shape_carries_the_mail_headers() -> None:
    item = make_extracted([Piece("NarrativeText", "Hello")],
                          mail=MailHeaders(sent_from=("a@x.org",), sent_to=("b@x.org",),
                                           subject="Q3"))

    for shape in SHAPES:
        metadata = document_parts(item, shape)[0].metadata
        assert (metadata["sent_from"], metadata["sent_to"], metadata["subject"]) == (
            ["a@x.org"], ["b@x.org"], "Q3")


def test_element_ids_are_the_same_for_the_same_bytes_and_unique_within_a_file() -> None:
    first = [p.id for p in document_parts(make_extracted(REPORT), "element")]
    again = [p.id for p in document_parts(make_extracted(REPORT), "element")]

    assert first == again
    assert len(set(first)) == len(first)


def test_parts_are_new_dicts_so_changing_one_never_changes_another() -> None:
    item = make_extracted(REPORT)
    parts = document_parts(item, "page")

    parts[0].metadata["filename"] = "changed"

    assert parts[1].metadata["filename"] == "r.pdf"
    assert document_parts(item, "page")[0].metadata["filename"] == "r.pdf"


def test_check_shape_refuses_a_shape_it_does_not_know() -> None:
    with pytest.raises(ValueError, match="'file', 'page', 'element'"):
        check_shape("paged")


def test_plain_text_gets_one_element_per_paragraph() -> None:
    item = extract_attachment(Attachment(label="n.md", payload=b"# Title\n\nOne.\n\nTwo."),
                              PlainTextExtractor())

    assert [p.text for p in document_parts(item, "element")] == ["# Title", "One.", "Two."]


texts = st.lists(st.text(alphabet="ab \n\t", min_size=1, max_size=15), min_size=1, max_size=8)


@given(texts, st.lists(st.none() | st.integers(1, 3), min_size=8, max_size=8),
       st.sampled_from(SHAPES))
def test_the_parts_of_every_shape_hold_every_word_of_the_text_in_order(
        chunks: list[str], pages: list[int | None], shape: Shape) -> None:
    item = make_extracted([Piece("NarrativeText", chunk, page=page)
                           for chunk, page in zip(chunks, pages, strict=False)])

    parts = document_parts(item, shape)

    assert " ".join(p.text for p in parts).split() == item.text.split()


def test_an_element_with_a_negative_offset_is_refused_when_the_record_is_built() -> None:
    with pytest.raises(ValueError, match="greater than or equal to 0"):
        Element(category="Title", start=-1, end=2)
