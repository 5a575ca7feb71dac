"""Bulk extraction: a whole document store through the isolated pool, resumably.

`extract_all` is for the handful of files attached to one prompt. A user
ingesting a folder of ten thousand files needs three more things: memory that
does not grow with the set (files are read only when a worker is about to
take them), results as they finish (not at the end), and a manifest so that a
run killed half-way resumes where it stopped instead of starting over.
"""

from __future__ import annotations

import contextvars
import hashlib
import json
import os
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar, overload

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
from capsa.guard.shapes import DocumentPart, Shape, check_shape, document_parts
from capsa.guard.sniff import media_type_for_name
from capsa.guard.walk import LinkRule, walk_files

__all__ = [
    "BulkSource", "ExtractedPart", "Skipped", "default_width", "display_name",
    "extract_many", "extracted_parts", "map_streaming", "pool_width",
]

T = TypeVar("T")
R = TypeVar("R")

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


class ExtractedPart(BaseModel):
    """One page or element of an extracted file, with the file's provenance.

    What `extract_many` yields in place of an `Extracted` with
    ``shape="page"`` or ``"element"``. A bare `DocumentPart` would not say
    which file it came from, and a pair ``(Extracted, DocumentPart)`` would
    carry the whole file's text beside every one of its 600 pages (and into
    every serialised record). This model carries the part and the fields
    that name its file, the same ones `Omission` and `Skipped` carry
    (`label`, `parent`, `source`), so `display_name` and the manifest's
    digest work on it unchanged, and `metadata` gives the keys `CapsaLoader`
    and `CapsaReader` put on the same part.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)
    label: str
    """The file's safe label (``mail.eml/invoice.pdf`` for an attachment)."""
    kind: str
    """The file's format, as on `Extracted`."""
    sha256: str
    """The file's digest: every part of one file has the same."""
    byte_size: int
    """The file's size in bytes."""
    parent: str | None = None
    """The label of the file this one was found in (an e-mail's), or None."""
    source: str | None = None
    """The path the file (or the file it was found in) was read from; None for bytes."""
    index: int
    """The part's position among its file's parts, from 0."""
    part: DocumentPart
    """The part itself: its id, text and unstructured's metadata keys."""

    @property
    def id(self) -> str:
        """The part's id, stable across runs (`DocumentPart.id`)."""
        return self.part.id

    @property
    def text(self) -> str:
        """The part's text, a span of its file's."""
        return self.part.text

    @property
    def metadata(self) -> dict[str, Any]:
        """The part's metadata as `CapsaLoader` gives it: unstructured's keys, ``source``
        and capsa's provenance (``capsa_label``, ``capsa_kind``, ``capsa_sha256``,
        ``capsa_bytes``, and ``capsa_parent`` for a file found inside another); a
        fresh dict on each call."""
        metadata: dict[str, Any] = {**self.part.metadata,
                                    "source": self.source or self.label}
        if self.parent is not None:
            metadata["capsa_parent"] = self.parent
        metadata.update(capsa_label=self.label, capsa_kind=self.kind,
                        capsa_sha256=self.sha256, capsa_bytes=self.byte_size)
        return metadata


def extracted_parts(item: Extracted, shape: Shape) -> tuple[ExtractedPart, ...]:
    """`item`'s parts in `shape` (`document_parts`), each with `item`'s provenance.

    The files found inside `item` are not included: `Extracted.flattened`
    gives them, and each has parts of its own.

    Examples:
        >>> from capsa.guard import Element
        >>> item = Extracted(label="r.pdf", kind="pdf", media_type=None, text="One\\n\\nTwo",
        ...                  byte_size=9, sha256="ab" * 32, source="in/r.pdf",
        ...                  elements=(Element(category="Title", start=0, end=3, page=1),
        ...                            Element(category="NarrativeText", start=5, end=8,
        ...                                    page=2)))
        >>> [(p.text, p.metadata["page_number"], p.source) for p in extracted_parts(item, "page")]
        [('One', 1, 'in/r.pdf'), ('Two', 2, 'in/r.pdf')]

    Raises:
        ValueError: `shape` is not one of `SHAPES`.
    """
    return tuple(ExtractedPart(label=item.label, kind=item.kind, sha256=item.sha256,
                               byte_size=item.byte_size, parent=item.parent,
                               source=item.source, index=index, part=part)
                 for index, part in enumerate(document_parts(item, shape)))


