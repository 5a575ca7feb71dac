"""A document's structure as plain, bounded data: elements, pages and mail headers.

A parser knows more than the text: which lines are titles, which are list
items, which block is a table and on which page each sits. capsa keeps that as
*spans* of the extracted text, never as a second copy of it: an `Element` is a
category and ``[start, end)`` offsets into `Extracted.text`, so the text stays
the one source and structure can never say something the text does not.

Structure crosses the sandbox boundary as compact lists in the reply's meta
(`to_wire`), and the application reads it back with `from_wire`, which checks
every field's type, range and length and keeps the elements only when all of
them hold; otherwise the text stands alone, cut into paragraphs, with a note.

Examples:
    >>> text, elements = assemble([Piece("Title", "Report"), Piece("NarrativeText", "Body.")])
    >>> text, [(e.category, text[e.start:e.end]) for e in elements]
    ('Report\\n\\nBody.', [('Title', 'Report'), ('NarrativeText', 'Body.')])
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, NonNegativeInt, PositiveInt

from capsa.guard.normalize import normalize

__all__ = [
    "CATEGORIES",
    "Element",
    "MailHeaders",
    "Page",
    "Piece",
    "assemble",
    "cap_elements",
    "from_wire",
    "mail_from_wire",
    "mail_to_wire",
    "page_pieces",
    "pages_of",
    "paragraphs",
    "settle",
    "table_cells",
    "to_wire",
]

_FROZEN = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)
SEPARATOR = "\n\n"
"""What stands between two elements in the text."""
CATEGORIES: frozenset[str] = frozenset({
    "Title", "NarrativeText", "ListItem", "Table", "Header", "Footer", "FigureCaption",
    "Image", "Address", "EmailAddress", "Formula", "CodeSnippet", "PageNumber",
    "PageBreak", "UncategorizedText", "Text",
})
"""unstructured's element categories; a parser's other names arrive as ``UncategorizedText``."""
_LANGUAGE = re.compile(r"[a-z]{2,3}(?:_[A-Za-z]{2,4})?")
_MAX_LANGUAGES = 8
_MAX_PAGE = 10_000_000
_MAX_ADDRESSES = 200
_MAX_ADDRESS_CHARS = 320
_MAX_SUBJECT_CHARS = 1000
_BLANK_LINES = re.compile(r"\n{2,}")


class Element(BaseModel):
    """One block of a document: its category and where its text sits in `Extracted.text`.

    Examples:
        >>> Element(category="Title", start=0, end=6, page=1)
        Element(category='Title', start=0, end=6, page=1, parent=None, languages=())
    """

    model_config = _FROZEN
    category: str
    """unstructured's name for it: ``Title``, ``NarrativeText``, ``ListItem``, ``Table``, ..."""
    start: NonNegativeInt
    """Offset of its first character in the document's text."""
    end: NonNegativeInt
    """Offset just past its last character (``text[start:end]`` is its text)."""
    page: PositiveInt | None = None
    """The page (PDF), slide (PPTX), sheet (XLSX) or frame (TIFF) it is on, from 1;
    None where the format has no pages."""
    parent: NonNegativeInt | None = None
    """Index, in the same document's elements, of the heading it sits under; None at top level."""
    languages: tuple[str, ...] = ()
    """ISO 639-3 codes the parser detected (``("eng",)``); empty when it did not say."""


class Page(BaseModel):
    """Where one page's text sits in `Extracted.text`; pages without text have none."""

    model_config = _FROZEN
    number: PositiveInt
    """The page number, from 1."""
    start: NonNegativeInt
    """Offset of the page's first character."""
    end: NonNegativeInt
    """Offset just past the page's last character."""


class MailHeaders(BaseModel):
    """The headers of an e-mail, as unstructured reports them (cleaned and bounded)."""

    model_config = _FROZEN
    sent_from: tuple[str, ...] = ()
    """The ``From`` addresses."""
    sent_to: tuple[str, ...] = ()
    """The ``To`` addresses."""
    subject: str | None = None
    """The ``Subject``."""
    date: str | None = Field(default=None, max_length=64)
    """The ``Date``, as the parser gave it (ISO 8601 where it could)."""


@dataclass(frozen=True, slots=True)
class Piece:
    """One element as a parser found it, before the guard places it in the text."""

    category: str
    """unstructured's category name."""
    text: str
    """Its text, raw (`assemble` normalises it)."""
    page: int | None = None
    """Its page number from 1, when the format has pages."""
    key: str | None = None
    """The parser's own id for it, so children can name it as `parent_key`."""
    parent_key: str | None = None
    """The parser's id of the heading it sits under."""
    languages: tuple[str, ...] = ()
    """Detected languages (ISO 639-3)."""


