"""Counts made before parsing: slides against `max_pages`, text against `max_text_chars`.

Work done before a limit refuses must be proportional to the limit, not to
the file. Each counter here reads a file the way its real parser will
(unstructured over python-docx, python-pptx, openpyxl and pandas, pandoc, or
libxml2's HTML parser), counts what that parser would surely return, and
stops as soon as the count is over the limit: a 500-slide deck, a
100,000-row workbook or a book is refused in milliseconds instead of after
the parser has read it whole. Containers are read through the inspected
archive (`capsa.guard.archive.open_inspected`), and only after the DTD scan
when a counter parses XML.

Each text count is a *floor*: only characters the parser certainly keeps are
counted (`visible_chars`: no white space, no control or format characters,
no combining marks that NFC could fold into the letter before them), and only
in parts, shapes and elements the parser certainly reads. A file is refused
only when its text would be over the limit after parsing anyway, so a floor
never refuses a file the parser would have accepted; it only refuses it
sooner. Where the floor cannot be sure, it counts nothing.

What is not counted here, and why:

- E-mail: the body is found by parsing the MIME tree, and decoded by its
  declared charsets; that is the parse. RTF: control words, groups and
  destinations (``\\*``) decide what is text, which is the parser's work
  again. Plain text, Markdown, CSV and JSON: decoding is the whole parse, and
  it runs in milliseconds.
- PDF: text exists only once content streams are decoded; pypdf extracts
  page by page and stops at the page that passes the limit
  (`capsa.guard.extractors.unstructured`).
- Pages of a DOCX: pages are made by layout, which no part records.
"""

from __future__ import annotations

import codecs
import html
import posixpath
import re
import unicodedata
import urllib.parse
import zipfile
from collections import Counter
from collections.abc import Iterator
from typing import IO, Any
from xml.etree import ElementTree

from capsa.errors import IngestionRejected, RejectionReason

__all__ = ["check_docx_text_floor", "check_html_text_floor", "check_text_floor", "count_slides",
           "refuse", "text_floor_over", "visible_chars"]


def refuse(reason: RejectionReason, detail: str) -> IngestionRejected:
    """A pre-flight refusal of the payload (the guard puts the file's label on it)."""
    return IngestionRejected(detail, label="<payload>", stage="preflight", reason=reason)


def text_floor_over(counted: int, limit: int, where: str) -> IngestionRejected:
    """The ``text_too_long`` refusal of a count that is already over `limit`."""
    return IngestionRejected(
        f"{where} holds at least {counted} characters of text, over the limit of {limit} "
        "(max_text_chars); refused before it was all parsed, dropped whole, never truncated",
        label="<payload>", stage="text", reason="text_too_long")


# ------------------------------------------------------------------------ counting text


_ASCII_UNCOUNTED = " " + "".join(map(chr, range(0x20))) + "\x7f"
"""Space, the C0 controls (white space among them) and DEL."""
_ASCII_DROPPED = str.maketrans("", "", _ASCII_UNCOUNTED)
_COUNTED: dict[str, bool] = {}
_HANGUL_VOWELS_AND_FINALS = range(0x1160, 0x1200)
"""Conjoining jamo that NFC composes into the syllable before them."""


def _counted(ch: str) -> bool:
    seen = _COUNTED.get(ch)
    if seen is None:
        category = unicodedata.category(ch)
        seen = not (ch.isspace() or category[0] == "M" or category in ("Cc", "Cf", "Co", "Cn", "Cs")
                    or ord(ch) in _HANGUL_VOWELS_AND_FINALS)
        if len(_COUNTED) < 65536:
            _COUNTED[ch] = seen
    return seen


