"""One extracted file as the documents a framework wants: per file, per page, per element.

Users of LangChain's `UnstructuredLoader` get one document per element, with
its category, page and heading; users of LlamaIndex's `SimpleDirectoryReader`
get one document per PDF page. `document_parts` gives either, or one per file,
from the same `Extracted`, so `CapsaLoader`, `CapsaReader` and `extract_many`
callers choose the shape without a second parse. The metadata keys are
unstructured's (`category`, `page_number`, `element_id`, `parent_id`,
`text_as_html`, `languages`, `filename`, `filetype`, `sent_from`, `sent_to`,
`subject`) where they mean the same thing; adapters add their framework's own.

Every shape covers all of the text: each element, and so each page, is a span
of `Extracted.text`, and the parts of a file together hold every word of it.

Examples:
    >>> from capsa.guard import Element, Extracted
    >>> item = Extracted(label="r.pdf", kind="pdf", media_type=None, text="One\\n\\nTwo",
    ...                  byte_size=9, sha256="ab" * 32,
    ...                  elements=(Element(category="Title", start=0, end=3, page=1),
    ...                            Element(category="NarrativeText", start=5, end=8, page=2)))
    >>> [(p.text, p.metadata["page_number"]) for p in document_parts(item, "page")]
    [('One', 1), ('Two', 2)]
    >>> [p.metadata["category"] for p in document_parts(item, "element")]
    ['Title', 'NarrativeText']
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from capsa.guard.elements import Element, table_cells
from capsa.guard.extract import Extracted
from capsa.guard.sniff import media_type_for_name

__all__ = ["SHAPES", "DocumentPart", "Shape", "check_shape", "distinct_ids", "document_parts",
           "label_of", "page_of", "refs_of"]

Shape = Literal["file", "page", "element"]
"""One document per file (the default), per page, or per element."""
SHAPES: tuple[Shape, ...] = ("file", "page", "element")
_EXTENSION_OF_KIND = {"text": "txt", "markdown": "md"}
_MAX_HEADING_CHARS = 200
_ID_DIGITS = 16
"""Hex digits of the file's digest in a part's id: unique enough within a corpus, and
short, since models copy ids into citations."""


class DocumentPart(BaseModel):
    """One document of a shape: its text, an id stable across runs, and its metadata."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)
    id: str
    """The file's sha256 for a whole file; for a part, its first 16 hex digits and
    ``-p<page>``, ``-e<index>`` (an element) or ``-t<offset>`` (text without a page)."""
    text: str
    """A span of the file's text (the whole text for ``"file"``)."""
    metadata: dict[str, Any]
    """unstructured's keys for the same facts; a fresh dict per part."""


def check_shape(shape: str) -> Shape:
    """`shape` if it names a shape, else a `ValueError` that lists them (for constructors)."""
    for known in SHAPES:
        if shape == known:
            return known
    raise ValueError(f"shape must be one of {', '.join(map(repr, SHAPES))}, not {shape!r}")


def document_parts(item: Extracted, shape: Shape = "file") -> tuple[DocumentPart, ...]:
    """The documents `item` becomes in `shape`, in reading order.

    ``"file"``: one, the whole text. ``"page"``: one per run of elements on
    the same page (`page_number`); text without a page (a format with no
    pages, an e-mail's attachment listing) is a part without one.
    ``"element"``: one per element, with its `category`, `element_id`, the
    `parent_id` and text (``capsa_heading``) of the heading it sits under, and
    for a table its `text_as_html`, rebuilt here from the cells and escaped,
    so a file can never put markup of its own into metadata.

    Raises:
        ValueError: `shape` is not one of `SHAPES`.
    """
    check_shape(shape)
    base = _file_metadata(item)
    if shape == "file" or not item.elements:
        return (DocumentPart(id=item.sha256, text=item.text,
                             metadata={**base, **_languages(item.elements)}),)
    if shape == "page":
        return tuple(_page_part(item, group, base) for group in _page_runs(item.elements))
    return tuple(_element_part(item, index, element, base)
                 for index, element in enumerate(item.elements))


def page_of(metadata: Mapping[str, Any]) -> str | None:
    """The page a document's metadata names, as a reader would cite it; None if none.

    ``page_label`` (LlamaIndex's PDF reader, LangChain's `PyPDFLoader`: the
    label printed on the page) wins over ``page_number`` (unstructured,
    capsa: from 1). LangChain's bare ``page`` is not read: its PDF loaders
    count it from 0, and a model shown it would cite the wrong page.

    Examples:
        >>> page_of({"page_number": 12}), page_of({"page_label": "iv"}), page_of({"page": 0})
        ('12', 'iv', None)
    """
    for key in ("page_label", "page_number"):
        value = metadata.get(key)
        if isinstance(value, bool) or not isinstance(value, int | str):
            continue
        text = " ".join(str(value).split())[:20]
        if text:
            return text
    return None