@overload
def extract_many(sources: Iterable[BulkSource], *, workers: int | None = None,
                 limits: ExtractionLimits | None = None,
                 extractor: TextExtractor | None = None,
                 manifest: str | os.PathLike[str] | None = None,
                 progress: bool = False, symlinks: LinkRule = "refuse",
                 hidden: bool = False, ordered: bool = False, shape: Literal["file"] = "file",
                 ) -> Iterator[Extracted | Omission | Skipped]: ...
@overload
def extract_many(sources: Iterable[BulkSource], *, workers: int | None = None,
                 limits: ExtractionLimits | None = None,
                 extractor: TextExtractor | None = None,
                 manifest: str | os.PathLike[str] | None = None,
                 progress: bool = False, symlinks: LinkRule = "refuse",
                 hidden: bool = False, ordered: bool = False, shape: Literal["page", "element"],
                 ) -> Iterator[ExtractedPart | Omission | Skipped]: ...
@overload
def extract_many(sources: Iterable[BulkSource], *, workers: int | None = None,
                 limits: ExtractionLimits | None = None,
                 extractor: TextExtractor | None = None,
                 manifest: str | os.PathLike[str] | None = None,
                 progress: bool = False, symlinks: LinkRule = "refuse",
                 hidden: bool = False, ordered: bool = False, shape: Shape = "file",
                 ) -> Iterator[Extracted | ExtractedPart | Omission | Skipped]: ...
def extract_many(sources: Iterable[BulkSource], *, workers: int | None = None,
                 limits: ExtractionLimits | None = None,
                 extractor: TextExtractor | None = None,
                 manifest: str | os.PathLike[str] | None = None,
                 progress: bool = False, symlinks: LinkRule = "refuse",
                 hidden: bool = False, ordered: bool = False, shape: Shape = "file",
                 ) -> Iterator[Extracted | ExtractedPart | Omission | Skipped]:
    """Stream many files through the guard; yield each outcome as it finishes.

    At most ``2 * workers`` files (``8 * workers`` when ordered) are held in
    memory at once; sources are consumed lazily, so a generator over a huge
    tree works. With `manifest` (a JSON-lines file, created if missing,
    appended as outcomes arrive), a rerun skips every file whose sha256 is
    recorded as extracted or refused by a guard, and retries those whose
    parser timed out, crashed or ran out of memory. Every input yields exactly
    one outcome, followed by one for each file found inside it (an e-mail's
    attachments, labelled ``mail.eml/invoice.pdf``); order is completion order
    (files finishing together keep input order), or input order with
    ``ordered=True``. Outcomes of files read from a path carry it as `source`,
    so two ``report.pdf`` in different folders stay apart.

    Args:
        sources: paths (directories are walked, sorted) or ``(name, bytes)`` pairs.
        workers: files parsed at once (feeding threads); None for the pool's
            width (`pool_width`): the workers of `extractor` when it is an
            `IsolatedExtractor`, `default_width()` for the private pool, one
            for an in-process extractor.
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
        hidden: walk files and folders whose names start with a dot too. By
            default a walked directory's ``.git``, ``.env`` and the like are
            not read, as `CapsaLoader`, `CapsaDirectoryReader`, LangChain's
            `DirectoryLoader` and `SimpleDirectoryReader` skip them: a token in
            a repository's config or a key in an environment file is not a
            document. A path given by name is read whatever it is called.
        ordered: yield in input order (a slow file then holds back the
            outcomes behind it, though they are parsed meanwhile); False
            (the default) yields each file as it finishes.
        shape: ``"file"`` (the default) yields each extracted file as one
            `Extracted`; ``"page"`` or ``"element"`` yields its parts instead
            (`ExtractedPart`, `capsa.guard.document_parts`: the pages or
            elements `CapsaLoader` would make documents of), one after another
            in reading order, before the next outcome; a file without
            structure is one part. Omissions and skips come through as they
            are, and the manifest and progress bar still count files.

    Raises:
        ValueError: `workers` is below one or `shape` names no shape; raised
            at the call, before any file is read.

    Examples:
        >>> from capsa.guard.extractors import PlainTextExtractor
        >>> outcomes = extract_many([("a.txt", b"alpha"), ("b.txt", b"")],
        ...                         extractor=PlainTextExtractor(), workers=1)
        >>> sorted(type(o).__name__ for o in outcomes)
        ['Extracted', 'Omission']
        >>> [(type(o).__name__, o.label) for o in extract_many(
        ...     [("a.txt", b"alpha")], extractor=PlainTextExtractor(), shape="page")]
        [('ExtractedPart', 'a.txt')]
    """
    if workers is not None and workers < 1:
        raise ValueError("workers must be at least 1")
    check_shape(shape)
    return _extract_many(sources, workers=workers, limits=limits, extractor=extractor,
                         manifest=manifest, progress=progress, symlinks=symlinks,
                         hidden=hidden, ordered=ordered, shape=shape)