def visible_chars(text: str) -> int:
    """Characters of `text` that survive `capsa.guard.normalize.normalize` in any context.

    White space, control and format characters are left out (normalisation
    strips or folds them), and so are combining marks and conjoining jamo,
    which NFC may fold into the character before them; every character
    counted stays one character. So the count of a text is never more than
    the length of the normalised text, wherever the text ends up in it.

    Examples:
        >>> visible_chars("a b\\tc")
        3
        >>> visible_chars("e\\u0301t\\u00e9\\u200b")  # e + combining acute folds into é
        3
    """
    if text.isascii():
        return len(text.translate(_ASCII_DROPPED))
    return sum(number for ch, number in Counter(text).items() if _counted(ch))


# -------------------------------------------------------------------------------- parts


_RELATIONSHIPS_NS = "http://schemas.openxmlformats.org/package/2006/relationships"
_OFFICE_DOCUMENT = ("http://schemas.openxmlformats.org/officeDocument/2006/relationships/"
                    "officeDocument")
_R_ID = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}id"


def parse_part(archive: zipfile.ZipFile, name: str) -> ElementTree.Element | None:
    """Part `name` parsed whole (its size was bounded by the inspection), or None if absent.

    Parts were scanned for DTDs before anything here parses them.
    """
    try:
        info = archive.getinfo(name)
    except KeyError:
        return None  # the parser will say what is missing
    with archive.open(info) as part:
        data = part.read(info.file_size + 1)
    try:
        return ElementTree.fromstring(data)
    except ElementTree.ParseError as exc:
        raise refuse("corrupt", f"part {name!r} is not well-formed XML: {exc}") from None


def office_documents(archive: zipfile.ZipFile) -> list[str]:
    """The main parts the package relationships name (one, in any file a parser opens)."""
    return [target for target, kind in _relationships(archive, "").values()
            if kind == _OFFICE_DOCUMENT]


def _resolve(source: str, target: str) -> str:
    base = posixpath.dirname(source)
    joined = target if target.startswith("/") else posixpath.join("/", base, target)
    return posixpath.normpath(joined).lstrip("/")


def _relationships(archive: zipfile.ZipFile, part: str) -> dict[str, tuple[str, str]]:
    """Id to (target part name, type), for the internal relationships of `part` ("" for
    the package's own)."""
    rels_name = posixpath.join(posixpath.dirname(part), "_rels", posixpath.basename(part) + ".rels")
    rels = parse_part(archive, rels_name)
    if rels is None:
        return {}
    return {rel.get("Id", ""): (_resolve(part, rel.get("Target", "")), rel.get("Type", ""))
            for rel in rels.iter(f"{{{_RELATIONSHIPS_NS}}}Relationship")
            if rel.get("TargetMode") != "External"}


# --------------------------------------------------------------------------------- DOCX


_DOCX_TEXT = re.compile(rb"<w:t(?:\s[^>]*)?>([^<]*)</w:t>")
_DOCX_TEXT_BOX = re.compile(rb"<w:txbxContent\b.*?</w:txbxContent>", re.DOTALL)
_DOCX_ALTERNATE = re.compile(rb"<(/?)mc:AlternateContent\b[^>]*?(/?)>")


def _outside_alternates(xml: bytes) -> bytes:
    """`xml` less each ``mc:AlternateContent``, nested ones with it: the parser reads the
    one branch Word draws (`capsa.guard.extractors._alternates`), which depends on what
    the branches require, so the floor counts neither. An alternate left open takes the
    rest of `xml` with it, which only lowers the floor."""
    kept: list[bytes] = []
    depth = start = 0
    for tag in _DOCX_ALTERNATE.finditer(xml):
        closing, empty = tag.group(1), tag.group(2)
        if empty or not closing:
            if depth == 0:
                kept.append(xml[start:tag.start()])
                start = tag.end()
            depth += 0 if empty else 1
        elif depth:
            depth -= 1
            if depth == 0:
                start = tag.end()
    if depth == 0:
        kept.append(xml[start:])
    return b"".join(kept)


