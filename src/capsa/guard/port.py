"""The one-method port every format parser satisfies, and what it may return."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from capsa.guard.elements import Element, MailHeaders

__all__ = ["EmbeddedFile", "Parsed", "TextExtractor"]


@dataclass(frozen=True, slots=True)
class EmbeddedFile:
    """A file found inside the one being parsed (an e-mail attachment, a forwarded message).

    The parser never extracts it itself: it hands the bytes back, and the
    guard runs them through the whole pipeline again (label, size, sniff,
    archive checks, a fresh isolated parser) as a file of their own.
    """

    name: str
    """The name the container gave it (untrusted; becomes a label through `safe_label`)."""
    media_type: str | None
    """The type the container declared (untrusted; checked against the bytes)."""
    payload: bytes
    """The decoded bytes."""


@dataclass(frozen=True, slots=True)
class Parsed:
    """A parser's full answer when plain text is not all it has to say.

    Examples:
        >>> Parsed("hello", encoding="cp1252", encoding_confidence=0.9).text
        'hello'
    """

    text: str
    """The text of the file itself."""
    encoding: str | None = None
    """The character encoding the text was decoded from, when the parser had to detect one."""
    encoding_confidence: float | None = None
    """The detector's confidence in `encoding`, 0 to 1; None when it was not guessed."""
    embedded: tuple[EmbeddedFile, ...] = ()
    """Files inside this one, to be extracted on their own."""
    notes: tuple[str, ...] = ()
    """Facts a reader should know about how the text was obtained (``"OCR read 3 pages"``)."""
    elements: tuple[Element, ...] = ()
    """The document's structure as spans of `text` (`capsa.guard.elements.assemble` builds
    both); empty when the parser knows none, and the guard then cuts paragraphs."""
    mail: MailHeaders | None = None
    """An e-mail's headers; None for anything else."""


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

    It returns the text, or a `Parsed` when it has more to report: the
    encoding it detected, notes on how the text was obtained, or files
    embedded in this one (an e-mail's attachments), which the guard then
    extracts on their own under the same limits.

    An extractor may also define ``self_test() -> dict[str, str]``, run once
    when a worker starts, which parses one trusted sample of each kind it
    supports and reports ``"ok"`` or the error per kind.
    """

    def extract(self, kind: str, media_type: str | None, payload: bytes, *,
                max_pages: int) -> str | Parsed:
        """Return the text of `payload`, or a `Parsed` with more to say."""
        ...
