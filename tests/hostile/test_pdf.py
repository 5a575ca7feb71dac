"""P: PDF (P1–P13) through the production pool (pypdf in a rlimited child).

Each hostile PDF sits between a good PDF and a good text file, and a good
PDF follows it on the same pool.
"""

from __future__ import annotations

import pytest

from capsa.guard import Attachment, Extracted, ExtractionLimits, IsolatedExtractor, Omission
from capsa.guard.samples import (
    MiB,
    pdf_deep_nesting,
    pdf_encrypted,
    pdf_flate_bomb,
    pdf_inline_image_without_end,
    pdf_missing_root,
    pdf_pages_cycle,
    pdf_quoting_a_limit_name,
    pdf_with_text,
    pdf_xobject_fanout,
    pdf_xobject_loop,
)

from .conftest import (
    LIMITS,
    PARSE_LIMITS,
    assert_omitted,
    good_for,
    run_among_good,
)


def _run_pdf(pool: IsolatedExtractor, payload: bytes, limits: ExtractionLimits = PARSE_LIMITS,
             label: str = "hostile.pdf") -> Extracted | Omission:
    return run_among_good(pool, Attachment(label=label, payload=payload), limits,
                          good=[good_for("pdf"), good_for("text")], next_file=good_for("pdf"))


@pytest.mark.slow
def test_p1_flate_bomb_is_stopped_by_the_decoder_cap(real_pool: IsolatedExtractor) -> None:
    outcome = _run_pdf(real_pool, pdf_flate_bomb(128 * MiB))
    omission = assert_omitted(outcome, stage="parser", reason="raised")
    assert "LimitReachedError" in omission.detail


@pytest.mark.slow
def test_p2_double_flate_bomb_is_stopped_by_the_decoder_cap(real_pool: IsolatedExtractor) -> None:
    outcome = _run_pdf(real_pool, pdf_flate_bomb(256 * MiB, layers=2))
    omission = assert_omitted(outcome, stage="parser", reason="raised")
    assert "LimitReachedError" in omission.detail


@pytest.mark.slow
def test_p3_xobject_fanout_never_yields_partial_text(real_pool: IsolatedExtractor) -> None:
    # A million draws: under the 2 s wall clock pypdf is either killed (timeout)
    # or reaches its invocation cap first (incomplete); which one depends on
    # the machine's speed, but partial text is never passed on.
    outcome = _run_pdf(real_pool, pdf_xobject_fanout(levels=7, fan=10), LIMITS)
    assert isinstance(outcome, Omission)
    assert (outcome.stage, outcome.reason) in {("parser", "timeout"), ("parser", "incomplete")}


@pytest.mark.slow
def test_p3_xobject_fanout_partial_text_is_reported_incomplete(
        real_pool: IsolatedExtractor) -> None:
    # Given time, pypdf stops after 5000 form invocations and returns partial
    # text with only a log warning; capsa turns that warning into a failure.
    outcome = _run_pdf(real_pool, pdf_xobject_fanout(levels=6, fan=10))
    omission = assert_omitted(outcome, stage="parser", reason="incomplete")
    assert "5000 form XObject" in omission.detail


@pytest.mark.slow
def test_p4_self_drawing_xobject_ends_with_no_text(real_pool: IsolatedExtractor) -> None:
    outcome = _run_pdf(real_pool, pdf_xobject_loop())
    assert_omitted(outcome, stage="text", reason="no_text")


@pytest.mark.slow
def test_p5_page_tree_cycle_is_refused_as_corrupt(real_pool: IsolatedExtractor) -> None:
    outcome = _run_pdf(real_pool, pdf_pages_cycle())
    omission = assert_omitted(outcome, stage="preflight", reason="corrupt")
    assert "cyclic" in omission.detail


@pytest.mark.slow
def test_p6_deeply_nested_arrays_are_refused_as_corrupt(real_pool: IsolatedExtractor) -> None:
    outcome = _run_pdf(real_pool, pdf_deep_nesting(200_000))
    omission = assert_omitted(outcome, stage="preflight", reason="corrupt")
    assert "PdfReadError" in omission.detail


@pytest.mark.slow
def test_p7_page_count_lie_is_ignored_by_walking_the_tree(real_pool: IsolatedExtractor) -> None:
    outcome = _run_pdf(real_pool, pdf_with_text(["the only page"], count=2**31 - 1))
    assert isinstance(outcome, Extracted)
    assert outcome.text == "the only page"


@pytest.mark.slow
def test_p8_pages_over_the_limit_are_refused_before_extraction(
        real_pool: IsolatedExtractor) -> None:
    outcome = _run_pdf(real_pool, pdf_with_text([f"page {i}" for i in range(25)]))
    omission = assert_omitted(outcome, stage="preflight", reason="too_many_pages")
    assert "25 pages" in omission.detail


@pytest.mark.slow
def test_p8_pages_at_the_limit_are_extracted_whole(real_pool: IsolatedExtractor) -> None:
    outcome = _run_pdf(real_pool, pdf_with_text([f"page {i}" for i in range(20)]))
    assert isinstance(outcome, Extracted)
    assert outcome.text.split() == [w for i in range(20) for w in ("page", str(i))]


@pytest.mark.slow
def test_p9_truncated_pdf_is_refused_as_corrupt(real_pool: IsolatedExtractor) -> None:
    outcome = _run_pdf(real_pool, good_for("pdf").attachment.payload[:200])
    omission = assert_omitted(outcome, stage="preflight", reason="corrupt")
    assert "PdfStreamError" in omission.detail


@pytest.mark.slow
def test_p10_encrypted_pdf_is_refused_without_trying_passwords(
        real_pool: IsolatedExtractor) -> None:
    outcome = _run_pdf(real_pool, pdf_encrypted())
    omission = assert_omitted(outcome, stage="preflight", reason="encrypted")
    assert "never tries passwords" in omission.detail


@pytest.mark.slow
def test_p11_inline_image_without_end_marker_ends_with_no_text(
        real_pool: IsolatedExtractor) -> None:
    outcome = _run_pdf(real_pool, pdf_inline_image_without_end())
    assert_omitted(outcome, stage="text", reason="no_text")


@pytest.mark.slow
def test_p12_missing_root_with_huge_size_is_recovered_boundedly(
        real_pool: IsolatedExtractor) -> None:
    outcome = _run_pdf(real_pool, pdf_missing_root())
    assert isinstance(outcome, Extracted)
    assert outcome.text == "rootless"


def test_p13_empty_pdf_is_refused_before_any_parser(plain_pool: IsolatedExtractor) -> None:
    empty = Attachment(label="empty.pdf", media_type="application/pdf", payload=b"")
    outcome = run_among_good(plain_pool, empty)
    assert_omitted(outcome, stage="size", reason="empty")


@pytest.mark.slow
@pytest.mark.parametrize("name", ["NoLimitExceeded", "limit", "EXCEEDED"])
def test_a_name_that_says_limit_cannot_get_a_pdf_refused_as_incomplete(
        real_pool: IsolatedExtractor, name: str) -> None:
    # pypdf quotes the name in a warning ("Detected cyclic form XObject
    # reference, skipping /NoLimitExceeded."); only the template of a warning
    # that means skipped content may count, never words the file chose.
    outcome = _run_pdf(real_pool, pdf_quoting_a_limit_name(name))
    assert isinstance(outcome, Extracted)
    assert outcome.text == "Northwind Harbor limits"
