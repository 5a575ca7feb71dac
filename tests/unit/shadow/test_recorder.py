"""ShadowRecorder: comparisons run off the request's path, sampled, bounded and counted."""

from __future__ import annotations

import asyncio
import logging
import secrets
import threading
from collections.abc import Iterator, Sequence

import pytest

from capsa.errors import CaptureInvalid
from capsa.shadow import (
    Candidate,
    PairedDecision,
    RouteCapture,
    ShadowCounts,
    ShadowRecorder,
    capture_retrieved,
)

QUERY = "how long is the refund window"
A = Candidate(source_id="a", score=1.0, text="Refunds are accepted within 30 days.")
B = Candidate(source_id="b", score=0.5, text="Store credit never expires.")


def _captured(side, items: Sequence[Candidate]):
    return lambda: capture_retrieved(side, QUERY, items)


@pytest.fixture
def rows() -> list[PairedDecision]:
    return []


@pytest.fixture
def recorder(rows: list[PairedDecision]) -> Iterator[ShadowRecorder]:
    recorder = ShadowRecorder(rows.extend, timeout_s=5.0)
    yield recorder
    recorder.close()


@pytest.fixture
def gate() -> Iterator[threading.Event]:
    """Holds a blocked candidate until the test ends, then releases its thread."""
    event = threading.Event()
    yield event
    event.set()


def _boom() -> RouteCapture:
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
    assert recorder.counts.refused == {"duplicate_identity": 1}


def test_compare_counts_and_logs_a_sink_that_raises(caplog) -> None:
    def broken(_: tuple[PairedDecision, ...]) -> None:
        raise ConnectionError("analytics endpoint unreachable")

    recorder = ShadowRecorder(broken)
    with caplog.at_level(logging.WARNING, logger="capsa.shadow"):
        assert recorder.compare(QUERY, [A], [A]) == "sink_failed"
    assert recorder.counts.sink_failed == 1 and recorder.counts.paired == 0
    assert "shadow sink raised" in caplog.text


