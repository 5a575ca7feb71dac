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

The newer kinds (``cx:chart``: waterfall, funnel, histogram, treemap,
sunburst, box and whisker; Office 2016 and later) are read the same way from
their own part (`chartex_text`); their drawings carry a picture or a
sentence for older readers in the fallback, which is not read.

Not read: a chart in a footnote or an endnote, data labels a chart writes itself, charts on slide
layouts and masters (unstructured reads no layout), and a workbook's charts.
"""

from __future__ import annotations

import datetime
import math
import re
from dataclasses import dataclass
from typing import Any

from capsa.guard.extractors._drawn import Kind, place_in_docx, place_in_pptx

__all__ = ["Charts", "chart_text", "read_docx_charts", "read_pptx_charts"]

_A = "{http://schemas.openxmlformats.org/drawingml/2006/main}"
_C = "{http://schemas.openxmlformats.org/drawingml/2006/chart}"
_CX = "{http://schemas.microsoft.com/office/drawing/2014/chartex}"
_R_ID = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}id"
_AXES = frozenset({f"{_C}catAx", f"{_C}valAx", f"{_C}dateAx", f"{_C}serAx"})
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
    placed = [place_in_docx(document, kind) for kind in (CHART, CHARTEX)]
    return Charts(sum(one.read for one in placed), sum(one.unread for one in placed))


def read_pptx_charts(presentation: Any) -> Charts:
    """Lay a text box holding each chart's paragraph over each chart of a python-pptx
    `presentation`'s slides; return what was read."""
    placed = [place_in_pptx(presentation, kind) for kind in (CHART, CHARTEX)]
    return Charts(sum(one.read for one in placed), sum(one.unread for one in placed))


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
    return _said(title, axes, categories, named)


def _said(title: str, axes: list[str], categories: list[str], named: list[str]) -> str:
    """A chart's paragraph from its parts; ``""`` when it has none."""
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


CHART = Kind(reference=f"{_C}chart", relationship=_R_ID,
             uri="http://schemas.openxmlformats.org/drawingml/2006/chart",
             root=f"{_C}chartSpace", text=chart_text, box_name="Chart text")
"""A chart, as `capsa.guard.extractors._drawn` places it."""


# ------------------------------------------------------------ the newer kinds (chartex)


def chartex_text(chart_space: Any) -> str:
    """The paragraph a newer chart's part (``cx:chartSpace``: waterfall, funnel, histogram,
    box and whisker, treemap, sunburst, Pareto, region map) reads as, written as a chart's.

    Its data is kept apart from its series: ``cx:chartData`` holds numbered
    data sets, each with dimensions (``cx:strDim`` categories, ``cx:numDim``
    values or sizes) whose points are the element text itself, and each
    series names its set (``cx:dataId``). A hierarchy (treemap, sunburst)
    keeps its innermost level, its first ``cx:lvl``, as a chart's categories do.
    """
    chart = chart_space.find(f"{_CX}chart")
    if chart is None:
        return ""
    data = {item.get("id"): item for item in chart_space.iterfind(f"{_CX}chartData/{_CX}data")}
    title = _chartex_label(chart.find(f"{_CX}title"))
    plot = chart.find(f"{_CX}plotArea")
    axes = [] if plot is None else [
        text for axis in plot.iterchildren(f"{_CX}axis")
        for text in [_chartex_label(axis.find(f"{_CX}title"))] if text]
    series = [] if plot is None else list(plot.iterfind(f"{_CX}plotAreaRegion/{_CX}series"))
    categories: list[str] = []
    named: list[str] = []
    for number, one in enumerate(series, start=1):
        identity = one.find(f"{_CX}dataId")
        source = data.get(identity.get("val") if identity is not None else None)
        if source is None:
            continue
        if not categories:
            categories = _chartex_points(source, f"{_CX}strDim", ("cat",)) or _chartex_points(
                source, f"{_CX}numDim", ("cat", "x"), numbers=True)
        if len(named) < _MAX_SERIES:
            name = _chartex_label(one) or f"series {number}"
            values = _chartex_points(source, f"{_CX}numDim", ("val", "size", "y"), numbers=True)
            named.append(f"{name} ({_listed(values, ', ')})" if values else name)
    if len(series) > _MAX_SERIES:
        named.append(f"and {len(series) - _MAX_SERIES:,} more")
    return _said(title, axes, categories, named)


def _chartex_label(holder: Any) -> str:
    """A title's or series' text: its literal (``cx:tx/cx:txData/cx:v``), else its rich
    text's paragraphs."""
    if holder is None:
        return ""
    literal = holder.find(f"{_CX}tx/{_CX}txData/{_CX}v")
    if literal is not None and (literal.text or "").strip():
        return _line(literal.text or "")
    rich = holder.find(f"{_CX}tx/{_CX}rich")
    if rich is None:
        return ""
    return _line(" ".join("".join(text.text or "" for text in paragraph.iter(f"{_A}t"))
                          for paragraph in rich.iter(f"{_A}p")))


def _chartex_points(data: Any, tag: str, kinds: tuple[str, ...], *,
                    numbers: bool = False) -> list[str]:
    """The points of `data`'s first dimension `tag` whose ``type`` is one of `kinds`, from its
    first level, in index order; with `numbers`, only the finite numbers, written plainly."""
    dimension = next((found for found in data.iterchildren(tag) if found.get("type") in kinds),
                     None)
    level = dimension.find(f"{_CX}lvl") if dimension is not None else None
    if level is None:
        return []
    points: dict[int, str] = {}
    for point in level.iterchildren(f"{_CX}pt"):
        text = _line(point.text or "")
        if numbers:
            text = _number(text, dated=False)
        if text:
            points.setdefault(_index(point.get("idx")), text)
    return [points[index] for index in sorted(points)]


CHARTEX = Kind(reference=f"{_CX}chart", relationship=_R_ID, uri=_CX[1:-1],
               root=f"{_CX}chartSpace", text=chartex_text, box_name="Chart text")
"""A chart of the newer kinds (``cx:chart``), as `capsa.guard.extractors._drawn` places it."""
