"""Office text a reader does not see: left out where the document hides it, said where it is kept.

Word hides a run whose run properties say ``<w:vanish/>`` (the Hidden font
attribute): it is not shown, not printed, and reaches a reader only when they
turn on "show hidden text". PowerPoint hides a shape whose ``<p:cNvPr>`` says
``hidden="1"`` (the selection pane's eye), on the slide and in the show. Text
put there reaches the model while no reader of the document sees it, so both
are taken out of the document python-docx or python-pptx has just parsed,
before unstructured reads it (`guard_docx`, `guard_pptx`), and counted.

What a reader does see in the normal view, or unhides with a click, stays and
is named in a note instead: a hidden slide (PowerPoint leaves it out of the
show but shows it in the editor), a hidden or very hidden sheet and hidden
rows and columns of a workbook (`survey_workbook`; openpyxl reads them all).

Whether a run is hidden follows ECMA-376 Part 1 §17.7: direct formatting
decides absolutely (``w:val="0"``, ``"false"`` or ``"off"`` shows the run);
otherwise the document defaults, the table style, the paragraph style and the
run style each give the value nearest in their ``basedOn`` chain. Where the
standard and LibreOffice 7.4 disagree, the rule hides more: a run hidden at
two style levels is hidden (the standard's toggle rule would show it,
LibreOffice hides it), hidden document defaults hide (LibreOffice ignores
them), and ``w:specVanish`` hides a run as ``w:vanish`` does (the standard says
such a run "shall always behave as if it is hidden"; LibreOffice shows it).
``w:webHidden`` is kept: it hides text only in Word's web layout, and Word
writes it on the page numbers of every table of contents.
"""

from __future__ import annotations

import importlib
import re
import zipfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import IO, Any

from capsa.guard.extractors._docx_chunks import Chunks, read_alt_chunks
from capsa.guard.extractors._docx_containers import (
    Opened,
    open_containers,
    resolve_alternates,
    text_roots,
)
from capsa.guard.extractors._docx_glyphs import read_glyphs
from capsa.guard.extractors._docx_math import Equations, read_equations
from capsa.guard.extractors._docx_notes import Notes, append_notes
from capsa.guard.extractors._office_charts import Charts, read_docx_charts, read_pptx_charts
from capsa.guard.extractors._office_diagrams import (
    Diagrams,
    read_docx_diagrams,
    read_pptx_diagrams,
)
from capsa.guard.extractors._office_objects import Objects, docx_objects, pptx_objects
from capsa.guard.extractors._pptx_alternates import Alternates, read_alternates
from capsa.guard.extractors._workbook import Worksheet

__all__ = ["HiddenTally", "WorkbookSurvey", "drop_hidden_runs", "drop_hidden_shapes",
           "guard_docx", "guard_pptx", "listening", "survey_workbook", "tally_notes",
           "workbook_notes"]

_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_P = "{http://schemas.openxmlformats.org/presentationml/2006/main}"
_A = "{http://schemas.openxmlformats.org/drawingml/2006/main}"
_S = "{http://schemas.openxmlformats.org/spreadsheetml/2006/main}"
_HIDING = (f"{_W}vanish", f"{_W}specVanish")
_SHAPE_PARENTS = frozenset({f"{_P}spTree", f"{_P}grpSp"})
_MAX_CHAIN = 64
HtmlReader = Callable[[bytes, str | None], list[str]]
"""Reads an HTML page's bytes (and its declared charset) into its elements' texts."""
_NAME_CHARS = 40
_NAMES_SHOWN = 10