def assemble(pieces: Iterable[Piece]) -> tuple[str, tuple[Element, ...]]:
    """The text of `pieces` joined by blank lines, and one element per non-empty piece.

    Each piece is normalised on its own (`capsa.guard.normalize.normalize`), so
    the joined text is already normal: the guard's own normalisation after the
    parser leaves it unchanged and every offset stays true. A piece that is
    empty once normalised becomes nothing; a parent the parser named but
    dropped becomes None.
    """
    parts: list[str] = []
    elements: list[Element] = []
    index_of: dict[str, int] = {}
    offset = 0
    for piece in pieces:
        text = normalize(piece.text)
        if not text.strip():
            continue
        if parts:
            offset += len(SEPARATOR)
        parent = index_of.get(piece.parent_key) if piece.parent_key is not None else None
        elements.append(Element(
            category=piece.category if piece.category in CATEGORIES else "UncategorizedText",
            start=offset, end=offset + len(text),
            page=piece.page if isinstance(piece.page, int) and 0 < piece.page <= _MAX_PAGE
            else None,
            parent=parent, languages=_languages(piece.languages)))
        if piece.key is not None:
            index_of.setdefault(piece.key, len(elements) - 1)
        parts.append(text)
        offset += len(text)
    return SEPARATOR.join(parts), tuple(elements)


def page_pieces(pages: Sequence[str], category: str = "NarrativeText") -> list[Piece]:
    """One piece per paragraph of each page's text, numbered by page from 1.

    For parsers that know pages but nothing finer: pypdf's text layer, OCR.

    Examples:
        >>> [(p.page, p.text) for p in page_pieces(["a\\n\\nb", "", "c"])]
        [(1, 'a'), (1, 'b'), (3, 'c')]
    """
    return [Piece(category, paragraph, page=number)
            for number, text in enumerate(pages, start=1)
            for paragraph in _BLANK_LINES.split(text) if paragraph.strip()]


def paragraphs(text: str, *, start: int = 0, category: str = "NarrativeText",
               page: int | None = None) -> tuple[Element, ...]:
    """One element per paragraph (runs of text between blank lines) of ``text[start:]``.

    What a document gets when its parser reported no structure (plain text,
    a custom extractor), or when the structure it sent could not be trusted.

    Examples:
        >>> [(e.start, e.end) for e in paragraphs("a\\nb\\n\\nc")]
        [(0, 3), (5, 6)]
    """
    if category not in CATEGORIES or (page is not None and not 0 < page <= _MAX_PAGE):
        raise ValueError(f"paragraphs needs one of CATEGORIES and a page from 1, "
                         f"not {category!r} and {page!r}")
    elements: list[Element] = []
    position = start
    for match in [*_BLANK_LINES.finditer(text, start), None]:
        end = match.start() if match is not None else len(text)
        if text[position:end].strip():
            elements.append(Element(category=category, start=position, end=end, page=page))
        if match is not None:
            position = match.end()
    return tuple(elements)


def cap_elements(elements: Sequence[Element], limit: int, text_length: int
                 ) -> tuple[tuple[Element, ...], str | None]:
    """At most `limit` elements; past it, everything from the last kept one on is one element.

    The text is never cut: only its division into elements stops. Returns
    the elements and the note that says so (None when nothing was merged).
    """
    if len(elements) <= limit:
        return tuple(elements), None
    kept = list(elements[:limit - 1])
    last = elements[limit - 1]
    kept.append(Element(category="UncategorizedText", start=last.start, end=text_length,
                        page=last.page, languages=last.languages))
    note = (f"the parser found {len(elements)} elements, over the limit of {limit} "
            f"(max_elements); the text from element {limit} on is one element")
    return tuple(kept), note


def settle(elements: Sequence[Element], raw_text: str, text: str, max_elements: int
           ) -> tuple[tuple[Element, ...], str | None]:
    """A parser's elements as they stand against the normalised `text`, capped.

    `assemble` hands over text that normalising leaves unchanged; a parser
    that built its text otherwise, so that normalising moved characters,
    loses its structure (the offsets would point at the wrong words), and the
    note says so. Returns the elements and a note, or None.
    """
    if not elements:
        return (), None
    if raw_text != text:
        return (), ("the parser's structure did not match its normalised text; "
                    "paragraphs stand in for it")
    return cap_elements(elements, max_elements, len(text))


def pages_of(elements: Sequence[Element]) -> tuple[Page, ...]:
    """Each page's span: from its first element's start to its last element's end.

    Examples:
        >>> pages_of([Element(category="Text", start=0, end=3, page=1),
        ...           Element(category="Text", start=5, end=9, page=2)])[1].start
        5
    """
    spans: dict[int, list[int]] = {}
    for element in elements:
        if element.page is None:
            continue
        span = spans.setdefault(element.page, [element.start, element.end])
        span[0], span[1] = min(span[0], element.start), max(span[1], element.end)
    return tuple(Page(number=number, start=span[0], end=span[1])
                 for number, span in sorted(spans.items()))


