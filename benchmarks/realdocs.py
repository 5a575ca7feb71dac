"""The real-document set: where it is, what the raw parsers make of it, how capsa compares.

Two halves: the PDFs (and their source images) under ``shared/realdocs`` beside
the repository, made by real producers (pdflatex, LibreOffice, Google Docs,
ReportLab, ImageMagick, pdfkit; CC-BY-SA-4.0), and the files in
``tests/realdocs/files`` made with LibreOffice, pandoc, ImageMagick, Pillow,
pypdf, msoffcrypto-tool and Python's e-mail package (``tests/realdocs/README.md``).

"Raw" is what a user gets from the parser alone: pypdf (with the empty user
password tried, as every viewer does), Tesseract for images, and unstructured's
own ``partition_*`` for everything else, elements joined by blank lines.
Agreement is the Jaccard index of the two texts' lower-cased word sets.

Used by ``tests/realdocs/test_realdocs.py`` (behaviour) and
``benchmarks/extraction.py`` (the coverage, agreement and timing rows).
"""

from __future__ import annotations

import io
import os
import re
import time
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
GENERATED = REPO / "tests" / "realdocs" / "files"
AGREEMENT_FLOOR = 0.8
"""Word-set Jaccard a file with a text layer must reach against its raw parser."""
EXPECTED_OMISSIONS: dict[str, str] = {
    # needs its user password ("openpassword"); the owner-only case is copy-protected.pdf
    "libreoffice-writer-password.pdf": "encrypted",
    "protected.xlsx": "encrypted",  # a password-protected XLSX (OLE EncryptedPackage)
    # pictures of a smiley face: no words in them, OCR runs and finds none
    "imagemagick-ASCII85Decode.pdf": "no_text",
    "imagemagick-CCITTFaxDecode.pdf": "no_text",
    "imagemagick-lzw.pdf": "no_text",
    "grayscale-image.pdf": "no_text",
    "cmyk-image.pdf": "no_text",
    "smile.png": "no_text", "smile.jpg": "no_text", "smile.tiff": "no_text",
    "smile-deflate.tiff": "no_text", "smile-lzw.tiff": "no_text",
    "smile-pack-bits.tiff": "no_text", "image.jpg": "no_text", "image.png": "no_text",
    # its /Pages tree holds an invalid object; pypdf's strict page walk refuses it too
    "unreadablemetadata.pdf": "corrupt",
}
"""Files that should not become text, and the reason each must give."""
LISTING = "\n\nAttached:\n- "
"""Where capsa's list of a file's attachments begins in the parent's text."""
_SKIPPED_SUFFIXES = frozenset({".json", ".md", ""})
_WORD = re.compile(r"\w+")


VENDORED = REPO / "tests" / "realdocs" / "sample-files"
"""A copy of ``shared/realdocs`` (CC-BY-SA-4.0, its LICENSE and files.json beside it)."""


def shared_dir() -> Path | None:
    """``shared/realdocs`` beside the repository (or ``$CAPSA_REALDOCS``), else the copy here."""
    candidates = [os.environ.get("CAPSA_REALDOCS"), REPO.parent / "shared" / "realdocs",
                  REPO.parents[1] / "shared" / "realdocs", VENDORED]
    for candidate in candidates:
        if candidate and Path(candidate).is_dir():
            return Path(candidate)
    return None


def realdoc_paths() -> list[Path]:
    """Every file of the set, shared PDFs and images first, then the generated ones."""
    shared = shared_dir()
    found: list[Path] = []
    if shared is not None:
        found += sorted(p for p in shared.rglob("*") if p.is_file()
                        and p.suffix.lower() not in _SKIPPED_SUFFIXES and p.name != "LICENSE")
    found += sorted(p for p in GENERATED.iterdir() if p.is_file())
    return found


def words(text: str) -> set[str]:
    """Lower-cased word set."""
    return set(_WORD.findall(text.lower()))


def jaccard(left: str, right: str) -> float:
    """Word-set Jaccard index; 1.0 for two texts without words."""
    a, b = words(left), words(right)
    return 1.0 if not a and not b else len(a & b) / len(a | b)


def raw_text(path: Path) -> str | None:
    """What the raw parser alone makes of `path`; None when it raised."""
    from capsa.guard import sniff

    payload = path.read_bytes()
    kind = sniff(payload)
    try:
        with warnings.catch_warnings():  # unstructured warns about guessed encodings
            warnings.simplefilter("ignore")
            return _RAW.get(kind, _raw_unstructured)(payload, kind)
    except Exception:
        return None


def _raw_pdf(payload: bytes, kind: str) -> str:
    from pypdf import PdfReader

    reader = PdfReader(io.BytesIO(payload))
    if reader.is_encrypted:
        reader.decrypt("")
    return "\n\n".join((page.extract_text() or "").strip() for page in reader.pages)


def _raw_image(payload: bytes, kind: str) -> str:
    import pytesseract
    from PIL import Image

    return str(pytesseract.image_to_string(Image.open(io.BytesIO(payload))))


def _raw_unstructured(payload: bytes, kind: str) -> str:
    from capsa.guard.extractors.unstructured import _offline_spacy

    _offline_spacy()  # the registry copy of unstructured's spaCy model, never a download
    stream = io.BytesIO(payload)
    if kind == "eml":
        from unstructured.partition.email import partition_email

        elements = partition_email(file=stream, process_attachments=False)
    elif kind in ("text", "markdown", "csv", "json"):
        from unstructured.partition.text import partition_text

        elements = partition_text(file=stream)
    else:
        from unstructured.partition.auto import partition

        elements = partition(file=stream)
    return "\n\n".join(str(element) for element in elements)


