"""One isolated parser pool per process and per set of parsers, for code that is pickled.

Framework adapters are pickled into worker processes (LlamaIndex's
``num_workers``, Dask partitions) and unpickled there once per task. Each
unpickled copy must not start a pool of its own: a pool costs a fork and
its self-tests, and one per task costs more than the parsing. `shared_pool`
hands every copy in a process the same pool for the same parsers.
"""

from __future__ import annotations

import atexit
import hashlib
import multiprocessing
import os
import pickle
import threading

from capsa.guard.extract import default_extractor
from capsa.guard.port import TextExtractor
from capsa.guard.sandbox.pool import IsolatedExtractor

__all__ = ["shared_pool"]

_POOLS: dict[tuple[int, str, int], IsolatedExtractor] = {}
_LOCK = threading.Lock()


def shared_pool(inner: TextExtractor | None = None, *, workers: int | None = None
                ) -> IsolatedExtractor:
    """This process's isolated pool over `inner`, started on first use, closed at exit.

    Two calls with equal parsers (same pickled bytes) and worker count get
    the same pool. With no `inner` and no `workers` in the main process this
    is `default_extractor()`. Inside a worker process of a
    `multiprocessing` pool the default is one parser worker: the framework
    already runs one such process per core, and two parser workers in each
    would only contend for the same cores.

    Args:
        inner: the parsers (picklable); None for the default router.
        workers: parser workers in the pool; None for the default above.

    Examples:
        >>> from capsa.guard.extractors import PlainTextExtractor
        >>> shared_pool(PlainTextExtractor()) is shared_pool(PlainTextExtractor())
        True
    """
    in_pool_worker = multiprocessing.parent_process() is not None
    if inner is None and workers is None and not in_pool_worker:
        return default_extractor()
    count = workers if workers is not None else (1 if in_pool_worker else
                                                  min(2, os.cpu_count() or 1))
    recipe = hashlib.sha256(pickle.dumps(inner)).hexdigest()
    key = (os.getpid(), recipe, count)
    with _LOCK:
        pool = _POOLS.get(key)
        if pool is None:
            if inner is None:
                from capsa.guard.extractors import default_router

                inner = default_router()
            pool = IsolatedExtractor(inner, workers=count)
            atexit.register(pool.close)
            _POOLS[key] = pool
        return pool
