"""Bulk extraction on Dask, for stores that outgrow one machine.

Each Dask worker process keeps its own isolated parser pool (started on its
first partition, closed when the process exits), so parsers never run inside
the Dask worker itself, exactly as they never run inside your application.
Outcomes come back as plain JSON-able records, one per input file.

Install with ``pip install 'capsa[dask]'``.
"""

from __future__ import annotations

import atexit
import os
import threading
from collections.abc import Iterable, Sequence
from typing import Any

from capsa.guard.bulk import extract_many
from capsa.guard.extract import Extracted, Omission
from capsa.guard.isolation import IsolatedExtractor
from capsa.guard.limits import DEFAULT_LIMITS, ExtractionLimits

__all__ = ["extract_bag", "outcome_record"]

_POOLS: dict[int, IsolatedExtractor] = {}
_LOCK = threading.Lock()


def extract_bag(paths_or_bag: Sequence[str | os.PathLike[str]] | Any, *,
                client: Any = None, limits: ExtractionLimits | None = None,
                npartitions: int | None = None) -> Any:
    """A Dask bag of outcome records, one per file.

    Args:
        paths_or_bag: file paths, or a `dask.bag.Bag` of paths.
        client: a `distributed.Client`; when given, the bag is persisted on
            its cluster (computation starts at once). Otherwise the bag is
            lazy and runs on whatever scheduler `.compute()` finds.
        limits: the guard's limits on every worker.
        npartitions: partitions for a list of paths (default: about 4 files each).

    Returns:
        A bag of dicts: ``{"outcome": "extracted", "label", "kind", "text",
        "sha256", ...}`` or ``{"outcome": "omitted", "label", "stage",
        "reason", "detail"}``.
    """
    try:
        import dask.bag as db
    except ImportError as exc:
        raise ImportError("extract_bag needs: pip install 'capsa[dask]'") from exc
    limits = limits or DEFAULT_LIMITS
    if isinstance(paths_or_bag, db.Bag):
        bag = paths_or_bag
    else:
        paths = [os.fspath(p) for p in paths_or_bag]
        parts = npartitions or max(1, (len(paths) + 3) // 4)
        bag = db.from_sequence(paths, npartitions=parts)  # type: ignore[no-untyped-call]
    limits_json = limits.model_dump_json()
    records = bag.map_partitions(_extract_partition, limits_json)  # type: ignore[no-untyped-call]
    return client.persist(records) if client is not None else records


def outcome_record(outcome: Extracted | Omission) -> dict[str, Any]:
    """An outcome as a flat JSON-able dict with an ``outcome`` key."""
    kind = "extracted" if isinstance(outcome, Extracted) else "omitted"
    return {"outcome": kind, **outcome.model_dump(mode="json")}


def _extract_partition(paths: Iterable[str], limits_json: str) -> list[dict[str, Any]]:
    limits = ExtractionLimits.model_validate_json(limits_json)
    pool = _process_pool()
    records = []
    for outcome in extract_many(list(paths), workers=1, limits=limits, extractor=pool):
        if isinstance(outcome, (Extracted, Omission)):
            records.append(outcome_record(outcome))
    return records


def _process_pool() -> IsolatedExtractor:
    with _LOCK:
        pool = _POOLS.get(os.getpid())
        if pool is None:
            from capsa.guard.extractors import default_router

            pool = IsolatedExtractor(default_router())
            atexit.register(pool.close)
            _POOLS[os.getpid()] = pool
        return pool