class FakeClock:
    """Monotonic seconds the test moves by hand."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize("rate", [-0.1, 1.5])
def test_recorder_refuses_a_sample_rate_outside_zero_to_one(rate) -> None:
    with pytest.raises(ValueError, match="sample_rate"):
        ShadowRecorder(list().extend, sample_rate=rate)


@pytest.mark.parametrize("field", ["max_in_flight", "max_workers"])
def test_recorder_refuses_a_bound_below_one(field) -> None:
    with pytest.raises(ValueError, match="at least 1"):
        ShadowRecorder(list().extend, **{field: 0})


# --- off the request's path --------------------------------------------------------


def test_start_returns_before_the_candidate_runs(recorder, rows, gate) -> None:
    started = threading.Event()

    def slow() -> RouteCapture:
        started.set()
        gate.wait()
        return capture_retrieved("candidate", QUERY, [B])

    slot = recorder.reserve()
    slot.start(_captured("baseline", [A, B]), slow)
    assert started.wait(5)
    assert rows == [] and recorder.in_flight == 1
    gate.set()
    recorder.flush(timeout_s=5)
    assert len(rows) == 2 and recorder.in_flight == 0


def test_flush_waits_for_every_started_comparison(recorder, rows) -> None:
    for _ in range(5):
        recorder.reserve().start(_captured("baseline", [A]), _captured("candidate", [A, B]))
    recorder.flush(timeout_s=5)
    assert recorder.counts.paired == 5 and len(rows) == 10


def test_flush_times_out_on_a_candidate_that_never_returns(recorder, gate) -> None:
    recorder.reserve().start(_captured("baseline", [A]),
                             lambda: gate.wait() and capture_retrieved("candidate", QUERY, [A]))
    with pytest.raises(TimeoutError, match="still running"):
        recorder.flush(timeout_s=0.05)
    gate.set()


def test_close_refuses_later_queries_without_counting_them(rows) -> None:
    recorder = ShadowRecorder(rows.extend)
    recorder.close()
    assert recorder.reserve() is None
    assert recorder.counts == ShadowCounts()


# --- sampling and the bound on work in flight --------------------------------------


def test_reserve_samples_by_the_injected_draw_and_counts_the_rest(rows) -> None:
    draws = iter([0.05, 0.5, 0.09, 0.95])
    recorder = ShadowRecorder(rows.extend, sample_rate=0.1, sampler=lambda: next(draws))
    slots = [recorder.reserve() for _ in range(4)]
    assert [s is not None for s in slots] == [True, False, True, False]
    assert recorder.counts.sampled_out == 2
    for slot in slots:
        if slot is not None:
            slot.cancel()
    recorder.close()


def test_reserve_drops_and_counts_queries_beyond_max_in_flight(rows) -> None:
    recorder = ShadowRecorder(rows.extend, max_in_flight=2)
    first, second = recorder.reserve(), recorder.reserve()
    assert recorder.reserve() is None and recorder.counts.dropped_busy == 1
    first.cancel()
    assert recorder.reserve() is not None
    second.cancel()
    recorder.close()


def test_a_hanging_candidate_costs_only_its_place_in_flight(rows, gate) -> None:
    recorder = ShadowRecorder(rows.extend, max_in_flight=1)
    recorder.reserve().start(_captured("baseline", [A]),
                             lambda: gate.wait() and capture_retrieved("candidate", QUERY, [A]))
    assert recorder.reserve() is None
    assert recorder.counts.dropped_busy == 1
    gate.set()
    recorder.close()
    assert recorder.counts.paired == 1


def test_cancel_gives_the_place_back_without_a_count(recorder) -> None:
    recorder.reserve().cancel()
    assert recorder.in_flight == 0 and recorder.counts == ShadowCounts()


def test_a_slot_starts_once(recorder) -> None:
    slot = recorder.reserve()
    slot.start(_captured("baseline", [A]), _captured("candidate", [A]))
    with pytest.raises(RuntimeError, match="started once"):
        slot.start(_captured("baseline", [A]), _captured("candidate", [A]))


# --- losses, counted by cause ------------------------------------------------------


def test_a_candidate_that_raises_is_counted_and_logged(recorder, rows, caplog) -> None:
    with caplog.at_level(logging.INFO, logger="capsa.shadow"):
        recorder.reserve().start(_captured("baseline", [A]), _boom)
        recorder.flush(timeout_s=5)
    assert rows == [] and recorder.counts.candidate_raised == 1
    assert "candidate raised RuntimeError" in caplog.text


def test_a_candidates_error_message_is_logged_only_at_debug(recorder, rows, caplog) -> None:
    def quoting() -> object:  # a search service's error often quotes the query
        raise RuntimeError(f"no index for {QUERY!r}")

    with caplog.at_level(logging.INFO, logger="capsa.shadow"):
        recorder.reserve().start(_captured("baseline", [A]), quoting)
        recorder.flush(timeout_s=5)
    assert "RuntimeError" in caplog.text and QUERY not in caplog.text


def test_a_candidate_past_its_timeout_is_counted_and_ignored(rows) -> None:
    clock = FakeClock()
    recorder = ShadowRecorder(rows.extend, timeout_s=1.0, clock=clock)

    def late() -> RouteCapture:
        clock.now += 2.0
        return capture_retrieved("candidate", QUERY, [A])

    recorder.reserve().start(_captured("baseline", [A]), late)
    recorder.close()
    assert rows == [] and recorder.counts.candidate_timed_out == 1


def test_an_ambiguous_capture_is_counted_as_refused(recorder, rows) -> None:
    recorder.reserve().start(_captured("baseline", [A, A]), _captured("candidate", [A]))
    recorder.reserve().start(_captured("baseline", [A]), _captured("candidate", [B, B]))
    recorder.flush(timeout_s=5)
    assert rows == [] and recorder.counts.capture_refused == 2
    assert recorder.counts.refused == {"duplicate_identity": 2}


# --- the wire ----------------------------------------------------------------------


def test_a_slot_with_a_wire_key_records_visibility_from_the_wire(recorder, rows) -> None:
    recorder.reserve().start(_captured("baseline", [A]), _captured("candidate", [A]),
                             wire_key="thread-1")
    assert recorder.observe_wire("thread-1", [{"role": "user", "content": A.text}]) == 1
    recorder.flush(timeout_s=5)
    assert [r.baseline_visible for r in rows] == [True]


def test_a_wire_without_the_block_records_it_as_not_visible(recorder, rows) -> None:
    recorder.reserve().start(_captured("baseline", [A]), _captured("candidate", [A]),
                             wire_key="thread-1")
    recorder.observe_wire("thread-1", ["Answer politely."])
    recorder.flush(timeout_s=5)
    assert [r.baseline_visible for r in rows] == [False]


def test_a_wire_holding_part_of_the_block_pairs_with_visibility_unknown(recorder, rows) -> None:
    # A synthesizer that splits the context over several calls (LlamaIndex's refine), or a
    # custom separator: the comparison is sound, only visibility cannot be told.
    recorder.reserve().start(_captured("baseline", [A, B]), _captured("candidate", [A]),
                             wire_key="thread-1")
    recorder.observe_wire("thread-1", [f"Context: {A.text}"])
    recorder.flush(timeout_s=5)
    assert len(rows) == 2 and recorder.counts.capture_refused == 0
    assert {r.baseline_visible for r in rows} == {None}


def test_a_capture_still_refuses_a_partial_wire_when_asked_to() -> None:
    capture = capture_retrieved("baseline", QUERY, [A, B])
    with pytest.raises(CaptureInvalid) as refused:
        capture.observe_provider([f"Context: {A.text}"])
    assert refused.value.cause == "partial_wire"


def test_another_threads_wire_is_not_taken_for_this_one(recorder, rows) -> None:
    recorder.reserve().start(_captured("baseline", [A]), _captured("candidate", [A]),
                             wire_key="thread-1")
    assert recorder.observe_wire("thread-2", ["Answer politely."]) == 0
    recorder.flush(timeout_s=5)
    assert [r.baseline_visible for r in rows] == [None]


def test_a_wire_that_never_comes_pairs_as_unknown_after_the_wire_timeout(rows) -> None:
    clock = FakeClock()
    recorder = ShadowRecorder(rows.extend, wire_timeout_s=5.0, clock=clock)
    recorder.reserve().start(_captured("baseline", [A]), _captured("candidate", [A]),
                             wire_key="thread-1")
    clock.now += 10.0
    recorder.reserve().cancel()  # any later reservation sweeps the expired slots
    recorder.flush(timeout_s=5)
    assert [r.baseline_visible for r in rows] == [None]
    recorder.close()


# --- async -------------------------------------------------------------------------


async def test_astart_runs_the_candidate_as_a_task_and_aflush_awaits_it(recorder, rows) -> None:
    began = asyncio.Event()

    async def candidate() -> RouteCapture:
        began.set()
        await asyncio.sleep(0)
        return capture_retrieved("candidate", QUERY, [B])

    recorder.reserve().astart(_captured("baseline", [A, B]), candidate)
    assert rows == []
    await recorder.aflush()
    assert began.is_set() and len(rows) == 2


async def test_astart_counts_a_candidate_past_its_timeout(rows) -> None:
    recorder = ShadowRecorder(rows.extend, timeout_s=0.01)

    async def hangs() -> RouteCapture:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    recorder.reserve().astart(_captured("baseline", [A]), hangs)
    await recorder.aflush()
    assert recorder.counts.candidate_timed_out == 1 and rows == []
    recorder.close()


async def test_astart_counts_a_candidate_that_raises(recorder, rows) -> None:
    async def boom() -> RouteCapture:
        raise ConnectionError("candidate index unreachable")

    recorder.reserve().astart(_captured("baseline", [A]), boom)
    await recorder.aflush()
    assert recorder.counts.candidate_raised == 1 and rows == []


def test_a_served_answer_that_cannot_be_captured_is_counted_and_frees_its_place(
        recorder, rows) -> None:
    def unreadable() -> RouteCapture:
        Candidate(source_id="", text="an empty id fails validation")
        raise AssertionError("unreachable")

    recorder.reserve().start(unreadable, _captured("candidate", [A]))
    recorder.flush(timeout_s=5)
    assert recorder.counts.capture_refused == 1 and recorder.in_flight == 0 and rows == []
    assert recorder.counts.refused == {"other": 1}


def test_a_random_source_that_repeats_costs_the_comparison_not_the_pool(rows) -> None:
    recorder = ShadowRecorder(rows.extend, random_bytes=lambda n: bytes(n))
    recorder.reserve().start(_captured("baseline", [A, B]), _captured("candidate", [A]))
    recorder.close()
    assert recorder.counts.capture_refused == 1 and recorder.in_flight == 0


async def test_aclose_awaits_running_tasks_and_refuses_later_queries(rows) -> None:
    recorder = ShadowRecorder(rows.extend)

    async def candidate() -> RouteCapture:
        await asyncio.sleep(0)
        return capture_retrieved("candidate", QUERY, [A])

    recorder.reserve().astart(_captured("baseline", [A]), candidate)
    await recorder.aclose()
    assert recorder.counts.paired == 1 and recorder.reserve() is None


# --- closing on a candidate that hangs ---------------------------------------------


def _held(gate: threading.Event, running: threading.Event):
    """A candidate that says it is running, then waits for `gate` before it answers."""
    def candidate() -> RouteCapture:
        running.set()
        gate.wait()
        return capture_retrieved("candidate", QUERY, [A])
    return candidate


def _pool_threads(recorder: ShadowRecorder) -> list[threading.Thread]:
    pool = recorder._pool
    return list(pool._threads) if pool is not None else []


def test_close_with_a_timeout_gives_up_on_a_candidate_that_never_returns(rows, gate) -> None:
    recorder = ShadowRecorder(rows.extend, timeout_s=60.0)
    running = threading.Event()
    recorder.reserve().start(_captured("baseline", [A]), _held(gate, running))
    assert running.wait(5)
    threads = _pool_threads(recorder)
    recorder.close(timeout_s=0.05)
    assert recorder.counts == ShadowCounts(candidate_timed_out=1)
    assert recorder.in_flight == 0 and recorder.reserve() is None
    gate.set()  # the candidate answers after all: what it returns is dropped
    for thread in threads:
        thread.join(5)
    assert rows == [] and recorder.counts == ShadowCounts(candidate_timed_out=1)


def test_comparisons_still_queued_when_close_gives_up_never_run(rows, gate) -> None:
    recorder = ShadowRecorder(rows.extend, max_workers=1, timeout_s=60.0)
    running, calls = threading.Event(), []

    def baseline(n: int):
        return lambda: calls.append(n) or capture_retrieved("baseline", QUERY, [A])

    recorder.reserve().start(baseline(0), _held(gate, running))
    assert running.wait(5)
    for n in (1, 2, 3):
        recorder.reserve().start(baseline(n), _captured("candidate", [A]))
    threads = _pool_threads(recorder)
    recorder.close(timeout_s=0.05)
    gate.set()
    for thread in threads:
        thread.join(5)
    assert calls == [0] and rows == []
    assert recorder.counts == ShadowCounts(candidate_timed_out=4)


def test_a_slot_started_after_close_runs_nothing_and_is_counted(rows) -> None:
    recorder = ShadowRecorder(rows.extend)
    slot = recorder.reserve()
    recorder.close(timeout_s=5)
    ran = []
    slot.start(lambda: ran.append(1) or capture_retrieved("baseline", QUERY, [A]),
               _captured("candidate", [A]))
    assert ran == [] and recorder._pool is None
    assert recorder.counts == ShadowCounts(candidate_timed_out=1) and recorder.in_flight == 0


def test_close_with_a_timeout_still_pairs_what_ends_in_time(rows) -> None:
    recorder = ShadowRecorder(rows.extend)
    recorder.reserve().start(_captured("baseline", [A]), _captured("candidate", [A, B]))
    recorder.close(timeout_s=5)
    assert recorder.counts == ShadowCounts(paired=1, rows=2)


@pytest.mark.timeout(60)  # a hang guard: close must not join a blocked worker for good
def test_close_with_a_timeout_leaves_a_worker_blocked_outside_any_slot(rows, gate) -> None:
    # `run_blocking` work holds a pool thread after its own comparison has timed out
    recorder = ShadowRecorder(rows.extend, timeout_s=0.05)
    blocked = threading.Event()

    async def candidate() -> RouteCapture:
        return await recorder.run_blocking(_held(gate, blocked))

    async def serve() -> None:
        recorder.reserve().astart(_captured("baseline", [A]), candidate)
        await recorder.aflush()

    asyncio.run(serve())
    assert blocked.is_set() and recorder.counts.candidate_timed_out == 1
    assert recorder.counts.invalidated == 1
    recorder.close(timeout_s=0.2)
    assert recorder.reserve() is None


async def test_aclose_with_a_timeout_cancels_a_task_that_never_returns(rows) -> None:
    recorder = ShadowRecorder(rows.extend, timeout_s=60.0)
    began, cancelled = asyncio.Event(), []

    async def hangs() -> RouteCapture:
        began.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(True)
            raise
        raise AssertionError("unreachable")

    recorder.reserve().astart(_captured("baseline", [A]), hangs)
    await began.wait()
    await recorder.aclose(timeout_s=0.05)
    await asyncio.sleep(0)  # the cancelled task's own callbacks run
    assert cancelled == [True]
    assert recorder.counts == ShadowCounts(candidate_timed_out=1)
    assert recorder.in_flight == 0 and recorder.reserve() is None and rows == []


# --- the candidate's deadline on the sync path ---------------------------------------


@pytest.mark.parametrize("bound", [-1, 1.5])
def test_recorder_refuses_an_abandoned_thread_bound_that_is_not_a_count(bound) -> None:
    with pytest.raises(ValueError, match="max_abandoned_threads"):
        ShadowRecorder(list().extend, max_abandoned_threads=bound)


def _hang(recorder: ShadowRecorder, gate: threading.Event, clock: FakeClock) -> None:
    """Start a comparison whose candidate blocks on `gate`, then move the clock past the
    recorder's deadline (its `timeout_s` is 1 s in these tests)."""
    running = threading.Event()
    recorder.reserve().start(_captured("baseline", [A]), _held(gate, running))
    assert running.wait(5)
    clock.now += 2.0