@dataclass
class HiddenTally:
    """What one parse left out or kept hidden; filled while `listening`."""

    documents: int = 0
    """Documents opened through the guarded loader (0 means the guard was bypassed)."""
    runs: int = 0
    """DOCX runs of hidden text left out."""
    shapes: int = 0
    """PPTX shapes hidden on their slide, left out."""
    hidden_slides: list[int] = field(default_factory=list)
    """Numbers (from 1) of the PPTX slides marked hidden, whose text was kept."""
    opened: Opened = field(default_factory=Opened)
    """DOCX containers opened (`open_containers`): tracked changes read as accepted."""
    notes: Notes = field(default_factory=Notes)
    """DOCX footnotes and endnotes written after the body (`append_notes`)."""
    equations: Equations = field(default_factory=Equations)
    """DOCX equations read as linear text (`read_equations`)."""
    charts: Charts = field(default_factory=Charts)
    """DOCX and PPTX charts read as a paragraph where they stand, or left out unread
    (`read_docx_charts`, `read_pptx_charts`)."""
    diagrams: Diagrams = field(default_factory=Diagrams)
    """DOCX and PPTX SmartArt diagrams read as a paragraph where they stand, or left out
    unread (`read_docx_diagrams`, `read_pptx_diagrams`)."""
    chunks: Chunks = field(default_factory=Chunks)
    """DOCX embedded HTML or text (``w:altChunk``) read where it stands (`read_alt_chunks`)."""
    objects: Objects = field(default_factory=Objects)
    """DOCX and PPTX embedded objects' files, handed back to be read on their own
    (`docx_objects`, `pptx_objects`)."""
    alternates_read: int = 0
    """DOCX runs, paragraphs and emoji Word writes twice, now read as Word draws them
    (`resolve_alternates`)."""
    alternates: Alternates = field(default_factory=Alternates)
    """PPTX shapes written twice read as PowerPoint shows them, and their equations as
    linear text (`read_alternates`)."""


_TALLY: ContextVar[HiddenTally | None] = ContextVar("capsa_office_hidden", default=None)


@contextmanager
def listening() -> Iterator[HiddenTally]:
    """Count, for the parse inside the block, what the guarded loaders found."""
    tally = HiddenTally()
    token = _TALLY.set(tally)
    try:
        yield tally
    finally:
        _TALLY.reset(token)


def tally_notes(tally: HiddenTally) -> tuple[str, ...]:
    """The notes a reader of the text should see about `tally`; none when nothing was hidden."""
    notes: list[str] = []
    if tally.runs:
        notes.append(f"left out {tally.runs} run(s) of hidden text (Word's hidden font "
                     "attribute): a reader never sees them")
    if tally.shapes:
        notes.append(f"left out {tally.shapes} shape(s) hidden on their slide (PowerPoint's "
                     "selection pane): a reader never sees them")
    for said in (tally.opened.note(), tally.notes.note(), tally.equations.note()):
        if said is not None:
            notes.append(said)
    notes.extend(tally.charts.notes())
    notes.extend(tally.diagrams.notes())
    if tally.alternates_read:
        notes.append(f"read {tally.alternates_read} passage(s) Word writes twice, for newer "
                     "and older readers, as Word shows them (python-docx reads neither)")
    notes.extend(tally.alternates.notes())
    notes.extend(tally.chunks.notes())
    if tally.hidden_slides:
        numbers = ", ".join(map(str, tally.hidden_slides[:_NAMES_SHOWN]))
        more = ", ..." if len(tally.hidden_slides) > _NAMES_SHOWN else ""
        notes.append(f"kept the text of {len(tally.hidden_slides)} hidden slide(s) (slide "
                     f"{numbers}{more}): PowerPoint leaves them out of a slide show but shows "
                     "them in its editor")
    return tuple(notes)


# ------------------------------------------------------------------------------------ DOCX


def _flag(element: Any) -> bool | None:
    """An on/off property's value: None when absent; off only for ``0``, ``false``, ``off``."""
    if element is None:
        return None
    value = element.get(f"{_W}val")
    return value is None or value.strip().lower() not in ("0", "false", "off")


