"""What a payload really is, from its bytes: never from its name or declared type."""

from __future__ import annotations

import re
from typing import Literal

from capsa.errors import IngestionRejected
from capsa.guard.archive import OLE_MAGIC, member_names, read_ole_directory
from capsa.guard.normalize import UndecodableText, detect_and_decode

__all__ = [
    "EXTRACTABLE_KINDS", "Kind", "bytes_over_name", "kind_for_media_type", "media_type_for_name",
    "resolve_kind", "sniff",
]

Kind = Literal[
    "pdf", "docx", "pptx", "xlsx", "epub", "zip", "html", "eml", "rtf",
    "png", "jpeg", "tiff", "webp", "text", "markdown", "csv", "json",
    "doc", "xls", "ppt", "msg", "odt", "ods", "odp",
    "ole", "postscript", "gif", "bmp", "binary",
]
"""Every kind `sniff` can name. Only `EXTRACTABLE_KINDS` reach a parser."""

EXTRACTABLE_KINDS: frozenset[Kind] = frozenset({
    "pdf", "docx", "pptx", "xlsx", "epub", "html", "eml", "rtf",
    "png", "jpeg", "tiff", "webp", "text", "markdown", "csv", "json",
    "doc", "xls", "ppt", "msg", "odt", "ods", "odp",
})
_TEXTUAL: frozenset[Kind] = frozenset({"text", "markdown", "csv", "json", "html", "eml"})
_PLAIN: frozenset[Kind] = frozenset({"text", "markdown", "csv", "json"})
_IMAGES: frozenset[Kind] = frozenset({"png", "jpeg", "tiff", "webp"})

_MEDIA_TYPES: dict[str, Kind] = {
    "application/pdf": "pdf",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "docx",
    "application/vnd.openxmlformats-officedocument.presentationml.presentation": "pptx",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": "xlsx",
    "application/epub+zip": "epub",
    "application/zip": "zip",
    "application/x-zip-compressed": "zip",
    "text/html": "html",
    "application/xhtml+xml": "html",
    "message/rfc822": "eml",
    "application/rtf": "rtf",
    "text/rtf": "rtf",
    "image/png": "png",
    "image/jpeg": "jpeg",
    "image/jpg": "jpeg",
    "image/tiff": "tiff",
    "image/webp": "webp",
    "image/gif": "gif",
    "image/bmp": "bmp",
    "image/x-ms-bmp": "bmp",
    "text/plain": "text",
    "text/markdown": "markdown",
    "text/x-markdown": "markdown",
    "text/csv": "csv",
    "application/json": "json",
    "application/msword": "doc",
    "application/vnd.ms-excel": "xls",
    "application/vnd.ms-powerpoint": "ppt",
    "application/vnd.ms-outlook": "msg",
    "application/x-ole-storage": "ole",
    "application/vnd.oasis.opendocument.text": "odt",
    "application/vnd.oasis.opendocument.spreadsheet": "ods",
    "application/vnd.oasis.opendocument.presentation": "odp",
    "application/vnd.oasis.opendocument.text-template": "odt",
    "application/vnd.oasis.opendocument.spreadsheet-template": "ods",
    "application/vnd.oasis.opendocument.presentation-template": "odp",
    "application/postscript": "postscript",
}
_EXTENSIONS: dict[str, str] = {
    "pdf": "application/pdf",
    "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    "epub": "application/epub+zip", "zip": "application/zip",
    "html": "text/html", "htm": "text/html", "xhtml": "application/xhtml+xml",
    "eml": "message/rfc822", "rtf": "application/rtf",
    "png": "image/png", "jpg": "image/jpeg", "jpeg": "image/jpeg", "tif": "image/tiff",
    "tiff": "image/tiff", "webp": "image/webp", "gif": "image/gif",
    "bmp": "image/bmp",
    "txt": "text/plain", "text": "text/plain", "log": "text/plain", "md": "text/markdown",
    "markdown": "text/markdown", "csv": "text/csv", "json": "application/json",
    "doc": "application/msword", "xls": "application/vnd.ms-excel",
    "ppt": "application/vnd.ms-powerpoint", "msg": "application/vnd.ms-outlook",
    "odt": "application/vnd.oasis.opendocument.text",
    "ods": "application/vnd.oasis.opendocument.spreadsheet",
    "odp": "application/vnd.oasis.opendocument.presentation",
    "ott": "application/vnd.oasis.opendocument.text-template",
    "ots": "application/vnd.oasis.opendocument.spreadsheet-template",
    "otp": "application/vnd.oasis.opendocument.presentation-template",
    "ps": "application/postscript",
    "eps": "application/postscript",
}
_NO_CLAIM = frozenset({"", "application/octet-stream", "binary/octet-stream"})
_HEADER_LINE = re.compile(rb"^[A-Za-z][A-Za-z0-9-]{1,40}:[ \t]", re.MULTILINE)
_MAIL_HEADERS = (b"from", b"to", b"subject", b"date", b"mime-version", b"received",
                 b"message-id", b"content-type", b"return-path", b"cc")


