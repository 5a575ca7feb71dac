"""OCR for PDF pages that have no text layer: PDFium renders, Tesseract reads.

A scanned PDF is a stack of pictures; pypdf finds no text in it. Each page
without a text layer is rendered with pypdfium2 (PDFium, the renderer in
Chromium: no system service, no Ghostscript) at up to 300 dpi, scaled down
so the bitmap stays under the pixel ceiling, and read by Tesseract, one page
at a time, each under its own timeout and all within the file's wall clock.
Both run inside the isolated child, like every other parser.
"""

from __future__ import annotations

import math
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from capsa.errors import ExtractionFailed

__all__ = ["OcrSettings", "ocr_available", "ocr_pages"]

_DPI = 300
_POINTS_PER_INCH = 72


@dataclass(frozen=True, slots=True)
class OcrSettings:
    """How far OCR may go for one file."""

    max_pixels: int = 40_000_000
    """Pixels in one rendered page; the resolution is lowered to stay under it."""
    page_timeout_s: float = 20.0
    """Seconds Tesseract may spend on one page."""
    budget_s: float = 30.0
    """Seconds all pages together may take; past it the file fails as ``timeout``."""
    lang: str = "eng"
    """Tesseract language code."""


def ocr_available() -> str | None:
    """None when OCR can run here; otherwise the reason it cannot."""
    try:
        import pypdfium2  # noqa: F401
        import pytesseract  # noqa: F401
    except ImportError:
        return "pypdfium2 or pytesseract is not installed (pip install 'capsa[ocr]')"
    if shutil.which("tesseract") is None:
        return "the tesseract program is not installed"
    return None


def ocr_pages(payload: bytes, pages: Sequence[int], settings: OcrSettings) -> dict[int, str]:
    """Render and read each of `pages` (0-based); return the text per page.

    Raises:
        ExtractionFailed: ``timeout`` when Tesseract or the whole run passes its limit.
    """
    import pypdfium2
    import pytesseract

    started = time.monotonic()
    document = pypdfium2.PdfDocument(payload)
    texts: dict[int, str] = {}
    try:
        for done, number in enumerate(pages):
            elapsed = time.monotonic() - started
            if elapsed > settings.budget_s:
                raise ExtractionFailed(
                    f"OCR read {done} of {len(pages)} pages without a text layer in "
                    f"{elapsed:.0f} s, past the limit of {settings.budget_s:g} s (timeout_s)",
                    label="<payload>", cause="timeout")
            if number >= len(document):
                continue
            image = _render(document[number], settings.max_pixels)
            try:
                text = pytesseract.image_to_string(image, lang=settings.lang,
                                                   timeout=settings.page_timeout_s)
            except RuntimeError as exc:
                if "timeout" not in str(exc).lower():
                    raise
                raise ExtractionFailed(
                    f"Tesseract ran past its limit of {settings.page_timeout_s:g} s on page "
                    f"{number + 1}", label="<payload>", cause="timeout") from None
            texts[number] = text.strip()
    finally:
        document.close()
    return texts


def _render(page: Any, max_pixels: int) -> Any:
    width, height = page.get_size()  # points
    scale = _DPI / _POINTS_PER_INCH
    if width * height * scale * scale > max_pixels:
        scale = math.sqrt(max_pixels / max(1.0, width * height)) * 0.99
    bitmap = page.render(scale=scale, grayscale=True)
    return bitmap.to_pil()
