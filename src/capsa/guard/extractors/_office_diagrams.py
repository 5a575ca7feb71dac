"""SmartArt diagrams in Word and PowerPoint, read as one paragraph where they stand.

A SmartArt diagram is text a reader sees: the words in its boxes, arrows
and circles, a process's steps, an org chart's names, a cycle's stages.
None of it is in the document's own XML: the drawing holds references
(``dgm:relIds`` in an ``a:graphicData``), and the text lives in the
diagram's data part (``dgm:dataModel``), beside its layout, style and
colour parts and a cached rendering Office adds (``dsp:drawing``).
Measured with unstructured 0.27: a DOCX or PPTX SmartArt reached the text
as nothing at all, without a word said (its PPTX partitioner skips graphic
frames; python-docx yields no drawing's text).

`read_docx_diagrams` and `read_pptx_diagrams` rewrite the document
python-docx or python-pptx has just parsed, in memory, before unstructured
reads it, as `capsa.guard.extractors._office_charts` does for charts. Each
diagram is read from its data part, which the library has already loaded
from the inspected package (never an external target, never a file), and
becomes one paragraph::

    Diagram: Plan; Build (code; review); Ship.

The data model is a tree: a ``doc`` point, the diagram, whose ``parOf``
connections (``dgm:cxn``) lead to its items (``node`` and ``asst`` points,
the text a reader sees), each connection's ``srcOrd`` giving an item's
place among its siblings. Items are written in that order, siblings
separated by semicolons, an item's sub-items in parentheses after it. One
line rather than an outline of paragraphs: it keeps the diagram one
element, marked as capsa's writing by its ``Diagram:``, as a chart's
paragraph is, and parentheses say the nesting at any depth where a reader
of indented lines would have to count spaces. Connector and presentation
points (``parTrans``, ``sibTrans``, ``pres``) carry no text a reader sees
and are not read; an item without text is skipped, its sub-items taking
its place. Nesting stops at 8 levels (deeper items are written at the
eighth, as siblings). When the connections do not make a tree (one is
missing, a point has two parents, a loop), the items are written in the
order the data part lists them, flat; items no connection reaches follow
the tree, in that order too, so that no text is lost to a broken list.

The data model is read, not the cached drawing: it is what the diagram
says, the text its author typed, while the drawing is an optional rendering
of it that Office 2007 never wrote (and that a hand-made file may make say
something else; see "Not read").

A diagram says at most 100 items, each cut at 300 characters; the
paragraph counts the rest (``and 99,900 more``), for the reason charts are
bounded: a data part of 100,000 points written whole would put the report
over ``max_text_chars`` and through unstructured's sentence tokenizer
before any text limit is checked. The walk is a loop, never a recursion,
and visits each point once, so a 10,000-deep chain or a looping list costs
time in proportion to the part.

Placed as charts are: in a DOCX the paragraph follows the paragraph the
diagram is anchored in; in a PPTX it is a text box laid exactly over the
diagram's frame, put right after it in the slide's shape tree. Run after
the hidden pass (`capsa.guard.extractors._office_hidden`), so a diagram in
a hidden run or a hidden shape goes with it, and in a DOCX before the
notes are appended and the containers opened, for the charts' reasons. A
diagram whose data part is missing, external, unparsable or not a data
model is left out and counted. A diagram inside a tracked deletion is left
out, as Word shows it struck through. In a paragraph anchoring both charts
and diagrams, the diagrams' paragraphs come first (each pass places its
own paragraphs right after the anchor).

Not read: SmartArt in a footnote or an endnote, on slide layouts and
masters (unstructured reads no layout), in a branch of a slide's
``mc:AlternateContent`` PowerPoint does not show (the branch it shows is put
in place first, `capsa.guard.extractors._pptx_alternates`), connector
labels, and the
cached drawing (``dsp:drawing``): LibreOffice draws a diagram from it, so a
file whose drawing says other words than its data shows a LibreOffice
reader those other words, which this text does not hold.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from capsa.guard.extractors._drawn import Kind, place_in_docx, place_in_pptx

__all__ = ["Diagrams", "diagram_text", "read_docx_diagrams", "read_pptx_diagrams"]

_A = "{http://schemas.openxmlformats.org/drawingml/2006/main}"
_DIAGRAM = "http://schemas.openxmlformats.org/drawingml/2006/diagram"
_DGM = f"{{{_DIAGRAM}}}"
_R_DM = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}dm"
_ITEMS = frozenset({"node", "asst"})
"""The point types a reader sees as a diagram's text (``node`` when a point names no type)."""
_MAX_POINTS = 100
"""Items of one diagram written out; the rest are counted (``and 99,900 more``)."""
_MAX_DEPTH = 8
"""Levels of parentheses; deeper items are written at the last level."""
_MAX_TEXT = 300
"""Characters of one item; longer ones are cut, with an ellipsis."""


