"""An HTML file's character encoding, picked as a browser picks it.

unstructured decodes an HTML file by statistics alone and never reads the
page's own ``<meta charset>``: a Shift_JIS page that says so, or a windows-1252
page that says nothing, could come back as mojibake with no word said
(charset-normalizer read a real cp1252 page as ISO-8859-5: every accented
letter became Cyrillic). A browser follows the WHATWG encoding sniffing
algorithm for a file: a byte-order mark; the ``<meta charset>`` or
``<meta http-equiv="Content-Type">`` found by the prescan of the first 1,024
bytes, by the Encoding Standard's labels (``iso-8859-1`` and ``ascii`` mean
windows-1252, ``gb2312`` means GBK, ``euc-kr`` windows-949, a UTF-16 label
in a meta means UTF-8); and otherwise a guess. `read_html` does the same,
guessing with capsa's own detector (`detect_and_decode`, which prefers
windows-1252 among equally clean readings, as browsers do). The encoding
ends up on `Extracted.encoding` when it was not UTF-8, as for a text file.

Where capsa parts from a browser it says so: bytes that are not valid in
the encoding the page declares are read with the detector instead, and a note
names both. A page that declares one of the Encoding Standard's
"replacement" encodings (``iso-2022-kr``, ``hz-gb-2312``, ...), which a browser
shows as a single replacement character, is refused as ``undecodable``:
reading it would give the model text no reader sees.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass

from capsa.guard.normalize import UndecodableText, detect_and_decode

__all__ = ["HtmlText", "browser_codec", "declared_charset", "read_html"]

_PRESCAN_BYTES = 1024
_COMMENT = re.compile(rb"<!--.*?(?:-->|\Z)", re.DOTALL)
_META = re.compile(rb"<meta[\t\n\f\r /]([^>]*)", re.IGNORECASE)
_ATTRIBUTE = re.compile(rb"""([^\t\n\f\r /=>][^\t\n\f\r /=>]*)(?:[\t\n\f\r ]*=[\t\n\f\r ]*"""
                        rb"""("[^"]*"|'[^']*'|[^\t\n\f\r >]*))?""")
_CONTENT_CHARSET = re.compile(rb"""charset[\t\n\f\r ]*=[\t\n\f\r ]*(?:"([^"]*)"|'([^']*)'|"""
                              rb"""([^\t\n\f\r ;"']+))""", re.IGNORECASE)

_WINDOWS_1252 = ("ansi_x3.4-1968", "ascii", "cp1252", "cp819", "csisolatin1", "ibm819",
                 "iso-8859-1", "iso-ir-100", "iso8859-1", "iso88591", "iso_8859-1",
                 "iso_8859-1:1987", "l1", "latin1", "us-ascii", "windows-1252", "x-cp1252",
                 "x-user-defined")
_LABELS = {
    **dict.fromkeys(_WINDOWS_1252, "cp1252"),
    **dict.fromkeys(("csisolatin5", "iso-8859-9", "iso-ir-148", "iso8859-9", "iso88599",
                     "iso_8859-9", "iso_8859-9:1989", "l5", "latin5", "windows-1254",
                     "cp1254", "x-cp1254"), "cp1254"),
    **dict.fromkeys(("dos-874", "iso-8859-11", "iso8859-11", "iso885911", "tis-620",
                     "windows-874"), "cp874"),
    **dict.fromkeys(("chinese", "csgb2312", "csiso58gb231280", "gb2312", "gb_2312",
                     "gb_2312-80", "gbk", "iso-ir-58", "x-gbk", "gb18030"), "gb18030"),
    **dict.fromkeys(("big5", "big5-hkscs", "cn-big5", "csbig5", "x-x-big5"), "big5hkscs"),
    **dict.fromkeys(("csshiftjis", "ms932", "ms_kanji", "shift-jis", "shift_jis", "sjis",
                     "windows-31j", "x-sjis"), "cp932"),
    **dict.fromkeys(("cseuckr", "csksc56011987", "euc-kr", "iso-ir-149", "korean",
                     "ks_c_5601-1987", "ks_c_5601-1989", "ksc5601", "ksc_5601",
                     "windows-949"), "cp949"),
    **dict.fromkeys(("cseucpkdfmtjapanese", "euc-jp", "x-euc-jp"), "euc_jp"),
    **dict.fromkeys(("csiso2022jp", "iso-2022-jp"), "iso2022_jp"),
    **dict.fromkeys(("unicode-1-1-utf-8", "unicode11utf8", "unicode20utf8", "utf-8", "utf8",
                     "x-unicode20utf8"), "utf-8"),
    # a UTF-16 label in a meta is a mistake the standard reads as UTF-8
    **dict.fromkeys(("csunicode", "iso-10646-ucs-2", "ucs-2", "unicode", "unicodefeff",
                     "utf-16", "utf-16le", "unicodefffe", "utf-16be"), "utf-8"),
    **dict.fromkeys(("csiso2022kr", "hz-gb-2312", "iso-2022-cn", "iso-2022-cn-ext",
                     "iso-2022-kr", "replacement"), "replacement"),
}
"""The Encoding Standard's labels whose meaning differs from Python's name, or whose
Python codec must not be reached by name (a label is case-folded and stripped first)."""
_SINGLE_BYTE = frozenset({
    *(f"iso8859-{n}" for n in (2, 3, 4, 5, 6, 7, 8, 10, 13, 14, 15, 16)),
    *(f"cp125{n}" for n in range(0, 9)), "cp866", "koi8-r", "koi8-u", "mac-roman",
    "mac-cyrillic"})
