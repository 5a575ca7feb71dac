"""Serve the baseline, run the candidate beside it, pair the two, count every loss.

This is the edge both framework adapters stand on. A `ShadowRecorder` runs
the candidate route concurrently with the baseline (in a worker thread on the
sync path, as a task on the async path), waits for it at most `timeout_s`,
and then pairs the two answers and hands the rows to a sink. Whatever the
candidate does, raises, hangs, returns something ambiguous, the caller gets
the baseline's answer unchanged; the lost comparison becomes a count.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import math
import secrets
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, NonNegativeInt

from capsa.errors import CaptureInvalid
from capsa.shadow.capture import Candidate, capture_retrieved
from capsa.shadow.pairing import PairedDecision, RandomBytes, pair

__all__ = [
    "InvalidationCause",
    "RowSink",
    "ShadowCounts",
    "ShadowOutcome",
    "ShadowRecorder",
    "Shadowed",
]

T = TypeVar("T")

RowSink = Callable[[tuple[PairedDecision, ...]], object]
"""Where one query's paired rows go: a list's ``extend``, a queue, an analytics client."""

InvalidationCause = Literal["candidate_raised", "candidate_timed_out", "capture_refused"]
"""Why a query produced no rows: the candidate route raised, ran past its
timeout, or a capture refused something ambiguous (`CaptureInvalid`)."""

ShadowOutcome = Literal[
    "paired", "sink_failed", "candidate_raised", "candidate_timed_out", "capture_refused"
]
"""What became of one query's comparison."""

_log = logging.getLogger("capsa.shadow")


class ShadowCounts(BaseModel):
    """What a `ShadowRecorder` has done so far: queries paired, and queries lost by cause."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    paired: NonNegativeInt = 0
    """Queries whose rows reached the sink."""
    rows: NonNegativeInt = 0
    """Rows handed to the sink in total."""
    candidate_raised: NonNegativeInt = 0
    """Queries lost because the candidate route raised."""
    candidate_timed_out: NonNegativeInt = 0
    """Queries lost because the candidate route ran past its timeout."""
    capture_refused: NonNegativeInt = 0
    """Queries lost because a capture refused something ambiguous."""
    sink_failed: NonNegativeInt = 0
    """Queries whose rows were paired but the sink raised on them (logged)."""

    @property
    def invalidated(self) -> int:
        """Queries whose capture was invalidated, over every cause."""
        return self.candidate_raised + self.candidate_timed_out + self.capture_refused


@dataclass(frozen=True)
class Shadowed(Generic[T]):
    """The baseline's answer, untouched, and what became of the comparison."""

    served: Sequence[T]
    """Exactly what the baseline returned."""
    outcome: ShadowOutcome
    """`paired`, or why this query produced no rows."""


