"""Bulk extraction on Dask, for stores that outgrow one machine.

Each Dask worker process keeps its own isolated parser pool
(`capsa.guard.pools.shared_pool`: started on its first partition, reused by
every later one, closed when the process exits), so parsers never run inside
the Dask worker itself, exactly as they never run inside your application.
Each partition runs through `extract_many`, so a bag takes the same
extractor, limits and resumable manifest as a local run. Outcomes come back
as plain JSON-able records, one per input file.

Install with ``pip install 'capsa[dask]'``.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from capsa.errors import IngestionRejected
from capsa.guard.bulk import Skipped, extract_many
from capsa.guard.extract import Extracted, Omission, read_bounded
from capsa.guard.labels import safe_label
from capsa.guard.limits import ExtractionLimits
from capsa.guard.pools import shared_pool
from capsa.guard.port import TextExtractor
from capsa.guard.sandbox.pool import IsolatedExtractor

__all__ = ["extract_bag", "outcome_record"]

def extract_bag(paths_or_bag: Sequence[str | os.PathLike[str]] | Any, *,
                client: Any = None, limits: ExtractionLimits | None = None,
                extractor: TextExtractor | None = None,
                manifest: str | os.PathLike[str] | None = None,
                npartitions: int | None = None, hidden: bool = False) -> Any:
    """A Dask bag of outcome records, one per file.

    Args:
        paths_or_bag: file or directory paths (directories are walked here,
            sorted, and a symbolic link found in a walk is refused, as in
            `extract_many`), or a `dask.bag.Bag` of file paths.
        client: a `distributed.Client`; when given, the bag is persisted on
            its cluster (computation starts at once). Otherwise the bag is
            lazy and runs on whatever scheduler `.compute()` finds.
        limits: the guard's limits on every worker;
            `ExtractionLimits.for_ingestion()` when None.
        extractor: the parsers to run, pickled to every worker. Each worker
            process runs them inside its own `IsolatedExtractor` (an
            `IsolatedExtractor` given here contributes its inner extractor
            and worker count). None: the default parsers.
        manifest: a JSON-lines manifest every worker can reach (local or
            shared storage), as in `extract_many`: files it records as done
            come back as ``{"outcome": "skipped", ...}`` records and are not
            parsed again.
        npartitions: partitions for a list of paths (default: about 4 files each).
        hidden: walk dot files and folders too (``.git``, ``.env``), as
            `extract_many`'s `hidden`; skipped by default.

    Returns:
        A bag of dicts: ``{"outcome": "extracted", "label", "kind", "text",
        "sha256", "source", ...}``, ``{"outcome": "omitted", "label", "stage",
        "reason", "detail", "source"}`` or ``{"outcome": "skipped", "label",
        "sha256", "previous", "source"}``.

    Examples:
        >>> import dask.bag
        >>> from capsa.guard.extractors import PlainTextExtractor
        >>> folder = getfixture("tmp_path")
        >>> _ = (folder / "a.txt").write_text("alpha")
        >>> [(r["label"], r["outcome"], r["text"]) for r in extract_bag(
        ...     [folder], extractor=PlainTextExtractor()).compute(scheduler="sync")]
        [('a.txt', 'extracted', 'alpha')]
    """
    try:
        import dask.bag as db
    except ImportError as exc:
        raise ImportError("extract_bag needs: pip install 'capsa[dask]'") from exc
    limits = limits or ExtractionLimits.for_ingestion()
    refused: list[dict[str, Any]] = []
    if isinstance(paths_or_bag, db.Bag):
        bag = paths_or_bag
    else:
        paths = list(_walk(paths_or_bag, limits, refused, hidden))
        parts = npartitions or max(1, (len(paths) + 3) // 4)
        bag = db.from_sequence(paths, npartitions=parts)  # type: ignore[no-untyped-call]
    where = os.fspath(manifest) if manifest is not None else None
    # a fresh id per call: the files may have changed since an earlier call with
    # the same arguments, so dask must never hand back that call's results
    records = bag.map_partitions(  # type: ignore[no-untyped-call]
        _extract_partition, limits.model_dump_json(), _inner(extractor), where, uuid.uuid4().hex)
    if refused:
        records = db.concat([records, db.from_sequence(refused, npartitions=1)])  # type: ignore[no-untyped-call]
    return client.persist(records) if client is not None else records


def outcome_record(outcome: Extracted | Omission | Skipped) -> dict[str, Any]:
    """An outcome as a flat JSON-able dict with an ``outcome`` key."""
    kind = {Extracted: "extracted", Omission: "omitted"}.get(type(outcome), "skipped")
    return {"outcome": kind, **outcome.model_dump(mode="json")}


def _walk(sources: Iterable[str | os.PathLike[str]], limits: ExtractionLimits,
          refused: list[dict[str, Any]], hidden: bool) -> Iterator[str]:
    """Files to send to the workers; a symbolic link met in a walk is refused here, and
    dot names are left out unless `hidden` (as `extract_many` walks)."""
    for source in sources:
        path = Path(source)
        if not path.is_dir():
            yield os.fspath(source)
            continue
        for found in sorted(path.rglob("*")):
            if not hidden and any(part.startswith(".")
                                  for part in found.relative_to(path).parts):
                continue
            if found.is_symlink():
                label = safe_label(found.name)
                try:
                    read_bounded(found, limits, label=label, follow_symlinks=False)
                except IngestionRejected as error:
                    omission = Omission.from_error(error)
                    refused.append(outcome_record(omission.model_copy(
                        update={"source": str(found)})))
            elif found.is_file():
                yield str(found)


def _inner(extractor: TextExtractor | None) -> tuple[TextExtractor | None, int | None]:
    if isinstance(extractor, IsolatedExtractor):
        return extractor.inner, extractor.workers
    return extractor, None


def _extract_partition(paths: Iterable[str], limits_json: str,
                       parsers: tuple[TextExtractor | None, int | None],
                       manifest: str | None, call_id: str) -> list[dict[str, Any]]:
    limits = ExtractionLimits.model_validate_json(limits_json)
    inner, workers = parsers
    pool = shared_pool(inner, workers=workers)
    return [outcome_record(outcome) for outcome in extract_many(
        list(paths), workers=pool.workers, limits=limits, extractor=pool, manifest=manifest)]
