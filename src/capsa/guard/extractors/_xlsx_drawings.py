"""A worksheet's charts and text boxes, read after its cells.

A workbook's charts and text boxes are text a reader sees on the sheet: a
dashboard's chart titles and the figures its bars stand for, the note in a
text box beside a table. openpyxl, which unstructured reads workbooks with,
drops every drawing when it loads a file, so none of it reached the text,
without a word said (measured with unstructured 0.27: a sheet holding a
table and a bar chart read as the table alone).

`sheet_drawings` reads one worksheet's drawing part (``xl/drawings/...``,
the one its ``<drawing r:id>`` names) straight from the inspected archive,
in the order
its anchors stand on the sheet (by row, then column): each chart from its
own part, as `capsa.guard.extractors._office_charts.chart_text` writes it
(``Chart: Sales by region. Categories: North, South. Series: ...``), and
each text box or shape as its paragraphs' text. Shapes a reader never sees
(``hidden="1"`` in their properties, or in a group's) are left out and
counted; a chart whose part is missing or unreadable is counted as unread.
Pictures and connectors hold no text. A drawing part the sheet relates
but never names is drawn by neither Excel nor LibreOffice, and is not
read; a chart named by many anchors is read once.

`capsa.guard.extractors.unstructured` appends the paragraphs after their
sheet's cells, with a note.
"""

from __future__ import annotations

import zipfile
from dataclasses import dataclass, field
from typing import Any

from capsa.guard.extractors._alternates import EXCEL, shown_branch
from capsa.guard.extractors._office_charts import chart_text, chartex_text
from capsa.guard.extractors._workbook import after_cells, parse_member, relationships

__all__ = ["Drawings", "sheet_drawings"]

_XDR = "{http://schemas.openxmlformats.org/drawingml/2006/spreadsheetDrawing}"
_A = "{http://schemas.openxmlformats.org/drawingml/2006/main}"
_C = "{http://schemas.openxmlformats.org/drawingml/2006/chart}"
_S = "{http://schemas.openxmlformats.org/spreadsheetml/2006/main}"
_R_ID = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}id"
_DRAWING = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/drawing"
_CX = "{http://schemas.microsoft.com/office/drawing/2014/chartex}"
_ALTERNATE = "{http://schemas.openxmlformats.org/markup-compatibility/2006}AlternateContent"
_ANCHORS = (f"{_XDR}twoCellAnchor", f"{_XDR}oneCellAnchor", f"{_XDR}absoluteAnchor")
_CHART_TAGS = (f"{_C}chart", f"{_CX}chart")
_READERS = {f"{_C}chartSpace": chart_text, f"{_CX}chartSpace": chartex_text}
"""A chart part's root, and how it reads: a chart, or one of the newer kinds."""
_MAX_DEPTH = 32
"""Group shapes followed inside one another; deeper ones are not read."""


@dataclass
class Drawings:
    """What one worksheet's drawings show, and what they hide."""

    paragraphs: list[str] = field(default_factory=list)
    charts: int = 0
    boxes: int = 0
    hidden: int = 0
    """Shapes and charts flagged hidden, left out."""
    unread: int = 0
    """Charts whose part is missing or unreadable."""


def sheet_drawings(archive: zipfile.ZipFile, sheet: str) -> Drawings:
    """The charts and text boxes of the worksheet part `sheet` (a member name of the
    inspected `archive`), in the order they stand on the sheet."""
    found = Drawings()
    related = relationships(archive, sheet)
    if not any(kind == _DRAWING for _, kind in related.values()):
        return found  # the common case: no drawing, and the sheet is not read again
    target, kind = related.get(_drawing_id(archive, sheet) or "", ("", ""))
    drawing = parse_member(archive, target) if kind == _DRAWING else None
    if drawing is None:
        return found
    charts = relationships(archive, target)
    texts: dict[str, str | None] = {}
    anchors = sorted(enumerate(_anchors(drawing)), key=_place)
    for _, anchor in anchors:
        for shape in anchor:
            _read(archive, shape, charts, found, 0, texts)
    return found


def _anchors(drawing: Any) -> list[Any]:
    """The drawing's anchors in document order, with those of each ``mc:AlternateContent``
    taken from the branch Excel draws (`shown_branch`): Excel writes the newer chart kinds
    that way, the chart in a choice and a sentence for older readers in the fallback."""
    found: list[Any] = []
    for child in drawing.iterchildren():
        if child.tag in _ANCHORS:
            found.append(child)
        elif child.tag == _ALTERNATE:
            branch = shown_branch(child, EXCEL)
            if branch is not None:
                found.extend(branch.iterchildren(*_ANCHORS))
    return found


def _drawing_id(archive: zipfile.ZipFile, sheet: str) -> str | None:
    """The relationship id the sheet's ``<drawing>`` names (a sheet has at most one), or None.

    Excel and LibreOffice draw that part alone: another drawing related from
    the sheet is shown by neither, so its text is no reader's (and a sheet
    relating one drawing 50,000 times would have it read 50,000 times).
    Streamed, one row in memory (`after_cells`).
    """
    drawing = after_cells(archive, sheet, f"{_S}drawing")
    found: str | None = drawing.get(_R_ID) if drawing is not None else None
    return found


def _place(numbered: tuple[int, Any]) -> tuple[int, int, int]:
    """Where an anchor stands: its top-left cell (row, column), then document order."""
    order, anchor = numbered
    start = anchor.find(f"{_XDR}from")
    if start is None:
        return (1 << 30, 1 << 30, order)
    return (_number(start.findtext(f"{_XDR}row")), _number(start.findtext(f"{_XDR}col")),
            order)


def _read(archive: zipfile.ZipFile, shape: Any, charts: dict[str, tuple[str, str]],
          found: Drawings, depth: int, texts: dict[str, str | None]) -> None:
    tag = shape.tag
    if tag not in (f"{_XDR}sp", f"{_XDR}grpSp", f"{_XDR}graphicFrame"):
        return  # a picture, a connector, the anchor's position and size
    if _hidden(shape):
        found.hidden += any(True for _ in shape.iter(f"{_A}t", *_CHART_TAGS))
        return
    if tag == f"{_XDR}grpSp":
        if depth < _MAX_DEPTH:
            for inner in shape:
                _read(archive, inner, charts, found, depth + 1, texts)
        return
    if tag == f"{_XDR}graphicFrame":
        for reference in shape.iter(*_CHART_TAGS):
            target = charts.get(reference.get(_R_ID) or "")
            name = target[0] if target is not None else ""
            if name not in texts:
                root = parse_member(archive, name)
                reader = _READERS.get(root.tag) if root is not None else None
                texts[name] = reader(root) if reader is not None else None
            text = texts[name]
            if text is None:
                found.unread += 1
                continue
            if text:
                found.paragraphs.append(text)
                found.charts += 1
        return
    body = shape.find(f"{_XDR}txBody")
    if body is None:
        return
    lines = [" ".join("".join(t.text or "" for t in paragraph.iter(f"{_A}t")).split())
             for paragraph in body.iter(f"{_A}p")]
    text = "\n".join(line for line in lines if line)
    if text:
        found.paragraphs.append(text)
        found.boxes += 1


def _hidden(shape: Any) -> bool:
    for properties in shape.iterchildren():
        if properties.tag.endswith("Pr") and properties.tag.startswith(f"{_XDR}nv"):
            flag = properties.find(f"{_XDR}cNvPr")
            value = (flag.get("hidden") or "").strip().lower() if flag is not None else ""
            return value in ("1", "true")
    return False


def _number(text: str | None) -> int:
    try:
        return int(text or "")
    except ValueError:
        return 0
