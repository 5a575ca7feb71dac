"""A workbook's parts, found as openpyxl finds them, read from the inspected archive.

`sheets` lists the worksheets (and the chart sheets) in the order pandas (and so unstructured)
numbers them; `parse_member` and `relationships` read one part and its
relationships; `after_cells` streams a sheet to an element that follows its
cells. Shared by the survey of hidden sheets, rows and columns
(`capsa.guard.extractors._office_hidden`) and the reading of a sheet's
drawings (`capsa.guard.extractors._xlsx_drawings`). Every part is parsed
by lxml with entities never resolved and no network, after the DTD scan.
"""

from __future__ import annotations

import posixpath
import zipfile
from dataclasses import dataclass
from typing import Any

__all__ = ["Worksheet", "after_cells", "parse_member", "relationships", "sheets"]

_CONTENT_TYPES = "{http://schemas.openxmlformats.org/package/2006/content-types}"
_RELATIONSHIPS = "{http://schemas.openxmlformats.org/package/2006/relationships}"
_S = "{http://schemas.openxmlformats.org/spreadsheetml/2006/main}"
_R_ID = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}id"
_SPREADSHEET = "application/vnd.openxmlformats-officedocument.spreadsheetml."
_WORKBOOK_TYPES = ("application/vnd.ms-excel.template.macroEnabled.main+xml",
                   _SPREADSHEET + "template.main+xml",
                   "application/vnd.ms-excel.sheet.macroEnabled.main+xml",
                   _SPREADSHEET + "sheet.main+xml")
"""In openpyxl's order of preference."""
_WORKSHEET = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/worksheet"
_CHARTSHEET = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/chartsheet"


@dataclass(frozen=True, slots=True)
class Worksheet:
    """One worksheet of a workbook."""

    number: int
    """From 1, among worksheets only, in workbook order: as pandas lists them."""
    name: str
    state: str
    """``visible``, ``hidden`` or ``veryHidden``."""
    part: str
    """Its member name in the archive (it may be missing)."""


def sheets(archive: zipfile.ZipFile) -> tuple[list[Worksheet], list[Worksheet]]:
    """The workbook's worksheets, found through the content types and the workbook's
    relationships as openpyxl finds them, and its chart sheets (a sheet that is one chart,
    which pandas and openpyxl's readers list nowhere; numbered among chart sheets); both
    empty when there is no workbook."""
    found: list[Worksheet] = []
    charts: list[Worksheet] = []
    for name, state, target, kind in _sheets(archive):
        if kind == _WORKSHEET:
            found.append(Worksheet(len(found) + 1, name, state, target))
        elif kind == _CHARTSHEET:
            charts.append(Worksheet(len(charts) + 1, name, state, target))
    return found, charts


def _sheets(archive: zipfile.ZipFile) -> list[tuple[str, str, str, str]]:
    """(name, state, member name, relationship type) of every sheet, in workbook order."""
    types = parse_member(archive, "[Content_Types].xml")
    if types is None:
        return []
    overrides: dict[str | None, str] = {}
    for item in types.iter(f"{_CONTENT_TYPES}Override"):
        overrides.setdefault(item.get("ContentType"), (item.get("PartName") or "")[1:])
    workbook = next((overrides[kind] for kind in _WORKBOOK_TYPES if kind in overrides), None)
    book = parse_member(archive, workbook) if workbook else None
    sheets = book.find(f"{_S}sheets") if book is not None else None
    if workbook is None or sheets is None:
        return []
    targets = relationships(archive, workbook)
    found: list[tuple[str, str, str, str]] = []
    for sheet in sheets.iter(f"{_S}sheet"):
        target, kind = targets.get(sheet.get(_R_ID) or "", ("", ""))
        found.append((sheet.get("name") or "", (sheet.get("state") or "visible").strip(),
                      target, kind))
    return found


def parse_member(archive: zipfile.ZipFile, name: str | None) -> Any:
    """A member parsed, or None when it is missing or not well-formed (a part openpyxl
    cannot read either: nothing to say)."""
    if not name or name not in archive.NameToInfo:
        return None
    info = archive.getinfo(name)
    with archive.open(info) as part:
        data = part.read(info.file_size + 1)
    from lxml import etree  # an optional dependency: imported when a workbook is read

    try:
        return etree.fromstring(data, etree.XMLParser(resolve_entities=False, no_network=True))
    except etree.LxmlError:
        return None


def relationships(archive: zipfile.ZipFile, part: str) -> dict[str, tuple[str, str]]:
    """A part's relationships: id -> (member name, type)."""
    base = posixpath.dirname(part)
    rels = parse_member(archive, posixpath.join(base, "_rels",
                                                posixpath.basename(part) + ".rels"))
    found: dict[str, tuple[str, str]] = {}
    for rel in rels.iter(f"{_RELATIONSHIPS}Relationship") if rels is not None else ():
        target = rel.get("Target") or ""
        joined = target if target.startswith("/") else posixpath.join("/", base, target)
        found.setdefault(rel.get("Id") or "", (posixpath.normpath(joined).lstrip("/"),
                                                rel.get("Type") or ""))
    return found


def after_cells(archive: zipfile.ZipFile, sheet: str, tag: str) -> Any:
    """The sheet's first element named `tag` (``{ns}drawing``, ``{ns}oleObjects``), or None.

    Such elements follow the sheet's cells, so the sheet is streamed to them with
    one row in memory: a sheet of a million rows is read, never held. None too
    when the sheet is missing or not well-formed (openpyxl cannot read it either,
    and the parse will say so).
    """
    from lxml import etree

    if sheet not in archive.NameToInfo:
        return None
    with archive.open(sheet) as part:
        try:
            for _, element in etree.iterparse(part, events=("end",), tag=(tag, f"{_S}row"),
                                              resolve_entities=False, no_network=True):
                if element.tag == tag:
                    return element
                element.clear()
                parent = element.getparent()
                while parent is not None and element.getprevious() is not None:
                    del parent[0]  # read: dropped, so memory stays one row deep
        except etree.LxmlError:
            return None
    return None