def test_a_candidate_hung_past_its_deadline_gives_back_its_place(rows, gate) -> None:
    clock = FakeClock()
    recorder = ShadowRecorder(rows.extend, max_in_flight=1, timeout_s=1.0, clock=clock)
    _hang(recorder, gate, clock)
    slot = recorder.reserve()  # the next query sweeps the overdue candidate first
    assert slot is not None
    slot.cancel()
    assert recorder.counts.candidate_timed_out == 1 and recorder.counts.dropped_busy == 0
    recorder.close(timeout_s=1)


def test_a_candidate_hung_past_its_deadline_gives_back_its_worker(rows, gate) -> None:
    clock = FakeClock()
    recorder = ShadowRecorder(rows.extend, max_workers=1, timeout_s=1.0, clock=clock)
    _hang(recorder, gate, clock)
    recorder.reserve().start(_captured("baseline", [A]), _captured("candidate", [A, B]))
    recorder.flush(timeout_s=5)  # the one worker is still blocked: a new one pairs it
    assert recorder.counts == ShadowCounts(paired=1, rows=2, candidate_timed_out=1,
                                           threads_abandoned=1)
    assert recorder.abandoned_threads == 1
    recorder.close(timeout_s=1)


def test_an_abandoned_candidates_late_answer_is_dropped_and_its_thread_ends(rows,
                                                                            gate) -> None:
    clock = FakeClock()
    recorder = ShadowRecorder(rows.extend, max_workers=1, timeout_s=1.0, clock=clock)
    _hang(recorder, gate, clock)
    (stuck,) = _pool_threads(recorder)
    recorder.reserve().cancel()
    gate.set()  # the candidate answers after all
    stuck.join(5)
    recorder.flush(timeout_s=5)
    assert not stuck.is_alive() and recorder.abandoned_threads == 0
    assert rows == [] and recorder.counts == ShadowCounts(candidate_timed_out=1,
                                                          threads_abandoned=1)
    recorder.close()


