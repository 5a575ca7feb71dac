"""The one-method port every format parser satisfies."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

__all__ = ["TextExtractor"]


@runtime_checkable
class TextExtractor(Protocol):
    """Turns the bytes of one file of a known kind into text.

    It receives bytes, never a path: an extractor that took a path would need
    someone to write untrusted bytes under a name derived from an untrusted
    label. `kind` is the sniffed kind (``"pdf"``, ``"docx"``, ...), never the
    declared one. `max_pages` bounds pages, slides or frames. An extractor may
    raise `IngestionRejected` (stage ``preflight``) for a structural refusal,
    `ExtractionFailed` for an incomplete result, or anything at all: the guard
    maps every other exception to `ExtractionFailed`.

    An extractor may also define ``self_test() -> dict[str, str]``, run once
    when a worker starts, which parses one trusted sample of each kind it
    supports and reports ``"ok"`` or the error per kind.
    """

    def extract(self, kind: str, media_type: str | None, payload: bytes, *, max_pages: int) -> str:
        """Return the text of `payload`."""
        ...
