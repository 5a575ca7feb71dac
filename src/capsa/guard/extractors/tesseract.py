"""Images to text through Tesseract, with Pillow's limits enforced before decoding."""

from __future__ import annotations

import io
import struct
import time
import warnings
import zlib
from typing import Any

from capsa.errors import ExtractionFailed, IngestionRejected, RejectionReason
from capsa.guard.elements import assemble, page_pieces
from capsa.guard.extractors._hyphenation import hyphenation_notes, join_hyphenated
from capsa.guard.port import Parsed

__all__ = ["TesseractExtractor"]

_FORMATS = {"png": "PNG", "jpeg": "JPEG", "tiff": "TIFF", "webp": "WEBP"}
_MAX_SIDE = 32_766  # Tesseract refuses 32 767 and more
_DECODER_ERRORS = (OSError, ValueError, SyntaxError, EOFError, struct.error, zlib.error,
                   IndexError)
"""What Pillow raises on bytes it cannot decode: truncated data, bad chunks, a broken
APNG frame. Each means the file is broken (``corrupt``), never that the parser lost."""


def _refuse(reason: RejectionReason, detail: str) -> IngestionRejected:
    return IngestionRejected(detail, label="<payload>", stage="preflight", reason=reason)


def _corrupt(where: str, exc: BaseException) -> IngestionRejected:
    return _refuse("corrupt", f"{where}: {type(exc).__name__}: {exc}")


class TesseractExtractor:
    """OCR of PNG, JPEG, TIFF and WebP with `pytesseract`.

    Before a pixel is decoded: the format must be the sniffed one (so EPS,
    which Pillow would hand to Ghostscript, and FITS never open); the frame
    count is checked against `max_pages`; every frame's pixel count against
    `max_pixels`, with Pillow's decompression-bomb warning raised as an error;
    each side must be under Tesseract's 32 767. Tesseract itself runs with a
    timeout, behind the worker's own process-group kill.

    Args:
        max_pixels: pixels per frame.
        timeout_s: seconds per frame given to Tesseract.
        lang: Tesseract language code.
    """

    kinds = frozenset(_FORMATS)

    def __init__(self, *, max_pixels: int = 40_000_000, timeout_s: float = 20.0,
                 lang: str = "eng") -> None:
        if max_pixels <= 0 or timeout_s <= 0:
            raise ValueError("max_pixels and timeout_s must be positive")
        self.max_pixels = max_pixels
        self.timeout_s = timeout_s
        self.lang = lang

    def with_limits(self, limits: Any) -> TesseractExtractor:
        """A copy whose pixel ceiling is the lower of its own and the call's."""
        return TesseractExtractor(max_pixels=min(self.max_pixels, limits.max_pixels),
                                  timeout_s=self.timeout_s,
                                  lang=self.lang)

    def extract(self, kind: str, media_type: str | None, payload: bytes, *,
                max_pages: int) -> Parsed:
        """Return the recognised text of every frame, frames separated by blank lines;
        each paragraph is an element on its frame's page."""
        image_module, pytesseract = _imports()
        image_module.MAX_IMAGE_PIXELS = self.max_pixels
        if kind not in _FORMATS:
            raise _refuse("unsupported_type", f"TesseractExtractor does not handle {kind}")
        with warnings.catch_warnings():
            warnings.simplefilter("error", image_module.DecompressionBombWarning)
            try:
                image = image_module.open(io.BytesIO(payload), formats=[_FORMATS[kind]])
            except (image_module.DecompressionBombError,
                    image_module.DecompressionBombWarning) as exc:
                raise _refuse("image_too_large", str(exc)) from None
            except _DECODER_ERRORS as exc:
                raise _corrupt("header", exc) from None
            try:
                frames = getattr(image, "n_frames", 1)
            except _DECODER_ERRORS as exc:
                raise _corrupt("frames", exc) from None
            if frames > max_pages:
                raise _refuse("too_many_frames", f"{frames} frames, over the limit of {max_pages}")
            texts = []
            for index in range(frames):
                try:
                    image.seek(index)
                    width, height = image.size
                except _DECODER_ERRORS as exc:
                    raise _corrupt(f"frame {index}", exc) from None
                if width * height > self.max_pixels or max(width, height) > _MAX_SIDE:
                    raise _refuse("image_too_large",
                                  f"frame {index} is {width}x{height} pixels, over the limit of "
                                  f"{self.max_pixels} pixels or {_MAX_SIDE} per side")
                try:
                    frame = image.convert("L")
                except _DECODER_ERRORS as exc:  # truncated data, bad chunks
                    raise _corrupt(f"frame {index}", exc) from None
                texts.append(self._recognise(pytesseract, frame, index))
        mended = join_hyphenated(texts)
        text, elements = assemble(page_pieces(mended.pages))
        return Parsed(text, notes=hyphenation_notes(mended), elements=elements)

    def _recognise(self, pytesseract: Any, frame: Any, index: int) -> str:
        started = time.monotonic()
        try:
            return str(pytesseract.image_to_string(frame, lang=self.lang, timeout=self.timeout_s))
        except RuntimeError as exc:
            if "timeout" not in str(exc).lower():  # pytesseract's own message, not the file's
                raise
            raise ExtractionFailed(
                f"Tesseract ran {time.monotonic() - started:.1f} s on frame {index}, past its "
                f"limit of {self.timeout_s:g} s", label="<payload>", cause="timeout") from None

    def self_test(self) -> dict[str, str]:
        """OCR one rendered sample line; proves the tesseract binary is there."""
        from capsa.guard.samples import SAMPLES

        missing = _missing()
        if missing is not None:
            return dict.fromkeys(sorted(self.kinds), f"missing_extra: {missing}")
        try:
            text = self.extract("png", None, SAMPLES["png"](), max_pages=1).text
            status = "ok" if "capsa" in text.lower() else f"sample text missing: {text!r}"
        except Exception as exc:  # noqa: BLE001 - a self-test reports, never raises
            status = f"{type(exc).__name__}: {exc}"
        return dict.fromkeys(sorted(self.kinds), status)


def _missing() -> str | None:
    """What to install for OCR, or None when pytesseract, Pillow and the binary are here."""
    import importlib.util
    import shutil

    absent = [name for name in ("pytesseract", "PIL") if importlib.util.find_spec(name) is None]
    if absent:
        return f"pip install 'capsa[ocr]' (no {', '.join(absent)} in this environment)"
    if shutil.which("tesseract") is None:
        return "install Tesseract: apt-get install tesseract-ocr tesseract-ocr-eng"
    return None


def _imports() -> tuple[Any, Any]:
    try:
        import pytesseract
        from PIL import Image
    except ImportError as exc:
        raise ImportError("TesseractExtractor needs: pip install 'capsa[ocr]'") from exc
    return Image, pytesseract