def check_docx_text_floor(archive: zipfile.ZipFile, limit: int) -> None:
    """Refuse a DOCX whose body text alone is over `limit`, before any parser runs.

    The visible characters inside ``<w:t>`` runs of ``word/document.xml``
    (text boxes and fallback copies left out) are a floor on what the parser
    will return, so a file over it would be refused after parsing anyway. The
    part is inflated in chunks and counting stops at the limit, so the work
    is proportional to the limit, not to the file: an 872-page report is
    refused in milliseconds instead of after half a minute of parsing. It
    reads bytes with a pattern and parses nothing, so it may run before the
    DTD scan.
    """
    counted = 0
    tail = b""
    # the archive is the inspected view: nothing unchecked is ever inflated
    try:
        part = archive.open("word/document.xml")
    except KeyError:
        return
    with part:
        while True:
            chunk = part.read(1 << 16)
            if not chunk:
                break
            data = tail + chunk
            cut = data.rfind(b"<w:p ")  # count whole paragraphs; carry the rest over
            cut = max(cut, data.rfind(b"<w:p>"))
            body, tail = (data[:cut], data[cut:]) if cut > 0 else (b"", data)
            counted += _docx_visible_text(body)
            if counted > limit:
                raise text_floor_over(counted, limit, "the document body")
    counted += _docx_visible_text(tail)
    if counted > limit:
        raise text_floor_over(counted, limit, "the document body")


_DOCX_PARAGRAPH = re.compile(rb"<w:p[\s>]")
BULLETS = frozenset("\u0095\u2022\u2023\u2043\u3164\u204c\u204d\u2219\u25cb\u25cf\u25d8"
                    "\u25e6\u2619\u2765\u2767\u29be\u29bf-\u2013*\u00b7\uf0b7")
"""Characters a parser may strip as a list item's bullet (unstructured's ``clean_bullets``)."""


def _docx_visible_text(xml: bytes) -> int:
    """Visible characters of the runs in `xml`, less one for each paragraph led by a bullet.

    unstructured strips one leading bullet from a list item's text and drops a
    paragraph left empty, so a leading bullet is not counted: the floor stays a floor.
    """
    if b"<mc:AlternateContent" in xml:
        xml = _outside_alternates(xml)
    if b"<w:txbxContent" in xml:
        xml = _DOCX_TEXT_BOX.sub(b"", xml)
    counted = 0
    for paragraph in _DOCX_PARAGRAPH.split(xml):
        text = b"".join(_DOCX_TEXT.findall(paragraph)).decode("utf-8", "replace")
        if "&" in text:
            text = html.unescape(text)
        visible = visible_chars(text)
        if visible and text.lstrip()[:1] in BULLETS:
            visible -= 1
        counted += visible
    return counted


# --------------------------------------------------------------------------------- PPTX


_P = "{http://schemas.openxmlformats.org/presentationml/2006/main}"
_A = "{http://schemas.openxmlformats.org/drawingml/2006/main}"
_TABLE_URI = "http://schemas.openxmlformats.org/drawingml/2006/table"
_RELATIONSHIP_TYPES = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/"
_SLIDE_LAYOUT = _RELATIONSHIP_TYPES + "slideLayout"
_SLIDE_MASTER = _RELATIONSHIP_TYPES + "slideMaster"
_NEGATIVE_OFFSET = re.compile(rb"<(?:[\w.-]+:)?off\s[^>]*\b[xy]\s*=\s*[\"']\s*-")


def count_slides(archive: zipfile.ZipFile, max_pages: int) -> None:
    """Count slides as python-pptx finds them: the ``sldIdLst`` of the main document.

    The main part is the one the package relationships name (not necessarily
    ``ppt/presentation.xml``), and every ``sldId`` counts, wherever its slide
    part is stored and however many ids point at one part: python-pptx yields
    (and unstructured extracts) one slide per id. Parts were scanned for DTDs
    before this parses any of them.
    """
    slides = 0
    for main in office_documents(archive):
        root = parse_part(archive, main)
        if root is None:
            continue
        id_list = root.find(f"{_P}sldIdLst")
        if id_list is not None:
            slides = max(slides, len(id_list))
    if slides > max_pages:
        raise refuse("too_many_pages", f"{slides} slides, over the limit of {max_pages}")


