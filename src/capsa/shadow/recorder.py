"""Serve the baseline, run the candidate off the request's path, pair, count every loss.

This is the edge both framework adapters stand on. The served request only
asks a `ShadowRecorder` for a slot (`reserve`: sampling and the bound on work
in flight, decided in microseconds) and hands it two thunks (`Slot.start`):
one that captures the answer already served, one that runs and captures the
candidate. Both run later, in a bounded thread pool (sync path) or as a task
(async path); the caller has its baseline answer before the candidate starts.
Whatever the candidate does, raises, hangs, returns something ambiguous, the
lost comparison becomes a count. `flush` waits for everything started;
`close` flushes and refuses new work.

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
import queue
import random
import secrets
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine, Hashable, Sequence
from concurrent.futures import Executor, Future
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, NonNegativeInt

from capsa import telemetry
from capsa.errors import CaptureInvalid
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

InvalidationCause = Literal["candidate_raised", "candidate_timed_out", "capture_refused"]
"""Why a query produced no rows: the candidate route raised (or its task was
cancelled, as when the caller's event loop closes), ran past its timeout (or was
still running or queued when `ShadowRecorder.close` gave up on it), or a
capture refused something ambiguous (`CaptureInvalid`)."""

ShadowOutcome = Literal[
    "paired", "sink_failed", "candidate_raised", "candidate_timed_out", "capture_refused"
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
    """Queries lost because the candidate route raised, or its task was cancelled."""
    candidate_timed_out: NonNegativeInt = 0
    """Queries lost because the candidate route ran past its timeout, or was still running
    or queued when `close` gave up waiting for it."""
    capture_refused: NonNegativeInt = 0
    """Queries lost because a capture refused something ambiguous."""
    sink_failed: NonNegativeInt = 0
    """Queries whose rows were paired but the sink raised on them (logged)."""

    @property
    def invalidated(self) -> int:
        """Queries whose capture was invalidated, over every cause."""
        return self.candidate_raised + self.candidate_timed_out + self.capture_refused


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
        except Exception:  # noqa: BLE001 - an answer that cannot be captured is ambiguous
            _log.info("shadow baseline capture refused; comparison discarded", exc_info=True)
            self._lose("capture_refused")
            return
        started = self._recorder._clock()
        try:
            trial = candidate()
        except CaptureInvalid:
            self._lose("capture_refused")
            return
        except Exception as error:  # noqa: BLE001 - counted, never served
            _candidate_raised(error)
            self._lose("candidate_raised")
            return
        if self._recorder._clock() - started > self._recorder.timeout_s:
            self._lose("candidate_timed_out")
            return
        self._captured(served, trial)

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
        except Exception:  # noqa: BLE001 - an answer that cannot be captured is ambiguous
            _log.info("shadow baseline capture refused; comparison discarded", exc_info=True)
            self._lose("capture_refused")
            return
        try:
            trial = await asyncio.wait_for(candidate(), self._recorder.timeout_s)
        except CaptureInvalid:
            self._lose("capture_refused")
            return
        except TimeoutError:
            self._lose("candidate_timed_out")
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
            self._finish()

    def _observe(self, texts: list[str] | None, *, inline: bool = False) -> None:
        """The wire arrived (or never will: None); pair if the captures are done.

        Pairing and the sink run in the pool unless `inline`: the wire is
        observed on the model call's path.
        """
        with self._lock:
            if self._wire is not _NO_WIRE or self._done:
                return
            self._wire = texts
            ready = self._captures is not None
        if ready and inline:
            self._finish()
        elif ready:
            self._recorder._submit(self._finish)

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
        except Exception:  # noqa: BLE001 - CaptureInvalid, or a random source that repeated
            _log.info("shadow pairing refused; comparison discarded", exc_info=True)
            self._recorder._refused(self)
        else:
            self._recorder._deliver(rows, self)
        finally:
            self._recorder._finished(self)

    def _lose(self, cause: InvalidationCause) -> None:
        with self._lock:
            if self._done:
                return
            self._done = True
        self._recorder._lose(cause)
        self._recorder._finished(self)

    def _abandoned(self) -> None:
        """The async task ended; without a capture it was cancelled: count it, free the place."""
        self._task_running = False
        with self._lock:
            if self._done or self._captures is not None:
                return
        _log.info("shadow candidate task cancelled; comparison discarded")
        self._lose("candidate_raised")

    def _expire(self) -> None:
        """Stop waiting for the wire: pair with visibility unknown."""
        self._observe(None, inline=True)


def _candidate_raised(error: Exception) -> None:
    """Log a candidate's failure by its type at INFO; its message, which may quote the
    query or a document (a search service's error often does), only at DEBUG."""
    _log.info("shadow candidate raised %s; comparison discarded", type(error).__name__)
    _log.debug("the candidate's error", exc_info=error)


class ShadowRecorder:
    """Compare a candidate route with the served baseline, off the request's path.

    The request pays for `reserve` (a random draw and a counter) and for
    handing two thunks to `Slot.start`; the candidate runs afterwards in a
    thread pool of `max_workers` (or as a task on `astart`), then the two
    captures are paired and the rows handed to `sink`. A query the sampler
    passes over, or one that arrives while `max_in_flight` comparisons are
    still running, is served without a comparison and counted. A candidate
    that raises, exceeds `timeout_s` or returns an ambiguous answer, and a
    sink that raises, each cost one comparison and are counted by cause.
    Safe to share between threads.

    On the sync path a candidate past `timeout_s` keeps its worker until it
    returns; its answer is then ignored and counted as timed out, and it holds
    its in-flight place meanwhile, so a hanging candidate can only ever cost
    `max_in_flight` places, never the served request.

    Args:
        sink: Receives each query's rows as one tuple. It is called from the
            pool's threads (or on the event loop after `Slot.astart`), so it
            must be safe to call from any thread: a list's ``extend``, a
            queue's ``put``, a thread-safe analytics client.
        sample_rate: Share of queries compared, 0 to 1.
        max_in_flight: Comparisons that may be running or waiting at once.
        max_workers: Threads running sync candidates.
        timeout_s: How long a candidate may take.
        wire_timeout_s: How long a slot waits for `observe_wire` before
            pairing with visibility unknown.
        random_bytes: Source of fresh row ids, passed to `pair`.
        sampler: Draws a number in [0, 1) per query; compared when below
            `sample_rate`. Inject a seeded one in tests.
        clock: Monotonic seconds; inject a fake one in tests.

    Raises:
        ValueError: a rate outside [0, 1], a non-positive bound, worker count
            or timeout.

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
        self._sink = sink
        self.sample_rate = sample_rate
        self.max_in_flight = max_in_flight
        self.max_workers = max_workers
        self.timeout_s = timeout_s
        self.wire_timeout_s = wire_timeout_s
        self._random_bytes = random_bytes
        self._sampler = sampler
        self._clock = clock
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._counts = ShadowCounts()
        self._slots: set[Slot] = set()
        self._waiting: dict[Hashable, list[Slot]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._pool: _DaemonPool | None = None
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
            return self._counts

    @property
    def in_flight(self) -> int:
        """Comparisons reserved and not yet paired or lost."""
        with self._lock:
            return len(self._slots)

    def reserve(self) -> Slot | None:
        """Decide, cheaply, whether this query is compared; None when not.

        None when the recorder is closed, the sampler passes the query over
        (counted as `sampled_out`) or `max_in_flight` comparisons are running
        (counted as `dropped_busy`).
        """
        self._expire_waiting()
        if self._closed:
            return None
        if self.sample_rate < 1.0 and self._sampler() >= self.sample_rate:
            self._bump(sampled_out=1)
            return None
        with self._lock:
            if len(self._slots) >= self.max_in_flight:
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
        except CaptureInvalid:
            return self._lose("capture_refused")
        return self._deliver(rows)

    def flush(self, timeout_s: float | None = None) -> None:
        """Wait until every comparison started on the sync path has paired or been lost.

        Slots still waiting for their wire pair now, with visibility unknown.
        Tasks started with `astart` are awaited by `aflush`.

        Raises:
            TimeoutError: `timeout_s` passed with comparisons still running.
        """
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            # A slot started during the flush may still wait for its wire: expire
            # it on every round, so flush never waits for `wire_timeout_s`.
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
                every comparison.
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
            # counted before the cancellation could count them as raised
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
        """Stop the pool: work still queued is cancelled once given up (`_sealed`), and its
        threads are joined until `deadline` (None: until they end)."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=self._sealed)
            pool.join(deadline)

    def _pool_of_workers(self) -> _DaemonPool:
        with self._lock:
            if self._pool is None:
                self._pool = _DaemonPool(self.max_workers, "capsa-shadow")
            return self._pool

    def _submit(self, work: Callable[[], None]) -> None:
        future: Future[None] = self._pool_of_workers().submit(work)
        future.add_done_callback(_log_crash)

    async def run_blocking(self, work: Callable[[], _T]) -> _T:
        """Await `work` run in the recorder's own pool, off the caller's event loop.

        For an async comparison whose candidate only has a blocking
        implementation: on the loop it would stall every request served
        there, and in the loop's default executor a hanging one would take
        the threads served requests need. Here it can only cost the pool.
        """
        context = contextvars.copy_context()
        return await asyncio.get_running_loop().run_in_executor(
            self._pool_of_workers(), context.run, work)

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

    def _refused(self, slot: Slot) -> None:
        """A slot's pairing refused its captures: counted, unless `close` already gave up."""
        with self._lock:
            if slot in self._given_up:
                return
            self._counts = _plus(self._counts, capture_refused=1)
        telemetry.shadow_invalidated("capture_refused")

    def _lose(self, cause: InvalidationCause) -> InvalidationCause:
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
    current = counts.model_dump()
    return ShadowCounts(**{k: v + deltas.get(k, 0) for k, v in current.items()})


class _DaemonPool(Executor):
    """A fixed pool of daemon threads: a hanging candidate never holds up the process's exit.

    `ThreadPoolExecutor` joins its workers when the interpreter exits, so one
    candidate that never returns would keep a served process from stopping.
    """

    def __init__(self, max_workers: int, name: str) -> None:
        self._work: queue.SimpleQueue[tuple[Future[Any], Callable[[], Any]] | None] = (
            queue.SimpleQueue())
        self._threads = [threading.Thread(target=self._serve, name=f"{name}_{n}", daemon=True)
                         for n in range(max_workers)]
        self._lock = threading.Lock()
        self._started = False
        self._shut = False

    def submit(self, fn: Callable[..., _T], /, *args: Any, **kwargs: Any) -> Future[_T]:
        """Queue `fn(*args, **kwargs)` for the next free worker."""
        future: Future[_T] = Future()
        with self._lock:
            if self._shut:
                raise RuntimeError("the shadow pool is shut down")
            if not self._started:
                self._started = True
                for thread in self._threads:
                    thread.start()
            self._work.put((future, lambda: fn(*args, **kwargs)))
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Let each worker finish what it holds, then stop; `wait` joins them.

        With `cancel_futures`, work still queued is cancelled instead of run.
        """
        with self._lock:
            if self._shut:
                return
            self._shut = True
            started = self._started
        if not started:
            return
        if cancel_futures:
            while True:
                try:
                    item = self._work.get_nowait()
                except queue.Empty:
                    break
                if item is not None:
                    item[0].cancel()
        for _ in self._threads:
            self._work.put(None)
        if wait:
            self.join(None)

    def join(self, deadline: float | None) -> None:
        """Wait for the workers to end, until `deadline` (`time.monotonic`; None: no limit)."""
        for thread in self._threads:
            if not thread.is_alive():
                continue
            if deadline is None:
                thread.join()
            elif (left := deadline - time.monotonic()) > 0:
                thread.join(left)

    def _serve(self) -> None:
        while (item := self._work.get()) is not None:
            future, work = item
            if not future.set_running_or_notify_cancel():
                continue
            try:
                result = work()
            except BaseException as error:  # noqa: BLE001 - handed to the future's owner
                future.set_exception(error)
            else:
                future.set_result(result)


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