class _Styles:
    """The hiding properties of a document's styles, resolved along ``basedOn`` chains."""

    def __init__(self, root: Any) -> None:
        self._by_id: dict[tuple[str, str], Any] = {}
        self._default: dict[str, Any] = {}
        self._cache: dict[tuple[str, str | None, str], bool] = {}
        self._defaults: dict[str, bool] = {}
        self._kinds: set[str] = set()
        self.hides_any = False
        if root is None:
            return
        for style in root.iterchildren(f"{_W}style"):
            kind = style.get(f"{_W}type") or "paragraph"
            self._by_id.setdefault((kind, style.get(f"{_W}styleId") or ""), style)
            if _flag_value(style.get(f"{_W}default")):
                self._default.setdefault(kind, style)
        defaults = root.find(f"{_W}docDefaults/{_W}rPrDefault/{_W}rPr")
        for tag in _HIDING:
            self._defaults[tag] = bool(_flag(defaults.find(tag))) if defaults is not None else False
        # the style types where some style hides text: only their levels can hide a run
        self._kinds = {kind for (kind, _), style in self._by_id.items()
                       if any(_flag(element) for element in style.iterfind(f"{_W}rPr/*")
                              if element.tag in _HIDING)}
        self.hides_any = any(self._defaults.values()) or bool(self._kinds)

    def hides(self, run: Any, properties: Any, tag: str) -> bool:
        """Whether a style level (or the document defaults) hides `run` by property `tag`."""
        if self._defaults.get(tag):
            return True
        if "character" in self._kinds and self._level(
                "character", _style_id(properties, f"{_W}rStyle"), tag):
            return True
        if "paragraph" in self._kinds and self._level(
                "paragraph", _style_id(next(run.iterancestors(f"{_W}p"), None),
                                       f"{_W}pPr/{_W}pStyle"), tag):
            return True
        table = next(run.iterancestors(f"{_W}tbl"), None) if "table" in self._kinds else None
        return table is not None and self._level(
            "table", _style_id(table, f"{_W}tblPr/{_W}tblStyle"), tag)

    def _level(self, kind: str, style_id: str | None, tag: str) -> bool:
        key = (kind, style_id, tag)
        if key not in self._cache:
            style = self._by_id.get((kind, style_id)) if style_id is not None else None
            if style is None:  # no style named, or a name the styles lack: the default applies
                style = self._default.get(kind)
            value: bool | None = None
            seen: set[int] = set()
            while style is not None and value is None and len(seen) < _MAX_CHAIN:
                seen.add(id(style))
                properties = style.find(f"{_W}rPr")
                value = _flag(properties.find(tag)) if properties is not None else None
                based = style.find(f"{_W}basedOn")
                style = self._by_id.get((kind, based.get(f"{_W}val") or "")) if (
                    based is not None) else None
                if style is not None and id(style) in seen:
                    break
            self._cache[key] = bool(value)
        return self._cache[key]


def _flag_value(value: str | None) -> bool:
    return value is not None and value.strip().lower() in ("1", "true", "on")


def _style_id(element: Any, path: str) -> str | None:
    found = element.find(path) if element is not None else None
    return found.get(f"{_W}val") if found is not None else None


def _hidden_run(run: Any, styles: _Styles) -> bool:
    properties = run.find(f"{_W}rPr")
    for tag in _HIDING:
        direct = _flag(properties.find(tag)) if properties is not None else None
        if direct is not None:
            if direct:
                return True
        elif styles.hides_any and styles.hides(run, properties, tag):
            return True
    return False


def _owning_run(element: Any) -> Any:
    """The run whose own properties hold `element` (not a paragraph mark's, not a tracked
    change's former properties); None otherwise."""
    properties = element.getparent()
    run = properties.getparent() if properties is not None else None
    if properties is None or properties.tag != f"{_W}rPr" or run is None or run.tag != f"{_W}r":
        return None
    return run


def _drop_runs(root: Any, styles: _Styles) -> int:
    """Remove the hidden runs under `root` (outermost only); return how many held text."""
    if styles.hides_any:
        candidates: Iterator[Any] = root.iter(f"{_W}r")
    else:  # only direct formatting can hide: look at the runs that carry it, not at all runs
        candidates = (_owning_run(element) for element in root.iter(*_HIDING))
    doomed = [run for run in candidates if run is not None and _hidden_run(run, styles)]
    gone: set[Any] = set()
    counted = 0
    for run in doomed:
        if run in gone or any(outer in gone for outer in run.iterancestors(f"{_W}r")):
            continue
        parent = run.getparent()
        if parent is None:
            continue
        counted += any(text.text for text in run.iter(f"{_W}t"))
        parent.remove(run)
        gone.add(run)
    return counted


def drop_hidden_runs(document: Any) -> int:
    """Remove every hidden run from a python-docx `document`'s body, headers and footers.

    Returns the number of runs left out that held text (a hidden run that
    only carries a field code or a bookmark changes no text and is not
    counted). Runs in a hidden run's text box go with it.
    """
    main = document.part
    styles_root = None
    try:
        from docx.opc.constants import RELATIONSHIP_TYPE

        styles_root = main.part_related_by(RELATIONSHIP_TYPE.STYLES).element
    except (KeyError, ValueError, AttributeError):
        pass  # no styles part (or two): no style hides anything
    styles = _Styles(styles_root)
    return sum(_drop_runs(root, styles) for root in text_roots(document))