def _check_pptx_text_floor(archive: zipfile.ZipFile, limit: int) -> None:
    """Refuse a deck whose slides' text runs already hold more than `limit` characters.

    Counted as unstructured reads a deck through python-pptx: the slides the
    main part's ``sldIdLst`` names (once per id), in each the text runs of
    shapes with a text body and the cells of tables, in groups at any depth;
    not notes (unstructured leaves them out by default), not shapes inside
    ``mc:AlternateContent`` (python-pptx does not see them), not a shape placed
    left of or above the slide (unstructured skips those; a placeholder that
    inherits its position counts only if neither its layout nor their master
    places anything off the slide).
    """
    mains = office_documents(archive)
    if len(mains) != 1:
        return  # python-pptx refuses a package without exactly one main part
    root = parse_part(archive, mains[0])
    id_list = root.find(f"{_P}sldIdLst") if root is not None else None
    if id_list is None:
        return
    targets = {key: target for key, (target, _) in _relationships(archive, mains[0]).items()}
    counted = 0
    slides: dict[str, int] = {}
    layouts: dict[str, bool] = {}
    for number, slide_id in enumerate(id_list, start=1):
        target = targets.get(slide_id.get(_R_ID, ""))
        if target is None:
            continue
        if target not in slides:
            slide = parse_part(archive, target)
            slides[target] = (_slide_text(slide, _inherits_on_slide(archive, target, layouts))
                              if slide is not None else 0)
        counted += slides[target]
        if counted > limit:
            raise text_floor_over(counted, limit, f"the first {number} of {len(id_list)} slides")


def _inherits_on_slide(archive: zipfile.ZipFile, slide: str, layouts: dict[str, bool]) -> bool:
    """Whether a placeholder of `slide` that inherits its position lands on the slide.

    python-pptx takes it from the slide's layout, else the layout's master:
    only if neither places anything left of or above the slide is it sure
    to be on it. `layouts` caches the answer per layout.
    """
    for layout, kind in _relationships(archive, slide).values():
        if kind != _SLIDE_LAYOUT:
            continue
        if layout not in layouts:
            chain = [layout] + [master for master, kind in _relationships(archive, layout).values()
                                if kind == _SLIDE_MASTER]
            layouts[layout] = not any(_places_off_slide(archive, part) for part in chain)
        if not layouts[layout]:
            return False
    return True


def _places_off_slide(archive: zipfile.ZipFile, name: str) -> bool:
    try:
        info = archive.getinfo(name)
    except KeyError:
        return False
    with archive.open(info) as part:
        return _NEGATIVE_OFFSET.search(part.read(info.file_size + 1)) is not None


def _slide_text(slide: ElementTree.Element, inherits_on_slide: bool) -> int:
    tree = slide.find(f"{_P}cSld/{_P}spTree")
    if tree is None:
        return 0
    counted = 0
    pending = [tree]
    while pending:  # groups nest; a stack, not recursion, whatever the depth
        for shape in pending.pop():
            if shape.tag == f"{_P}grpSp":
                pending.append(shape)
            elif shape.tag == f"{_P}sp":
                body = shape.find(f"{_P}txBody")
                if body is not None and _on_slide(shape, inherits_on_slide):
                    counted += _runs_text(body)
            elif shape.tag == f"{_P}graphicFrame":
                data = shape.find(f"{_A}graphic/{_A}graphicData")
                table = data.find(f"{_A}tbl") if data is not None else None
                if table is not None and data is not None and data.get("uri") == _TABLE_URI:
                    counted += _runs_text(table)
    return counted


def _on_slide(shape: ElementTree.Element, inherits_on_slide: bool) -> bool:
    offset = shape.find(f"{_P}spPr/{_A}xfrm/{_A}off")
    if offset is None:
        placeholder = shape.find(f"{_P}nvSpPr/{_P}nvPr/{_P}ph")
        return placeholder is None or inherits_on_slide
    try:
        return int(offset.get("x", "0")) >= 0 and int(offset.get("y", "0")) >= 0
    except ValueError:
        return False


