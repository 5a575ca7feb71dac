"""Structure as spans of the text: assembled, capped, and read back from an untrusted wire."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from capsa.guard.elements import (
    Element,
    MailHeaders,
    Piece,
    assemble,
    cap_elements,
    from_wire,
    mail_from_wire,
    page_pieces,
    pages_of,
    paragraphs,
    settle,
    table_cells,
    to_wire,
)
from capsa.guard.normalize import normalize

_CATEGORIES = ["Title", "NarrativeText", "ListItem", "Table", "Made-Up"]
pieces = st.lists(st.builds(
    Piece, category=st.sampled_from(_CATEGORIES),
    text=st.text(st.characters(codec="utf-8"), max_size=40) | st.sampled_from(
        ["", "  ", "\n\n", "a\n\n\n\n\nb", "x  \n", "\u200bword\u200b", "e\u0301", "\r\nline"]),
    page=st.none() | st.integers(min_value=-2, max_value=5)), max_size=12)


@given(pieces)
def test_assemble_gives_text_that_normalising_leaves_unchanged(parts: list[Piece]) -> None:
    text, _ = assemble(parts)

    assert normalize(text) == text


@given(pieces)
def test_assemble_places_each_nonempty_piece_at_its_own_span_in_order(
        parts: list[Piece]) -> None:
    text, elements = assemble(parts)

    kept = [normalize(p.text) for p in parts if normalize(p.text).strip()]
    assert [text[e.start:e.end] for e in elements] == kept
    assert all(a.end < b.start for a, b in itertools.pairwise(elements))


@given(pieces)
def test_assembled_elements_survive_the_wire_unchanged(parts: list[Piece]) -> None:
    text, elements = assemble(parts)

    assert from_wire(to_wire(elements), text, max_elements=100) == (elements, None)


def test_assemble_names_an_unknown_category_uncategorized() -> None:
    _, elements = assemble([Piece("Made-Up", "x")])

    assert elements[0].category == "UncategorizedText"


def test_assemble_points_a_child_at_its_heading_by_index() -> None:
    _, elements = assemble([Piece("Title", "Intro", key="h"), Piece("Title", "", key="gone"),
                            Piece("NarrativeText", "Body", parent_key="h"),
                            Piece("NarrativeText", "Orphan", parent_key="gone")])

    assert [e.parent for e in elements] == [None, 0, None]


def test_page_pieces_number_pages_from_one_and_skip_blank_pages() -> None:
    found = page_pieces(["first page", "   ", "third\n\nstill third"])

    assert [(p.page, p.text) for p in found] == [(1, "first page"), (3, "third"),
                                                 (3, "still third")]


@given(st.text(alphabet="ab \n", max_size=60))
def test_paragraphs_cover_every_word_of_the_text(text: str) -> None:
    covered = " ".join(text[e.start:e.end] for e in paragraphs(text))

    assert covered.split() == text.split()


def test_cap_elements_keeps_the_text_whole_in_one_last_element() -> None:
    elements = paragraphs("a\n\nb\n\nc\n\nd")

    capped, note = cap_elements(elements, 2, 10)

    assert [(e.start, e.end) for e in capped] == [(0, 1), (3, 10)]
    assert note is not None and "over the limit of 2 (max_elements)" in note


def test_settle_sets_structure_aside_when_normalising_moved_the_text() -> None:
    element = Element(category="Title", start=0, end=5)

    assert settle([element], "title  \n", "title", 10)[0] == ()


def test_pages_of_spans_each_page_from_its_first_to_its_last_element() -> None:
    elements = [Element(category="Text", start=0, end=2, page=1),
                Element(category="Text", start=4, end=6, page=1),
                Element(category="Text", start=8, end=9, page=2)]

    assert [(p.number, p.start, p.end) for p in pages_of(elements)] == [(1, 0, 6), (2, 8, 9)]


def test_table_cells_reads_rows_by_line_and_cells_by_tab() -> None:
    assert table_cells("A\tMerged B1-B3\tC\nx\ty") == (("A", "Merged B1-B3", "C"), ("x", "y"))


GOOD: list[Any] = ["Title", 0, 4, 1, None, ["eng"]]


@pytest.mark.parametrize(("raw", "why"), [
    ("elements", "not a list"),
    ([["Title", 0, 4, 1, None]], "malformed"),
    ([["<script>", 0, 4, None, None, []]], "malformed"),
    ([["Title", 0, 40, None, None, []]], "malformed"),
    ([["Title", -1, 4, None, None, []]], "malformed"),
    ([["Title", True, 4, None, None, []]], "malformed"),
    ([["Title", 2, 2, None, None, []]], "malformed"),
    ([GOOD, ["Title", 2, 6, None, None, []]], "malformed"),
    ([GOOD, ["Title", 5, 6, None, 1, []]], "malformed"),
    ([GOOD, ["Title", 5, 6, 0, None, []]], "malformed"),
    ([GOOD, ["Title", 5, 6, None, None, ["<b>"]]], "malformed"),
    ([GOOD, ["Title", 5, 6, None, None, ["eng"] * 9]], "malformed"),
    ([GOOD] * 3, "over the limit of 2"),
])
def test_from_wire_sets_aside_structure_a_child_could_not_have_sent_honestly(
        raw: object, why: str) -> None:
    elements, note = from_wire(raw, "abcd\n\nef", max_elements=2)

    assert elements == ()
    assert note is not None and why in note


def test_mail_from_wire_keeps_only_strings_cleaned_and_capped() -> None:
    headers = mail_from_wire({"sent_from": ["a@example.org", 7, "\u202eevil"],
                              "sent_to": "not a list", "subject": "s" * 5000, "date": ["x"]})

    assert headers == MailHeaders(sent_from=("a@example.org", "evil"),
                                  subject="s" * 1000)


def test_paragraphs_refuses_a_category_or_page_no_element_may_have() -> None:
    with pytest.raises(ValueError, match="one of CATEGORIES"):
        paragraphs("a", category="<b>")