"""The Python codecs (by `codecs.lookup` name) of the Encoding Standard's other
single-byte encodings, reached by any label Python knows for them (``latin2``,
``windows-1251``, ``koi8-r``, ``macintosh``...). Every other label is unknown, as
to a browser: UTF-7, EBCDIC and the like are never taken from a page."""


def _as_c1(error: UnicodeError) -> tuple[str, int]:
    if not isinstance(error, UnicodeDecodeError):
        raise error
    return "".join(map(chr, error.object[error.start:error.end])), error.end


_C1 = "capsa-windows-1252-c1"
codecs.register_error(_C1, _as_c1)


@dataclass(frozen=True, slots=True)
class HtmlText:
    """A page's text and how it was decoded."""

    text: str
    encoding: str | None = None
    """The codec used, when it was not UTF-8."""
    confidence: float | None = None
    """1.0 when the page declared its encoding (or had a byte-order mark); the
    detector's confidence when it was guessed."""
    note: str | None = None
    """What a reader should know: the page's declaration was not followed, and why."""


def declared_charset(head: bytes) -> str | None:
    """The Python codec a page's ``<meta>`` declares in `head` (its first bytes), by the
    Encoding Standard's labels; ``"replacement"`` for its replacement encodings; None
    when no meta declares an encoding a browser knows.

    Examples:
        >>> declared_charset(b'<meta charset="ISO-8859-1">')
        'cp1252'
        >>> declared_charset(b'<meta http-equiv=Content-Type content="text/html; charset=sjis">')
        'cp932'
        >>> declared_charset(b'<!-- <meta charset="koi8-r"> --><p>') is None
        True
    """
    scanned = _COMMENT.sub(b"", head[:_PRESCAN_BYTES])
    for meta in _META.finditer(scanned):
        attributes: dict[bytes, bytes] = {}
        for found in _ATTRIBUTE.finditer(meta.group(1)):
            name = found.group(1).lower()
            value = (found.group(2) or b"").strip(b"\"'")
            attributes.setdefault(name, value)
        label = attributes.get(b"charset")
        if label is None and attributes.get(b"http-equiv", b"").lower() == b"content-type":
            content = _CONTENT_CHARSET.search(attributes.get(b"content", b""))
            if content is not None:
                label = next(part for part in content.groups() if part is not None)
        if label is not None and (codec := browser_codec(label)) is not None:
            return codec
    return None


def read_html(payload: bytes) -> HtmlText:
    """Decode an HTML file as a browser would pick its encoding (see the module docstring).

    Raises:
        UndecodableText: no declaration, and the detector finds no clean reading
            (or the page declares a replacement encoding).
    """
    if payload.startswith((codecs.BOM_UTF8, codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        decoded = detect_and_decode(payload)
        return HtmlText(decoded.text, decoded.encoding, decoded.confidence)
    declared = declared_charset(payload)
    if declared == "replacement":
        raise UndecodableText("the page declares an encoding browsers show as one replacement "
                              "character (the Encoding Standard's 'replacement')")
    if declared is not None:
        try:  # windows-1252's five unassigned bytes are C1 controls to a browser
            text = payload.decode(declared, _C1 if declared == "cp1252" else "strict")
        except UnicodeDecodeError as error:
            guessed = detect_and_decode(payload)
            shown = guessed.encoding or "utf-8"
            return HtmlText(guessed.text, guessed.encoding, guessed.confidence,
                            f"the page declares the encoding {declared}, but byte "
                            f"{error.start} is not valid in it: read as {shown}, the "
                            "encoding its bytes fit")
        return HtmlText(text, None if declared == "utf-8" else declared,
                        None if declared == "utf-8" else 1.0)
    decoded = detect_and_decode(payload)
    return HtmlText(decoded.text, decoded.encoding, decoded.confidence)


def browser_codec(label: bytes) -> str | None:
    """The Python codec an Encoding Standard `label` names, or None when a browser does not
    know it."""
    try:
        name = label.decode("ascii").strip().lower()
    except UnicodeDecodeError:
        return None
    if name in _LABELS:
        return _LABELS[name]
    try:
        codec = codecs.lookup(name).name
    except LookupError:
        return None
    return codec if codec in _SINGLE_BYTE else None
