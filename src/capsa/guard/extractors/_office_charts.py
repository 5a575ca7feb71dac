"""Charts in Word and PowerPoint, read as one paragraph where they stand.

A chart is text a reader sees: its title, its axis titles, its legend (the
series' names), its category labels, and the values its bars and lines show
against the axis. None of it is in the document's own XML: the drawing
holds a reference (``c:chart`` in an ``a:graphicData``), and the chart lives
in a part of its own. Measured with unstructured 0.27: a DOCX or PPTX chart
reached the text as nothing at all, a slide holding only a chart as its
title alone, without a word said.

`read_docx_charts` and `read_pptx_charts` rewrite the document python-docx
or python-pptx has just parsed, in memory, before unstructured reads it.
Each chart is read from its part, which the library has already loaded
from the inspected package (never an external target, never a file), and
becomes one paragraph::

    Chart: Sales by region. Axis titles: Region; EUR m. Categories: North,
    South. Series: 2025 (12, 7); 2026 (15, 9.5).

In a DOCX the paragraph follows the paragraph the chart is anchored in; in
a PPTX it is a text box laid exactly over the chart, put right after it in
the slide's shape tree, since unstructured skips graphic frames and reads
shapes top to bottom, left to right (a stable sort, so the text lands where
the chart stands, in a group too).

Values are read because they are what a chart says: a reader reads them off
the axis, and a model asked what the chart shows has nothing else to go on.
They come from the cache the chart part keeps (``c:numCache``), which is
what Office draws; a point that is not a number is left out, as Office
draws none. Numbers are written plainly (``9.5``, not ``$9.50``: the format
codes are not applied), except categories in a date format, written as
ISO dates instead of Excel's day numbers.

A chart says at most 100 categories, 100 values a series and 20 series,
each label cut at 200 characters; the paragraph counts the rest (``c1, c2,
..., and 19,900 more``). A 5,000-point time series written out whole would
be 30,000 characters of numbers no reader reads off a chart, enough to put
the whole report over ``max_text_chars`` and have it refused; and
unstructured runs its sentence tokenizer over every paragraph before any
text limit is checked (20,000 categories took it 17 s), while the pre-parse
text floors (`capsa.guard.extractors._floors`) count no chart part.

Run after the hidden pass (`capsa.guard.extractors._office_hidden`), so a
chart in a hidden run or a hidden shape goes with it; in a DOCX, before the
notes are appended (a chart copied from a footnote names its part by the
footnotes' relationships, not the body's, so it is never looked up in the
wrong part) and before the containers are opened (a chart in a text box
follows its paragraph out of the box). A chart whose part is missing,
external or not a chart is left out and counted. A chart inside a tracked
deletion is left out, as Word shows it struck through.

Not read: a chart in a footnote or an endnote, the newer chart kinds
(``cx:chart``: waterfall, funnel, treemap, whose drawings carry a picture
for older readers), data labels a chart writes itself, charts on slide
layouts and masters (unstructured reads no layout), and a workbook's charts.
"""

from __future__ import annotations

import datetime
import math
import re
from dataclasses import dataclass
from typing import Any

from capsa.guard.extractors._docx_containers import text_parts

__all__ = ["Charts", "chart_text", "read_docx_charts", "read_pptx_charts"]

_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_P = "{http://schemas.openxmlformats.org/presentationml/2006/main}"
_A = "{http://schemas.openxmlformats.org/drawingml/2006/main}"
_C = "{http://schemas.openxmlformats.org/drawingml/2006/chart}"
_MC = "{http://schemas.openxmlformats.org/markup-compatibility/2006}"
_R_ID = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}id"
_XML_SPACE = "{http://www.w3.org/XML/1998/namespace}space"
_DELETED = (f"{_W}del", f"{_W}moveFrom")
_AXES = frozenset({f"{_C}catAx", f"{_C}valAx", f"{_C}dateAx", f"{_C}serAx"})
_SHAPE_PARENTS = frozenset({f"{_P}spTree", f"{_P}grpSp"})
_DATE_CODE = re.compile(r"(?i)^[^0#?]*[dy]")
"""A number format that shows a date: a day or year code before any digit placeholder
(once its ``[...]`` sections and quoted literals are taken out)."""
_FORMAT_LITERALS = re.compile(r'\[[^\]]*\]|"[^"]*"')
_MAX_POINTS = 100
"""Categories, and values of one series, written out; the rest are counted (``and 19,900
more``)."""
_MAX_SERIES = 20
_MAX_LABEL = 200
"""Characters of one title or label; longer ones are cut, with an ellipsis."""
_EXCEL_EPOCH = datetime.date(1899, 12, 30)
_LAST_DAY = 2_958_465  # 9999-12-31