def _runs_text(element: ElementTree.Element) -> int:
    """The text runs of `element`, less those inside an ``mc:AlternateContent``: the parser
    reads one branch of it (`capsa.guard.extractors._pptx_alternates`), so the floor counts
    none (a nested one is taken off twice, which only lowers the floor)."""
    counted = visible_chars("".join(run.text or "" for run in element.iter(f"{_A}t")))
    for alternate in element.iter(_ALTERNATE):
        counted -= visible_chars("".join(run.text or "" for run in alternate.iter(f"{_A}t")))
    return max(counted, 0)


_ALTERNATE = "{http://schemas.openxmlformats.org/markup-compatibility/2006}AlternateContent"


# --------------------------------------------------------------------------------- XLSX


_S = "{http://schemas.openxmlformats.org/spreadsheetml/2006/main}"
_CONTENT_TYPES = "{http://schemas.openxmlformats.org/package/2006/content-types}"
_SPREADSHEET = "application/vnd.openxmlformats-officedocument.spreadsheetml."
_WORKBOOK_TYPES = ("application/vnd.ms-excel.template.macroEnabled.main+xml",
                   _SPREADSHEET + "template.main+xml",
                   "application/vnd.ms-excel.sheet.macroEnabled.main+xml",
                   _SPREADSHEET + "sheet.main+xml")
"""In openpyxl's order of preference."""
_SHARED_STRINGS = _SPREADSHEET + "sharedStrings+xml"
_WORKSHEET = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/worksheet"
_NUMERIC_OR_FLAG = re.compile(
    r"\s*[+-]?(?:(?:\d[\d_,]*\.?\d*|\.\d+)(?:[eEdD][+-]?\d+)?|inf(?:inity)?|nan)\s*"
    r"|\s*(?:true|false)\s*", re.IGNORECASE)
"""Strings pandas may read as a number or a flag (and print otherwise): not counted."""
_CELL_REF = re.compile(r"([A-Z]{1,3})(\d+)")


def _check_xlsx_text_floor(archive: zipfile.ZipFile, limit: int) -> None:
    """Refuse a workbook whose text cells already hold more than `limit` characters.

    Counted as pandas reads a workbook through openpyxl for unstructured:
    the workbook and shared-string parts the content types name, the
    worksheets the workbook's relationships name; in each, every cell whose
    value is text (a shared string, counted once per cell that refers to it,
    an inline string or a formula's cached text), rows and cells in the
    order openpyxl keeps them. Numbers are not counted (their printed form
    is pandas' choice), nor is text pandas could read as a number or a flag.
    Sheets are read streaming and the count stops at the limit; the string
    table is read only as far as cells point, and at most `limit` + 1024
    strings into it.
    """
    types = parse_part(archive, "[Content_Types].xml")
    if types is None:
        return
    overrides: dict[str | None, str] = {}
    for item in types.iter(f"{_CONTENT_TYPES}Override"):  # the first of a type, as openpyxl
        overrides.setdefault(item.get("ContentType"), item.get("PartName", "")[1:])
    workbook = next((overrides[kind] for kind in _WORKBOOK_TYPES if kind in overrides), None)
    if workbook is None:
        return
    strings = _SharedStrings(archive, overrides.get(_SHARED_STRINGS), budget=limit + 1024)
    book = parse_part(archive, workbook)
    sheets = book.find(f"{_S}sheets") if book is not None else None
    if sheets is None:
        return
    targets = _relationships(archive, workbook)
    counted = 0
    for number, sheet in enumerate(sheets, start=1):
        target, kind = targets.get(sheet.get(_R_ID, ""), ("", ""))
        if kind != _WORKSHEET or target not in archive.NameToInfo:
            continue
        with archive.open(target) as part:
            counted = _sheet_text(part, strings, counted, limit)
        if counted > limit:
            raise text_floor_over(counted, limit,
                                  f"the text cells of the first {number} of {len(sheets)} sheets")


