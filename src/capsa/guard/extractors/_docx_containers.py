"""Word text a reader sees that unstructured never reaches: opened out of its containers.

unstructured reads a DOCX through python-docx, which yields a paragraph's
runs and hyperlinks and a body's paragraphs and tables, and nothing inside
any other element. Word wraps visible text in several: a tracked insertion
(``w:ins``, and ``w:moveTo`` for moved text), a content control
(``w:sdt``: form fields, a template's placeholders, a cover page, a table of
contents), a simple field's result (``w:fldSimple``: a page number, a
date), smart tags and custom XML (``w:smartTag``, ``w:customXml``),
bidirectional overrides (``w:dir``, ``w:bdo``), and text boxes
(``w:txbxContent``, inside a drawing). Measured with unstructured 0.27: a
redlined contract lost every inserted word, a form every filled-in value,
and a CV its text-box sidebar, without a word said. Nothing is lost here
the user could have found out about: the document read back differently
from what Word shows.

`open_containers` rewrites the document python-docx has just parsed, in
memory, before unstructured reads it: each container is replaced by its
content, so its runs become the paragraph's and its paragraphs the body's
(or the table cell's); a text box's paragraphs follow the paragraph it is
anchored in. `resolve_alternates` runs before every other pass: content
written twice for newer and older readers (``mc:AlternateContent``, which
python-docx does not yield: a text box's drawing and its VML copy, an
emoji) becomes the branch Word draws (`capsa.guard.extractors._alternates`). Tracked deletions
(``w:del``, ``w:moveFrom``) stay where they are, which unstructured never
reads: the text is the document as Word shows it by default, every change
accepted, and a note says how many changes there were, since a reader asked
what was changed needs to know the text reads as accepted.

Run after the hidden-run pass (`capsa.guard.extractors._office_hidden`), so
a text box anchored in a hidden run goes with its run, and a hidden run
inside an insertion or a content control is found where it stands.

Not opened: comments. Embedded foreign content (``w:altChunk``) is read
by `capsa.guard.extractors._docx_chunks`.
Footnotes and endnotes are appended after the body
(`capsa.guard.extractors._docx_notes`), equations read as linear text
(`capsa.guard.extractors._docx_math`) and charts from their parts
(`capsa.guard.extractors._office_charts`); see docs/guard.md.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from capsa.guard.extractors._alternates import WORD, in_unshown_branch, resolve
from capsa.guard.extractors._docx_glyphs import symbol_extension

__all__ = ["Opened", "open_containers", "resolve_alternates", "text_parts", "text_roots"]

_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_W16SE = "{http://schemas.microsoft.com/office/word/2015/wordml/symex}"
_MAX_ALTERNATES = 10_000
_TEXT_ROOTS = frozenset({f"{_W}document", f"{_W}hdr", f"{_W}ftr"})
"""The parts whose text unstructured reads: the main document, its headers and footers."""
_INSERTED = (f"{_W}ins", f"{_W}moveTo")
_DELETED = (f"{_W}del", f"{_W}moveFrom")
_WRAPPERS = (*_INSERTED, f"{_W}sdt", f"{_W}fldSimple", f"{_W}smartTag", f"{_W}customXml",
             f"{_W}dir", f"{_W}bdo")
"""Elements whose content Word shows in place and python-docx does not yield."""
_OWN_PROPERTIES = frozenset({f"{_W}sdtPr", f"{_W}sdtEndPr", f"{_W}smartTagPr",
                             f"{_W}customXmlPr"})
"""A wrapper's own settings: dropped with it, never opened into the text."""
_BLOCKS = frozenset({f"{_W}p", f"{_W}tbl"})


@dataclass(frozen=True, slots=True)
class Opened:
    """What `open_containers` did to one document."""

    insertions: int = 0
    """Tracked insertions and moves (``w:ins``, ``w:moveTo``) whose text is now read."""
    deletions: int = 0
    """Tracked deletions and moves away (``w:del``, ``w:moveFrom``) holding text, left out."""
    text_boxes: int = 0
    """Text boxes whose paragraphs now follow their anchoring paragraph."""

    def note(self) -> str | None:
        """What a reader of the text should know, or None: only tracked changes need saying."""
        changes = self.insertions + self.deletions
        if not changes:
            return None
        return (f"read {changes} tracked change(s) as accepted, as Word shows them by default: "
                f"{self.insertions} insertion(s) kept, {self.deletions} deletion(s) left out")