@dataclass(frozen=True, slots=True)
class Diagrams:
    """What one pass over a document's SmartArt diagrams did."""

    read: int = 0
    """Diagrams whose text now stands where they do."""
    unread: int = 0
    """Diagrams left out: their data part is missing, external, or not a data model."""

    def __add__(self, other: Diagrams) -> Diagrams:
        return Diagrams(self.read + other.read, self.unread + other.unread)

    def notes(self) -> tuple[str, ...]:
        """The extraction notes: the diagram paragraph is capsa's writing (its ``Diagram:``,
        its semicolons and parentheses), not the document's, and a diagram not read is lost
        text."""
        said: list[str] = []
        if self.read:
            said.append(f"read {self.read} SmartArt diagram(s) from their data parts, each as "
                        "one paragraph where it stands: items in the diagram's order, separated "
                        "by semicolons, each item's sub-items in parentheses")
        if self.unread:
            said.append(f"left out {self.unread} SmartArt diagram(s) whose data part is missing "
                        "or unreadable: their text could not be read")
        return tuple(said)


def read_docx_diagrams(document: Any) -> Diagrams:
    """Write each SmartArt diagram of a python-docx `document`'s body, headers and footers as
    a paragraph after the paragraph it is anchored in; return what was read."""
    placed = place_in_docx(document, DIAGRAM)
    return Diagrams(placed.read, placed.unread)


def read_pptx_diagrams(presentation: Any) -> Diagrams:
    """Lay a text box holding each SmartArt diagram's paragraph over each diagram of a
    python-pptx `presentation`'s slides; return what was read."""
    placed = place_in_pptx(presentation, DIAGRAM)
    return Diagrams(placed.read, placed.unread)


def diagram_text(data_model: Any) -> str:
    """The paragraph a diagram data part's root (``dgm:dataModel``) reads as; ``""`` when the
    diagram holds no text at all."""
    items = _items(data_model)
    written = [(depth, text) for depth, text in items if text]
    if not written:
        return ""
    said: list[str] = []
    depth = 0
    for number, (level, text) in enumerate(written[:_MAX_POINTS]):
        level = min(level, depth + 1, _MAX_DEPTH) if number else 0
        if number:
            said.append(" (" if level > depth else ")" * (depth - level) + "; ")
        said.append(text)
        depth = level
    said.append(")" * depth)
    more = len(written) - _MAX_POINTS
    if more > 0:
        said.append(f"; and {more:,} more")
    return f"Diagram: {''.join(said)}."


# ------------------------------------------------------------------------ the data part


def _items(data_model: Any) -> list[tuple[int, str]]:
    """Each item of the data model with its depth (0 for the diagram's own items) and its
    text (``""`` for an item without any), in the order the diagram shows them.

    The tree is walked with a stack from the ``doc`` point along ``parOf``
    connections, each point at most once: meeting one again means the
    connections are no tree, and the items are then taken as listed.
    """
    points = data_model.find(f"{_DGM}ptLst")
    texts: dict[str, str] = {}  # item id -> its text, in the order the part lists them
    root: str | None = None
    for point in points.iterchildren(f"{_DGM}pt") if points is not None else ():
        ident = point.get("modelId") or ""
        kind = (point.get("type") or "node").strip()
        if kind == "doc" and root is None:
            root = ident
        elif kind in _ITEMS and ident not in texts:
            texts[ident] = _item_text(point)
    children: dict[str, list[tuple[int, int, str]]] = {}
    connections = data_model.find(f"{_DGM}cxnLst")
    for order, link in enumerate(
            connections.iterchildren(f"{_DGM}cxn") if connections is not None else ()):
        if (link.get("type") or "parOf").strip() == "parOf":
            children.setdefault(link.get("srcId") or "", []).append(
                (_index(link.get("srcOrd")), order, link.get("destId") or ""))
    items: list[tuple[int, str]] = []
    seen: set[str] = set()
    pending = [(root, -1)] if root is not None else []
    while pending:
        ident, depth = pending.pop()
        if ident in seen:  # a loop, or a point with two parents: no tree
            return [(0, text) for text in texts.values()]
        seen.add(ident)
        if ident in texts:
            items.append((depth, texts[ident]))
        below = depth + 1 if texts.get(ident) or ident == root else depth
        pending.extend((child, below) for _, _, child in sorted(
            children.get(ident, ()), reverse=True))
    items.extend((0, text) for ident, text in texts.items() if ident not in seen)
    return items


def _item_text(point: Any) -> str:
    """A point's text body (``dgm:t``) on one line, its paragraphs joined by a space, cut to
    `_MAX_TEXT` characters."""
    body = point.find(f"{_DGM}t")
    if body is None:
        return ""
    text = "".join(" " if element.tag == f"{_A}p" else element.text or ""
                   for element in body.iter(f"{_A}p", f"{_A}t"))
    line = " ".join(text[:_MAX_TEXT * 4].split())
    return line if len(line) <= _MAX_TEXT else line[:_MAX_TEXT - 1] + "\u2026"


# ---------------------------------------------------------------------------- the drawing


def _index(value: str | None) -> int:
    try:
        return int(value or "")
    except ValueError:
        return 0


DIAGRAM = Kind(reference=f"{_DGM}relIds", relationship=_R_DM, uri=_DIAGRAM,
               root=f"{_DGM}dataModel", text=diagram_text, box_name="Diagram text")
"""A SmartArt diagram, as `capsa.guard.extractors._drawn` places it."""