class _SharedStrings:
    """The counted characters of each shared string, read from the table only as far as a
    cell has asked, and never past `budget` strings (a cell pointing further counts 0):
    work stays proportional to the limit, however long the table."""

    def __init__(self, archive: zipfile.ZipFile, name: str | None, budget: int) -> None:
        self._budget = budget
        self._counts: list[int] = []
        self._archive = archive
        self._name = name if name is not None and name in archive.NameToInfo else None
        self._strings: Iterator[int] | None = None

    def count(self, index: int) -> int:
        """The count of string `index`; 0 for an index the table does not have."""
        if index < 0:
            return 0
        if self._strings is None and self._name is not None:
            self._strings = self._read()
        while (index >= len(self._counts) and self._strings is not None
               and len(self._counts) < self._budget):
            try:
                self._counts.append(next(self._strings))
            except StopIteration:
                self._strings = None
        return self._counts[index] if index < len(self._counts) else 0

    def _read(self) -> Iterator[int]:
        assert self._name is not None
        table = None
        with self._archive.open(self._name) as part:
            for event, item in ElementTree.iterparse(part, events=("start", "end")):
                if table is None:
                    table = item
                elif event == "end" and item.tag == f"{_S}si":
                    yield _cell_text(item)
                    table.clear()  # memory stays one string deep, however long the table


def _cell_text(string: ElementTree.Element) -> int:
    """A rich or plain string as openpyxl reads it: its ``t``, then its runs' ``t``."""
    pieces = [string.findtext(f"{_S}t") or ""]
    pieces += [run.findtext(f"{_S}t") or "" for run in string.findall(f"{_S}r")]
    text = "".join(pieces).replace("x005F_", "")
    return 0 if _NUMERIC_OR_FLAG.fullmatch(text) else visible_chars(text)


def _sheet_text(part: IO[bytes], strings: _SharedStrings, counted: int, limit: int) -> int:
    """`counted` plus the text cells of one worksheet, stopping once over `limit`.

    openpyxl's read-only rows skip a row numbered at or before one already
    read, and keep only one value per column, up to the row's last cell: a
    row whose cells do not go strictly rightwards is not counted.
    """
    last_row = 0
    row_count = 0
    last_column = 0
    ordered = True
    cells = None
    for event, element in ElementTree.iterparse(part, events=("start", "end")):
        tag = element.tag
        if event == "start":
            if tag == f"{_S}sheetData":
                cells = element
            elif tag == f"{_S}row":
                row_count, last_column, ordered = 0, 0, True
            continue
        if tag == f"{_S}c":
            column = _column(element.get("r"), last_column)
            ordered = ordered and column > last_column
            last_column = column
            row_count += _value_text(element, strings)
        elif tag == f"{_S}row":
            number = _row_number(element.get("r"), last_row)
            if ordered and number > last_row:
                counted += row_count
            last_row = max(last_row, number)
            if cells is not None:
                cells.clear()  # what was counted is dropped: memory stays one row deep
            if counted > limit:
                return counted
    return counted


def _column(reference: str | None, last: int) -> int:
    match = _CELL_REF.fullmatch(reference or "")
    if match is None:
        return last + 1 if reference is None else 0
    column = 0
    for letter in match.group(1):
        column = column * 26 + ord(letter) - 64
    return column


def _row_number(reference: str | None, last: int) -> int:
    if reference is None:
        return last + 1
    try:
        return int(reference)
    except ValueError:
        return 0


def _value_text(cell: ElementTree.Element, strings: _SharedStrings) -> int:
    kind = cell.get("t")
    if kind == "s":
        try:
            index = int(cell.findtext(f"{_S}v") or "")
        except ValueError:
            return 0
        return strings.count(index)
    if kind == "inlineStr":
        inline = cell.find(f"{_S}is")
        return _cell_text(inline) if inline is not None else 0
    if kind == "str":
        text = cell.findtext(f"{_S}v") or ""
        return 0 if _NUMERIC_OR_FLAG.fullmatch(text) else visible_chars(text)
    return 0