def _clean_docx(document: Any, tally: HiddenTally, html: HtmlReader) -> None:
    # first: every pass after sees the branch Word draws, and nothing of the others
    tally.alternates_read += resolve_alternates(document)
    # the chunks' paragraphs are the body's, for every pass after
    tally.chunks += read_alt_chunks(document, html)
    tally.runs += drop_hidden_runs(document)  # first: a hidden run takes its text box with it
    # before the notes: a chart copied from a note would be looked up in the body's part
    tally.charts += read_docx_charts(document)
    tally.diagrams += read_docx_diagrams(document)  # for the same reason
    tally.objects += docx_objects(document)  # for the same reason
    notes = append_notes(document)  # the references left standing, then their notes' text
    if notes.footnotes or notes.endnotes:
        tally.alternates_read += resolve_alternates(document)  # the notes' own
        tally.runs += drop_hidden_runs(document)  # the notes' own hidden runs
    tally.notes = notes
    read_glyphs(text_roots(document))  # symbols and phonetic guides, wherever they stand
    opened = open_containers(document)
    tally.opened = Opened(tally.opened.insertions + opened.insertions,
                          tally.opened.deletions + opened.deletions,
                          tally.opened.text_boxes + opened.text_boxes)
    # last: an equation in a note, an insertion or a text box is where the reader sees it
    equations = read_equations(document)
    tally.equations = Equations(tally.equations.read + equations.read,
                                tally.equations.hidden + equations.hidden)


def guard_docx(html: HtmlReader) -> None:
    """Make unstructured's DOCX partitioner open documents without their hidden runs, and
    with the text Word shows inside containers python-docx does not yield
    (`capsa.guard.extractors._docx_containers`), in notes, equations, charts, SmartArt
    diagrams and embedded HTML or text (`capsa.guard.extractors._docx_chunks`, read by
    `html` as an HTML file is)."""
    _guard("unstructured.partition.docx", "docx", "Document",
           lambda document, tally: _clean_docx(document, tally, html),
           "capsa cannot leave out Word's hidden text")


# ------------------------------------------------------------------------------------ PPTX


def _true(value: str | None) -> bool:
    return value is not None and value.strip().lower() in ("1", "true")


def drop_hidden_shapes(presentation: Any) -> tuple[int, list[int]]:
    """Remove the shapes a python-pptx `presentation` hides on its slides.

    Returns how many of the shapes left out held text, and the numbers (from
    1, in the order python-pptx yields slides, which is unstructured's page
    order) of slides marked hidden (``<p:sld show="0">``), which are kept.
    A hidden group goes whole, with everything in it.
    """
    counted = 0
    hidden: list[int] = []
    done: set[int] = set()
    for number, slide in enumerate(presentation.slides, start=1):
        element = slide.element
        show = element.get("show")
        if show is not None and show.strip().lower() in ("0", "false"):
            hidden.append(number)
        if id(element) in done:
            continue  # two slide ids naming one slide part: cleaned once
        done.add(id(element))
        tree = element.find(f"{_P}cSld/{_P}spTree")
        if tree is None:
            continue
        doomed = [properties.getparent().getparent() for properties in tree.iter(f"{_P}cNvPr")
                  if _true(properties.get("hidden"))]
        gone: set[Any] = set()
        for shape in doomed:
            parent = shape.getparent() if shape is not None else None
            if parent is None or parent.tag not in _SHAPE_PARENTS or any(
                    outer in gone for outer in shape.iterancestors(f"{_P}grpSp")):
                continue
            counted += any(text.text for text in shape.iter(f"{_A}t"))
            parent.remove(shape)
            gone.add(shape)
    return counted, hidden


def _count_shapes(presentation: Any, tally: HiddenTally) -> None:
    # the branch PowerPoint shows first: a hidden shape or a chart inside it is then one
    # like any other
    tally.alternates += read_alternates(presentation)
    removed, hidden = drop_hidden_shapes(presentation)  # first: a hidden chart goes unread
    tally.shapes += removed
    tally.hidden_slides.extend(hidden)
    tally.charts += read_pptx_charts(presentation)
    tally.diagrams += read_pptx_diagrams(presentation)
    tally.objects += pptx_objects(presentation)


def guard_pptx() -> None:
    """Make unstructured's PPTX partitioner open decks without their hidden shapes, and with
    the text of shapes written twice (`capsa.guard.extractors._pptx_alternates`) and of
    their charts and SmartArt diagrams (`capsa.guard.extractors._office_charts`,
    `capsa.guard.extractors._office_diagrams`)."""
    _guard("unstructured.partition.pptx", "pptx", "Presentation", _count_shapes,
           "capsa cannot leave out hidden shapes")


# ------------------------------------------------------------------------------ the loaders


