"""The shadow recorder's threads: daemons, and replaceable when a candidate hangs.

`ThreadPoolExecutor` will not do here, for two reasons. It joins its workers
when the interpreter exits, so one candidate that never returns would keep a
served process from stopping; and a worker stuck in a candidate holds its
place in the pool for good, since Python cannot stop a thread. `DaemonPool`
runs daemon threads, and lets the recorder give a stuck worker up to its work
and start a fresh one in its place, within a bound.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any, TypeVar

__all__ = ["DaemonPool", "current_pool"]

_T = TypeVar("_T")

_worker = threading.local()
"""`_worker.pool`: the `DaemonPool` the current thread serves, if any."""


def current_pool() -> DaemonPool | None:
    """The pool whose worker this thread is; None on any other thread."""
    pool: DaemonPool | None = getattr(_worker, "pool", None)
    return pool


class DaemonPool(Executor):
    """A pool of daemon threads: a hanging candidate never holds up the process's exit.

    `ThreadPoolExecutor` joins its workers when the interpreter exits, so one
    candidate that never returns would keep a served process from stopping.
    A worker stuck past its deadline can be `abandon`ed: a fresh thread takes
    its place, at most `max_abandoned` abandoned threads run at once, and an
    abandoned thread ends when its work returns (or, if the bound left a
    stuck worker unreplaced, takes that worker's place).
    """

    def __init__(self, max_workers: int, name: str, *, max_abandoned: int = 0) -> None:
        self._work: queue.SimpleQueue[tuple[Future[Any], Callable[[], Any]] | None] = (
            queue.SimpleQueue())
        self._size, self._name, self._max_abandoned = max_workers, name, max_abandoned
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        """Every thread started, in order."""
        self._live: set[threading.Thread] = set()
        """Threads that take work."""
        self._stuck: set[threading.Thread] = set()
        """Live threads past a deadline that the bound kept from being replaced."""
        self._abandoned: set[threading.Thread] = set()
        """Threads given up and replaced; each ends when its work returns."""
        self.replaced = 0
        """Threads abandoned and replaced so far."""
        self._started = False
        self._shut = False

    @property
    def abandoned(self) -> int:
        """Abandoned threads still running."""
        with self._lock:
            return len(self._abandoned)

    def submit(self, fn: Callable[..., _T], /, *args: Any, **kwargs: Any) -> Future[_T]:
        """Queue `fn(*args, **kwargs)` for the next free worker."""
        future: Future[_T] = Future()
        with self._lock:
            if self._shut:
                raise RuntimeError("the shadow pool is shut down")
            if not self._started:
                self._started = True
                for _ in range(self._size):
                    self._spawn()
            self._work.put((future, lambda: fn(*args, **kwargs)))
        return future

    def abandon(self, thread: threading.Thread) -> bool:
        """Give `thread` up to the work it is stuck in; True when a fresh one replaced it.

        False when the bound on abandoned threads is reached (the pool runs one
        worker short until an abandoned thread returns) or the pool is shut.
        """
        with self._lock:
            if thread not in self._live or thread in self._stuck:
                return False
            if self._shut or len(self._abandoned) >= self._max_abandoned:
                self._stuck.add(thread)
                return False
            self._live.discard(thread)
            self._abandoned.add(thread)
            self._spawn()
            self.replaced += 1
            return True

    def _spawn(self) -> None:
        """Start one more live worker; under the lock."""
        thread = threading.Thread(target=self._serve, daemon=True,
                                  name=f"{self._name}_{len(self._threads)}")
        self._threads.append(thread)
        self._live.add(thread)
        thread.start()

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Let each worker finish what it holds, then stop; `wait` joins them.

        With `cancel_futures`, work still queued is cancelled instead of run.
        """
        with self._lock:
            if self._shut:
                return
            self._shut = True
            live = len(self._live) if self._started else 0
        if not live:
            return
        if cancel_futures:
            while True:
                try:
                    item = self._work.get_nowait()
                except queue.Empty:
                    break
                if item is not None:
                    item[0].cancel()
        for _ in range(live):
            self._work.put(None)
        if wait:
            for thread in self.joinable():
                thread.join()

    def joinable(self) -> list[threading.Thread]:
        """Live threads not stuck past a deadline: those a shutdown can wait for."""
        with self._lock:
            return [t for t in self._threads
                    if t in self._live and t not in self._stuck and t.is_alive()]

    def _serve(self) -> None:
        _worker.pool = self
        me = threading.current_thread()
        while (item := self._work.get()) is not None:
            future, work = item
            if future.set_running_or_notify_cancel():
                try:
                    result = work()
                except BaseException as error:  # noqa: BLE001 - handed to the future's owner
                    future.set_exception(error)
                else:
                    future.set_result(result)
            if not self._carry_on(me):
                return

    def _carry_on(self, me: threading.Thread) -> bool:
        """After each piece of work: False when this thread was abandoned and should end."""
        with self._lock:
            self._stuck.discard(me)
            if me not in self._abandoned:
                return True
            self._abandoned.discard(me)
            if self._shut or not self._stuck:
                return False
            # a worker left stuck by the bound: this thread takes its place, and it is
            # abandoned in its turn
            stuck = self._stuck.pop()
            self._live.discard(stuck)
            self._abandoned.add(stuck)
            self._live.add(me)
            self.replaced += 1
            return True