def test_abandoned_threads_never_exceed_their_bound(rows, gate) -> None:
    clock = FakeClock()
    recorder = ShadowRecorder(rows.extend, max_workers=1, max_abandoned_threads=1,
                              timeout_s=1.0, clock=clock)
    for _ in range(2):
        _hang(recorder, gate, clock)
        recorder.reserve().cancel()
    # The first hung thread was replaced, the second could not be: the pool runs short.
    assert recorder.abandoned_threads == 1 and len(_pool_threads(recorder)) == 2
    assert recorder.counts == ShadowCounts(candidate_timed_out=2, threads_abandoned=1)
    gate.set()  # both answer; the thread past the bound serves again, nothing leaks
    recorder.reserve().start(_captured("baseline", [A]), _captured("candidate", [A]))
    recorder.flush(timeout_s=5)
    assert recorder.counts.paired == 1 and rows
    recorder.close(timeout_s=5)


def test_close_does_not_wait_for_a_thread_abandoned_to_a_hung_candidate(rows, gate) -> None:
    clock = FakeClock()
    recorder = ShadowRecorder(rows.extend, max_workers=1, timeout_s=1.0, clock=clock)
    _hang(recorder, gate, clock)
    recorder.close()  # no timeout: flush counts the overdue candidate, the join skips it
    assert recorder.counts == ShadowCounts(candidate_timed_out=1, threads_abandoned=1)