class ShadowRecorder:
    """Run a candidate beside a baseline and turn each query into paired rows or a count.

    Neither `serve` nor `aserve` ever lets the candidate change what the
    caller receives: a candidate that raises, runs past `timeout_s` or
    returns an answer the capture refuses costs one comparison, counted by
    cause. A sink that raises is logged on the ``capsa.shadow`` logger and
    counted. The baseline's own exceptions propagate as they would without
    the shadow. Safe to share between threads.

    On the sync path a candidate that times out keeps its worker thread until
    it returns; its answer is then ignored.

    Args:
        sink: Receives each query's rows as one tuple.
        timeout_s: How long to wait for the candidate, counted from when both
            routes were started.
        random_bytes: Source of fresh row ids, passed to `pair`.

    Raises:
        ValueError: `timeout_s` is not a positive finite number.

    Examples:
        >>> rows: list[PairedDecision] = []
        >>> recorder = ShadowRecorder(rows.extend)
        >>> docs = [Candidate(source_id="a", score=1.0, text="Refunds within 30 days.")]
        >>> recorder.compare("refunds", docs, docs)
        'paired'
        >>> recorder.discard("candidate_timed_out")
        >>> (len(rows), recorder.counts.paired, recorder.counts.invalidated)
        (1, 1, 1)
    """

    def __init__(
        self,
        sink: RowSink,
        *,
        timeout_s: float = 10.0,
        random_bytes: RandomBytes = secrets.token_bytes,
    ) -> None:
        if not (math.isfinite(timeout_s) and timeout_s > 0):
            raise ValueError(f"timeout_s must be a positive number of seconds, not {timeout_s!r}")
        self._sink = sink
        self.timeout_s = timeout_s
        self._random_bytes = random_bytes
        self._lock = threading.Lock()
        self._counts = ShadowCounts()

    @property
    def counts(self) -> ShadowCounts:
        """A snapshot of the counts."""
        with self._lock:
            return self._counts

    def serve(
        self,
        query: str,
        baseline: Callable[[], Sequence[T]],
        candidate: Callable[[], Sequence[T]],
        convert: Callable[[Sequence[T]], Sequence[Candidate]],
    ) -> Shadowed[T]:
        """Run both routes concurrently; return the baseline's answer and the outcome.

        Args:
            query: The query both routes answer.
            baseline: Produces the served answer, in the calling thread.
            candidate: Produces the trial answer, in a worker thread.
            convert: Turns either answer into capture candidates.
        """
        deadline = time.monotonic() + self.timeout_s
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="capsa-shadow")
        try:
            future = pool.submit(contextvars.copy_context().run, candidate)
        finally:
            pool.shutdown(wait=False)
        try:
            served = baseline()
        except BaseException:
            future.cancel()
            raise
        try:
            trial = future.result(timeout=max(0.0, deadline - time.monotonic()))
        except TimeoutError:
            return Shadowed(served, self._lose("candidate_timed_out"))
        except Exception:  # noqa: BLE001 - the candidate's failure is counted, never served
            _log.info("shadow candidate raised; comparison discarded", exc_info=True)
            return Shadowed(served, self._lose("candidate_raised"))
        return Shadowed(served, self._convert_and_compare(query, served, trial, convert))

    async def aserve(
        self,
        query: str,
        baseline: Callable[[], Awaitable[Sequence[T]]],
        candidate: Callable[[], Awaitable[Sequence[T]]],
        convert: Callable[[Sequence[T]], Sequence[Candidate]],
    ) -> Shadowed[T]:
        """Async `serve`: the candidate runs as a task beside the awaited baseline."""
        task = asyncio.ensure_future(asyncio.wait_for(candidate(), self.timeout_s))
        try:
            served = await baseline()
        except BaseException:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
            raise
        try:
            trial = await task
        except TimeoutError:
            return Shadowed(served, self._lose("candidate_timed_out"))
        except Exception:  # noqa: BLE001 - the candidate's failure is counted, never served
            _log.info("shadow candidate raised; comparison discarded", exc_info=True)
            return Shadowed(served, self._lose("candidate_raised"))
        return Shadowed(served, self._convert_and_compare(query, served, trial, convert))

    def compare(
        self, query: str, baseline: Sequence[Candidate], candidate: Sequence[Candidate]
    ) -> ShadowOutcome:
        """Capture both answers as plain retrievals, pair them and hand the rows on."""
        try:
            rows = pair(
                capture_retrieved("baseline", query, baseline),
                capture_retrieved("candidate", query, candidate),
                random_bytes=self._random_bytes,
            )
        except CaptureInvalid:
            return self._lose("capture_refused")
        try:
            self._sink(rows)
        except Exception:  # noqa: BLE001 - a failing sink must not fail the served request
            _log.warning("shadow sink raised; %d paired rows lost", len(rows), exc_info=True)
            self._bump(sink_failed=1)
            return "sink_failed"
        self._bump(paired=1, rows=len(rows))
        return "paired"

    def discard(self, cause: InvalidationCause) -> None:
        """Count one query whose comparison was invalidated."""
        self._bump(**{cause: 1})

    def _lose(self, cause: InvalidationCause) -> InvalidationCause:
        self.discard(cause)
        return cause

    def _convert_and_compare(
        self,
        query: str,
        served: Sequence[T],
        trial: Sequence[T],
        convert: Callable[[Sequence[T]], Sequence[Candidate]],
    ) -> ShadowOutcome:
        try:
            baseline, candidate = convert(served), convert(trial)
        except (CaptureInvalid, ValueError, TypeError):
            # An answer that cannot even be described as candidates (a score
            # that is not a number, an id that is not a string) is ambiguous.
            return self._lose("capture_refused")
        return self.compare(query, baseline, candidate)

    def _bump(self, **deltas: int) -> None:
        with self._lock:
            current = self._counts.model_dump()
            self._counts = ShadowCounts(**{k: v + deltas.get(k, 0) for k, v in current.items()})
