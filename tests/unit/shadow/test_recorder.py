"""ShadowRecorder: the baseline is served unchanged whatever the candidate does."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Iterator, Sequence

import pytest

from capsa.shadow import Candidate, PairedDecision, ShadowCounts, ShadowRecorder

QUERY = "how long is the refund window"
A = Candidate(source_id="a", score=1.0, text="Refunds are accepted within 30 days.")
B = Candidate(source_id="b", score=0.5, text="Store credit never expires.")


def _same(items: Sequence[Candidate]) -> Sequence[Candidate]:
    return items


@pytest.fixture
def rows() -> list[PairedDecision]:
    return []


@pytest.fixture
def recorder(rows: list[PairedDecision]) -> ShadowRecorder:
    return ShadowRecorder(rows.extend, timeout_s=5.0)


@pytest.fixture
def gate() -> Iterator[threading.Event]:
    """Holds a blocked candidate until the test ends, then releases its thread."""
    event = threading.Event()
    yield event
    event.set()


def _boom() -> list[Candidate]:
    raise RuntimeError("candidate index is down")


# --- construction and compare ------------------------------------------------------


@pytest.mark.parametrize("timeout_s", [0.0, -1.0, float("nan"), float("inf")])
def test_recorder_refuses_a_timeout_that_is_not_positive_and_finite(timeout_s) -> None:
    with pytest.raises(ValueError, match="timeout_s"):
        ShadowRecorder(list().extend, timeout_s=timeout_s)


def test_compare_hands_the_paired_rows_to_the_sink_and_counts_them(recorder, rows) -> None:
    assert recorder.compare(QUERY, [A, B], [B]) == "paired"
    assert len(rows) == 2
    assert recorder.counts == ShadowCounts(paired=1, rows=2)


def test_compare_counts_a_refused_capture_without_raising(recorder, rows) -> None:
    assert recorder.compare(QUERY, [A, A], [A]) == "capture_refused"
    assert rows == []
    assert (recorder.counts.capture_refused, recorder.counts.invalidated) == (1, 1)


def test_compare_counts_and_logs_a_sink_that_raises(caplog) -> None:
    def broken(_: tuple[PairedDecision, ...]) -> None:
        raise ConnectionError("analytics endpoint unreachable")

    recorder = ShadowRecorder(broken)
    with caplog.at_level(logging.WARNING, logger="capsa.shadow"):
        assert recorder.compare(QUERY, [A], [A]) == "sink_failed"
    assert recorder.counts.sink_failed == 1 and recorder.counts.paired == 0
    assert "shadow sink raised" in caplog.text


def test_discard_counts_by_cause(recorder) -> None:
    recorder.discard("candidate_raised")
    recorder.discard("candidate_timed_out")
    recorder.discard("candidate_timed_out")
    counts = recorder.counts
    assert (counts.candidate_raised, counts.candidate_timed_out, counts.invalidated) == (1, 2, 3)


# --- serve (sync) -------------------------------------------------------------------


def test_serve_returns_the_baseline_answer_unchanged_and_pairs(recorder, rows) -> None:
    served = [A, B]
    result = recorder.serve(QUERY, lambda: served, lambda: [B], _same)
    assert result.served is served
    assert result.outcome == "paired"
    assert len(rows) == 2


def test_serve_runs_the_candidate_concurrently_with_the_baseline(recorder) -> None:
    candidate_started = threading.Event()

    def baseline() -> list[Candidate]:
        assert candidate_started.wait(timeout=5), "the candidate never ran beside the baseline"
        return [A]

    def candidate() -> list[Candidate]:
        candidate_started.set()
        return [A]

    assert recorder.serve(QUERY, baseline, candidate, _same).outcome == "paired"


def test_serve_counts_a_candidate_that_raises_and_still_serves(recorder, rows) -> None:
    result = recorder.serve(QUERY, lambda: [A], _boom, _same)
    assert (list(result.served), result.outcome) == ([A], "candidate_raised")
    assert rows == [] and recorder.counts.candidate_raised == 1


def test_serve_counts_a_candidate_that_times_out_and_still_serves(rows, gate) -> None:
    recorder = ShadowRecorder(rows.extend, timeout_s=0.05)

    def hangs() -> list[Candidate]:
        gate.wait()
        return [A]

    result = recorder.serve(QUERY, lambda: [A], hangs, _same)
    assert (list(result.served), result.outcome) == ([A], "candidate_timed_out")
    assert rows == [] and recorder.counts.candidate_timed_out == 1


def test_serve_counts_a_candidate_answer_the_capture_refuses(recorder) -> None:
    result = recorder.serve(QUERY, lambda: [A], lambda: [B, B], _same)
    assert (list(result.served), result.outcome) == ([A], "capture_refused")


def test_serve_counts_an_answer_that_cannot_be_converted(recorder) -> None:
    def convert(items: Sequence[object]) -> list[Candidate]:
        return [Candidate(source_id="x", score="high", text="t") for _ in items]  # type: ignore[arg-type]

    result = recorder.serve(QUERY, lambda: ["doc"], lambda: ["doc"], convert)
    assert (list(result.served), result.outcome) == (["doc"], "capture_refused")


def test_serve_lets_the_baselines_own_error_propagate_uncounted(recorder) -> None:
    def baseline() -> list[Candidate]:
        raise LookupError("the served index is down")

    with pytest.raises(LookupError):
        recorder.serve(QUERY, baseline, lambda: [A], _same)
    assert recorder.counts == ShadowCounts()


# --- aserve (async) -------------------------------------------------------------------


async def test_aserve_returns_the_baseline_answer_unchanged_and_pairs(recorder, rows) -> None:
    served = [A, B]

    async def baseline() -> list[Candidate]:
        return served

    async def candidate() -> list[Candidate]:
        return [A]

    result = await recorder.aserve(QUERY, baseline, candidate, _same)
    assert result.served is served and result.outcome == "paired"
    assert len(rows) == 2


async def test_aserve_runs_the_candidate_concurrently_with_the_baseline(recorder) -> None:
    candidate_started = asyncio.Event()

    async def baseline() -> list[Candidate]:
        await asyncio.wait_for(candidate_started.wait(), timeout=5)
        return [A]

    async def candidate() -> list[Candidate]:
        candidate_started.set()
        return [A]

    assert (await recorder.aserve(QUERY, baseline, candidate, _same)).outcome == "paired"


async def test_aserve_counts_a_candidate_that_raises_and_still_serves(recorder) -> None:
    async def baseline() -> list[Candidate]:
        return [A]

    async def candidate() -> list[Candidate]:
        return _boom()

    result = await recorder.aserve(QUERY, baseline, candidate, _same)
    assert (list(result.served), result.outcome) == ([A], "candidate_raised")


async def test_aserve_counts_a_candidate_that_times_out_and_still_serves(rows) -> None:
    recorder = ShadowRecorder(rows.extend, timeout_s=0.05)
    never = asyncio.Event()

    async def baseline() -> list[Candidate]:
        return [A]

    async def candidate() -> list[Candidate]:
        await never.wait()
        return [A]

    result = await recorder.aserve(QUERY, baseline, candidate, _same)
    assert (list(result.served), result.outcome) == ([A], "candidate_timed_out")
    assert recorder.counts.candidate_timed_out == 1


async def test_aserve_cancels_the_candidate_when_the_baseline_raises(recorder) -> None:
    cancelled = asyncio.Event()

    async def baseline() -> list[Candidate]:
        await asyncio.sleep(0)
        raise LookupError("the served index is down")

    async def candidate() -> list[Candidate]:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return [A]

    with pytest.raises(LookupError):
        await recorder.aserve(QUERY, baseline, candidate, _same)
    assert cancelled.is_set()
    assert recorder.counts == ShadowCounts()
