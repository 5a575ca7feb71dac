"""I: images and OCR (I1–I9): pixel and frame ceilings before a pixel is decoded.

Images go to Tesseract through the production pool, whose self-test needs
the tesseract binary; those tests are marked ``slow`` and ``ocr`` and skip
without it. Formats refused by sniffing never reach a parser and run on the
plain pool.
"""

from __future__ import annotations

import pytest

from capsa.guard import Attachment, Extracted, ExtractionLimits, IsolatedExtractor, Omission
from capsa.guard.samples import (
    EPS,
    FITS,
    apng_with_bad_frame,
    png_blank,
    png_raw,
    png_ztxt_bomb,
    tiff_frames,
)

from .conftest import (
    PARSE_LIMITS,
    assert_omitted,
    good_for,
    needs_tesseract,
    run_among_good,
)


def _run_image(pool: IsolatedExtractor, label: str, payload: bytes,
               limits: ExtractionLimits = PARSE_LIMITS) -> Extracted | Omission:
    return run_among_good(pool, Attachment(label=label, payload=payload), limits,
                          good=[good_for("png"), good_for("text")], next_file=good_for("png"))


@pytest.mark.slow
@pytest.mark.ocr
@needs_tesseract
def test_i1_header_declaring_ten_gigapixels_is_refused_at_open(
        real_pool: IsolatedExtractor) -> None:
    outcome = _run_image(real_pool, "bomb.png", png_raw(100_000, 100_000))
    omission = assert_omitted(outcome, stage="preflight", reason="image_too_large")
    assert "10000000000 pixels" in omission.detail


@pytest.mark.slow
@pytest.mark.ocr
@needs_tesseract
def test_i2_image_in_pillows_warning_zone_is_refused(real_pool: IsolatedExtractor) -> None:
    # 49 Mpx is over capsa's 40 Mpx but under Pillow's own 2x error line:
    # Pillow only warns there, and capsa turns the warning into a refusal.
    outcome = _run_image(real_pool, "wide.png", png_blank(7000, 7000))
    omission = assert_omitted(outcome, stage="preflight", reason="image_too_large")
    assert "49000000 pixels" in omission.detail


@pytest.mark.slow
@pytest.mark.ocr
@needs_tesseract
def test_i3_ztxt_text_bomb_is_refused_as_corrupt(real_pool: IsolatedExtractor) -> None:
    outcome = _run_image(real_pool, "ztxt.png", png_ztxt_bomb())
    omission = assert_omitted(outcome, stage="preflight", reason="corrupt")
    assert "MAX_TEXT_CHUNK" in omission.detail


@pytest.mark.slow
@pytest.mark.ocr
@needs_tesseract
def test_i4_tiff_with_thousands_of_frames_is_refused_before_ocr(
        real_pool: IsolatedExtractor) -> None:
    outcome = _run_image(real_pool, "frames.tiff", tiff_frames(5000))
    omission = assert_omitted(outcome, stage="preflight", reason="too_many_frames")
    assert "5000 frames" in omission.detail


@pytest.mark.slow
@pytest.mark.ocr
@needs_tesseract
def test_i5_tiff_ifd_loop_terminates(real_pool: IsolatedExtractor) -> None:
    outcome = _run_image(real_pool, "loop.tiff", tiff_frames(3, loop=True))
    assert_omitted(outcome, stage="text", reason="no_text")  # three blank frames, then done


def test_i6_eps_is_refused_by_sniffing_before_pillow(plain_pool: IsolatedExtractor) -> None:
    outcome = run_among_good(plain_pool, Attachment(label="figure.eps", payload=EPS))
    omission = assert_omitted(outcome, stage="sniff", reason="unsupported_type")
    assert "postscript" in omission.detail


def test_i6_eps_declared_as_png_is_a_type_mismatch(plain_pool: IsolatedExtractor) -> None:
    outcome = run_among_good(plain_pool, Attachment(label="figure.png", media_type="image/png",
                                                    payload=EPS))
    assert_omitted(outcome, stage="sniff", reason="type_mismatch")


@pytest.mark.slow
@pytest.mark.ocr
@needs_tesseract
def test_i7_truncated_png_is_refused_as_corrupt(real_pool: IsolatedExtractor) -> None:
    truncated = good_for("png").attachment.payload[:-30]
    outcome = _run_image(real_pool, "cut.png", truncated)
    omission = assert_omitted(outcome, stage="preflight", reason="corrupt")
    assert "truncated" in omission.detail


@pytest.mark.slow
@pytest.mark.ocr
@needs_tesseract
def test_i8_side_over_tesseracts_limit_is_refused(real_pool: IsolatedExtractor) -> None:
    outcome = _run_image(real_pool, "strip.png", png_blank(40_000, 8))
    omission = assert_omitted(outcome, stage="preflight", reason="image_too_large")
    assert "40000x8" in omission.detail


def test_i9_fits_never_reaches_an_image_decoder(plain_pool: IsolatedExtractor) -> None:
    # FITS has no magic capsa routes to Pillow; its ASCII header is read as
    # plain text, so Pillow's FITS plugin (CVE-2026-40192) never runs.
    outcome = run_among_good(plain_pool, Attachment(label="sky.fits", media_type="image/fits",
                                                    payload=FITS))
    assert isinstance(outcome, Extracted)
    assert outcome.kind == "text"
    assert outcome.text.startswith("SIMPLE")


@pytest.mark.slow
@pytest.mark.ocr
@needs_tesseract
def test_per_call_pixel_limit_is_enforced(real_pool: IsolatedExtractor) -> None:
    image = png_blank(1500, 1000)
    limits = PARSE_LIMITS.model_copy(update={"max_pixels": 1_000_000})
    outcome = _run_image(real_pool, "big.png", image, limits)
    omission = assert_omitted(outcome, stage="preflight", reason="image_too_large")
    assert "1500000 pixels" in omission.detail
    # The ceiling was the call's: the same image under the pool's own 40 Mpx
    # is decoded (and, being blank, yields no text).
    assert_omitted(_run_image(real_pool, "big.png", image), stage="text", reason="no_text")


@needs_tesseract
@pytest.mark.slow
def test_apng_with_a_broken_frame_is_refused_as_corrupt(real_pool: IsolatedExtractor) -> None:
    outcome = run_among_good(real_pool, Attachment(label="moving.png",
                                                   payload=apng_with_bad_frame()),
                             PARSE_LIMITS, good=[good_for("png"), good_for("text")],
                             next_file=good_for("png"))
    omission = assert_omitted(outcome, stage="preflight", reason="corrupt")
    assert omission.detail.startswith("frame 1:")
