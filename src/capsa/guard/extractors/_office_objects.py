"""Files embedded in Word, PowerPoint and Excel files, handed back to be read on their own.

A worksheet pasted into a report, or a document dropped onto a slide, is an
OLE object: the page shows a picture of it, and the file itself is a part of
the package (``word/embeddings/Microsoft_Excel_Worksheet.xlsx``, or an
``oleObject1.bin`` container for older formats). unstructured reads none of
it, so a report's figures in an embedded table were lost without a word.

`docx_objects`, `pptx_objects` and `xlsx_objects` find the objects a reader
sees, after the hiding passes (an object in a hidden run, a hidden shape, a
tracked deletion or a branch the application does not draw is not one), and
hand each object's part back as an `EmbeddedFile`, once however many objects
name it. The guard then runs it through the whole pipeline as a file of its
own, as it does an e-mail's attachment: inspected, sniffed, parsed in a
fresh isolated parser, under the parent's share of the limits, and listed in
the parent's text; what it cannot read is an omission with its reason. A
file wrapped in an OLE container (a packager object, a PDF) is taken out of
it first (`capsa.guard.extractors._ole_native`). A linked object (its file
outside the package) is not read; an object whose part is missing is
counted (`Objects.missing`).
"""

from __future__ import annotations

import posixpath
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from capsa.guard.extractors._alternates import EXCEL, POWERPOINT, WORD, in_unshown_branch
from capsa.guard.extractors._docx_containers import text_parts
from capsa.guard.extractors._ole_native import unwrapped
from capsa.guard.extractors._workbook import after_cells, relationships
from capsa.guard.port import EmbeddedFile

__all__ = ["Objects", "docx_objects", "pptx_objects", "xlsx_objects"]

_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_P = "{http://schemas.openxmlformats.org/presentationml/2006/main}"
_O = "{urn:schemas-microsoft-com:office:office}"
_R_ID = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}id"
_S = "{http://schemas.openxmlformats.org/spreadsheetml/2006/main}"
_DELETED = (f"{_W}del", f"{_W}moveFrom")
_EMBEDDING_TYPES = frozenset({
    "http://schemas.openxmlformats.org/officeDocument/2006/relationships/package",
    "http://schemas.openxmlformats.org/officeDocument/2006/relationships/oleObject",
})


@dataclass(frozen=True, slots=True)
class Objects:
    """The embedded objects of one document."""

    files: tuple[EmbeddedFile, ...] = ()
    """Each embedded part once, in the order the document first names it."""
    missing: int = 0
    """Objects whose part is missing, external or unreadable."""
    over: tuple[int, ...] = ()
    """The sizes of the files left out because the files inside took more than `within`'s
    budget."""
    budget: int = 0
    """That budget, in bytes, when any file went over it."""

    def __add__(self, other: Objects) -> Objects:
        return Objects(self.files + other.files, self.missing + other.missing,
                       self.over + other.over, max(self.budget, other.budget))

    def within(self, budget: int) -> Objects:
        """The files that fit in `budget` bytes together, in order; the rest counted.

        The guard charges the files found inside one against what is left of
        ``max_uncompressed_bytes`` once the file itself (its bytes, and what its parts
        declare) is charged, and refuses the whole file when they take more: an
        embedded workbook must not cost the report its own text. So they are cut
        here to that budget. A file found inside another shares what the files
        before it left, which the parser does not know: there an embedded object
        can still take its document past the limit, refused as ``archive_too_large``.
        """
        kept: list[EmbeddedFile] = []
        over: list[int] = []
        left = budget
        for found in self.files:
            if len(found.payload) <= left:
                kept.append(found)
                left -= len(found.payload)
            else:
                over.append(len(found.payload))
        if not over:
            return self
        return Objects(tuple(kept), self.missing, (*self.over, *over), budget)

    def notes(self) -> tuple[str, ...]:
        """The extraction notes; none when every object's file was handed back."""
        said = []
        if self.missing:
            said.append(f"left out {self.missing} embedded object(s) whose file is missing "
                        "from the package: the page shows only their picture")
        if self.over:
            said.append(f"left out {len(self.over)} embedded object(s) of {sum(self.over)} "
                        f"bytes: the files inside one file share the {self.budget} bytes it "
                        "leaves of max_uncompressed_bytes")
        return tuple(said)