# --------------------------------------------------------------------------------- EPUB


_CONTAINER = "{urn:oasis:names:tc:opendocument:xmlns:container}"
_OPF = "{http://www.idpf.org/2007/opf}"
_XHTML = "{http://www.w3.org/1999/xhtml}"
_BLOCKS = frozenset({"body", "div", "section", "article", "main", "blockquote"})
"""Containers whose paragraphs pandoc keeps and unstructured emits (not ``nav``, ``figure``,
``aside``, ``details``, ``form``, ``template``, a list or a table: one of them drops some)."""
_PARAGRAPHS = frozenset({"p", "h1", "h2", "h3", "h4", "h5", "h6"})
_PHRASING = frozenset({"span", "em", "strong", "b", "i", "u", "code", "sub", "sup", "cite",
                       "abbr", "small", "dfn", "var", "kbd", "samp", "time"})
"""Phrasing whose text both pandoc and unstructured keep as it is (not ``a``, which pandoc may
turn into a footnote, nor ``del``, ``s`` or ``q``, which one of them drops or decorates)."""
_TAILS = _PHRASING | {"a", "img"}
"""Children whose tail stays in the paragraph's one element (after a ``br`` it may not)."""


def _check_epub_text_floor(archive: zipfile.ZipFile, limit: int) -> None:
    """Refuse a book whose chapters' paragraphs already hold more than `limit` characters.

    Counted as unstructured reads a book (pandoc converts it to HTML, which
    unstructured partitions): the first rootfile's package, the linear spine
    items that are XHTML, and in each only the paragraphs and headings that
    sit in plain containers, with the text of plain phrasing inside them.
    A paragraph is counted as unstructured keeps it (`_html_element_floor`).
    A chapter that is not well-formed XML (pandoc reads it leniently, with
    HTML's entities) is not counted. Chapters are read one at a time and the
    count stops at the limit.
    """
    container = _parse_leniently(archive, "META-INF/container.xml")
    rootfile = container.find(f".//{_CONTAINER}rootfile") if container is not None else None
    package_name = rootfile.get("full-path", "") if rootfile is not None else ""
    package = _parse_leniently(archive, package_name)
    if package is None:
        return
    items = {item.get("id"): item for item in package.iter(f"{_OPF}item")}
    spine = [ref for ref in package.iter(f"{_OPF}itemref") if ref.get("linear") != "no"]
    counted = 0
    for number, ref in enumerate(spine, start=1):
        item = items.get(ref.get("idref"))
        if item is None or item.get("media-type") != "application/xhtml+xml":
            continue
        chapter = _parse_leniently(
            archive, _resolve(package_name, urllib.parse.unquote(item.get("href", ""))))
        if chapter is not None:
            counted += sum(_paragraph_floors(_content_root(chapter)))
        if counted > limit:
            raise text_floor_over(counted, limit, f"the first {number} of {len(spine)} chapters")


def _parse_leniently(archive: zipfile.ZipFile, name: str) -> ElementTree.Element | None:
    try:
        return parse_part(archive, name)
    except IngestionRejected:
        return None


def _local(tag: object) -> str | None:
    """An XHTML element's local name; None for anything else (comments, other namespaces)."""
    if not isinstance(tag, str):
        return None
    if tag.startswith(_XHTML):
        return tag[len(_XHTML):]
    return None if tag.startswith("{") else tag


def _content_root(root: Any) -> Any:
    """Where the text is taken from: the first ``<main>`` if there is one (pandoc and
    unstructured both keep only it), else the ``<body>``; None if neither."""
    body = None
    for element in root.iter():
        name = _local(element.tag)
        if name == "main":
            return element
        if name == "body" and body is None:
            body = element
    return body


def _paragraph_floors(start: Any) -> Iterator[int]:
    """`_html_element_floor` of each paragraph and heading in plain containers below `start`."""
    pending = [start] if start is not None else []
    while pending:  # plain containers nest; a stack, not recursion, whatever the depth
        for child in pending.pop():
            name = _local(child.tag)
            if name in _BLOCKS:
                pending.append(child)
            elif name in _PARAGRAPHS:
                yield _html_element_floor("".join(_phrasing_text(child)))