_UNSUPPORTED: dict[Kind, str] = {
    "zip": " (an archive that is no DOCX, PPTX, XLSX, EPUB or OpenDocument file)",
    "ole": " (an OLE compound file that is no .doc, .xls, .ppt or .msg: no WordDocument, "
           "Workbook, PowerPoint Document or Outlook property stream at its root)",
    "postscript": " (convert it to PDF)",
    "gif": " (convert it to PNG for OCR)",
    "bmp": " (a Windows bitmap; convert it to PNG for OCR)",
}
"""What a refusal adds to a kind capsa recognises but does not extract: what it is, what to do."""


def sniff(payload: bytes) -> Kind:
    """Name the kind of `payload` from its leading bytes and structure.

    Zip containers are told apart by their central directory (a DOCX has
    ``word/document.xml``), never by decompressing anything; OpenDocument by
    its stored ``mimetype`` member. OLE compound files are told apart by the
    streams at their root (``WordDocument``, ``Workbook``, ``PowerPoint
    Document``, Outlook's ``__properties_version1.0``), read from the
    directory without opening a stream. Text is told from
    binary by decoding, HTML and e-mail by their first lines; markdown, CSV and
    JSON cannot be told from plain text by bytes alone and sniff as ``text``.

    Examples:
        >>> sniff(b"%PDF-1.7\\n...")
        'pdf'
        >>> sniff(b"\\x89PNG\\r\\n\\x1a\\n....")
        'png'
        >>> sniff(b"plain words")
        'text'
    """
    head = payload[:16]
    if head.startswith(b"%PDF-"):
        return "pdf"
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        return _zip_kind(payload)
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "png"
    if head.startswith(b"\xff\xd8\xff"):
        return "jpeg"
    if head.startswith((b"II*\x00", b"MM\x00*")):
        return "tiff"
    if head.startswith(b"RIFF") and payload[8:12] == b"WEBP":
        return "webp"
    if head.startswith((b"GIF87a", b"GIF89a")):
        return "gif"
    if head.startswith(b"{\\rtf"):
        return "rtf"
    if head.startswith(OLE_MAGIC):
        return _ole_kind(payload)
    if head.startswith((b"%!PS", b"\xc5\xd0\xd3\xc6")):
        return "postscript"
    if _is_bmp(payload):
        return "bmp"
    return _text_kind(payload)


def kind_for_media_type(media_type: str | None) -> Kind | None:
    """The kind a declared media type claims, or None when it claims nothing.

    Parameters such as ``; charset=utf-8`` are ignored; unknown types claim nothing.
    """
    if media_type is None:
        return None
    base = media_type.split(";", 1)[0].strip().lower()
    if base in _NO_CLAIM:
        return None
    return _MEDIA_TYPES.get(base)


