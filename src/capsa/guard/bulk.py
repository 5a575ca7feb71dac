"""Bulk extraction: a whole document store through the isolated pool, resumably.

`extract_all` is for the handful of files attached to one prompt. A user
ingesting a folder of ten thousand files needs three more things: memory that
does not grow with the set (files are read only when a worker is about to
take them), results as they finish (not at the end), and a manifest so that a
run killed half-way resumes where it stopped instead of starting over.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from capsa.errors import ExtractionFailed, IngestionRejected
from capsa.guard.extract import (
    Attachment,
    Extracted,
    Omission,
    extract_attachment,
    read_bounded,
)
from capsa.guard.labels import safe_label
from capsa.guard.limits import INGESTION_LIMITS, ExtractionLimits
from capsa.guard.port import TextExtractor
from capsa.guard.sandbox.pool import IsolatedExtractor
from capsa.guard.sniff import media_type_for_name
from capsa.guard.walk import LinkRule, walk_files

__all__ = ["BulkSource", "Skipped", "extract_many"]

BulkSource = str | os.PathLike[str] | tuple[str, bytes]
"""A path (a directory is walked), or a ``(name, bytes)`` pair."""

_RETRYABLE: frozenset[str] = frozenset({"timeout", "memory_limit", "crashed", "protocol"})


class Skipped(BaseModel):
    """A file the manifest says an earlier run already finished."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)
    label: str
    """The safe label."""
    sha256: str
    """The payload's digest, the manifest's key."""
    previous: Literal["extracted", "omitted"]
    """What the earlier run recorded."""
    source: str | None = None
    """The path it was read from; None for bytes handed in."""


def extract_many(sources: Iterable[BulkSource], *, workers: int = 2,
                 limits: ExtractionLimits | None = None,
                 extractor: TextExtractor | None = None,
                 manifest: str | os.PathLike[str] | None = None,
                 progress: bool = False, symlinks: LinkRule = "refuse",
                 ) -> Iterator[Extracted | Omission | Skipped]:
    """Stream many files through the guard; yield each outcome as it finishes.

    At most ``2 * workers`` files are held in memory at once; sources are
    consumed lazily, so a generator over a huge tree works. With `manifest`
    (a JSON-lines file, created if missing, appended as outcomes arrive), a
    rerun skips every file whose sha256 is recorded as extracted or refused by
    a guard, and retries those whose parser timed out, crashed or ran out of
    memory. Every input yields exactly one outcome, followed by one for each
    file found inside it (an e-mail's attachments, labelled
    ``mail.eml/invoice.pdf``); order is completion order. Outcomes of files
    read from a path carry it as `source`, so two ``report.pdf`` in different
    folders stay apart.

    Args:
        sources: paths (directories are walked, sorted) or ``(name, bytes)`` pairs.
        workers: parallel isolated workers (and feeding threads).
        limits: `ExtractionLimits.for_ingestion()` when None: a folder holds
            books and long reports, not chat attachments.
        extractor: when None, a private `IsolatedExtractor` over the default
            parsers with `workers` workers, closed when the iterator finishes.
        manifest: path of the resumable manifest.
        progress: draw a rich progress bar on stderr.
        symlinks: the link rule for walked directories (`capsa.guard.walk`):
            ``"refuse"`` (default) reports each link as ``symlink``,
            ``"within_root"`` follows links that stay inside the directory,
            ``"follow"`` follows every link.

    Examples:
        >>> from capsa.guard.extractors import PlainTextExtractor
        >>> outcomes = extract_many([("a.txt", b"alpha"), ("b.txt", b"")],
        ...                         extractor=PlainTextExtractor(), workers=1)
        >>> sorted(type(o).__name__ for o in outcomes)
        ['Extracted', 'Omission']
    """
    if workers < 1:
        raise ValueError("workers must be at least 1")
    limits = limits or INGESTION_LIMITS
    own_pool = extractor is None
    pool: TextExtractor = extractor if extractor is not None else _default_pool(workers, limits)
    book = _Manifest(Path(manifest)) if manifest is not None else None
    skip = Path(manifest).resolve() if manifest is not None else None
    bar = _Progress() if progress else None
    try:
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="capsa-bulk") as threads:
            pending: set[Future[Extracted | Omission | Skipped]] = set()
            # files that finish together come out in the order they went in, so
            # one worker streams its outcomes in input order
            order: dict[Future[Extracted | Omission | Skipped], int] = {}
            # at most 2 * workers files are read and waiting at any moment
            for index, source in enumerate(_expand(sources, skip, symlinks)):
                if len(pending) >= 2 * workers:
                    done, pending = wait(pending, return_when=FIRST_COMPLETED)
                    yield from _finish(sorted(done, key=order.pop), bar)
                future = threads.submit(_one, index, source, pool, limits, book)
                order[future] = index
                pending.add(future)
            while pending:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                yield from _finish(sorted(done, key=order.pop), bar)
    finally:
        if bar is not None:
            bar.close()
        if own_pool and isinstance(pool, IsolatedExtractor):
            pool.close()