def open_containers(document: Any) -> Opened:
    """Open the containers of a python-docx `document`'s body, headers and footers in place.

    Returns what was opened. Containers inside a run's properties (an
    ``w:ins`` that marks a paragraph mark as inserted) carry no text and
    are left alone.
    """
    insertions = deletions = boxes = 0
    for root in text_roots(document):
        deletions += sum(1 for change in root.iter(*_DELETED)
                         if _holds_content(change) and _holds_text(change))
        boxes += _move_text_boxes(root)
        for wrapper in list(root.iter(*_WRAPPERS)):
            if _holds_content(wrapper):
                insertions += wrapper.tag in _INSERTED and _holds_text(wrapper)
                _unwrap(wrapper)
    return Opened(insertions, deletions, boxes)


def text_parts(document: Any) -> Iterator[tuple[Any, Any]]:
    """Each text part of a python-docx `document` once, with its root element: the main
    document and the headers and footers it relates to."""
    main = document.part
    parts = [main, *(rel.target_part for rel in main.rels.values() if not rel.is_external)]
    seen: set[int] = set()
    for part in parts:
        root: Any = getattr(part, "element", None)
        if id(part) in seen or getattr(root, "tag", None) not in _TEXT_ROOTS:
            continue
        seen.add(id(part))
        yield part, root


def text_roots(document: Any) -> Iterator[Any]:
    """The root elements of a python-docx `document`'s text parts (`text_parts`)."""
    return (root for _, root in text_parts(document))


def _holds_text(element: Any) -> bool:
    return next(element.iter(f"{_W}t", f"{_W}delText"), None) is not None


def _holds_content(element: Any) -> bool:
    """Whether `element` stands among content, not inside some element's properties."""
    parent = element.getparent()
    return parent is not None and not parent.tag.endswith("Pr")


def _unwrap(wrapper: Any) -> None:
    """Put `wrapper`'s content where it stands (a content control's, from ``w:sdtContent``)."""
    parent = wrapper.getparent()
    if parent is None:
        return
    if wrapper.tag == f"{_W}sdt":
        content = wrapper.find(f"{_W}sdtContent")
        children = list(content) if content is not None else []
    else:
        children = [child for child in wrapper if child.tag not in _OWN_PROPERTIES]
    at = parent.index(wrapper)
    for offset, child in enumerate(children):
        parent.insert(at + offset, child)  # lxml moves the element, tail and all
    # the wrapper's tail is whitespace between elements in WordprocessingML
    parent.remove(wrapper)


def _move_text_boxes(root: Any) -> int:
    """Move each text box's paragraphs after the paragraph it is anchored in."""
    moved = 0
    for box in list(root.iter(f"{_W}txbxContent")):
        if in_unshown_branch(box, WORD):
            continue
        anchor = next(box.iterancestors(f"{_W}p"), None)
        while (anchor is not None
               and next(anchor.iterancestors(f"{_W}txbxContent"), None) is not None):
            # a text box inside a text box: moved with the outer one's paragraphs, then
            # anchored at the paragraph it ends up in
            anchor = next(anchor.iterancestors(f"{_W}p"), None)
        holder = anchor.getparent() if anchor is not None else None
        if anchor is None or holder is None:
            continue
        blocks = [child for child in box if child.tag in _BLOCKS]
        if not blocks:
            continue
        at = holder.index(anchor) + 1
        for offset, block in enumerate(blocks):
            holder.insert(at + offset, block)
        moved += 1
    return moved


def resolve_alternates(document: Any) -> int:
    """Put the branch Word draws in place of each ``mc:AlternateContent`` in a python-docx
    `document`'s text parts (`capsa.guard.extractors._alternates`); return how many
    that held text outside a drawing (runs, a paragraph, an emoji) are now read.

    Word writes an emoji as a symbol extension (``w16se:symEx``, its code
    point in an attribute) with the character as the fallback; the
    extension is written here as that character, which is what Word draws.
    Alternates inside an element's properties (a run's font for an emoji)
    carry no text and stay as they are.
    """
    read = 0
    for root in text_roots(document):
        for content in resolve(root, WORD, where=_holds_content_below, limit=_MAX_ALTERNATES):
            symbols = [found for child in content for found in child.iter(f"{_W16SE}symEx")]
            for symbol in symbols:
                symbol_extension(symbol)
            if symbols or any(_holds_text(child) and not _drawn(child) for child in content):
                read += 1
    return read


def _holds_content_below(parent: Any) -> bool:
    return not parent.tag.endswith("Pr")


def _drawn(element: Any) -> bool:
    """Whether `element` is or holds a drawing (text boxes are counted as they move)."""
    return next(element.iter(f"{_W}drawing", f"{_W}pict"), None) is not None
