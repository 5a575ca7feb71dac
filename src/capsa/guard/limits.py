"""The ceilings applied around every parser call."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt

__all__ = ["ATTACHMENT_LIMITS", "DEFAULT_LIMITS", "INGESTION_LIMITS", "ExtractionLimits"]

_MiB = 1024 * 1024


class ExtractionLimits(BaseModel):
    """Every bound the guard enforces, checked before, around and after the parser.

    The field defaults are the *attachment* preset: what one file a person drops
    into a chat should be. Corpora are bigger, so ingestion entry points
    (`extract_many`, loaders, readers, the CLI) start from `for_ingestion()`
    instead. Both are starting points; override any field with `model_copy`.
    `docs/threat-model.md` argues each number.

    Examples:
        >>> ExtractionLimits(max_bytes=1024).max_bytes
        1024
        >>> ExtractionLimits().max_pages
        20
        >>> ExtractionLimits.for_ingestion().max_pages
        5000
    """

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    max_bytes: PositiveInt = 8 * _MiB
    """Raw bytes per file. Checked first; a path is never read past this plus one byte."""
    max_uncompressed_bytes: PositiveInt = 8 * _MiB
    """Declared uncompressed total of an archive's members, summed across nesting levels;
    the archives found inside one file (an e-mail's DOCX attachments) share it with that
    file's other contents."""
    max_expansion_ratio: PositiveFloat = 100.0
    """Uncompressed / compressed size, per member and overall, once past `ratio_floor_bytes`."""
    ratio_floor_bytes: PositiveInt = 1 * _MiB
    """Members and archives smaller than this uncompressed are never refused for their ratio."""
    max_members: PositiveInt = 1024
    """Members in one archive, counted together with those of the archives stored in it,
    each count read from its end-of-central-directory record first."""
    max_nesting_depth: int = Field(default=1, ge=0)
    """Archives inside the attachment's own container, and files inside files (an
    e-mail's attachment is 1 deep, an attachment of a forwarded message 2); 0 allows none."""
    max_pages: PositiveInt = 20
    """Pages (PDF), slides (PPTX) or frames (TIFF) a parser may touch."""
    max_pixels: PositiveInt = 40_000_000
    """Pixels in one image frame, enforced before decoding."""
    max_text_chars: PositiveInt = 50_000
    """Characters of text per file. A file over it is dropped whole, never truncated."""
    max_total_chars: PositiveInt = 120_000
    """Characters of text for the whole set; files that do not fit are dropped whole."""
    timeout_s: PositiveFloat = 30.0
    """Wall clock per file, shared with the files found inside it; enforced by ending
    the file's PID namespace, which takes every process it started."""
    cpu_s: PositiveInt = 30
    """CPU seconds per file, counted over all its processes where a cgroup counts them
    (each process's `RLIMIT_CPU` besides)."""
    memory_bytes: PositiveInt = 1024 * _MiB
    """Memory a parser may add to its warm worker's: counted for the whole file
    (memfd, shared memory and scratch included) where a cgroup counts it, and
    each process's address space (`RLIMIT_AS`) besides."""
    max_file_write_bytes: PositiveInt = 64 * _MiB
    """Bytes a parser may write: the size of the file's scratch tmpfs (all its files
    together), and of any one file (`RLIMIT_FSIZE`), e.g. Tesseract's scratch files."""
    max_scratch_files: PositiveInt = 4096
    """Files and directories a parser may create in its scratch (the tmpfs's inodes)."""
    max_elements: PositiveInt = 5_000
    """Elements (titles, paragraphs, list items, tables, pages) one file's structure may
    have. Past it the text is never cut: the rest of it becomes one element, and a
    note says so. It also bounds the structure a worker may send back (at most
    ``capsa.guard.sandbox.protocol.STRUCTURE_BYTES_PER_ELEMENT``
    bytes each)."""
    on_type_mismatch: Literal["refuse", "trust_bytes", "trust_document_bytes"] = "refuse"
    """A declared media type (or a file name's extension) that contradicts the sniffed
    bytes: ``refuse`` it (``type_mismatch``); ``trust_bytes``, the bytes win; or
    ``trust_document_bytes``, the bytes win when both are document formats (a DOCX named
    ``.doc``, RTF named ``.doc``), and a picture or text under a document's name is still
    refused. Either way an outcome whose bytes won says so in its `notes`."""


    @classmethod
    def for_attachments(cls) -> ExtractionLimits:
        """The chat-attachment preset: small files, refused early, cheap to refuse."""
        return ATTACHMENT_LIMITS

    @classmethod
    def for_ingestion(cls) -> ExtractionLimits:
        """The corpus preset: books, long reports, thousand-page PDFs, large text.

        Every bound still holds (bombs are refused by ratio and declared size
        long before these ceilings matter); the time and memory allowances
        grow with the size a parser may now be handed. A name that disagrees
        with the bytes of a document (``eng_spa_mult.doc`` holding a DOCX) is
        extracted as what the bytes are, with a note on the outcome
        (``trust_document_bytes``): a real archive is full of them.
        """
        return INGESTION_LIMITS


ATTACHMENT_LIMITS = ExtractionLimits()
INGESTION_LIMITS = ExtractionLimits(
    max_bytes=256 * _MiB,
    max_uncompressed_bytes=1024 * _MiB,
    max_members=20_000,
    max_nesting_depth=3,
    max_pages=5_000,
    max_pixels=100_000_000,
    max_text_chars=50_000_000,
    max_total_chars=2_000_000_000,
    timeout_s=600.0,
    cpu_s=600,
    memory_bytes=4096 * _MiB,
    max_file_write_bytes=512 * _MiB,
    max_elements=200_000,
    on_type_mismatch="trust_document_bytes",
)
DEFAULT_LIMITS = ATTACHMENT_LIMITS
"""The attachment preset, under its historical name."""
