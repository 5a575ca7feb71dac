"""Plain text, markdown, CSV and JSON: the standard library is the whole parser."""

from __future__ import annotations

import copy

from capsa.errors import IngestionRejected
from capsa.guard.extractors._markdown import visible_markdown
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
    loses only the raw HTML its rendered page never shows (comments, and
    ``<script>``, ``<style>``, ``<template>`` and ``<noscript>`` elements, outside
    code), with a note of how many: text a reader never saw is how an
    instruction hides in a document (see `capsa.guard.extractors._markdown`).

    Examples:
        >>> PlainTextExtractor().extract("text", "text/plain", b"\\xef\\xbb\\xbfhi", max_pages=1)
        'hi'
    """

    kinds = frozenset({"text", "markdown", "csv", "json"})
    in_process = True
    """Safe to run in the application's process: pure standard-library decoding of at
    most ``max_bytes``, no native parser a crafted file could take over. An
    `IsolatedExtractor` takes this light path for these kinds instead of a worker."""

    max_text_chars: int | None = None
    """Text longer than this is refused after extraction anyway, so Markdown that long is
    not scanned for hidden HTML first; set by `with_limits`."""

    def with_limits(self, limits: ExtractionLimits) -> PlainTextExtractor:
        """A copy of this extractor (subclasses keep their state) that knows the text limit."""
        configured = copy.copy(self)
        configured.max_text_chars = limits.max_text_chars
        return configured

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
        """Decode one sample; the plain extractor has no imports to warm."""
        ok = self.extract("text", None, "héllo".encode(), max_pages=1) == "héllo"
        return {kind: "ok" if ok else "wrong text" for kind in sorted(self.kinds)}