def media_type_for_name(name: str) -> str | None:
    """The media type a file name's extension declares, from capsa's own fixed table.

    A file read from disk declares its type through its extension; like any
    declaration it is checked against the bytes, never trusted. The table is
    fixed (not the system's mime.types), so results do not vary by machine.

    Examples:
        >>> media_type_for_name("invoice.PDF")
        'application/pdf'
        >>> media_type_for_name("README") is None
        True
    """
    _, dot, ext = name.rpartition(".")
    return _EXTENSIONS.get(ext.lower()) if dot else None


_DOCUMENTS: frozenset[Kind] = frozenset({
    "pdf", "docx", "pptx", "xlsx", "epub", "rtf", "doc", "xls", "ppt", "msg", "odt", "ods",
    "odp",
})
"""Document formats: an office saving one of these under another's name (a DOCX called
``.doc``, RTF called ``.doc``, an XLSX called ``.xls``) is everyday, not a disguise."""


def resolve_kind(
    sniffed: Kind, declared: str | None, *, label: str, trust_bytes: bool = False,
    trust_documents: bool = False,
) -> Kind:
    """Decide the kind a parser will be told, refusing contradictions.

    The bytes decide. A declared type only refines within a family: sniffed
    text declared as markdown is markdown, and a textual declaration keeps an
    HTML-looking file as plain text (parsing it more simply is always safe).
    Any other disagreement, such as PNG bytes declared ``application/pdf``, is
    refused unless `trust_bytes` is set, when the sniffed kind wins; with
    `trust_documents`, the sniffed kind wins only when both it and the claim are
    document formats (a DOCX named ``.doc``), and a picture or text under a
    document's name is still refused. `bytes_over_name` says when either happened.

    Raises:
        IngestionRejected: ``type_mismatch`` or ``unsupported_type``.
    """
    claimed = kind_for_media_type(declared)
    kind: Kind = sniffed
    if claimed is not None and claimed != sniffed:
        if (claimed in _PLAIN and sniffed in _TEXTUAL) or (
                claimed in _TEXTUAL and sniffed == "text"):
            kind = claimed
        elif claimed in _IMAGES and sniffed in _IMAGES:
            kind = sniffed
        elif not trust_bytes and not (
                trust_documents and claimed in _DOCUMENTS and sniffed in _DOCUMENTS):
            raise IngestionRejected(
                f"declared {declared!r} ({claimed}) but the bytes are {sniffed}; "
                "a declared type that contradicts the content is refused",
                label=label, stage="sniff", reason="type_mismatch",
            )
    if kind not in EXTRACTABLE_KINDS:
        raise IngestionRejected(
            f"content is {kind}{_UNSUPPORTED.get(kind, '')}, which capsa does not extract "
            f"(supported: {', '.join(sorted(EXTRACTABLE_KINDS))})",
            label=label, stage="sniff", reason="unsupported_type",
        )
    return kind


def bytes_over_name(kind: str, declared: str | None) -> str | None:
    """The note an outcome carries when its bytes overruled its declared type, else None.

    Refinements within a family (text declared as markdown, one image format
    declared as another) are not overrulings and get no note.

    Examples:
        >>> bytes_over_name("docx", "application/msword")
        "declared 'application/msword' (doc) but the bytes are docx; extracted as docx"
        >>> bytes_over_name("markdown", "text/markdown") is None
        True
    """
    claimed = kind_for_media_type(declared)
    if claimed is None or claimed == kind or (claimed in _IMAGES and kind in _IMAGES) or (
            claimed in _TEXTUAL and kind in _TEXTUAL):
        return None
    return f"declared {declared!r} ({claimed}) but the bytes are {kind}; extracted as {kind}"


def _zip_kind(payload: bytes) -> Kind:
    try:
        names = member_names(payload)
    except IngestionRejected:
        return "zip"  # archive inspection will give the precise reason
    lowered = {name.lower() for name in names}
    if "[content_types].xml" in lowered:
        if "word/document.xml" in lowered:
            return "docx"
        if "ppt/presentation.xml" in lowered:
            return "pptx"
        if "xl/workbook.xml" in lowered:
            return "xlsx"
    if "mimetype" in lowered and b"application/epub+zip" in payload[:200]:
        return "epub"
    if "mimetype" in lowered and "content.xml" in lowered:
        # ODF stores its mimetype member first and uncompressed (ISO 26300 part 3, 3.3);
        # a template (.ott, .ots, .otp) is the same document format under a "-template"
        # type, and LibreOffice ships dozens of them
        declared = _ODF_MIMETYPE.search(payload[:256])
        if declared is not None:
            return _ODF_KINDS.get(declared.group(1), "zip")
    return "zip"