class _Guarded:
    """A module (`docx`, `pptx`) as unstructured's partitioner sees it: its `opener`
    (`Document`, `Presentation`) hands what it opens to `clean`, which removes what the
    reader never sees and counts it where `listening`."""

    def __init__(self, module: Any, opener: str,
                 clean: Callable[[Any, HiddenTally], None]) -> None:
        self._module, self._opener, self._clean = module, opener, clean

    def __getattr__(self, name: str) -> Any:
        if name == self._opener:
            return self._open
        return getattr(self._module, name)

    def _open(self, source: str | IO[bytes] | None = None) -> Any:
        opened = getattr(self._module, self._opener)(source)
        tally = _TALLY.get()
        self._clean(opened, tally if tally is not None else HiddenTally())
        if tally is not None:
            tally.documents += 1
        return opened


def _guard(partition: str, attribute: str, opener: str,
           clean: Callable[[Any, HiddenTally], None], consequence: str) -> None:
    """Put `_Guarded` in place of `attribute`, the module `partition` opens files through."""
    module = importlib.import_module(partition)
    current = getattr(module, attribute, None)
    if isinstance(current, _Guarded):
        return
    if current is None or not hasattr(current, opener):
        raise RuntimeError(f"unstructured's {attribute.upper()} partitioner no longer opens "
                           f"files through {attribute}.{opener}; {consequence}")
    setattr(module, attribute, _Guarded(current, opener, clean))


# ------------------------------------------------------------------------------------ XLSX


_HIDDEN_MARKS = (b"hidden", "hidden".encode("utf-16-le"), "hidden".encode("utf-16-be"))
_CELL_REF = re.compile(r"([A-Z]{1,3})(\d+)")
_MAX_COLUMN = 16384
_STATES = {"hidden": "hidden", "veryHidden": "very hidden: only the VBA editor unhides it"}


@dataclass(frozen=True, slots=True)
class WorkbookSurvey:
    """A workbook's hidden sheets, rows and columns, as its parts declare them."""

    hidden_sheets: tuple[tuple[int, str, str], ...] = ()
    """(number from 1 among worksheets, name, state) of each sheet not visible."""
    hidden_cells: tuple[tuple[int, str, int, int], ...] = ()
    """(number, name, hidden rows, hidden columns) of each visible sheet whose hidden rows or
    columns hold cells with a value."""


def survey_workbook(archive: zipfile.ZipFile, worksheets: list[Worksheet]) -> WorkbookSurvey:
    """Find the hidden sheets, rows and columns of the workbook in `archive`, whose
    `worksheets` are found by `capsa.guard.extractors._workbook.sheets` (as openpyxl finds
    them, numbered as pandas lists them). A sheet is read
    for hidden rows and columns only when its bytes name ``hidden`` at all,
    and then streamed, one row in memory. Run after the DTD scan; parsed by
    lxml with entities never resolved and no network all the same.
    """
    from lxml import etree  # an optional dependency: imported when a workbook is read

    hidden_sheets: list[tuple[int, str, str]] = []
    hidden_cells: list[tuple[int, str, int, int]] = []
    for sheet in worksheets:
        if sheet.state != "visible":
            hidden_sheets.append((sheet.number, sheet.name, sheet.state))
        elif sheet.part in archive.NameToInfo and _names_hidden(archive, sheet.part):
            with archive.open(sheet.part) as part:
                try:
                    rows, columns = _hidden_with_values(part)
                except etree.LxmlError:
                    rows = columns = 0  # openpyxl cannot read it either; the parse will say so
            if rows or columns:
                hidden_cells.append((sheet.number, sheet.name, rows, columns))
    return WorkbookSurvey(tuple(hidden_sheets), tuple(hidden_cells))


def workbook_notes(survey: WorkbookSurvey, pages: set[int],
                   charts: Sequence[Worksheet] = ()) -> tuple[str, ...]:
    """Notes on the hidden parts of a workbook whose text was kept (`pages`: sheet numbers
    that have text; `charts`: the chart sheets whose chart was read)."""
    notes: list[str] = []
    sheets = [(number, name, state) for number, name, state in survey.hidden_sheets
              if number in pages]
    sheets += [(sheet.number, sheet.name, sheet.state) for sheet in charts
               if sheet.state != "visible"]
    if sheets:
        named = ", ".join(f"{_shown(name)} ({_STATES.get(state, 'hidden')})"
                          for _, name, state in sheets[:_NAMES_SHOWN])
        more = ", ..." if len(sheets) > _NAMES_SHOWN else ""
        notes.append(f"kept the text of {len(sheets)} hidden sheet(s): {named}{more}; a "
                     "reader sees them only once they are unhidden")
    cells = [entry for entry in survey.hidden_cells if entry[0] in pages]
    if cells:
        rows = sum(entry[2] for entry in cells)
        columns = sum(entry[3] for entry in cells)
        named = ", ".join(_shown(entry[1]) for entry in cells[:_NAMES_SHOWN])
        more = ", ..." if len(cells) > _NAMES_SHOWN else ""
        notes.append(f"kept {rows} hidden row(s) and {columns} hidden column(s) that hold "
                     f"cells, on sheet(s) {named}{more}: a reader sees them only once they "
                     "are unhidden")
    return tuple(notes)