def distinct_ids(ids: Sequence[str | None]) -> list[str]:
    """Each item's own id when it is the first to carry it, else its position from 1.

    Retrievers return the same document twice (two chunks of one id, a merged
    ensemble), and a packet names every passage once. A position counts from 1,
    as the packet's handles do (``<document 2>``), so a report naming a
    document that had no id names it as the prompt showed it. A position never
    stands in for an item when another item's real id is that number, and a
    made-up id (``"a#2"``) never takes one an item really has: a report naming
    an id must mean the item that carries it.

    Examples:
        >>> distinct_ids(["a", "a", None, "2"])
        ['a', '2#2', '3', '2']
        >>> distinct_ids(["a", "3", "a"])
        ['a', '3', '3#3']
    """
    taken = {ident for ident in ids if ident}
    seen: set[str] = set()
    distinct = []
    for n, own in enumerate(ids, start=1):
        ident = own if own and own not in seen else str(n)
        while ident in seen or (ident != own and ident in taken):
            ident = f"{ident}#{n}"
        seen.add(ident)
        distinct.append(ident)
    return distinct


def label_of(value: object) -> str | None:
    """A metadata value as a title or collection name: text or a number, else None.

    Metadata is whatever a loader or the application wrote; a list or a dict
    there (``"title": ["Travel", "Policy"]``) names nothing a model could be
    shown, and must not make a whole retrieval fail.

    Examples:
        >>> label_of("Travel policy"), label_of(2024), label_of(["a"]), label_of("  ")
        ('Travel policy', '2024', None, None)
    """
    if isinstance(value, str):
        return value if value.strip() else None
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return None


def refs_of(value: object) -> tuple[str, ...]:
    """A metadata value as picture references: one string is one reference, not its letters.

    Examples:
        >>> refs_of("fig-1.png"), refs_of(["a.png", 3, None]), refs_of(None)
        (('fig-1.png',), ('a.png', '3'), ())
    """
    if isinstance(value, str):
        return (value,) if value.strip() else ()
    if isinstance(value, Iterable) and not isinstance(value, bytes | Mapping):
        return tuple(label for item in value if (label := label_of(item)) is not None)
    return ()


def _element_id(item: Extracted, index: int) -> str:
    """The id of `item`'s element `index`: stable for the same bytes, unique within the file."""
    return f"{item.sha256[:_ID_DIGITS]}-e{index}"


def _file_metadata(item: Extracted) -> dict[str, Any]:
    metadata: dict[str, Any] = {"filename": item.label}
    filetype = media_type_for_name(f"x.{_EXTENSION_OF_KIND.get(item.kind, item.kind)}")
    if filetype is not None:
        metadata["filetype"] = filetype
    if item.mail is not None:
        if item.mail.sent_from:
            metadata["sent_from"] = list(item.mail.sent_from)
        if item.mail.sent_to:
            metadata["sent_to"] = list(item.mail.sent_to)
        if item.mail.subject is not None:
            metadata["subject"] = item.mail.subject
    return metadata


def _languages(elements: Sequence[Element]) -> dict[str, Any]:
    seen = list(dict.fromkeys(code for element in elements for code in element.languages))
    return {"languages": seen} if seen else {}


def _page_runs(elements: Sequence[Element]) -> list[list[Element]]:
    runs: list[list[Element]] = []
    for element in elements:
        if runs and runs[-1][0].page == element.page:
            runs[-1].append(element)
        else:
            runs.append([element])
    return runs


def _page_part(item: Extracted, run: list[Element], base: dict[str, Any]) -> DocumentPart:
    page = run[0].page
    metadata = {**base, **_languages(run)}
    if page is None:
        part_id = f"{item.sha256[:_ID_DIGITS]}-t{run[0].start}"
    else:
        metadata["page_number"] = page
        part_id = f"{item.sha256[:_ID_DIGITS]}-p{page}"
    return DocumentPart(id=part_id, text=item.text[run[0].start:run[-1].end], metadata=metadata)


def _element_part(item: Extracted, index: int, element: Element,
                  base: dict[str, Any]) -> DocumentPart:
    text = item.element_text(element)
    metadata = {**base, **_languages([element]), "category": element.category,
                "element_id": _element_id(item, index)}
    if element.page is not None:
        metadata["page_number"] = element.page
    if element.parent is not None:
        metadata["parent_id"] = _element_id(item, element.parent)
        heading = item.element_text(item.elements[element.parent])
        metadata["capsa_heading"] = " ".join(heading.split())[:_MAX_HEADING_CHARS]
    if element.category == "Table":
        metadata["text_as_html"] = _table_html(text)
    return DocumentPart(id=_element_id(item, index), text=text, metadata=metadata)


def _table_html(text: str) -> str:
    """A table's rows and cells as escaped HTML (no spans: each cell as the text has it)."""
    rows = "".join("<tr>" + "".join(f"<td>{html.escape(cell)}</td>" for cell in row) + "</tr>"
                   for row in table_cells(text))
    return f"<table>{rows}</table>"