_RAW: dict[str, Callable[[bytes, str], str]] = {
    "pdf": _raw_pdf, "png": _raw_image, "jpeg": _raw_image, "tiff": _raw_image,
    "webp": _raw_image,
}


@dataclass(frozen=True)
class Row:
    """One file of the set: capsa's outcome beside the raw parser's."""

    name: str
    size: int
    outcome: str
    """``extracted`` or the omission's reason."""
    raw_chars: int | None
    """Characters the raw parser returned; None when it raised."""
    guarded_chars: int
    agreement: float | None
    """Jaccard against raw, when both produced text."""
    expected: str
    """The outcome the set expects (``extracted`` unless listed in `EXPECTED_OMISSIONS`)."""
    attachments: int
    """Files found inside this one and reported after it (e-mail attachments)."""


def run_set(paths: Sequence[Path], *, workers: int = 2, extractor: Any = None) -> list[Row]:
    """Run `extract_many` (ingestion preset) over `paths`; compare each top-level file with raw."""
    from capsa.guard import Extracted, extract_many

    outcomes: dict[str, Any] = {}
    children: dict[str, int] = {}
    for outcome in extract_many([str(p) for p in paths], workers=workers, extractor=extractor):
        if outcome.parent is not None:
            top = outcome.label.split("/", 1)[0]
            children[top] = children.get(top, 0) + 1
            continue
        outcomes[outcome.source] = outcome
    rows = []
    for path in paths:
        outcome = outcomes[str(path)]
        raw = raw_text(path)
        text = outcome.text if isinstance(outcome, Extracted) else ""
        if children.get(outcome.label):  # compare the body, not capsa's list of attachments
            text = text.rpartition(LISTING)[0] or text
        both = isinstance(outcome, Extracted) and raw is not None and bool(words(raw))
        rows.append(Row(
            name=path.name, size=path.stat().st_size,
            outcome="extracted" if isinstance(outcome, Extracted) else outcome.reason,
            raw_chars=None if raw is None else len(raw.strip()), guarded_chars=len(text),
            agreement=round(jaccard(text, raw or ""), 3) if both else None,
            expected=EXPECTED_OMISSIONS.get(path.name, "extracted"),
            attachments=children.get(outcome.label, 0)))
    return rows


def summarise(rows: Iterable[Row]) -> dict[str, Any]:
    """Coverage (extracted by capsa vs by raw) and agreement over the set."""
    rows = list(rows)
    agreements = [r.agreement for r in rows if r.agreement is not None]
    return {
        "files": len(rows),
        "extracted_guarded": sum(r.outcome == "extracted" for r in rows),
        "extracted_raw": sum(bool(r.raw_chars) for r in rows),
        "as_expected": sum(r.outcome == r.expected for r in rows),
        "agreement_mean": round(sum(agreements) / len(agreements), 3) if agreements else None,
        "agreement_min": min(agreements) if agreements else None,
        "agreement_floor": AGREEMENT_FLOOR,
    }


def large_docx(pages: int = 872) -> bytes:
    """An ordinary long DOCX written by python-docx: `pages` pages of report prose.

    About the size of the 872-page, 482 KB report in the issue that first
    measured this: a page break after every ~1,800 characters.
    """
    import random

    import docx

    vocabulary = [
        "harbour", "authority", "berth", "occupancy", "crane", "schedule", "feeder", "vessel",
        "waiting", "quarter", "customs", "inspection", "manifest", "cargo", "tonnage", "quay",
        "dredging", "shift", "night", "report", "growth", "container", "traffic", "budget",
        "board", "approval", "pilot", "tug", "weather", "delay", "storage", "yard", "gate",
        "truck", "rail", "link", "tariff", "revenue", "safety", "audit"]
    rng = random.Random(872)  # prose that compresses like prose, the same on every run

    def sentence() -> str:
        return " ".join(rng.choice(vocabulary) for _ in range(rng.randint(8, 18))).capitalize()

    document = docx.Document()
    for page in range(pages):
        document.add_heading(f"Section {page + 1}", level=2)
        for _ in range(3):
            document.add_paragraph(". ".join(sentence() for _ in range(4)) + ".")
        document.add_page_break()
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def time_large_docx_refusal(pool: Any, payload: bytes, limits: Any,
                            runs: int = 5) -> dict[str, Any]:
    """Median time for `extract_attachment` to refuse `payload` under `limits`, and why."""
    from capsa.errors import ExtractionFailed, IngestionRejected
    from capsa.guard import Attachment, extract_attachment

    seconds: list[float] = []
    reason = detail = "extracted"
    for _ in range(runs):
        began = time.perf_counter()
        try:
            extract_attachment(Attachment(label="long-report.docx", payload=payload), pool,
                               limits)
        except (IngestionRejected, ExtractionFailed) as error:
            reason = getattr(error, "reason", getattr(error, "cause", "?"))
            detail = error.detail
        seconds.append(time.perf_counter() - began)
    seconds.sort()
    return {"bytes": len(payload), "median_ms": round(seconds[len(seconds) // 2] * 1000, 1),
            "min_ms": round(seconds[0] * 1000, 1), "reason": reason, "detail": detail}