@dataclass(frozen=True, slots=True)
class Charts:
    """What one pass over a document's charts did."""

    read: int = 0
    """Charts whose text now stands where they do."""
    unread: int = 0
    """Charts left out: their part is missing, external, or not a chart."""

    def __add__(self, other: Charts) -> Charts:
        return Charts(self.read + other.read, self.unread + other.unread)

    def notes(self) -> tuple[str, ...]:
        """The extraction notes: the chart paragraph is capsa's writing (its ``Chart:``,
        ``Series:``), not the document's, and a chart not read is lost text."""
        said: list[str] = []
        if self.read:
            said.append(f"read {self.read} chart(s) from their chart parts, each as one "
                        "paragraph where it stands: title, axis titles, categories, and each "
                        "series with its values")
        if self.unread:
            said.append(f"left out {self.unread} chart(s) whose chart part is missing or "
                        "unreadable: their text could not be read")
        return tuple(said)


def read_docx_charts(document: Any) -> Charts:
    """Write each chart of a python-docx `document`'s body, headers and footers as a
    paragraph after the paragraph it is anchored in; return what was read."""
    found = Charts()
    for part, root in text_parts(document):
        last: dict[Any, Any] = {}  # anchor paragraph -> the chart paragraph written after it
        for reference in list(root.iter(f"{_C}chart")):
            anchor = next(reference.iterancestors(f"{_W}p"), None)
            if (anchor is None or _not_drawn(reference)
                    or next(reference.iterancestors(*_DELETED), None) is not None):
                continue
            text = _chart_text_of(part, reference.get(_R_ID))
            if text is None:
                found += Charts(unread=1)
                continue
            if not text:
                continue
            paragraph = _docx_paragraph(anchor, text)
            last.get(anchor, anchor).addnext(paragraph)
            last[anchor] = paragraph
            found += Charts(read=1)
    return found


def read_pptx_charts(presentation: Any) -> Charts:
    """Lay a text box holding each chart's paragraph over each chart of a python-pptx
    `presentation`'s slides; return what was read."""
    from pptx.shapes.graphfrm import GraphicFrame
    from pptx.shapes.group import GroupShape

    found = Charts()
    done: set[int] = set()
    for slide in presentation.slides:
        if id(slide.element) in done:
            continue  # two slide ids naming one slide part: read once
        done.add(id(slide.element))
        frames: list[Any] = []
        pending = list(slide.shapes)
        while pending:  # each frame gets its own text box: the order they are found is free
            shape = pending.pop()
            if isinstance(shape, GroupShape):
                pending.extend(shape.shapes)
            elif isinstance(shape, GraphicFrame) and shape.has_chart:
                frames.append(shape)
        next_id = _next_shape_id(slide.element) if frames else 0
        for frame in frames:
            element = frame._element
            parent = element.getparent()
            if parent is None or parent.tag not in _SHAPE_PARENTS:
                continue
            text = _chart_text_of(slide.part, element.chart_rId)
            if text is None:
                found += Charts(unread=1)
                continue
            if text:
                element.addnext(_pptx_text_box(frame, text, next_id))
                next_id += 1
                found += Charts(read=1)
    return found