async def test_run_blocking_work_past_the_deadline_gives_back_its_thread(rows, gate) -> None:
    clock = FakeClock()
    recorder = ShadowRecorder(rows.extend, max_workers=1, timeout_s=1.0, clock=clock)
    running = threading.Event()
    hung = asyncio.ensure_future(recorder.run_blocking(_held(gate, running)))
    assert await asyncio.to_thread(running.wait, 5)
    hung.cancel()  # as the comparison's own deadline does
    clock.now += 2.0
    recorder.reserve().cancel()
    assert await asyncio.wait_for(recorder.run_blocking(lambda: 7), 5) == 7
    assert recorder.counts.threads_abandoned == 1
    gate.set()
    await recorder.aclose(timeout_s=5)


async def test_astart_gives_up_on_a_candidate_that_ignores_cancellation(rows) -> None:
    recorder = ShadowRecorder(rows.extend, timeout_s=0.01)
    finish = asyncio.Event()

    async def stubborn() -> RouteCapture:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            await finish.wait()  # swallows the cancellation until the test ends
        return capture_retrieved("candidate", QUERY, [A])

    recorder.reserve().astart(_captured("baseline", [A]), stubborn)
    await asyncio.wait_for(recorder.aflush(), 5)
    assert recorder.counts.candidate_timed_out == 1 and recorder.in_flight == 0 and rows == []
    finish.set()
    await recorder.aclose(timeout_s=5)