def _extract_many(sources: Iterable[BulkSource], *, workers: int | None,
                  limits: ExtractionLimits | None, extractor: TextExtractor | None,
                  manifest: str | os.PathLike[str] | None, progress: bool,
                  symlinks: LinkRule, hidden: bool, ordered: bool, shape: Shape,
                  ) -> Iterator[Extracted | ExtractedPart | Omission | Skipped]:
    width = workers if workers is not None else pool_width(extractor)
    limits = limits or INGESTION_LIMITS
    own_pool = extractor is None
    pool: TextExtractor = extractor if extractor is not None else _default_pool(width, limits)
    book = _Manifest(Path(manifest)) if manifest is not None else None
    skip = Path(manifest).resolve() if manifest is not None else None
    bar = _Progress() if progress else None
    try:
        def work(index: int, source: BulkSource | _Walked) -> Extracted | Omission | Skipped:
            return _one(index, source, pool, limits, book)

        for outcome in map_streaming(work, _expand(sources, skip, symlinks, hidden), workers=width,
                                     ordered=ordered, threads=True):
            for found in _finish(outcome, bar):
                if shape != "file" and isinstance(found, Extracted):
                    yield from extracted_parts(found, shape)
                else:
                    yield found
    finally:
        if bar is not None:
            bar.close()
        if own_pool and isinstance(pool, IsolatedExtractor):
            pool.close()


def default_width() -> int:
    """The width of `default_extractor()`'s pool: two workers, or one on a single core."""
    return min(2, os.cpu_count() or 1)


def pool_width(extractor: TextExtractor | None) -> int:
    """How many files `extractor` can parse at once: what ``workers=None`` means everywhere.

    An `IsolatedExtractor` parses one file per worker; None stands for the
    default pool (`default_width`); any other extractor runs in this
    process, where capsa does not assume it is safe to call from two threads.

    Examples:
        >>> from capsa.guard.extractors import PlainTextExtractor
        >>> pool_width(IsolatedExtractor(PlainTextExtractor(), workers=3))
        3
        >>> pool_width(PlainTextExtractor())
        1
    """
    if isinstance(extractor, IsolatedExtractor):
        return extractor.workers
    if extractor is None:
        return default_width()
    return 1


