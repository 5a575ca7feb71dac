"""Serve the baseline, run the candidate off the request's path, pair, count every loss.

This is the edge both framework adapters stand on. The served request only
asks a `ShadowRecorder` for a slot (`reserve`: sampling and the bound on work
in flight, decided in microseconds) and hands it two thunks (`Slot.start`):
one that captures the answer already served, one that runs and captures the
candidate. Both run later, in a bounded thread pool (sync path) or as a task
(async path); the caller has its baseline answer before the candidate starts.
Pairing and the sink run on one delivery thread of their own, never on the
served request's thread or event loop. Whatever the candidate does, raises,
hangs, returns something ambiguous, the lost comparison becomes a count, and
a candidate still running at its deadline gives back its place and its
worker. `flush` waits for everything started; `close` flushes and refuses new
work.

When a host can also show what the model was sent (a LangChain middleware, a
LlamaIndex instrumentation handler), a slot started with a `wire_key` waits
for `observe_wire(wire_key, messages)` and the baseline's block is checked
against that wire; a wire that never comes leaves visibility unknown once
`wire_timeout_s` has passed or at `flush`.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import math
import random
import secrets
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine, Hashable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, NonNegativeInt

from capsa import telemetry
from capsa.errors import CaptureInvalid, RefusalCause
from capsa.shadow._pool import DaemonPool, current_pool
from capsa.shadow.capture import Candidate, RouteCapture, _wire_texts, capture_retrieved
from capsa.shadow.pairing import PairedDecision, RandomBytes, pair

__all__ = [
    "InvalidationCause",
    "RecorderLifecycle",
    "RowSink",
    "ShadowCounts",
    "ShadowOutcome",
    "ShadowRecorder",
    "Slot",
]

RowSink = Callable[[tuple[PairedDecision, ...]], object]
"""Where one query's paired rows go: a list's ``extend``, a queue, an analytics client."""

InvalidationCause = Literal[
    "candidate_raised", "candidate_timed_out", "capture_refused", "cancelled"
]
"""Why a query produced no rows: the candidate route raised, ran past its
timeout (or was still running or queued when `ShadowRecorder.close` gave up on
it), a capture refused something ambiguous (`CaptureInvalid`), or the
comparison's task was cancelled from outside, as when the caller's event loop
closes (`asyncio.run` per request): the candidate did not fail, its host left."""

ShadowOutcome = Literal[
    "paired", "sink_failed", "candidate_raised", "candidate_timed_out", "capture_refused",
    "cancelled",
]
"""What became of one query's comparison."""

_log = logging.getLogger("capsa.shadow")
_FLUSH_POLL_S = 0.05
_T = TypeVar("_T")


class ShadowCounts(BaseModel):
    """What a `ShadowRecorder` has done so far: queries paired, skipped and lost by cause."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    paired: NonNegativeInt = 0
    """Queries whose rows reached the sink."""
    rows: NonNegativeInt = 0
    """Rows handed to the sink in total."""
    sampled_out: NonNegativeInt = 0
    """Queries served without a comparison because sampling passed them over."""
    dropped_busy: NonNegativeInt = 0
    """Queries served without a comparison because `max_in_flight` comparisons were running."""
    candidate_raised: NonNegativeInt = 0
    """Queries lost because the candidate route raised."""
    candidate_timed_out: NonNegativeInt = 0
    """Queries lost because the candidate route ran past its timeout, or was still running
    or queued when `close` gave up waiting for it."""
    capture_refused: NonNegativeInt = 0
    """Queries lost because a capture refused something ambiguous (by cause: `refused`)."""
    refused: dict[RefusalCause, NonNegativeInt] = {}
    """`capture_refused` by the capture's cause (`CaptureInvalid.cause`): ``bad_score``
    when a retriever's scores are not in [0, 1], ``duplicate_identity``, ``partial_wire``
    and so on; a baseline that raised something else counts as ``other``."""
    cancelled: NonNegativeInt = 0
    """Queries lost because the comparison's task was cancelled from outside (the caller's
    event loop closed, as `asyncio.run` per request does): no fault of the candidate's."""
    sink_failed: NonNegativeInt = 0
    """Queries whose rows were paired but the sink raised on them (logged)."""
    threads_abandoned: NonNegativeInt = 0
    """Worker threads left to a candidate still running at its deadline, and replaced so
    comparisons go on. Not a query count: each such query is in `candidate_timed_out`.
    At most `max_abandoned_threads` are still running at once
    (`ShadowRecorder.abandoned_threads`)."""

    @property
    def invalidated(self) -> int:
        """Queries whose comparison produced no rows, over every cause."""
        return (self.candidate_raised + self.candidate_timed_out + self.capture_refused
                + self.cancelled)


_NO_WIRE = object()


