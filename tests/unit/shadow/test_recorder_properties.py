"""ShadowRecorder invariant: every query served is accounted for exactly once."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from capsa.errors import CaptureInvalid
from capsa.shadow import (
    Candidate,
    PairedDecision,
    RouteCapture,
    ShadowRecorder,
    capture_retrieved,
)

QUERY = "refund window"
DOC = Candidate(source_id="a", score=1.0, text="Refunds within 30 days.")

_fates = st.sampled_from(["ok", "raises", "refused", "baseline_raises"])


def _candidate(fate: str) -> RouteCapture:
    if fate == "raises":
        raise ConnectionError("candidate index unreachable")
    if fate == "refused":
        raise CaptureInvalid("an ambiguous answer")
    return capture_retrieved("candidate", QUERY, [DOC])


@settings(max_examples=40, deadline=None)
@given(
    queries=st.lists(st.tuples(_fates, st.floats(0, 0.999)), max_size=25),
    sample_rate=st.sampled_from([0.0, 0.3, 1.0]),
    max_in_flight=st.integers(1, 4),
)
def test_every_query_is_paired_skipped_or_lost_exactly_once(queries, sample_rate,
                                                            max_in_flight) -> None:
    rows: list[PairedDecision] = []
    draws = iter([draw for _, draw in queries])
    recorder = ShadowRecorder(rows.extend, sample_rate=sample_rate,
                              max_in_flight=max_in_flight, sampler=lambda: next(draws))
    cancelled = 0
    for fate, _ in queries:
        slot = recorder.reserve()
        if slot is None:
            continue
        if fate == "baseline_raises":
            slot.cancel()
            cancelled += 1
            continue
        slot.start(lambda: capture_retrieved("baseline", QUERY, [DOC]),
                   lambda fate=fate: _candidate(fate))
    recorder.close()
    counts = recorder.counts
    accounted = (counts.paired + counts.invalidated + counts.sink_failed
                 + counts.sampled_out + counts.dropped_busy + cancelled)
    assert accounted == len(queries)
    assert counts.rows == len(rows) == counts.paired
    assert recorder.in_flight == 0