def _default_pool(workers: int, limits: ExtractionLimits) -> IsolatedExtractor:
    from capsa.guard.extractors import default_router

    return IsolatedExtractor(default_router(), workers=workers, limits=limits)


@dataclass(frozen=True, slots=True)
class _Walked:
    """A path found by walking a directory, with the link rule's refusal, if any."""

    path: Path
    refusal: IngestionRejected | None = None


def _expand(sources: Iterable[BulkSource], skip: Path | None, symlinks: LinkRule
            ) -> Iterator[BulkSource | _Walked]:
    for source in sources:
        if not isinstance(source, tuple) and Path(source).is_dir():
            yield from (_Walked(p, refusal) for p, refusal in
                        walk_files(source, "**/*", symlinks=symlinks)
                        if p.resolve() != skip)
        else:
            yield source


def _one(index: int, source: BulkSource | _Walked, pool: TextExtractor,
         limits: ExtractionLimits, book: _Manifest | None) -> Extracted | Omission | Skipped:
    outcome = _read_one(index, source, pool, limits, book)
    if isinstance(source, tuple):
        return outcome
    path = source.path if isinstance(source, _Walked) else Path(source)
    return outcome.model_copy(update={"source": str(path)})


def _read_one(index: int, source: BulkSource | _Walked, pool: TextExtractor,
              limits: ExtractionLimits, book: _Manifest | None
              ) -> Extracted | Omission | Skipped:
    if isinstance(source, tuple):
        name = source[0]
    else:
        name = (source.path if isinstance(source, _Walked) else Path(source)).name
    label = safe_label(name, index=index)
    try:
        if isinstance(source, tuple):
            payload = source[1]
        elif isinstance(source, _Walked):
            if source.refusal is not None:
                raise source.refusal
            payload = read_bounded(source.path, limits, label=label)
        else:
            payload = read_bounded(source, limits, label=label)
    except IngestionRejected as error:
        return Omission.from_error(error)
    except OSError as error:
        return Omission(label=label, stage="size", reason="corrupt",
                        detail=f"could not read the file: {error.strerror}")
    digest = hashlib.sha256(payload).hexdigest()
    previous = book.previous(digest) if book is not None else None
    if previous is not None:
        return Skipped(label=label, sha256=digest, previous=previous)
    outcome: Extracted | Omission
    try:
        outcome = extract_attachment(Attachment(label=label, media_type=media_type_for_name(name),
                                                payload=payload), pool, limits, index=index)
    except (IngestionRejected, ExtractionFailed) as error:
        outcome = Omission.from_error(error)
    if book is not None:
        book.record(digest, outcome)
    return outcome


def _finish(done: list[Future[Extracted | Omission | Skipped]], bar: _Progress | None
            ) -> Iterator[Extracted | Omission | Skipped]:
    for future in done:
        outcome = future.result()
        found = outcome.flattened() if isinstance(outcome, Extracted) else (outcome,)
        for item in found:
            if item is not outcome and outcome.source is not None:
                item = item.model_copy(update={"source": outcome.source})
            if bar is not None:
                bar.advance(item)
            yield item


class _Manifest:
    """sha256 -> outcome, as JSON lines; the last line for a digest wins."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lock = threading.Lock()
        self.done: dict[str, Literal["extracted", "omitted"]] = {}
        if path.exists():
            for line in path.read_text(encoding="utf-8").splitlines():
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue  # a line cut by a crash; that file is simply redone
                if not isinstance(entry, dict) or not isinstance(entry.get("sha256"), str):
                    continue
                if entry.get("outcome") == "extracted":
                    self.done[entry["sha256"]] = "extracted"
                elif entry.get("outcome") == "omitted" and entry.get("reason") not in _RETRYABLE:
                    self.done[entry["sha256"]] = "omitted"
                else:
                    self.done.pop(entry.get("sha256", ""), None)

    def previous(self, digest: str) -> Literal["extracted", "omitted"] | None:
        return self.done.get(digest)

    def record(self, digest: str, outcome: Extracted | Omission) -> None:
        entry: dict[str, str] = {"sha256": digest, "label": outcome.label}
        if isinstance(outcome, Extracted):
            entry["outcome"] = "extracted"
        else:
            entry.update(outcome="omitted", reason=outcome.reason, stage=outcome.stage)
        with self.lock, self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(entry) + "\n")


class _Progress:
    def __init__(self) -> None:
        from rich.console import Console
        from rich.progress import Progress

        self.progress = Progress(console=Console(stderr=True), transient=True)
        self.task = self.progress.add_task("extracting", total=None)
        self.counts = {"extracted": 0, "omitted": 0, "skipped": 0}
        self.progress.start()

    def advance(self, outcome: Extracted | Omission | Skipped) -> None:
        key = {"Extracted": "extracted", "Omission": "omitted"}.get(type(outcome).__name__,
                                                                    "skipped")
        self.counts[key] += 1
        self.progress.update(self.task, advance=1, description=", ".join(
            f"{v} {k}" for k, v in self.counts.items()))

    def close(self) -> None:
        self.progress.stop()