# --- the sink runs off the served path ----------------------------------------------


async def test_astart_pairs_and_calls_the_sink_off_the_event_loop(rows) -> None:
    threads: dict[str, int] = {}

    def sink(batch: tuple[PairedDecision, ...]) -> None:
        threads["sink"] = threading.get_ident()
        rows.extend(batch)

    def random_bytes(n: int) -> bytes:  # `pair` draws the rows' ids while it pairs
        threads["pair"] = threading.get_ident()
        return secrets.token_bytes(n)

    recorder = ShadowRecorder(sink, random_bytes=random_bytes)

    async def candidate() -> RouteCapture:
        return capture_retrieved("candidate", QUERY, [A, B])

    recorder.reserve().astart(_captured("baseline", [A]), candidate)
    await recorder.aflush()
    loop = threading.get_ident()
    assert len(rows) == 2 and threads["sink"] != loop and threads["pair"] != loop
    await recorder.aclose()


async def test_aflush_returns_only_after_a_slow_sink_has_taken_the_rows(rows) -> None:
    entered, release = threading.Event(), threading.Event()

    def slow(batch: tuple[PairedDecision, ...]) -> None:
        entered.set()
        release.wait()
        rows.extend(batch)

    recorder = ShadowRecorder(slow)

    async def candidate() -> RouteCapture:
        return capture_retrieved("candidate", QUERY, [A])

    recorder.reserve().astart(_captured("baseline", [A]), candidate)
    flushing = asyncio.ensure_future(recorder.aflush())
    assert await asyncio.to_thread(entered.wait, 5)
    assert not flushing.done() and recorder.in_flight == 1
    release.set()
    await asyncio.wait_for(flushing, 5)
    assert len(rows) == 1 and recorder.counts == ShadowCounts(paired=1, rows=1)
    await recorder.aclose()


def test_the_sink_is_called_from_one_thread_apart_from_the_workers(rows) -> None:
    names: set[str] = set()

    def sink(batch: tuple[PairedDecision, ...]) -> None:
        names.add(threading.current_thread().name)
        rows.extend(batch)

    recorder = ShadowRecorder(sink, max_workers=4)
    for _ in range(20):
        recorder.reserve().start(_captured("baseline", [A]), _captured("candidate", [A]))
    recorder.flush(timeout_s=5)
    workers = {thread.name for thread in _pool_threads(recorder)}
    assert len(rows) == 20 and len(names) == 1 and not names & workers
    recorder.close()


