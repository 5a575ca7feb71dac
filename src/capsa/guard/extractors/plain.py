"""Plain text, markdown, CSV and JSON: the standard library is the whole parser."""

from __future__ import annotations

from capsa.errors import IngestionRejected
from capsa.guard.normalize import UndecodableText, decode_text

__all__ = ["PlainTextExtractor"]


class PlainTextExtractor:
    """Decodes text without guessing code pages (see `decode_text`).

    Markdown, CSV and JSON are passed through as text: a language model reads
    them as they are, and re-rendering them would only add a parser.

    Examples:
        >>> PlainTextExtractor().extract("text", "text/plain", b"\\xef\\xbb\\xbfhi", max_pages=1)
        'hi'
    """

    kinds = frozenset({"text", "markdown", "csv", "json"})
    in_process = True
    """Safe to run in the application's process: pure standard-library decoding of at
    most ``max_bytes``, no native parser a crafted file could take over. An
    `IsolatedExtractor` takes this light path for these kinds instead of a worker."""

    def extract(self, kind: str, media_type: str | None, payload: bytes, *, max_pages: int) -> str:
        """Return the decoded text of `payload`."""
        try:
            return decode_text(payload)
        except UndecodableText as exc:
            raise IngestionRejected(str(exc), label="<payload>", stage="preflight",
                                    reason="undecodable") from None

    def self_test(self) -> dict[str, str]:
        """Decode one sample; the plain extractor has no imports to warm."""
        ok = self.extract("text", None, "héllo".encode(), max_pages=1) == "héllo"
        return {kind: "ok" if ok else "wrong text" for kind in sorted(self.kinds)}