class Slot:
    """One sampled query's place in the recorder, from `reserve` to its rows.

    Start it once, with `start` or `astart`, after the baseline has answered;
    or `cancel` it when the baseline raised. Not created directly.
    """

    def __init__(self, recorder: ShadowRecorder) -> None:
        self._recorder = recorder
        self._lock = threading.Lock()
        self._used = False
        self._captures: tuple[RouteCapture, RouteCapture] | None = None
        self._wire: object = _NO_WIRE
        self._awaits_wire = False
        self._done = False
        self._pairing = False
        """Set when the captures are done and pairing has begun: from then on the slot's
        outcome is counted by the recorder (`_deliver`, `_refused`), or by `close` giving up."""
        self._handed_over = False
        """Set when both captures (and the wire) are in and the slot waits only for the
        delivery thread: it no longer takes one of the `max_in_flight` places."""
        self._task_running = False
        self.started_at = recorder._clock()

    def start(
        self,
        baseline: Callable[[], RouteCapture],
        candidate: Callable[[], RouteCapture],
        *,
        wire_key: Hashable | None = None,
    ) -> None:
        """Capture the served answer and run the candidate in the recorder's pool.

        Args:
            baseline: Captures the answer already served (cheap; no I/O).
            candidate: Runs the candidate route and captures its answer.
            wire_key: Wait for `ShadowRecorder.observe_wire` with this key
                before pairing; None pairs as soon as the candidate is done.
        """
        if not self._begin(wire_key):
            return
        context = contextvars.copy_context()
        self._recorder._submit(lambda: context.run(self._run, baseline, candidate))

    def astart(
        self,
        baseline: Callable[[], RouteCapture],
        candidate: Callable[[], Awaitable[RouteCapture]],
        *,
        wire_key: Hashable | None = None,
    ) -> None:
        """Async `start`: the candidate runs as a task on the running loop."""
        if not self._begin(wire_key):
            return
        self._task_running = True
        task = self._recorder._spawn(self._arun(baseline, candidate))
        # A task cancelled before or while it runs (the caller's loop closing,
        # as `asyncio.run` does when the request returns) must still give its
        # place back, or the recorder fills up and `flush` never returns.
        task.add_done_callback(lambda _: self._abandoned())

    def cancel(self) -> None:
        """Give the slot back without a comparison (the baseline itself raised)."""
        with self._lock:
            self._used = True
            self._done = True
        self._recorder._finished(self)

    def _begin(self, wire_key: Hashable | None) -> bool:
        """Mark the slot started; False when its recorder closed after it was reserved
        (the comparison is then counted as given up, and nothing runs)."""
        with self._lock:
            if self._used:
                raise RuntimeError("a shadow slot is started once")
            self._used = True
            self._awaits_wire = wire_key is not None
        if self._recorder._closed:
            self._lose("candidate_timed_out")
            return False
        if wire_key is not None:
            self._recorder._await_wire(wire_key, self)
        return True

    def _run(
        self,
        baseline: Callable[[], RouteCapture],
        candidate: Callable[[], RouteCapture],
    ) -> None:
        if self._done:  # given up while it waited in the queue
            return
        try:
            served = baseline()
        except Exception as error:  # noqa: BLE001 - an answer that cannot be captured is ambiguous
            _log.info("shadow baseline capture refused (%s); comparison discarded",
                      _refusal(error), exc_info=True)
            self._lose("capture_refused", _refusal(error))
            return
        started = self._recorder._clock()
        # Past `timeout_s` the recorder counts the comparison, frees its place and
        # replaces this thread (`_sweep_overdue`); whatever the candidate returns
        # later is then ignored (`_lose` and `_finish` do nothing once done).
        self._recorder._running_begin(self, started, self._overdue)
        try:
            trial = candidate()
        except CaptureInvalid as error:
            self._lose("capture_refused", error.cause)
            return
        except Exception as error:  # noqa: BLE001 - counted, never served
            _candidate_raised(error)
            self._lose("candidate_raised")
            return
        finally:
            self._recorder._running_end(self)
        if self._recorder._clock() - started > self._recorder.timeout_s:
            self._lose("candidate_timed_out")
            return
        self._captured(served, trial)

    def _overdue(self) -> None:
        """The candidate is still running at its deadline: count it and free the place."""
        _log.info("shadow candidate still running after %ss; comparison discarded",
                  self._recorder.timeout_s)
        self._lose("candidate_timed_out")

    async def _arun(
        self,
        baseline: Callable[[], RouteCapture],
        candidate: Callable[[], Awaitable[RouteCapture]],
    ) -> None:
        try:
            await self._acompare(baseline, candidate)
        finally:
            self._task_running = False

    async def _acompare(
        self,
        baseline: Callable[[], RouteCapture],
        candidate: Callable[[], Awaitable[RouteCapture]],
    ) -> None:
        try:
            served = baseline()
        except Exception as error:  # noqa: BLE001 - an answer that cannot be captured is ambiguous
            _log.info("shadow baseline capture refused (%s); comparison discarded",
                      _refusal(error), exc_info=True)
            self._lose("capture_refused", _refusal(error))
            return
        try:
            trial = await _within(candidate, self._recorder.timeout_s)
        except CaptureInvalid as error:
            self._lose("capture_refused", error.cause)
            return
        except TimeoutError:
            self._lose("candidate_timed_out")
            return
        except _CandidateCancelled as error:
            _candidate_raised(error.__cause__ or error)
            self._lose("candidate_raised")
            return
        except Exception as error:  # noqa: BLE001 - counted, never served
            _candidate_raised(error)
            self._lose("candidate_raised")
            return
        self._captured(served, trial)

    def _captured(self, served: RouteCapture, trial: RouteCapture) -> None:
        with self._lock:
            self._captures = (served, trial)
            ready = not self._awaits_wire or self._wire is not _NO_WIRE
        if ready:
            self._recorder._hand_over(self)

    def _observe(self, texts: list[str] | None) -> None:
        """The wire arrived (or never will: None); pair if the captures are done.

        Pairing and the sink are handed to the delivery thread: the wire is
        observed on the model call's path, and expired on a served query's.
        """
        with self._lock:
            if self._wire is not _NO_WIRE or self._done:
                return
            self._wire = texts
            ready = self._captures is not None
        if ready:
            self._recorder._hand_over(self)

    def _finish(self) -> None:
        with self._lock:
            if self._done or self._captures is None:
                return
            self._done = self._pairing = True
            served, trial = self._captures
            wire = self._wire
        try:
            if isinstance(wire, list):  # a wire holding part of the block leaves it unknown
                served.observe_provider(wire, partial="unknown")
            rows = pair(served, trial, random_bytes=self._recorder._random_bytes)
        except Exception as error:  # noqa: BLE001 - CaptureInvalid, or a random source that repeated
            _log.info("shadow pairing refused (%s); comparison discarded", _refusal(error),
                      exc_info=True)
            self._recorder._refused(self, _refusal(error))
        else:
            self._recorder._deliver(rows, self)
        finally:
            self._recorder._finished(self)

    def _lose(self, cause: InvalidationCause, refusal: RefusalCause = "other") -> None:
        with self._lock:
            if self._done:
                return
            self._done = True
        self._recorder._lose(cause, refusal)
        self._recorder._finished(self)

    def _abandoned(self) -> None:
        """The async task ended; without a capture or a count it was cancelled from outside
        (its loop closed): count that as such, never as the candidate's failure."""
        self._task_running = False
        with self._lock:
            if self._done or self._captures is not None:
                return
        _log.info("shadow comparison task cancelled (its event loop closed?); discarded")
        self._lose("cancelled")

    def _expire(self) -> None:
        """Stop waiting for the wire: pair with visibility unknown."""
        self._observe(None)


