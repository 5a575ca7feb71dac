"""Attacks on the shadow recorder's promises: places in flight, the process's exit, the rows.

Each test drives `ShadowRecorder` the way a host does and checks what the
module documentation promises: a lost comparison is counted and gives its
place back, nothing the candidate does holds up the served process, and the
rows carry nothing but figures.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from collections.abc import Iterator

import numpy as np
import pytest

from capsa.errors import CaptureInvalid
from capsa.shadow import (
    Candidate,
    PairedDecision,
    RouteCapture,
    ShadowRecorder,
    capture_retrieved,
    pair,
)

QUERY = "refund window for damaged parcels"
DOCS = [
    Candidate(source_id="doc-refunds-7", score=0.9, text="Refunds are accepted within 30 days."),
    Candidate(source_id="doc-parcels-2", score=0.4, text="Damaged parcels are replaced at once."),
]


@pytest.fixture
def release() -> Iterator[threading.Event]:
    event = threading.Event()
    yield event
    event.set()


def _baseline() -> RouteCapture:
    return capture_retrieved("baseline", QUERY, DOCS)


def _candidate() -> RouteCapture:
    return capture_retrieved("candidate", QUERY, DOCS[::-1])


async def _never() -> RouteCapture:
    await asyncio.Event().wait()
    raise AssertionError("unreachable")


async def _at_once() -> RouteCapture:
    return _candidate()


def _serve_in_its_own_loop(recorder: ShadowRecorder, candidate: object) -> None:
    """One request served the way scripts and sync web handlers do: `asyncio.run` per call."""

    async def request() -> None:
        slot = recorder.reserve()
        assert slot is not None
        slot.astart(_baseline, candidate)  # type: ignore[arg-type]

    asyncio.run(request())


@pytest.mark.parametrize("candidate", [_never, _at_once], ids=["hanging", "not-yet-started"])
def test_a_task_cancelled_by_its_loop_closing_gives_its_place_back(candidate) -> None:
    rows: list[PairedDecision] = []
    recorder = ShadowRecorder(rows.extend, max_in_flight=2)
    for _ in range(5):
        _serve_in_its_own_loop(recorder, candidate)
    # Every comparison was cut short by its loop closing: each is counted as
    # cancelled (never as the candidate's failure) and frees its place, so later
    # queries are still compared, and flush returns.
    assert recorder.in_flight == 0
    assert recorder.counts.dropped_busy == 0
    assert (recorder.counts.cancelled, recorder.counts.candidate_raised) == (5, 0)
    recorder.flush(timeout_s=5)
    recorder.close()


async def test_a_cancelled_task_waiting_for_its_wire_is_not_counted_twice() -> None:
    rows: list[PairedDecision] = []
    recorder = ShadowRecorder(rows.extend)
    slot = recorder.reserve()
    assert slot is not None
    slot.astart(_baseline, _at_once, wire_key="thread-1")
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    # The candidate is captured and waits for its wire; the task has ended.
    assert recorder.in_flight == 1
    assert recorder.observe_wire("thread-1", ["Refunds are accepted within 30 days.\n\n"
                                              "Damaged parcels are replaced at once."]) == 1
    await recorder.aflush()
    assert recorder.counts.paired == 1 and recorder.counts.invalidated == 0
    assert all(r.baseline_visible for r in rows)
    await recorder.aclose()


def test_the_pool_threads_never_hold_up_the_process_exit(release) -> None:
    seen: list[bool] = []

    def candidate() -> RouteCapture:
        seen.append(threading.current_thread().daemon)
        release.wait()
        return _candidate()

    recorder = ShadowRecorder([].append, timeout_s=60.0)  # still running at the flush
    slot = recorder.reserve()
    assert slot is not None
    slot.start(_baseline, candidate)
    with pytest.raises(TimeoutError):
        recorder.flush(timeout_s=0.05)
    assert seen == [True]
    release.set()
    recorder.close()


_HANGING_SCRIPT = """
import threading
from capsa.shadow import Candidate, ShadowRecorder, capture_retrieved
docs = [Candidate(source_id="a", score=1.0, text="Refunds within 30 days.")]
recorder = ShadowRecorder(print, timeout_s=0.1)
slot = recorder.reserve()
slot.start(lambda: capture_retrieved("baseline", "q", docs),
           lambda: threading.Event().wait())
print("served")
"""


def test_a_hanging_candidate_does_not_keep_the_process_from_exiting() -> None:
    # The timeout only guards the test run; a correct recorder exits at once.
    done = subprocess.run([sys.executable, "-c", _HANGING_SCRIPT], capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0 and done.stdout.strip() == "served"


async def test_run_blocking_runs_off_the_loop_in_the_bounded_pool(release) -> None:
    recorder = ShadowRecorder([].append, max_workers=1, timeout_s=0.01)
    loop_thread = threading.get_ident()
    threads: list[str] = []

    def hang() -> int:
        threads.append(threading.current_thread().name)
        release.wait()
        return 1

    # Two blocking candidates time out; the loop stays free throughout.
    for _ in range(2):
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(recorder.run_blocking(hang), 0.01)
    assert threads and threading.get_ident() == loop_thread
    assert all(name.startswith("capsa-shadow") for name in threads)
    # The second never started: its queued work was cancelled with it.
    assert len(threads) == 1
    release.set()
    await recorder.aclose()


def test_wire_keys_that_never_come_do_not_accumulate() -> None:
    rows: list[PairedDecision] = []
    recorder = ShadowRecorder(rows.extend, max_in_flight=1000)
    for n in range(300):
        slot = recorder.reserve()
        assert slot is not None
        slot.start(_baseline, _candidate, wire_key=("thread", n))
    recorder.flush(timeout_s=10)
    assert recorder.in_flight == 0
    assert recorder._waiting == {} and recorder._slots == set()
    assert recorder.counts.paired == 300
    assert all(r.baseline_visible is None for r in rows)
    recorder.close()


@pytest.mark.parametrize("score", [np.float64(0.5), np.float32(0.5)])
def test_numpy_scores_are_released_as_plain_floats(score) -> None:
    docs = [Candidate(source_id="a", score=score, text="Refunds within 30 days.")]
    rows = pair(capture_retrieved("baseline", QUERY, docs),
                capture_retrieved("candidate", QUERY, docs))
    assert type(rows[0].baseline_score) is float and rows[0].baseline_score == 0.5
    assert json.loads(rows[0].model_dump_json())["candidate_score"] == 0.5


def test_a_numpy_nan_score_is_refused_with_its_cause() -> None:
    docs = [Candidate(source_id="a", score=np.float32("nan"), text="Refunds within 30 days.")]
    with pytest.raises(CaptureInvalid) as refused:
        capture_retrieved("baseline", QUERY, docs)
    assert refused.value.cause == "bad_score"


def test_rows_of_the_same_query_twice_cannot_be_linked_by_id_or_order() -> None:
    first = pair(_baseline(), _candidate())
    second = pair(_baseline(), _candidate())
    ids = {r.query_id for r in first} | {r.query_id for r in second}
    assert len(ids) == 2
    assert not {r.row_id for r in first} & {r.row_id for r in second}
    text = "".join(r.model_dump_json() for r in (*first, *second))
    for needle in ("doc-refunds-7", "doc-parcels-2", "refund", "Refunds", "parcels", "30 days"):
        assert needle not in text
