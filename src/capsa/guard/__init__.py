"""Guarded extraction: untrusted attachment bytes become text only through bounded parsers.

Every attachment passes, in order: a safe label; empty and size checks; zip
central-directory inspection; sniffing its real kind; the parser, in an
isolated worker with time and memory limits; normalisation and text
ceilings. Each step can refuse with a typed reason; `extract_all` puts every
refusal on the result, so nothing disappears silently.

Examples:
    >>> from capsa.guard import Attachment, extract_all
    >>> from capsa.guard.extractors import PlainTextExtractor
    >>> result = extract_all([Attachment(label="a.txt", payload=b"hello")], PlainTextExtractor())
    >>> result.extracted[0].text
    'hello'
"""

from capsa.errors import ExtractionFailed, IngestionRejected
from capsa.guard.archive import inspect_archive
from capsa.guard.bulk import BulkSource, ExtractedPart, Skipped, extract_many
from capsa.guard.elements import Element, MailHeaders, Page
from capsa.guard.extract import (
    Attachment,
    Extracted,
    ExtractionResult,
    Omission,
    awarm_up,
    default_extractor,
    extract_all,
    extract_attachment,
    read_bounded,
    render_blocks,
    warm_up,
)
from capsa.guard.labels import safe_label
from capsa.guard.limits import DEFAULT_LIMITS, ExtractionLimits
from capsa.guard.normalize import normalize
from capsa.guard.port import EmbeddedFile, Parsed, TextExtractor
from capsa.guard.sandbox.layers import SandboxReport
from capsa.guard.sandbox.pool import IsolatedExtractor
from capsa.guard.shapes import DocumentPart, Shape, document_parts
from capsa.guard.sniff import EXTRACTABLE_KINDS, media_type_for_name, sniff

__all__ = [
    "DEFAULT_LIMITS",
    "EXTRACTABLE_KINDS",
    "Attachment",
    "BulkSource",
    "DocumentPart",
    "Element",
    "EmbeddedFile",
    "Extracted",
    "ExtractedPart",
    "ExtractionFailed",
    "ExtractionLimits",
    "ExtractionResult",
    "IngestionRejected",
    "IsolatedExtractor",
    "MailHeaders",
    "Omission",
    "Page",
    "Parsed",
    "SandboxReport",
    "Shape",
    "Skipped",
    "TextExtractor",
    "awarm_up",
    "default_extractor",
    "document_parts",
    "extract_all",
    "extract_attachment",
    "extract_many",
    "inspect_archive",
    "media_type_for_name",
    "normalize",
    "read_bounded",
    "render_blocks",
    "safe_label",
    "sniff",
    "warm_up",
]