def table_cells(text: str) -> tuple[tuple[str, ...], ...]:
    """A table element's rows and cells, read back from its text (rows by line, cells by tab).

    The extractor writes each table row as one line and its cells separated
    by tabs, with white space inside a cell folded to single spaces, so the
    text alone says where every cell is.

    Examples:
        >>> table_cells("a\\tb\\nc\\td")
        (('a', 'b'), ('c', 'd'))
    """
    return tuple(tuple(row.split("\t")) for row in text.split("\n"))


# ---------------------------------------------------------------------- the wire


def to_wire(elements: Sequence[Element]) -> list[list[Any]]:
    """Elements as compact lists for the reply's meta (three levels deep inside it)."""
    return [[e.category, e.start, e.end, e.page, e.parent, list(e.languages)] for e in elements]


def from_wire(raw: object, text: str, *, max_elements: int
              ) -> tuple[tuple[Element, ...], str | None]:
    """Elements as a worker sent them, each field checked, or none and the reason why.

    The worker is untrusted: a list that is not a list of six-field lists, a
    category outside `CATEGORIES`, offsets outside the text, out of order or
    overlapping, a parent that is not an earlier element, a page past ten
    million or more than `max_elements` elements, and the whole structure is
    set aside (the text is kept, and the caller cuts it into paragraphs).
    Returns the elements and None, or ``()`` and the note to record.
    """
    if raw is None:
        return (), None
    if not isinstance(raw, list):
        return (), "the worker's structure was not a list; paragraphs stand in for it"
    if len(raw) > max_elements:
        return (), (f"the worker sent {len(raw)} elements, over the limit of {max_elements} "
                    "(max_elements); paragraphs stand in for them")
    elements: list[Element] = []
    previous_end = 0
    for index, item in enumerate(raw):
        element = _element_from_wire(item, index, previous_end, len(text))
        if element is None:
            return (), (f"the worker's element {index} was malformed; paragraphs stand in "
                        "for the structure")
        elements.append(element)
        previous_end = element.end
    return tuple(elements), None


def _element_from_wire(item: object, index: int, previous_end: int,
                       text_length: int) -> Element | None:
    if not isinstance(item, list) or len(item) != 6:
        return None
    category, start, end, page, parent, languages = item
    if not isinstance(category, str) or category not in CATEGORIES:
        return None
    if not (_is_int(start) and _is_int(end) and previous_end <= start < end <= text_length):
        return None
    if page is not None and not (_is_int(page) and 0 < page <= _MAX_PAGE):
        return None
    if parent is not None and not (_is_int(parent) and 0 <= parent < index):
        return None
    if not isinstance(languages, list) or len(languages) > _MAX_LANGUAGES or not all(
            isinstance(code, str) and _LANGUAGE.fullmatch(code) for code in languages):
        return None
    return Element(category=category, start=start, end=end, page=page, parent=parent,
                   languages=tuple(languages))


def mail_to_wire(headers: MailHeaders) -> dict[str, Any]:
    """Mail headers for the reply's meta (two levels deep inside it)."""
    return headers.model_dump(exclude_none=True, mode="json")


def mail_from_wire(raw: object) -> MailHeaders | None:
    """Mail headers as a worker sent them: strings only, cleaned, counted and capped.

    Anything of the wrong type is left out rather than refused: headers are
    metadata, and the text already holds what the message says.
    """
    if not isinstance(raw, dict):
        return None
    return MailHeaders(
        sent_from=_addresses(raw.get("sent_from")), sent_to=_addresses(raw.get("sent_to")),
        subject=_header(raw.get("subject"), _MAX_SUBJECT_CHARS),
        date=_header(raw.get("date"), 64))


def _addresses(raw: object) -> tuple[str, ...]:
    if not isinstance(raw, list):
        return ()
    cleaned = (_header(item, _MAX_ADDRESS_CHARS) for item in raw[:_MAX_ADDRESSES])
    return tuple(item for item in cleaned if item)


def _header(raw: object, limit: int) -> str | None:
    if not isinstance(raw, str):
        return None
    cleaned = " ".join(normalize(raw[:limit * 4]).split())[:limit]
    return cleaned or None


def _languages(codes: Iterable[object]) -> tuple[str, ...]:
    return tuple(code for code in list(codes)[:_MAX_LANGUAGES]
                 if isinstance(code, str) and _LANGUAGE.fullmatch(code))


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
