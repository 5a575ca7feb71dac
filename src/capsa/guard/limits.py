"""The ceilings applied around every parser call."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt

__all__ = ["DEFAULT_LIMITS", "ExtractionLimits"]

_MiB = 1024 * 1024


class ExtractionLimits(BaseModel):
    """Every bound the guard enforces, checked before, around and after the parser.

    The defaults are deliberately small: capsa guards *attachments to a prompt*,
    not a document warehouse. Raise them per call when you ingest larger files.
    `docs/threat-model.md` argues each number.

    Examples:
        >>> ExtractionLimits(max_bytes=1024).max_bytes
        1024
        >>> ExtractionLimits().max_pages
        20
    """

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    max_bytes: PositiveInt = 8 * _MiB
    """Raw bytes per file. Checked first; a path is never read past this plus one byte."""
    max_uncompressed_bytes: PositiveInt = 8 * _MiB
    """Declared uncompressed total of an archive's members, summed across nesting levels."""
    max_expansion_ratio: PositiveFloat = 100.0
    """Uncompressed / compressed size, per member and overall, once past `ratio_floor_bytes`."""
    ratio_floor_bytes: PositiveInt = 1 * _MiB
    """Members and archives smaller than this uncompressed are never refused for their ratio."""
    max_members: PositiveInt = 1024
    """Members in one archive, read from the end-of-central-directory record first."""
    max_nesting_depth: int = Field(default=1, ge=0)
    """Archives inside the attachment's own container; 0 allows none."""
    max_pages: PositiveInt = 20
    """Pages (PDF), slides (PPTX) or frames (TIFF) a parser may touch."""
    max_pixels: PositiveInt = 40_000_000
    """Pixels in one image frame, enforced before decoding."""
    max_text_chars: PositiveInt = 50_000
    """Characters of text per file. A file over it is dropped whole, never truncated."""
    max_total_chars: PositiveInt = 120_000
    """Characters of text for the whole set; files that do not fit are dropped whole."""
    timeout_s: PositiveFloat = 30.0
    """Wall clock per file, enforced by killing the parser's process group."""
    cpu_s: PositiveInt = 30
    """CPU seconds per file (`RLIMIT_CPU`), a backstop behind the wall clock."""
    memory_bytes: PositiveInt = 1024 * _MiB
    """Address space a parser may add to its warm worker's (`RLIMIT_AS`)."""
    max_file_write_bytes: PositiveInt = 64 * _MiB
    """Largest file a parser may write (`RLIMIT_FSIZE`), e.g. Tesseract's scratch files."""
    on_type_mismatch: Literal["refuse", "trust_bytes"] = "refuse"
    """A declared media type that contradicts the sniffed bytes is refused, or the bytes win."""


DEFAULT_LIMITS = ExtractionLimits()