def _html_element_floor(text: str) -> int:
    """What unstructured's HTML partitioner surely keeps of one paragraph's `text`.

    It drops an element of one character, and strips one leading bullet (a
    dash, an asterisk, a dot, a Hangul filler, ...): one character is taken
    off whenever the text does not start with a letter or a digit.
    """
    counted = visible_chars(text)
    if counted < 2:
        return 0
    first = text.lstrip()[:1]
    return counted - 1 if not first.isalnum() or first == "\u3164" else counted


def _phrasing_text(element: Any) -> Iterator[str]:
    pending = [element]
    while pending:
        current = pending.pop()
        yield current.text or ""
        for child in current:
            name = _local(child.tag)
            if "katex" in (child.get("class") or ""):
                continue  # unstructured may drop KaTeX's visual copy of a formula, tail and all
            if name in _PHRASING:
                pending.append(child)
            if name in _TAILS:
                yield child.tail or ""


_HTML_BOMS = ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"),
              (codecs.BOM_UTF8, "utf-8-sig"), (codecs.BOM_UTF16_LE, "utf-16"),
              (codecs.BOM_UTF16_BE, "utf-16"))


def check_html_text_floor(payload: bytes, limit: int) -> None:
    """Refuse an HTML page whose paragraphs already hold more than `limit` characters.

    unstructured decodes the page, builds its tree with libxml2's HTML parser
    and then classifies every element in Python, which is where its time
    goes (seconds for a few hundred kilobytes). This count makes the same
    tree, with the same parser settings, from the same text, and counts what
    unstructured surely keeps: paragraphs and headings in plain containers
    of the first ``<main>`` (else the ``<body>``), with the text of plain
    phrasing inside them (`_html_element_floor`). The text is only decoded
    where unstructured's choice is certain (a byte-order mark, or bytes that
    are valid UTF-8 with no NUL); anything else would be detected by
    statistics, and is not counted here. libxml2 builds the tree at tens of
    megabytes a second; the count stops at the limit.
    """
    text = _decoded_as_unstructured_would(payload)
    if text is None:
        return
    from lxml import etree

    parser = etree.HTMLParser(remove_comments=True, remove_pis=True)
    try:
        try:
            root = etree.fromstring(text, parser)
        except ValueError:  # a str with an encoding declaration, as unstructured retries
            root = etree.fromstring(text.encode("utf-8"), parser)
    except etree.LxmlError:
        return
    if root is None:
        return
    counted = 0
    for number, floor in enumerate(_paragraph_floors(_content_root(root)), start=1):
        counted += floor
        if counted > limit:
            raise text_floor_over(counted, limit,
                                  f"the first {number} paragraphs and headings of the page")


def _decoded_as_unstructured_would(payload: bytes) -> str | None:
    for bom, codec in _HTML_BOMS:
        if payload.startswith(bom):
            try:
                return payload.decode(codec)
            except UnicodeDecodeError:
                return None
    if b"\x00" in payload:
        return None
    try:
        return payload.decode("utf-8")
    except UnicodeDecodeError:
        return None


# ------------------------------------------------------------------------------ dispatch


def check_text_floor(kind: str, archive: zipfile.ZipFile, limit: int) -> None:
    """Refuse a PPTX, XLSX or EPUB whose text is surely over `limit`, before it is parsed.

    Run after the DTD scan: these counters parse the parts they read. (The
    DOCX count, `check_docx_text_floor`, reads bytes only and runs first;
    HTML is counted by `check_html_text_floor`.)

    Raises:
        IngestionRejected: ``text_too_long``, naming the count, the limit and
            what was counted.
    """
    if kind == "pptx":
        _check_pptx_text_floor(archive, limit)
    elif kind == "xlsx":
        _check_xlsx_text_floor(archive, limit)
    elif kind == "epub":
        _check_epub_text_floor(archive, limit)