def docx_objects(document: Any) -> Objects:
    """The embedded objects (``o:OLEObject Type="Embed"``) of a python-docx `document`'s
    body, headers and footers, as Word shows them."""
    collected = _Collected()
    for part, root in text_parts(document):
        for ole in root.iter(f"{_O}OLEObject"):
            if ((ole.get("Type") or "Embed") != "Embed"
                    or next(ole.iterancestors(*_DELETED), None) is not None
                    or in_unshown_branch(ole, WORD)):
                continue
            collected.take(part, ole.get(_R_ID))
    return collected.objects()


def pptx_objects(presentation: Any) -> Objects:
    """The embedded objects (``p:oleObj`` holding ``p:embed``) on a python-pptx
    `presentation`'s slides, as PowerPoint shows them."""
    collected = _Collected()
    done: set[int] = set()
    for slide in presentation.slides:
        if id(slide.element) in done:
            continue  # two slide ids naming one slide part: read once
        done.add(id(slide.element))
        tree = slide.element.find(f"{_P}cSld/{_P}spTree")
        for ole in tree.iter(f"{_P}oleObj") if tree is not None else ():
            if ole.find(f"{_P}embed") is None or in_unshown_branch(ole, POWERPOINT):
                continue  # a linked object, or a copy PowerPoint does not draw
            collected.take(slide.part, ole.get(_R_ID))
    return collected.objects()


def xlsx_objects(archive: zipfile.ZipFile, sheets: Sequence[str]) -> Objects:
    """The embedded objects (``oleObject``) of the worksheet parts `sheets` (member names
    of the inspected `archive`), in sheet order: Excel lists them after the sheet's cells.

    A sheet is read again, streamed and one row deep, only when it relates an embedded
    part; of an ``mc:AlternateContent`` the branch Excel draws names the object.
    """
    files: list[EmbeddedFile] = []
    missing = 0
    seen: set[str] = set()
    for sheet in sheets:
        related = relationships(archive, sheet)
        if not any(kind in _EMBEDDING_TYPES for _, kind in related.values()):
            continue  # the common case: nothing embedded, and the sheet is not read again
        for ident in _object_ids(archive, sheet):
            target, kind = related.get(ident, ("", ""))
            if kind not in _EMBEDDING_TYPES or target not in archive.NameToInfo:
                missing += 1
            elif target not in seen:
                seen.add(target)
                info = archive.getinfo(target)
                with archive.open(info) as part:
                    payload = part.read(info.file_size + 1)
                files.append(_embedded(posixpath.basename(target), None, payload))
    return Objects(tuple(files), missing)


def _object_ids(archive: zipfile.ZipFile, sheet: str) -> list[str]:
    """The relationship ids of the objects the sheet's ``oleObjects`` lists, as Excel
    draws them."""
    listed = after_cells(archive, sheet, f"{_S}oleObjects")
    return [ole.get(_R_ID) or "" for ole in listed.iter(f"{_S}oleObject")
            if not in_unshown_branch(ole, EXCEL)] if listed is not None else []


def _embedded(name: str, media_type: str | None, payload: bytes) -> EmbeddedFile:
    """The file an object's part holds: the file a packager or PDF container wraps
    (`capsa.guard.extractors._ole_native`), else the part itself."""
    inner = unwrapped(name, payload)
    if inner is not None:
        return EmbeddedFile(name=inner[0], media_type=None, payload=inner[1])
    return EmbeddedFile(name=name or "object", media_type=media_type, payload=payload)


class _Collected:
    def __init__(self) -> None:
        self.files: list[EmbeddedFile] = []
        self.missing = 0
        self._seen: set[int] = set()

    def take(self, part: Any, ident: str | None) -> None:
        rel = part.rels.get(ident) if ident else None
        target: Any = None
        try:
            if rel is not None and not rel.is_external:
                target = rel.target_part
        except Exception:  # noqa: BLE001 - a broken relationship is one object lost, counted
            target = None
        blob = getattr(target, "blob", None)
        if target is None or not blob:
            self.missing += 1
            return
        if id(target) in self._seen:
            return
        self._seen.add(id(target))
        self.files.append(_embedded(posixpath.basename(str(target.partname)),
                                    target.content_type or None, bytes(blob)))

    def objects(self) -> Objects:
        return Objects(tuple(self.files), self.missing)