class _CandidateCancelled(Exception):
    """The candidate's own awaitable ended cancelled while its comparison was not."""


async def _within(candidate: Callable[[], Awaitable[RouteCapture]],
                  timeout_s: float) -> RouteCapture:
    """Await `candidate()` for at most `timeout_s`, then give up on it without waiting.

    `asyncio.wait_for` waits for the cancelled awaitable to end, so a
    candidate that swallows its cancellation would hold its place for good;
    here it is cancelled and left. A cancellation of the comparison itself
    (its loop closing) cancels the candidate and propagates; one that comes
    from inside the candidate is its own failure (`_CandidateCancelled`).

    Raises:
        TimeoutError: the deadline passed.
    """
    trial = asyncio.ensure_future(candidate())
    try:
        done, _ = await asyncio.wait({trial}, timeout=timeout_s)
    except asyncio.CancelledError:
        trial.cancel()
        raise
    if not done:
        trial.cancel()
        trial.add_done_callback(_ignore_outcome)
        raise TimeoutError
    try:
        return trial.result()
    except asyncio.CancelledError as cancelled:
        raise _CandidateCancelled("the candidate was cancelled from inside") from cancelled


def _ignore_outcome(task: asyncio.Future[Any]) -> None:
    """Read a given-up candidate's end, so asyncio does not log it as never retrieved."""
    if not task.cancelled():
        task.exception()


def _candidate_raised(error: BaseException) -> None:
    """Log a candidate's failure by its type at INFO; its message, which may quote the
    query or a document (a search service's error often does), only at DEBUG."""
    _log.info("shadow candidate raised %s; comparison discarded", type(error).__name__)
    _log.debug("the candidate's error", exc_info=error)