def map_streaming(work: Callable[[int, T], R], items: Iterable[T], *, workers: int,
                  ordered: bool = False, window: int | None = None,
                  threads: bool | None = None) -> Iterator[R]:
    """Run ``work(index, item)`` for each item on `workers` threads; yield each result.

    The engine behind `extract_many` and the loaders' and readers' `workers`
    option: a file that takes a minute to parse must not hold every other
    file behind it, and a folder of ten thousand files must not be read into
    memory first. Items are pulled lazily, at most `window` ahead of what was
    yielded; results come out as they finish (results finishing together in
    input order), or exactly in input order with ``ordered=True``, where the
    files behind a slow one are parsed meanwhile and held until it is done.
    Each call runs in a copy of the caller's context (`contextvars`), as it
    would in the caller's thread.
    An exception raised by `work` is raised where its result would have been
    yielded; work not yet started is then cancelled. Closing the iterator
    early cancels what has not started and waits for what has.

    Args:
        work: called with the item's position and the item, in a worker thread.
        items: consumed lazily.
        workers: threads; with one (and `threads` not True) everything runs in
            the caller's thread, one item at a time, nothing read ahead.
        ordered: yield in input order instead of completion order.
        window: most items pulled but not yet yielded; ``2 * workers`` by
            default, ``8 * workers`` when ordered (so a slow first file does
            not leave the other workers idle after a few files).
        threads: force a thread pool even for one worker (so the next item is
            read while this one parses).

    Examples:
        >>> list(map_streaming(lambda i, x: x * 10, [1, 2, 3], workers=2, ordered=True))
        [10, 20, 30]
    """
    if workers < 1:
        raise ValueError("workers must be at least 1")
    if workers == 1 and not threads:
        for index, item in enumerate(items):
            yield work(index, item)
        return
    limit = window if window is not None else (8 if ordered else 2) * workers
    if limit < 1:
        raise ValueError("window must be at least 1")
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="capsa-stream")
    pending: set[Future[R]] = set()
    held: dict[int, Future[R]] = {}  # ordered: finished, waiting for an earlier item
    order: dict[Future[R], int] = {}
    next_out = 0

    def release(finished: set[Future[R]]) -> Iterator[R]:
        nonlocal next_out
        if not ordered:
            for future in sorted(finished, key=order.pop):
                yield future.result()
            return
        held.update((order.pop(future), future) for future in finished)
        while next_out in held:
            yield held.pop(next_out).result()
            next_out += 1

    try:
        for index, item in enumerate(items):
            while len(pending) + len(held) >= limit:
                finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                yield from release(finished)
            # each item runs in a copy of the caller's context, so a tracing span or
            # a tenant's context variable open around the loop reaches the work
            future = pool.submit(contextvars.copy_context().run, work, index, item)
            order[future] = index
            pending.add(future)
        while pending:
            finished, pending = wait(pending, return_when=FIRST_COMPLETED)
            yield from release(finished)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def display_name(outcome: Extracted | ExtractedPart | Omission | Skipped) -> str:
    """The file an outcome is about, as a person should read it, with what it was found in.

    A file found inside another is named by its own name and then its
    parents', the outermost by its path when it was read from one, so a
    refused attachment is never mistaken for the e-mail that carried it.

    Examples:
        >>> display_name(Omission(label="message.eml/profilephoto.png", parent="message.eml",
        ...                       stage="text", reason="no_text", detail="",
        ...                       source="inbox/message.eml"))
        'profilephoto.png in inbox/message.eml'
        >>> display_name(Omission(label="q3.pdf", stage="sniff", reason="type_mismatch",
        ...                       detail=""))
        'q3.pdf'
    """
    parent = getattr(outcome, "parent", None)
    if parent is None or not outcome.label.startswith(f"{parent}/"):
        return outcome.source or outcome.label
    names = outcome.label.split("/")
    outer = parent.split("/")
    top = outcome.source or outer[0]
    return " in ".join([*reversed(names[len(outer):]), *reversed(outer[1:]), top])


def _default_pool(workers: int, limits: ExtractionLimits) -> IsolatedExtractor:
    from capsa.guard.extractors import default_router

    return IsolatedExtractor(default_router(), workers=workers, limits=limits)


@dataclass(frozen=True, slots=True)
class _Walked:
    """A path found by walking a directory, with the link rule's refusal, if any."""

    path: Path
    refusal: IngestionRejected | None = None
    follow: bool = False
    """Whether the link rule follows links: with ``"refuse"`` the file is also read
    without following one, so a link swapped in after the walk checked it is refused."""
    root: Path | None = None
    """The folder walked: with ``"refuse"``, every folder from it down to the file is
    opened without following a link as well."""


def _expand(sources: Iterable[BulkSource], skip: Path | None, symlinks: LinkRule,
            hidden: bool) -> Iterator[BulkSource | _Walked]:
    for source in sources:
        if not isinstance(source, tuple) and Path(source).is_dir():
            yield from (_Walked(p, refusal, follow=symlinks != "refuse", root=Path(source))
                        for p, refusal in walk_files(source, "**/*", symlinks=symlinks,
                                                     hidden=hidden)
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
            payload = read_bounded(source.path, limits, label=label,
                                   follow_symlinks=source.follow, beneath=source.root)
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


def _finish(outcome: Extracted | Omission | Skipped, bar: _Progress | None
            ) -> Iterator[Extracted | Omission | Skipped]:
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