def test_a_wire_that_expires_at_the_next_query_pairs_off_that_querys_thread(rows) -> None:
    clock = FakeClock()
    caller, threads = threading.get_ident(), []

    def sink(batch: tuple[PairedDecision, ...]) -> None:
        threads.append(threading.get_ident())
        rows.extend(batch)

    recorder = ShadowRecorder(sink, wire_timeout_s=5.0, clock=clock)
    recorder.reserve().start(_captured("baseline", [A]), _captured("candidate", [A]),
                             wire_key="thread-1")
    _wait_until_captured(recorder)
    clock.now += 10.0
    recorder.reserve().cancel()  # sweeps the expired wire: the pairing is handed off
    recorder.flush(timeout_s=5)
    assert len(rows) == 1 and caller not in threads
    recorder.close()


def _wait_until_captured(recorder: ShadowRecorder) -> None:
    """Until every started slot has both captures (they then only wait for the wire)."""
    _wait_until(recorder, lambda slot: slot._captures is not None)


def _wait_until_handed_over(recorder: ShadowRecorder) -> None:
    """Until every started slot waits only for the delivery thread."""
    _wait_until(recorder, lambda slot: slot._handed_over)


def _wait_until(recorder: ShadowRecorder, holds) -> None:
    idle = threading.Event()
    for _ in range(5000):  # a hang guard of about five seconds, not a timing
        with recorder._lock:
            if all(holds(slot) for slot in recorder._slots):
                return
        idle.wait(0.001)
    raise AssertionError("the comparisons never got there")


def _blocking_sink(rows: list[PairedDecision]):
    """A sink that says when it is called, then holds the delivery thread until released."""
    entered, release = threading.Event(), threading.Event()

    def sink(batch: tuple[PairedDecision, ...]) -> None:
        entered.set()
        release.wait()
        rows.extend(batch)

    return sink, entered, release


def test_a_comparison_waiting_for_the_sink_gives_its_place_back(rows) -> None:
    sink, entered, release = _blocking_sink(rows)
    recorder = ShadowRecorder(sink, max_in_flight=1)
    recorder.reserve().start(_captured("baseline", [A]), _captured("candidate", [A]))
    assert entered.wait(5)
    slot = recorder.reserve()  # as pairing on the spot used to free it at once
    assert slot is not None and recorder.counts.dropped_busy == 0
    slot.cancel()
    release.set()
    recorder.close(timeout_s=5)
    assert recorder.counts.paired == 1


def test_comparisons_waiting_for_a_slow_sink_are_bounded(rows) -> None:
    sink, entered, release = _blocking_sink(rows)
    recorder = ShadowRecorder(sink, max_in_flight=1)
    for _ in range(2):  # one in the sink, one queued behind it: twice max_in_flight
        recorder.reserve().start(_captured("baseline", [A]), _captured("candidate", [A]))
        _wait_until_handed_over(recorder)
    assert entered.wait(5)
    assert recorder.reserve() is None and recorder.counts.dropped_busy == 1
    release.set()
    recorder.close(timeout_s=5)
    assert recorder.counts.paired == 2 and len(rows) == 2


# --- cancelled with the caller's loop ------------------------------------------------


def test_a_task_cancelled_with_its_loop_is_counted_as_cancelled_not_raised(rows) -> None:
    recorder = ShadowRecorder(rows.extend)

    async def never() -> RouteCapture:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    async def request() -> None:
        recorder.reserve().astart(_captured("baseline", [A]), never)
        await asyncio.sleep(0)  # the comparison is running when the request returns

    asyncio.run(request())  # a sync handler's loop per request: closing it cancels the task
    assert recorder.counts == ShadowCounts(cancelled=1)
    assert recorder.counts.invalidated == 1 and recorder.in_flight == 0
    recorder.close()


async def test_a_candidate_that_raises_cancelled_error_itself_is_counted_as_raised(
        rows) -> None:
    recorder = ShadowRecorder(rows.extend)

    async def gives_up() -> RouteCapture:  # a client whose own request was cancelled
        raise asyncio.CancelledError

    recorder.reserve().astart(_captured("baseline", [A]), gives_up)
    await recorder.aflush()
    assert recorder.counts == ShadowCounts(candidate_raised=1)
    await recorder.aclose()