class ShadowRecorder:
    """Compare a candidate route with the served baseline, off the request's path.

    The request pays for `reserve` (a random draw and a counter) and for
    handing two thunks to `Slot.start`; the candidate runs afterwards in a
    thread pool of `max_workers` (or as a task on `astart`), then the two
    captures are paired and the rows handed to `sink` on a delivery thread
    of their own. A query the sampler passes over, or one that arrives while
    `max_in_flight` comparisons are still running, is served without a
    comparison and counted. A candidate that raises, exceeds `timeout_s` or
    returns an ambiguous answer, a comparison whose task is cancelled with
    its event loop, and a sink that raises, each cost one comparison and are
    counted by cause. Safe to share between threads.

    `timeout_s` is a deadline on both paths. On the async path the
    candidate is cancelled there and left, even if it ignores the
    cancellation. On the sync path Python cannot stop a thread, so a
    candidate still running at its deadline is counted as timed out, its
    place in flight is freed and its worker is abandoned to it and replaced
    by a fresh thread; whatever it returns later is ignored, and the thread
    ends then. The deadline is enforced when the recorder is next used (the
    next query's `reserve`, `flush`, `close`), which is when a place or a
    worker is needed. At most `max_abandoned_threads` abandoned threads run
    at once, so the recorder never holds more than `max_workers +
    max_abandoned_threads` threads; past that bound a hung worker is not
    replaced and the pool runs short until an abandoned thread returns.

    Args:
        sink: Receives each query's rows as one tuple. It is called on one
            delivery thread, one call at a time, in the order comparisons
            finish (`compare` calls it on the caller's thread), never on
            the served request's thread or event loop, so a slow sink costs
            comparisons (a backlog holds places in flight), not latency.
        sample_rate: Share of queries compared, 0 to 1.
        max_in_flight: Comparisons that may be running or waiting for their
            wire at once; as many again may wait for the sink.
        max_workers: Threads running sync candidates.
        timeout_s: How long a candidate may take, in seconds, on either path.
        wire_timeout_s: How long a slot waits for `observe_wire` before
            pairing with visibility unknown.
        max_abandoned_threads: How many threads left to hung sync candidates
            may be running at once (0: a hung worker is never replaced).
        random_bytes: Source of fresh row ids, passed to `pair`.
        sampler: Draws a number in [0, 1) per query; compared when below
            `sample_rate`. Inject a seeded one in tests.
        clock: Monotonic seconds; inject a fake one in tests.

    Raises:
        ValueError: a rate outside [0, 1], a non-positive bound, worker count
            or timeout, or a negative thread bound.

    Examples:
        >>> rows: list[PairedDecision] = []
        >>> recorder = ShadowRecorder(rows.extend)
        >>> docs = [Candidate(source_id="a", score=1.0, text="Refunds within 30 days.")]
        >>> slot = recorder.reserve()
        >>> slot.start(lambda: capture_retrieved("baseline", "refunds", docs),
        ...            lambda: capture_retrieved("candidate", "refunds", docs))
        >>> recorder.flush()
        >>> (len(rows), recorder.counts.paired)
        (1, 1)
        >>> recorder.close()
    """

    def __init__(
        self,
        sink: RowSink,
        *,
        sample_rate: float = 1.0,
        max_in_flight: int = 64,
        max_workers: int = 2,
        timeout_s: float = 10.0,
        wire_timeout_s: float = 60.0,
        max_abandoned_threads: int = 8,
        random_bytes: RandomBytes = secrets.token_bytes,
        sampler: Callable[[], float] = random.random,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not (0.0 <= sample_rate <= 1.0):
            raise ValueError(f"sample_rate must lie in [0, 1], not {sample_rate!r}")
        if max_in_flight < 1 or max_workers < 1:
            raise ValueError(
                f"max_in_flight and max_workers must be at least 1, not "
                f"{max_in_flight!r} and {max_workers!r}"
            )
        for name, value in (("timeout_s", timeout_s), ("wire_timeout_s", wire_timeout_s)):
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a positive number of seconds, not {value!r}")
        if (not isinstance(max_abandoned_threads, int) or isinstance(max_abandoned_threads, bool)
                or max_abandoned_threads < 0):
            raise ValueError(f"max_abandoned_threads must be a count of threads, 0 or more, "
                             f"not {max_abandoned_threads!r}")
        self._sink = sink
        self.sample_rate = sample_rate
        self.max_in_flight = max_in_flight
        self.max_workers = max_workers
        self.timeout_s = timeout_s
        self.wire_timeout_s = wire_timeout_s
        self.max_abandoned_threads = max_abandoned_threads
        self._random_bytes = random_bytes
        self._sampler = sampler
        self._clock = clock
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._counts = ShadowCounts()
        self._slots: set[Slot] = set()
        self._waiting: dict[Hashable, list[Slot]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._pool: DaemonPool | None = None
        self._delivery: DaemonPool | None = None
        """The one thread that pairs and calls the sink, off every served path."""
        self._running: dict[object, _Running] = {}
        """Sync candidates (and `run_blocking` work) now running, for their deadline."""
        self._retired: list[DaemonPool] = []
        """Worker pools `close` stopped, whose abandoned threads may still run."""
        self._stopped = False
        self._closed = False
        self._sealed = False
        """Set when `close` gives up: rows paired after that are dropped, never delivered."""
        self._delivering = 0
        """Sink calls in progress, which `close` waits for before it returns."""
        self._in_sink: set[Slot] = set()
        self._given_up: set[Slot] = set()
        """Slots caught pairing when `close` gave up: counted then, so never again."""

    @property
    def counts(self) -> ShadowCounts:
        """A snapshot of the counts."""
        with self._lock:
            counts, pool = self._counts, self._pool
        if pool is None or not pool.replaced:
            return counts
        return _plus(counts, threads_abandoned=pool.replaced)

    @property
    def in_flight(self) -> int:
        """Comparisons reserved and not yet paired or lost."""
        with self._lock:
            return len(self._slots)

    @property
    def abandoned_threads(self) -> int:
        """Threads left to hung sync candidates and still running, at most
        `max_abandoned_threads`; each ends when its candidate returns."""
        with self._lock:
            pools = [*self._retired, *([self._pool] if self._pool else [])]
        return sum(pool.abandoned for pool in pools)

    def reserve(self) -> Slot | None:
        """Decide, cheaply, whether this query is compared; None when not.

        None when the recorder is closed, the sampler passes the query over
        (counted as `sampled_out`) or `max_in_flight` comparisons are running
        (counted as `dropped_busy`). Candidates past their deadline are
        counted and give back their places and workers first.

        A comparison handed to the delivery thread (paired or about to be,
        waiting only for the sink) gives its place back at once, as when it
        was paired on the spot; as many again may wait there, so a sink that
        falls behind holds at most twice `max_in_flight` comparisons.
        """
        self._sweep_overdue()
        self._expire_waiting()
        if self._closed:
            return None
        if self.sample_rate < 1.0 and self._sampler() >= self.sample_rate:
            self._bump(sampled_out=1)
            return None
        with self._lock:
            delivering = sum(1 for slot in self._slots if slot._handed_over)
            if (len(self._slots) - delivering >= self.max_in_flight
                    or len(self._slots) >= 2 * self.max_in_flight):
                self._counts = _plus(self._counts, dropped_busy=1)
                return None
            slot = Slot(self)
            self._slots.add(slot)
            return slot

    def observe_wire(self, wire_key: Hashable, messages: Sequence[object]) -> int:
        """Record what the model was sent for every slot waiting on `wire_key`.

        Called by a model-call hook just before the call. Only the texts of
        `messages` are kept, until the slot pairs.

        Returns:
            How many waiting slots the wire was recorded for.
        """
        with self._lock:
            slots = self._waiting.pop(wire_key, [])
        if slots:
            texts = _wire_texts(messages)
            for slot in slots:
                slot._observe(texts)
        return len(slots)

    def forget_wire(self, wire_key: Hashable) -> int:
        """The wire `wire_key` waits for will not come: pair its slots with visibility unknown.

        For a hook that knows sooner than `wire_timeout_s` (the next query in the
        same context, with no model call between), so the places are not held.

        Returns:
            How many waiting slots were released.
        """
        with self._lock:
            slots = self._waiting.pop(wire_key, [])
        for slot in slots:
            slot._expire()
        return len(slots)

    def compare(
        self, query: str, baseline: Sequence[Candidate], candidate: Sequence[Candidate]
    ) -> ShadowOutcome:
        """Capture two answers as plain retrievals, pair them and hand the rows on, now."""
        try:
            rows = pair(
                capture_retrieved("baseline", query, baseline),
                capture_retrieved("candidate", query, candidate),
                random_bytes=self._random_bytes,
            )
        except CaptureInvalid as error:
            return self._lose("capture_refused", error.cause)
        return self._deliver(rows)

    def flush(self, timeout_s: float | None = None) -> None:
        """Wait until every comparison started on the sync path has paired or been lost.

        Slots still waiting for their wire pair now, with visibility unknown,
        and a candidate still running at its deadline is counted as timed out,
        so a hung candidate holds `flush` for `timeout_s` at most. Tasks
        started with `astart` are awaited by `aflush`.

        Raises:
            TimeoutError: `timeout_s` passed with comparisons still running.
        """
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            # A slot started during the flush may still wait for its wire: expire
            # it on every round, so flush never waits for `wire_timeout_s`.
            self._sweep_overdue()
            self._expire_waiting(everything=True)
            with self._idle:
                running = sum(1 for s in self._slots if s._used and not s._task_running)
                if not running:
                    return
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise TimeoutError(f"{running} shadow comparisons still running")
                self._idle.wait(_FLUSH_POLL_S if remaining is None
                                else min(remaining, _FLUSH_POLL_S))

    async def aflush(self) -> None:
        """Await every task started with `astart` on this loop, then `flush` the rest."""
        while tasks := self._tasks_here():
            await asyncio.gather(*tasks, return_exceptions=True)
        self._expire_waiting(everything=True)
        while tasks := self._tasks_here():
            await asyncio.gather(*tasks, return_exceptions=True)
        await asyncio.to_thread(self.flush)

    def _tasks_here(self) -> list[asyncio.Task[None]]:
        """The comparison tasks of the running loop: another loop's cannot be awaited here."""
        loop = asyncio.get_running_loop()
        with self._lock:
            return [task for task in self._tasks if task.get_loop() is loop]

    def close(self, timeout_s: float | None = None) -> None:
        """Flush, stop the pool, and serve every later query without a comparison.

        Args:
            timeout_s: Wait at most this long, as a shutdown hook should, on a
                candidate that hangs. Comparisons still running or queued then
                are counted as `candidate_timed_out`, whatever they return
                later is dropped before the sink, and the pool's threads
                (daemons) are left to end with the process. None waits for
                every comparison, but never past a candidate's deadline
                (`timeout_s` of the recorder), and never for a thread
                abandoned to a hung candidate.
        """
        self._closed = True
        if timeout_s is None:
            self.flush()
            self._stop_pool(deadline=None)
            return
        deadline = time.monotonic() + timeout_s
        try:
            self.flush(timeout_s)
        except TimeoutError:
            self._give_up(deadline)
        self._stop_pool(deadline=deadline)

    async def aclose(self, timeout_s: float | None = None) -> None:
        """Async `close`: await this loop's comparison tasks too, then stop the pool.

        Args:
            timeout_s: As for `close`; tasks still running then are cancelled
                and counted as `candidate_timed_out`.
        """
        self._closed = True
        if timeout_s is None:
            await self.aflush()
            await asyncio.to_thread(self._stop_pool, deadline=None)
            return
        deadline = time.monotonic() + timeout_s
        while (tasks := self._tasks_here()) and (left := deadline - time.monotonic()) > 0:
            await asyncio.wait(tasks, timeout=left)
        if tasks := self._tasks_here():
            self._expire_waiting(everything=True)
            # counted as timed out before the cancellation could count them as cancelled
            await asyncio.to_thread(self._give_up, deadline)
            for task in tasks:
                task.cancel()
        await asyncio.to_thread(self.close, max(deadline - time.monotonic(), 0.0))

    def _give_up(self, deadline: float) -> None:
        """Drop every comparison not yet delivered, counting it as timed out.

        Rows paired from now on never reach the sink, and a comparison caught
        pairing is counted now. A sink call already under way is waited for
        until `deadline`, so the counts add up when `close` returns unless a
        sink call outlasts it.
        """
        with self._idle:
            self._sealed = True
            running = [slot for slot in self._slots if slot._used]
            pairing = [slot for slot in running if slot._pairing and slot not in self._in_sink]
            self._given_up.update(pairing)
            self._counts = _plus(self._counts, candidate_timed_out=len(pairing))
        for _ in pairing:
            telemetry.shadow_invalidated("candidate_timed_out")
        for slot in running:
            if slot not in pairing:
                slot._lose("candidate_timed_out")
        with self._idle:
            while self._delivering and (left := deadline - time.monotonic()) > 0:
                self._idle.wait(left)
            self._slots.clear()
            self._waiting.clear()
            self._idle.notify_all()

    def _stop_pool(self, *, deadline: float | None) -> None:
        """Stop the workers, then the delivery thread: work still queued is cancelled once
        given up (`_sealed`), and the threads are joined until `deadline` (None: until they
        end), except those abandoned to a hung candidate, which end with it."""
        with self._lock:
            pools = [p for p in (self._pool, self._delivery) if p is not None]
            for pool in pools:
                pool.shutdown(wait=False, cancel_futures=self._sealed)
            if self._pool is not None:  # its count of replaced threads is final once shut
                self._counts = _plus(self._counts, threads_abandoned=self._pool.replaced)
                if self._pool.abandoned:
                    self._retired.append(self._pool)
            self._pool = self._delivery = None
            self._stopped = True
        for pool in pools:
            while (waiting := pool.joinable()) and (
                    deadline is None or (left := deadline - time.monotonic()) > 0):
                # a worker may hang in `run_blocking` work, which no slot waits for:
                # sweep between joins, so its deadline releases the join too
                waiting[0].join(_FLUSH_POLL_S if deadline is None else min(left, _FLUSH_POLL_S))
                self._sweep_overdue(pool)

    def _pool_of_workers(self) -> DaemonPool:
        with self._lock:
            if self._pool is None:
                self._pool = DaemonPool(self.max_workers, "capsa-shadow",
                                         max_abandoned=self.max_abandoned_threads)
            return self._pool

    def _submit(self, work: Callable[[], None]) -> None:
        future: Future[None] = self._pool_of_workers().submit(work)
        future.add_done_callback(_log_crash)

    def _hand_over(self, slot: Slot) -> None:
        """Pair `slot` and hand its rows to the sink on the delivery thread.

        Never on the caller's thread: that is a served request's (an expired
        wire swept by `reserve`, a model call's `observe_wire`) or its event
        loop (`astart`), and a slow sink there is latency the user pays. One
        thread keeps the sink's calls serial and in the order comparisons
        finish. The slot gives its place back now (a wire expired at the next
        query frees that query's place, as pairing on the spot did), but stays
        counted until delivered: a sink that falls behind costs comparisons
        (`dropped_busy`), never memory without bound.
        """
        if slot._done:  # given up by `close` meanwhile
            return
        with self._lock:
            slot._handed_over = True
            if self._delivery is None and not self._stopped:
                self._delivery = DaemonPool(1, "capsa-shadow-sink")
            delivery = self._delivery
        if delivery is None:  # stopped: `close` has given up on everything not delivered
            slot._finish()
            return
        future: Future[None] = delivery.submit(slot._finish)
        future.add_done_callback(_log_crash)

    def _running_begin(self, key: object, started: float,
                       overdue: Callable[[], None] | None) -> None:
        """A sync candidate (or `run_blocking` work) starts on this pool thread."""
        pool: DaemonPool | None = current_pool()
        if pool is None:  # not on a pool thread: nothing to replace
            return
        with self._lock:
            self._running[key] = _Running(started, threading.current_thread(), pool, overdue)

    def _running_end(self, key: object) -> None:
        with self._lock:
            self._running.pop(key, None)

    def _sweep_overdue(self, pool: DaemonPool | None = None) -> None:
        """Give up on every sync candidate past `timeout_s`: count it, free its place, and
        replace its thread, which Python cannot stop (within `max_abandoned_threads`)."""
        now = self._clock()
        with self._lock:
            overdue = [(key, run) for key, run in self._running.items()
                       if now - run.started > self.timeout_s
                       and (pool is None or run.pool is pool)]
            replaced = 0
            for key, run in overdue:
                del self._running[key]
                # under the lock: the thread cannot pass `_running_end` and take other work
                replaced += run.pool.abandon(run.thread)
        if len(overdue) > replaced and not self._stopped:
            _log.warning("%d shadow worker(s) hung past %ss and not replaced: "
                         "max_abandoned_threads (%d) are still running",
                         len(overdue) - replaced, self.timeout_s, self.max_abandoned_threads)
        for _, run in overdue:
            if run.overdue is not None:
                run.overdue()

    async def run_blocking(self, work: Callable[[], _T]) -> _T:
        """Await `work` run in the recorder's own pool, off the caller's event loop.

        For an async comparison whose candidate only has a blocking
        implementation: on the loop it would stall every request served
        there, and in the loop's default executor a hanging one would take
        the threads served requests need. Here it can only cost the pool,
        and past `timeout_s` its thread is abandoned and replaced as a sync
        candidate's is (the comparison awaiting it has timed out by then).
        """
        context = contextvars.copy_context()
        key = object()

        def timed() -> _T:
            self._running_begin(key, self._clock(), None)
            try:
                return context.run(work)
            finally:
                self._running_end(key)

        return await asyncio.wrap_future(self._pool_of_workers().submit(timed))

    def _spawn(self, work: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(work)
        with self._lock:
            self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _await_wire(self, wire_key: Hashable, slot: Slot) -> None:
        with self._lock:
            self._waiting.setdefault(wire_key, []).append(slot)

    def _expire_waiting(self, *, everything: bool = False) -> None:
        now = self._clock()
        expired: list[Slot] = []
        with self._lock:
            for key in list(self._waiting):
                keep: list[Slot] = []
                for slot in self._waiting[key]:
                    late = now - slot.started_at > self.wire_timeout_s
                    (expired if everything or late else keep).append(slot)
                if keep:
                    self._waiting[key] = keep
                else:
                    del self._waiting[key]
        for slot in expired:
            slot._expire()

    def _deliver(self, rows: tuple[PairedDecision, ...],
                 slot: Slot | None = None) -> ShadowOutcome:
        with self._idle:
            sealed = self._sealed
            counted = sealed and slot not in self._given_up
            if counted:  # paired after `close` gave up, and not counted then
                self._counts = _plus(self._counts, candidate_timed_out=1)
            if not sealed:
                self._delivering += 1
                if slot is not None:
                    self._in_sink.add(slot)
        if sealed:  # never handed to the sink once `close` gave up
            if counted:
                telemetry.shadow_invalidated("candidate_timed_out")
            return "candidate_timed_out"
        try:
            # In an empty context: the comparison ran in a copy of the request's, and a
            # sink that ships rows (an instrumented HTTP client) would stamp them with
            # the request's trace id, linking anonymous rows back to the query's trace.
            contextvars.Context().run(self._sink, rows)
        except Exception:  # noqa: BLE001 - a failing sink must not fail anything served
            _log.warning("shadow sink raised; %d paired rows lost", len(rows), exc_info=True)
            self._bump(sink_failed=1)
            return "sink_failed"
        finally:
            with self._idle:
                self._delivering -= 1
                self._in_sink.discard(slot)
                self._idle.notify_all()
        self._bump(paired=1, rows=len(rows))
        return "paired"

    def _refused(self, slot: Slot, refusal: RefusalCause) -> None:
        """A slot's pairing refused its captures: counted, unless `close` already gave up."""
        with self._lock:
            if slot in self._given_up:
                return
            self._counts = _plus_refused(self._counts, refusal)
        telemetry.shadow_invalidated(refusal)

    def _lose(self, cause: InvalidationCause,
              refusal: RefusalCause = "other") -> InvalidationCause:
        """Count a lost query; a refused capture by its `refusal` too, which is also the
        cause the telemetry counter gets (as `compare_routes` gives it)."""
        if cause == "capture_refused":
            with self._lock:
                self._counts = _plus_refused(self._counts, refusal)
            telemetry.shadow_invalidated(refusal)
        else:
            self._bump(**{cause: 1})
            telemetry.shadow_invalidated(cause)
        return cause

    def _finished(self, slot: Slot) -> None:
        with self._idle:
            self._slots.discard(slot)
            for key, waiting in list(self._waiting.items()):
                if slot in waiting:
                    waiting.remove(slot)
                    if not waiting:
                        del self._waiting[key]
            self._idle.notify_all()

    def _bump(self, **deltas: int) -> None:
        with self._lock:
            self._counts = _plus(self._counts, **deltas)


def _plus(counts: ShadowCounts, **deltas: int) -> ShadowCounts:
    current = counts.model_dump(exclude={"refused"})
    return ShadowCounts(refused=counts.refused,
                        **{k: v + deltas.get(k, 0) for k, v in current.items()})


def _plus_refused(counts: ShadowCounts, refusal: RefusalCause) -> ShadowCounts:
    """`counts` with one more capture refused, for `refusal`."""
    refused = {**counts.refused, refusal: counts.refused.get(refusal, 0) + 1}
    return _plus(counts.model_copy(update={"refused": refused}), capture_refused=1)


def _refusal(error: BaseException) -> RefusalCause:
    """The closed-set cause of a refused capture: a `CaptureInvalid`'s own, else ``other``."""
    return error.cause if isinstance(error, CaptureInvalid) else "other"


@dataclass(frozen=True)
class _Running:
    """A sync candidate (or `run_blocking` work) running on a pool thread, for its deadline."""

    started: float
    thread: threading.Thread
    pool: DaemonPool
    overdue: Callable[[], None] | None
    """Counts the comparison lost at the deadline; None for `run_blocking` work, whose
    comparison counts itself."""


def _log_crash(future: Future[None]) -> None:
    if future.cancelled():  # queued work `close` gave up on
        return
    error = future.exception()
    if error is not None:
        _log.error("shadow comparison crashed", exc_info=error)


class RecorderLifecycle:
    """`flush`, `aflush`, `close` and `aclose` for an adapter that owns a `ShadowRecorder`.

    Each framework's shadow retriever serves the baseline and hands the
    candidate to its recorder (``self._recorder``); ending the comparisons is
    the same in both, so it lives here once.
    """

    if TYPE_CHECKING:
        _recorder: ShadowRecorder

    def flush(self, timeout_s: float | None = None) -> None:
        """Wait until every comparison started on the sync path is paired or lost."""
        self._recorder.flush(timeout_s)

    async def aflush(self) -> None:
        """Await every comparison started on the async path, then `flush`."""
        await self._recorder.aflush()

    def close(self, timeout_s: float | None = None) -> None:
        """Flush and stop, waiting at most `timeout_s` (`ShadowRecorder.close`)."""
        self._recorder.close(timeout_s)

    async def aclose(self, timeout_s: float | None = None) -> None:
        """Async `close`: await running comparisons too, at most `timeout_s`, then stop."""
        await self._recorder.aclose(timeout_s)