def chart_text(chart_space: Any) -> str:
    """The paragraph a chart part's root (``c:chartSpace``) reads as; ``""`` when the chart
    holds no text at all."""
    chart = chart_space.find(f"{_C}chart")
    if chart is None:
        return ""
    title = _title(chart.find(f"{_C}title"))
    plot = chart.find(f"{_C}plotArea")
    axes = [] if plot is None else [
        text for axis in plot if axis.tag in _AXES
        for text in [_title(axis.find(f"{_C}title"))] if text]
    series = [] if plot is None else [
        one for kind in plot if kind.tag.endswith("Chart") for one in kind.iterchildren(f"{_C}ser")]
    categories: list[str] = []
    for one in series:
        source = one.find(f"{_C}cat")
        if source is None:
            source = one.find(f"{_C}xVal")
        categories = _points(source, dates=True) if source is not None else []
        if categories:
            break
    named: list[str] = []
    for number, one in enumerate(series[:_MAX_SERIES], start=1):
        name = _series_name(one) or f"series {number}"
        source = one.find(f"{_C}val")
        if source is None:
            source = one.find(f"{_C}yVal")
        values = _points(source, numbers=True) if source is not None else []
        named.append(f"{name} ({_listed(values, ', ')})" if values else name)
    if len(series) > _MAX_SERIES:
        named.append(f"and {len(series) - _MAX_SERIES:,} more")
    if not (title or axes or categories or named):
        return ""
    said = [f"Chart: {title}." if title else "Chart."]
    if axes:
        said.append(f"Axis titles: {'; '.join(axes)}.")
    if categories:
        said.append(f"Categories: {_listed(categories, ', ')}.")
    if named:
        said.append(f"Series: {'; '.join(named)}.")
    return " ".join(said)


def _listed(items: list[str], separator: str) -> str:
    """The first `_MAX_POINTS` of `items`, and how many more there are."""
    shown = separator.join(items[:_MAX_POINTS])
    more = len(items) - _MAX_POINTS
    return f"{shown}{separator}and {more:,} more" if more > 0 else shown


# ------------------------------------------------------------------------- the chart part


def _chart_text_of(part: Any, ident: str | None) -> str | None:
    """The chart paragraph of the part `part` relates as `ident`; None when that part is
    missing, external, unparsable or not a chart."""
    rel = part.rels.get(ident) if ident else None
    if rel is None or rel.is_external:
        return None
    try:
        root = _root(rel.target_part)
    except Exception:  # noqa: BLE001 - a broken chart is one chart lost, not the document
        return None
    if root is None or root.tag != f"{_C}chartSpace":
        return None
    return chart_text(root)


def _root(part: Any) -> Any:
    """The part's parsed XML: the library's own when it parsed it (python-pptx's chart part),
    else its bytes parsed here (python-docx keeps a chart as bytes), no entity resolved and
    no network, after the DTD scan."""
    element = getattr(part, "_element", None)
    if element is not None:
        return element
    from lxml import etree

    parser = etree.XMLParser(resolve_entities=False, no_network=True)
    return etree.fromstring(part.blob, parser)


def _title(title: Any) -> str:
    """A title's text: its rich text's paragraphs, or the cell it names (cached)."""
    if title is None:
        return ""
    rich = title.find(f"{_C}tx/{_C}rich")
    if rich is not None:
        return _line(" ".join("".join(text.text or "" for text in paragraph.iter(f"{_A}t"))
                              for paragraph in rich.iter(f"{_A}p")))
    reference = title.find(f"{_C}tx/{_C}strRef")
    return " ".join(_points(reference)) if reference is not None else ""


def _series_name(series: Any) -> str:
    text = series.find(f"{_C}tx")
    if text is None:
        return ""
    literal = text.find(f"{_C}v")
    if literal is not None:
        return _line(literal.text or "")
    return " ".join(_points(text))