_ODF_MIMETYPE = re.compile(
    rb"mimetypeapplication/vnd\.oasis\.opendocument\.([a-z]+)(?:-template)?(?![a-z-])")
_ODF_KINDS: dict[bytes, Kind] = {b"text": "odt", b"spreadsheet": "ods",
                                 b"presentation": "odp"}
_OLE_ROOT_STREAMS: tuple[tuple[str, Kind], ...] = (
    ("WordDocument", "doc"), ("Workbook", "xls"), ("Book", "xls"),
    ("PowerPoint Document", "ppt"), ("__properties_version1.0", "msg"),
)
"""Root streams that name an OLE file's application (MS-DOC, MS-XLS, MS-PPT, MS-OXMSG);
an encrypted OOXML package (``EncryptedPackage``) names none and stays ``ole``."""


def _ole_kind(payload: bytes) -> Kind:
    try:
        top = read_ole_directory(payload).top
    except IngestionRejected:
        return "ole"  # the compound-file inspection gives the precise reason
    if "EncryptedPackage" in top:
        return "ole"
    for stream, kind in _OLE_ROOT_STREAMS:
        if stream in top:
            return kind
    return "ole"


_BMP_HEADER_SIZES = frozenset({12, 16, 40, 52, 56, 64, 108, 124})
"""Sizes of the Windows and OS/2 bitmap info headers (BITMAPCOREHEADER to BITMAPV5HEADER)."""


def _is_bmp(payload: bytes) -> bool:
    """A Windows bitmap: ``BM``, two reserved zero words, and a known info-header size.

    ``BM`` alone also starts ordinary text; the reserved words and the header size
    do not. Without this a bitmap (about a third NUL bytes) fell through to the text
    sniffer and was refused as undecodable text, which said nothing about what it was.
    """
    if len(payload) < 18 or not payload.startswith(b"BM") or payload[6:10] != b"\0\0\0\0":
        return False
    return int.from_bytes(payload[14:18], "little") in _BMP_HEADER_SIZES


def _text_kind(payload: bytes) -> Kind:
    sample = payload[:65536]
    if b"\x00" in sample and not sample.startswith((b"\xff\xfe", b"\xfe\xff")):
        nul_share = sample.count(0) / len(sample)
        # UTF-16 text is about half NULs; a stray NUL or two in text is
        # stripped by normalisation; anything else is binary.
        if sample.count(0) > 2 and nul_share >= 0.01 and not 0.3 < nul_share < 0.6:
            return "binary"
    try:
        # no code-page detector here: sniffing stays cheap on any input
        text = detect_and_decode(sample, code_pages=False).text
    except UndecodableText:
        # No NULs, yet not text in any encoding capsa assumes (a legacy code
        # page, say): the plain extractor refuses it as undecodable, which
        # says more than "binary".
        return "text"
    start = text.lstrip("\ufeff \t\r\n")[:1024].lower()
    if start.startswith(("<!doctype html", "<html", "<?xml")) and "<html" in start:
        return "html"
    if start.startswith("<!doctype html") or start.startswith("<html"):
        return "html"
    # headers are matched on the decoded text, so a message saved as UTF-16 is mail too
    head = text.lstrip("\ufeff \t\r\n")[:4096].encode("utf-8", "replace")
    if _HEADER_LINE.match(head):
        names = {m.group(0).split(b":", 1)[0].strip().lower()
                 for m in _HEADER_LINE.finditer(head.split(b"\n\n", 1)[0])}
        if len(names.intersection(_MAIL_HEADERS)) >= 2:
            return "eml"
    return "text"