def _shown(name: str) -> str:
    """A sheet name as a note shows it: quoted, one line, cut."""
    name = " ".join(name.split())
    return repr(name if len(name) <= _NAME_CHARS else name[:_NAME_CHARS - 1] + "\u2026")


def _names_hidden(archive: zipfile.ZipFile, name: str) -> bool:
    """Whether the part's bytes spell ``hidden`` (UTF-8 or UTF-16), read in chunks."""
    tail = b""
    with archive.open(name) as part:
        while chunk := part.read(1 << 16):
            data = tail + chunk
            if any(mark in data for mark in _HIDDEN_MARKS):
                return True
            tail = data[-16:]
    return False


def _hidden_with_values(part: IO[bytes]) -> tuple[int, int]:
    """Hidden rows holding a value, and hidden columns holding one in any row.

    Streamed, one row in memory, with Python woken only at the end of each
    column range and row: a row's cells are looked at only when the row is
    hidden or its last cell reaches a hidden column not yet seen holding a
    value. The hidden ranges (which come before the cells) become one flag per
    column, merged first, so overlapping ranges cost nothing more.
    """
    from lxml import etree

    ranges: list[tuple[int, int]] = []
    hidden: bytearray | None = None
    used: set[int] = set()
    rows = 0
    for _, element in etree.iterparse(part, events=("end",), tag=(f"{_S}col", f"{_S}row"),
                                      resolve_entities=False, no_network=True):
        if element.tag == f"{_S}col":
            low, high = _number(element.get("min")), _number(element.get("max"))
            if _true(element.get("hidden")) and 0 < low <= high:
                ranges.append((low, min(high, _MAX_COLUMN)))
            continue
        if hidden is None:
            hidden = _column_flags(ranges)
        row_hidden = _true(element.get("hidden"))
        if row_hidden or (ranges and len(element) and _reaches(element[-1], hidden, used)):
            column, valued = 0, False
            for cell in element.iterchildren(f"{_S}c"):
                column = _column(cell.get("r"), column)
                if _has_value(cell):
                    valued = True
                    if column <= _MAX_COLUMN and hidden[column]:
                        used.add(column)
            rows += row_hidden and valued
        element.clear()
        parent = element.getparent()
        while parent is not None and element.getprevious() is not None:
            del parent[0]  # read: dropped, so memory stays one row deep
    return rows, len(used)


def _reaches(last: Any, hidden: bytearray, used: set[int]) -> bool:
    """Whether a row whose last cell is `last` may hold a value in a hidden column not yet
    seen holding one (a cell without a reference may be anywhere: yes)."""
    match = _CELL_REF.fullmatch(last.get("r") or "")
    if match is None:
        return True
    reach = min(_column(last.get("r"), 0), _MAX_COLUMN)
    return any(hidden[column] and column not in used for column in range(1, reach + 1))


def _column_flags(ranges: list[tuple[int, int]]) -> bytearray:
    """One byte per column (from 1), set where a range hides it; ranges merged first, so the
    work is bounded by the number of columns however many ranges overlap."""
    flags = bytearray(_MAX_COLUMN + 1)
    reach = 0
    for low, high in sorted(ranges):
        low = max(low, reach + 1)
        if low <= high:
            flags[low:high + 1] = b"\x01" * (high - low + 1)
            reach = high
    return flags


def _has_value(cell: Any) -> bool:
    value = cell.find(f"{_S}v")
    if value is not None and value.text:
        return True
    inline = cell.find(f"{_S}is")
    return inline is not None and any(text.text for text in inline.iter(f"{_S}t"))


def _number(value: str | None) -> int:
    try:
        return int(value or "")
    except ValueError:
        return 0


def _column(reference: str | None, last: int) -> int:
    match = _CELL_REF.fullmatch(reference or "")
    if match is None:
        return last + 1
    column = 0
    for letter in match.group(1):
        column = column * 26 + ord(letter) - 64
    return column