def _points(source: Any, *, numbers: bool = False, dates: bool = False) -> list[str]:
    """The cached points under `source` (a ``c:cat``, ``c:val``, ``c:tx``), in index order.

    A multi-level category keeps its innermost level, the one drawn beside
    the axis. With `numbers`, a point that is not a finite number is left
    out; with `dates`, numbers in a date format are written as ISO dates.
    """
    level = source.find(f".//{_C}lvl")
    holder = level if level is not None else source
    code = source.find(f".//{_C}formatCode")
    dated = dates and code is not None and bool(
        _DATE_CODE.match(_FORMAT_LITERALS.sub("", code.text or "")))
    numeric = numbers or dated or source.find(f".//{_C}numCache") is not None
    points: dict[int, str] = {}
    for point in holder.iter(f"{_C}pt"):
        value = point.find(f"{_C}v")
        text = _line(value.text or "") if value is not None else ""
        if numeric:
            text = _number(text, dated=dated) or ("" if numbers else text)
        if text:
            points.setdefault(_index(point.get("idx")), text)
    return [points[index] for index in sorted(points)]


def _number(text: str, *, dated: bool) -> str:
    """`text` written plainly as a number (or a date), ``""`` when it is not a finite one."""
    try:
        value = float(text)
    except ValueError:
        return ""
    if not math.isfinite(value):
        return ""
    if dated and 1 <= value <= _LAST_DAY:
        return (_EXCEL_EPOCH + datetime.timedelta(days=int(value))).isoformat()
    return format(value, ".15g")


def _index(value: str | None) -> int:
    try:
        return int(value or "")
    except ValueError:
        return 0


def _line(text: str) -> str:
    """`text` on one line (a label's line breaks would break the paragraph), cut to
    `_MAX_LABEL` characters."""
    line = " ".join(text[:_MAX_LABEL * 4].split())
    return line if len(line) <= _MAX_LABEL else line[:_MAX_LABEL - 1] + "\u2026"


# ---------------------------------------------------------------------------------- DOCX


def _not_drawn(reference: Any) -> bool:
    """Whether the ``c:chart`` is not a drawing's chart, or is the second copy of one: a
    drawing's fallback (or a later choice) when an earlier choice draws a chart too."""
    data = reference.getparent()
    if data is None or data.tag != f"{_A}graphicData":
        return True
    for branch in reference.iterancestors(f"{_MC}Choice", f"{_MC}Fallback"):
        alternatives = branch.getparent()
        for earlier in alternatives if alternatives is not None else ():
            if earlier is branch:
                break
            if any(True for _ in earlier.iter(f"{_C}chart")):
                return True
        break
    return False


def _docx_paragraph(anchor: Any, text: str) -> Any:
    paragraph = anchor.makeelement(f"{_W}p", {})
    run = paragraph.makeelement(f"{_W}r", {})
    value = run.makeelement(f"{_W}t", {_XML_SPACE: "preserve"})
    value.text = text
    run.append(value)
    paragraph.append(run)
    return paragraph


# ---------------------------------------------------------------------------------- PPTX


def _pptx_text_box(frame: Any, text: str, ident: int) -> Any:
    """A text box holding `text`, at `frame`'s place and size (as python-pptx reads them,
    a placeholder's inherited from its layout)."""
    from pptx.oxml import parse_xml

    box = parse_xml(
        f'<p:sp xmlns:p="{_P[1:-1]}" xmlns:a="{_A[1:-1]}"><p:nvSpPr>'
        f'<p:cNvPr id="{ident}" name="Chart text"/><p:cNvSpPr txBox="1"/><p:nvPr/>'
        '</p:nvSpPr><p:spPr><a:xfrm><a:off x="0" y="0"/><a:ext cx="0" cy="0"/></a:xfrm>'
        "</p:spPr><p:txBody><a:bodyPr/><a:lstStyle/><a:p><a:r><a:t/></a:r></a:p></p:txBody>"
        "</p:sp>")
    offset = box.find(f".//{_A}off")
    extent = box.find(f".//{_A}ext")
    offset.set("x", str(frame.left or 0))
    offset.set("y", str(frame.top or 0))
    extent.set("cx", str(frame.width or 0))
    extent.set("cy", str(frame.height or 0))
    box.find(f".//{_A}t").text = text
    return box


def _next_shape_id(slide: Any) -> int:
    """An id no shape on the slide uses (the largest plus one)."""
    return max((_index(properties.get("id")) for properties in slide.iter(f"{_P}cNvPr")),
               default=0) + 1
