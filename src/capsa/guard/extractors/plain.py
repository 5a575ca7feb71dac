"""Plain text, markdown, CSV and JSON: the standard library is the whole parser."""

from __future__ import annotations

import copy

from capsa.errors import IngestionRejected
from capsa.guard.extractors._markdown import may_hold_html, visible_markdown
from capsa.guard.limits import ExtractionLimits
from capsa.guard.normalize import UndecodableText, detect_and_decode
from capsa.guard.port import Parsed

__all__ = ["PlainTextExtractor"]


class PlainTextExtractor:
    """Decodes text: BOM, UTF-16/32, UTF-8, then a detected code page (see `detect_and_decode`).

    A detected encoding is reported with the detector's confidence, and ends
    up on `Extracted.encoding`.

    Markdown, CSV and JSON are passed through as text: a language model reads
    them as they are, and re-rendering them would only add a parser. Markdown
    loses only the raw HTML its rendered page never shows (comments,
    processing instructions, declarations, and ``script``, ``style``,
    ``template``, ``noscript``, ``title``, ``iframe``, ``noembed`` and
    ``noframes`` elements, outside code), with a note of how many: text a
    reader never saw is how an instruction hides in a document. What is raw
    HTML is decided by a CommonMark parser (markdown-it) and what it hides by
    the HTML tokenizer's states (see `capsa.guard.extractors._markdown`).

    Where it runs: text, CSV, JSON, and Markdown that cannot hold raw HTML (no
    ``<`` before ``!``, ``?``, ``/`` or a letter) are decoded in the
    application's process on an `IsolatedExtractor`'s light path
    (`fits_in_process`). Other Markdown needs the parser, whose time grows
    with crafted input, so the pool sends it to a parse worker with its time
    and memory limits. Called directly (``extract_attachment(..., PlainTextExtractor())``),
    everything runs in the caller's process, parser included, with no time
    limit: the caller chose in-process extraction, so give it trusted or
    size-capped Markdown, or use an `IsolatedExtractor`.

    Examples:
        >>> PlainTextExtractor().extract("text", "text/plain", b"\\xef\\xbb\\xbfhi", max_pages=1)
        'hi'
    """

    kinds = frozenset({"text", "markdown", "csv", "json"})
    in_process = True
    """May run in the application's process: decoding of at most ``max_bytes``, no native
    parser a crafted file could take over. An `IsolatedExtractor` takes this light path
    instead of a worker for each file `fits_in_process` accepts."""

    max_text_chars: int | None = None
    """Text longer than this is refused after extraction anyway, so Markdown that long is
    not scanned for hidden HTML first; set by `with_limits`."""

    def with_limits(self, limits: ExtractionLimits) -> PlainTextExtractor:
        """A copy of this extractor (subclasses keep their state) that knows the text limit."""
        configured = copy.copy(self)
        configured.max_text_chars = limits.max_text_chars
        return configured

    def fits_in_process(self, kind: str, payload: bytes | None) -> bool:
        """Whether extracting `payload` as `kind` stays light enough for the application's
        process: always for text, CSV and JSON; for Markdown only when it cannot
        hold raw HTML, so no Markdown parser runs (None: any Markdown, so no).

        Examples:
            >>> extractor = PlainTextExtractor()
            >>> extractor.fits_in_process("markdown", b"# Notes\\n\\nplain words")
            True
            >>> extractor.fits_in_process("markdown", b"# Notes <!-- hidden -->")
            False
        """
        if kind != "markdown":
            return True
        if payload is None:
            return False
        try:
            text = detect_and_decode(payload).text
        except UndecodableText:
            return True  # refused as undecodable without parsing, here as in a worker
        return not may_hold_html(text)

    def extract(self, kind: str, media_type: str | None, payload: bytes, *,
                max_pages: int) -> str | Parsed:
        """Return the decoded text of `payload`, with its encoding when it was not UTF-8."""
        try:
            decoded = detect_and_decode(payload)
        except UndecodableText as exc:
            raise IngestionRejected(str(exc), label="<payload>", stage="preflight",
                                    reason="undecodable") from None
        text = decoded.text
        notes: tuple[str, ...] = ()
        if kind == "markdown" and (self.max_text_chars is None
                                   or len(text) <= self.max_text_chars):
            text, hidden = visible_markdown(text)
            note = hidden.note()
            notes = () if note is None else (note,)
        if decoded.encoding is None and not notes:
            return text
        return Parsed(text, encoding=decoded.encoding, encoding_confidence=decoded.confidence,
                      notes=notes)

    def self_test(self) -> dict[str, str]:
        """Decode one sample, and leave a comment out of one Markdown sample (which imports
        and warms markdown-it)."""
        ok = self.extract("text", None, "héllo".encode(), max_pages=1) == "héllo"
        report = {kind: "ok" if ok else "wrong text" for kind in sorted(self.kinds)}
        parsed = self.extract("markdown", None, b"# capsa <!-- self-test -->", max_pages=1)
        text = parsed if isinstance(parsed, str) else parsed.text
        if text != "# capsa ":
            report["markdown"] = f"wrong text: {text!r}"
        return report
