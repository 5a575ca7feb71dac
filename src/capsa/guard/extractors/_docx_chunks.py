"""Word's embedded foreign content (``w:altChunk``), read where it stands.

A DOCX may hold a part in another format, an HTML page, a web archive
(MHT) or plain text, and say with ``w:altChunk`` where it goes. Word
imports it when the file is opened, so a reader sees it as part of the
document. Generators write these to fill a template with HTML
(html-docx-js writes a whole document as one MHT chunk; the OpenXML SDK
and docx4j merge HTML that way), and python-docx yields nothing for one:
unstructured read such a document as empty, or lost the merged sections.

`read_alt_chunks` replaces each chunk, in the parsed document, by one
paragraph per element of its text, before anything else reads the body. An
HTML or MHT chunk is read as an HTML file is, through the same partitioner
and the same rules: its encoding as a browser picks it, its hidden elements
left out and counted, its forms, details and figures opened
(`capsa.guard.extractors.unstructured`); a web archive's page is its root
part, decoded as its header declares when a browser knows the label. A
plain-text chunk is decoded as a text file is, a paragraph a line. A chunk
in any other format (RTF, another DOCX) or whose part is missing, external
or undecodable is left out and named in a note: Word would show it, capsa
cannot read it here. A chunk in
a branch of an ``mc:AlternateContent`` Word does not draw, or in a tracked
deletion, is not read, as Word does not import it.
"""

from __future__ import annotations

import email
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from email.message import Message
from typing import Any

from capsa.guard.extractors._alternates import WORD, in_unshown_branch
from capsa.guard.extractors._docx_containers import text_parts
from capsa.guard.extractors._drawn import docx_paragraph
from capsa.guard.extractors._floors import text_floor_over, visible_chars
from capsa.guard.extractors._html_charset import browser_codec

__all__ = ["CHUNK_CEILING", "Chunks", "read_alt_chunks"]

CHUNK_CEILING: ContextVar[int | None] = ContextVar("capsa_chunk_ceiling", default=None)
"""The parse's ``max_text_chars`` while a DOCX is read: the chunks' text counts against it
as it is written, since the pre-parse floor counts the document's own runs only, and 400
chunks naming one 3,000-paragraph page would put 1.2 million paragraphs before the
parser, past its time limit, before the text limit could refuse the file."""

_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_DELETED = (f"{_W}del", f"{_W}moveFrom")
_R_ID = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}id"
_HTML = frozenset({"text/html", "application/xhtml+xml"})
_ARCHIVES = frozenset({"message/rfc822", "multipart/related", "application/x-mimearchive"})
_PLAIN = frozenset({"text/plain"})
_UTF16 = {**dict.fromkeys(("csunicode", "iso-10646-ucs-2", "ucs-2", "unicode", "unicodefeff",
                           "utf-16", "utf-16le"), "utf-16-le"),
          **dict.fromkeys(("unicodefffe", "utf-16be"), "utf-16-be")}
"""The Encoding Standard's UTF-16 labels: in a part's header (unlike a page's ``<meta>``)
they mean UTF-16."""


@dataclass(frozen=True, slots=True)
class Chunks:
    """What `read_alt_chunks` did to one document."""

    read: int = 0
    """Chunks whose text now stands where they do."""
    unread: int = 0
    """Chunks left out: a format capsa does not read here, or a missing or broken part."""

    def __add__(self, other: Chunks) -> Chunks:
        return Chunks(self.read + other.read, self.unread + other.unread)

    def notes(self) -> tuple[str, ...]:
        """The extraction notes; none when the document has no chunk."""
        said = []
        if self.read:
            said.append(f"read {self.read} embedded HTML or text part(s) (w:altChunk) where "
                        "they stand, as Word imports them")
        if self.unread:
            said.append(f"left out {self.unread} embedded part(s) (w:altChunk) in a format "
                        "capsa does not read inside a DOCX (RTF, another DOCX) or that is "
                        "missing: Word shows them")
        return tuple(said)


def read_alt_chunks(document: Any, html: Callable[[bytes, str | None], list[str]]) -> Chunks:
    """Replace each ``w:altChunk`` of a python-docx `document`'s body, headers and footers by
    paragraphs of its text; `html` reads an HTML chunk's bytes (and its declared charset,
    if any) into the texts of its elements, as an HTML file is read."""
    read = unread = written = 0
    read_parts: dict[int, list[str] | None] = {}  # each part read once, however often named
    for part, root in text_parts(document):
        for chunk in list(root.iter(f"{_W}altChunk")):
            parent = chunk.getparent()
            if (parent is None or parent.tag.endswith("Pr") or in_unshown_branch(chunk, WORD)
                    or next(chunk.iterancestors(*_DELETED), None) is not None):
                continue  # in properties, a copy for older readers, or deleted: not imported
            texts = _texts(part, chunk.get(_R_ID), html, read_parts)
            if texts is None:
                unread += 1
                continue
            written += sum(visible_chars(text) for text in texts)
            ceiling = CHUNK_CEILING.get()
            if ceiling is not None and written > ceiling:
                raise text_floor_over(written, ceiling, "its embedded parts (w:altChunk)")
            at = parent.index(chunk)
            parent.remove(chunk)
            for offset, text in enumerate(texts):
                parent.insert(at + offset, docx_paragraph(chunk, text))
            read += 1
    return Chunks(read, unread)


def _texts(part: Any, ident: str | None, html: Callable[[bytes, str | None], list[str]],
           read_parts: dict[int, list[str] | None]) -> list[str] | None:
    """The texts of the chunk `part` relates as `ident`; None when capsa cannot read it.

    A target part is read once and its texts kept in `read_parts` (by its
    identity): 400 chunks naming one 3,000-paragraph page parsed it 400 times,
    past the parse's time limit, before any text limit could refuse the file.
    """
    rel = part.rels.get(ident) if ident else None
    if rel is None or rel.is_external:
        return None
    try:
        target = rel.target_part
    except Exception:  # noqa: BLE001 - a broken relationship is one part lost, and named
        return None
    if id(target) not in read_parts:
        read_parts[id(target)] = _read(target, html)
    return read_parts[id(target)]


def _read(target: Any, html: Callable[[bytes, str | None], list[str]]) -> list[str] | None:
    """The texts of one chunk part; None when capsa cannot read it."""
    try:
        kind = str(target.content_type).split(";")[0].strip().lower()
        blob = bytes(target.blob)
        if kind in _HTML:
            return html(blob, None)
        if kind in _ARCHIVES:
            return _archive_texts(blob, html)
        if kind in _PLAIN:
            from capsa.guard.normalize import detect_and_decode

            return [line for line in detect_and_decode(blob).text.splitlines() if line.strip()]
    except Exception:  # noqa: BLE001 - a chunk capsa cannot read is one part lost, and named
        return None
    return None


def _archive_texts(blob: bytes, html: Callable[[bytes, str | None], list[str]]
                   ) -> list[str] | None:
    """A web archive's page, as `html` reads it: the first HTML part of its root (the part
    its ``start`` parameter names, else its first part), as a viewer opens it (RFC 2557);
    None when the root holds no page, or declares an encoding browsers show as nothing.

    Parsed with the ``compat32`` policy: the default policy parses each part's headers
    into objects, twenty times slower (an 8 MB archive of tiny parts took a minute).
    """
    root = _root(email.message_from_bytes(blob))
    for piece in root.walk() if root is not None else ():
        if piece.get_content_type() in _HTML:
            payload = piece.get_payload(decode=True)
            if not isinstance(payload, bytes):
                return None
            charset = _charset(piece.get_content_charset())
            return None if charset == "replacement" else html(payload, charset)
    return None


def _root(message: Message) -> Message | None:
    """The root of a ``multipart/related`` `message` (RFC 2387): the part whose Content-ID
    its ``start`` parameter names, else its first part; None when ``start`` names no part.
    A viewer opens the root; a later page is a resource the root may or may not show, and
    a place to hide words. Any other message is its own root."""
    parts = message.get_payload() if message.get_content_type() == "multipart/related" else None
    if not isinstance(parts, list) or not parts:
        return message
    start = message.get_param("start")
    if isinstance(start, str) and start.strip():
        named = next((part for part in parts if isinstance(part, Message)
                      and str(part.get("Content-ID", "")).strip() == start.strip()), None)
        return named
    first = parts[0]
    return first if isinstance(first, Message) else message


def _charset(label: str | None) -> str | None:
    """The Python codec a part's charset `label` names as a browser reads it (the Encoding
    Standard), ``"replacement"`` for its replacement encodings, or None for a label no
    browser knows. Python's codecs know more: ``unicode_escape`` or ``utf-7`` would turn
    ``\\x2d\\x2d\\x3e`` or ``+ADw-`` into markup and bring a comment's words out."""
    if label is None:
        return None
    name = label.strip().lower()
    return _UTF16.get(name) or browser_codec(name.encode("ascii", "replace"))
