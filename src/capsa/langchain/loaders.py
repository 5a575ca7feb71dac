"""Guarded extraction as a LangChain blob parser and document loader."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from pathlib import Path, PurePath
from typing import Any, Literal

from langchain_core.callbacks import BaseCallbackHandler, CallbackManager
from langchain_core.document_loaders import BaseBlobParser, BaseLoader
from langchain_core.documents import Document
from langchain_core.documents.base import Blob

from capsa.errors import ExtractionFailed, IngestionRejected
from capsa.guard import (
    Attachment,
    Extracted,
    ExtractionLimits,
    Omission,
    TextExtractor,
    extract_attachment,
    media_type_for_name,
    read_bounded,
    safe_label,
)
from capsa.guard.bulk import map_streaming, pool_width
from capsa.guard.shapes import DocumentPart, Shape, check_shape, document_parts
from capsa.guard.walk import LinkRule, walk_files

__all__ = ["CapsaBlobParser", "CapsaLoader", "Source"]

Source = str | os.PathLike[str] | tuple[str, bytes] | Blob
"""What `CapsaLoader` accepts: a path, a ``(name, bytes)`` pair, or a `Blob`."""

OMISSION_EVENT = "capsa.omission"


class CapsaBlobParser(BaseBlobParser):
    """Parse a `Blob` through capsa's guard: bounded, isolated, never a silent skip.

    The blob's size is checked before its bytes are read (a path-backed blob
    is read at most ``limits.max_bytes + 1`` bytes), its real type is sniffed,
    and the parser runs in an isolated worker. Each extracted file becomes one
    `Document` whose `id` is the payload's sha256 and whose metadata carries
    ``capsa_label``, ``capsa_kind``, ``capsa_sha256`` and ``capsa_bytes``,
    beside `UnstructuredLoader`'s ``filename``, ``filetype``, ``languages``
    and an e-mail's ``sent_from``, ``sent_to`` and ``subject``. With
    ``shape="page"`` it becomes one document per page (``page_number``), with
    ``shape="element"`` one per element (``category``, ``element_id``,
    ``parent_id``, ``page_number``, a table's ``text_as_html``), as
    `UnstructuredLoader` yields them (`capsa.guard.document_parts`).
    A refused file yields nothing, is appended to `omitted` with its reason,
    and is sent to `callbacks` as a ``capsa.omission`` custom event; with
    ``on_rejection="raise"`` the typed error is raised instead.

    The default limits are the ingestion preset
    (`ExtractionLimits.for_ingestion`): blob parsers feed loaders over whole
    corpora, where a 300-page report is ordinary.

    Setup:
        ``pip install 'capsa[langchain,unstructured,ocr]'``

    Instantiate:
        .. code-block:: python

            limits = ExtractionLimits.for_ingestion().model_copy(update={"max_pages": 50})
            parser = CapsaBlobParser(limits=limits)

    Examples:
        >>> from langchain_core.documents.base import Blob
        >>> from capsa.guard.extractors import PlainTextExtractor
        >>> parser = CapsaBlobParser(extractor=PlainTextExtractor())
        >>> [d.page_content for d in parser.lazy_parse(Blob.from_data(b"hi", path="a.txt"))]
        ['hi']
    """

    def __init__(self, *, extractor: TextExtractor | None = None,
                 limits: ExtractionLimits | None = None,
                 on_rejection: Literal["omit", "raise"] = "omit",
                 callbacks: Sequence[BaseCallbackHandler] | None = None,
                 shape: Shape = "file") -> None:
        if on_rejection not in ("omit", "raise"):
            raise ValueError("on_rejection must be 'omit' or 'raise'")
        self.shape = check_shape(shape)
        """One document per file, per page or per element (`capsa.guard.document_parts`)."""
        self.extractor = extractor
        self.limits = limits or ExtractionLimits.for_ingestion()
        self.on_rejection = on_rejection
        self.callbacks = list(callbacks or [])
        self.omitted: list[Omission] = []
        """Every blob that did not become a document, with its reason, in order.

        A parser has no notion of a load, so this list grows with every blob
        parsed; `CapsaLoader` starts a new one on each load."""

    def lazy_parse(self, blob: Blob) -> Iterator[Document]:
        """Yield the blob's document, or nothing (and record why)."""
        for outcome in self.outcomes(blob):
            if isinstance(outcome, Document):
                yield outcome
            else:
                self.record(outcome)

    def outcomes(self, blob: Blob) -> list[Document | Omission]:
        """The blob's documents and omissions, recording nothing: safe in any thread.

        `CapsaLoader` calls this from its worker threads and records the
        omissions as each file's outcomes reach the caller, so `omitted`
        follows the order documents are yielded in.

        Raises:
            IngestionRejected: with ``on_rejection="raise"``, a guard refused the blob.
            ExtractionFailed: with ``on_rejection="raise"``, the parser lost.
        """
        label = _blob_label(blob)
        where = str(blob.path) if blob.path is not None else None
        try:
            payload = _blob_bytes(blob, self.limits, label)
            declared = blob.mimetype or media_type_for_name(label)
            item = extract_attachment(Attachment(label=label, media_type=declared,
                                                 payload=payload),
                                      self.extractor, self.limits)
        except (IngestionRejected, ExtractionFailed) as error:
            return [self.refusal(error, where=where)]
        outcomes: list[Document | Omission] = []
        for found in item.flattened():  # the file, then any file found inside it
            if isinstance(found, Extracted):
                outcomes.extend(_to_document(found, blob, part)
                                for part in document_parts(found, self.shape))
            else:
                outcomes.append(found.model_copy(update={"source": where}))
        return outcomes

    def refuse(self, error: IngestionRejected | ExtractionFailed, *, where: str | None) -> None:
        """Record (or, with ``on_rejection="raise"``, raise) a refusal for the source `where`."""
        self.record(self.refusal(error, where=where))

    def refusal(self, error: IngestionRejected | ExtractionFailed, *,
                where: str | None) -> Omission:
        """The omission for a refusal of the source `where`, unrecorded; with
        ``on_rejection="raise"`` the error is raised instead."""
        if self.on_rejection == "raise":
            raise error
        return Omission.from_error(error).model_copy(update={"source": where})

    def record(self, omission: Omission) -> None:
        """Keep `omission` in `omitted` and report it through the callbacks."""
        self.omitted.append(omission)
        if self.callbacks:
            CallbackManager(handlers=self.callbacks).on_custom_event(
                OMISSION_EVENT, omission.model_dump(mode="json"))


class CapsaLoader(BaseLoader):
    """Load files, folders, ``(name, bytes)`` pairs or blobs through `CapsaBlobParser`.

    Behaves like LangChain's own `DirectoryLoader` where they overlap: a
    directory is walked with `glob` (recursively with ``recursive=True``, or
    through ``**`` in the pattern), hidden files and folders are skipped unless
    ``load_hidden=True``, and a bare string or path is one source, never a
    sequence of characters. Unlike it, nothing is skipped silently and one bad
    source never aborts the load: a missing path, a symbolic link the link
    rule refuses (`symlinks`, `capsa.guard.walk`: by default every link met
    in a walk, as ``symlink``) and every refused file are listed in `omitted`.

    Documents stream out as files are parsed (`lazy_load`), `workers` files
    at once (by default the pool's width: two for the default pool), so a
    900-page report does not hold every other file; sources are read only
    a few files ahead of the stream, and a path is stat-ed before it is
    opened. ``ordered=True`` (the default, and what `load` returns) keeps
    input order; ``ordered=False`` yields each file's documents as soon as
    it finishes. `alazy_load` does the same work in threads, so an event
    loop keeps running. The
    default limits are the ingestion preset (`ExtractionLimits.for_ingestion`):
    a loader reads a corpus, not a chat attachment.

    Setup:
        ``pip install 'capsa[langchain,unstructured,ocr]'``

    Instantiate:
        .. code-block:: python

            loader = CapsaLoader("inbox/")                    # a folder, walked
            loader = CapsaLoader(["a.pdf", "b.docx"])          # several paths
            loader = CapsaLoader("inbox/", glob="**/*.pdf")   # only PDFs
            loader = CapsaLoader("inbox/", shape="page")      # one document per page
            loader = CapsaLoader("inbox/", ordered=False)     # as files finish

    Examples:
        >>> from capsa.guard.extractors import PlainTextExtractor
        >>> loader = CapsaLoader([("a.txt", b"alpha"), ("b.txt", b"")],
        ...                      extractor=PlainTextExtractor())
        >>> [d.metadata["capsa_label"] for d in loader.load()]
        ['a.txt']
        >>> [(o.label, o.reason) for o in loader.omitted]
        [('b.txt', 'empty')]
    """

    def __init__(self, sources: Source | Iterable[Source], *,
                 extractor: TextExtractor | None = None,
                 limits: ExtractionLimits | None = None,
                 glob: str = "**/[!.]*", recursive: bool = False, load_hidden: bool = False,
                 on_rejection: Literal["omit", "raise"] = "omit",
                 callbacks: Sequence[BaseCallbackHandler] | None = None,
                 symlinks: LinkRule = "refuse", shape: Shape = "file",
                 workers: int | None = None, ordered: bool = True) -> None:
        if workers is not None and workers < 1:
            raise ValueError("workers must be at least 1")
        self.workers = workers
        """Files parsed at once; None for the pool's width (`capsa.guard.bulk.pool_width`)."""
        self.ordered = ordered
        """Yield in input order (True) or as files finish (False)."""
        self.sources: tuple[Source, ...] = _sources(sources)
        self.symlinks = symlinks
        self.glob = glob
        self.recursive = recursive
        self.load_hidden = load_hidden
        self.parser = CapsaBlobParser(extractor=extractor,
                                      limits=limits or ExtractionLimits.for_ingestion(),
                                      on_rejection=on_rejection, callbacks=callbacks,
                                      shape=shape)

    @property
    def omitted(self) -> list[Omission]:
        """Every source of the latest load that did not become a document, with its reason.

        Each load starts a new list; a list taken from an earlier load is left as it was.
        """
        return self.parser.omitted

    def lazy_load(self) -> Iterator[Document]:
        """Yield the documents of every source, `workers` files parsed at once.

        With ``ordered=True`` (the default) documents come in input order (a
        walked folder sorted); with ``ordered=False`` each file's documents
        come as soon as it is parsed, so a slow file holds nothing back.
        `omitted` grows in the same order, as each file's outcome arrives.
        """
        self.parser.omitted = []
        for outcomes in map_streaming(self._outcomes, self._jobs(), workers=self._width(),
                                      ordered=self.ordered):
            for outcome in outcomes:
                if isinstance(outcome, Document):
                    yield outcome
                else:
                    self.parser.record(outcome)

    def _width(self) -> int:
        return self.workers if self.workers is not None else pool_width(self.parser.extractor)

    def _jobs(self) -> Iterator[Blob | tuple[Path, IngestionRejected | Path]]:
        """Every file to parse: a blob; a walked path with the link rule's refusal; or,
        under ``symlinks="refuse"``, a walked path with the folder it was found in."""
        for source in self.sources:
            if isinstance(source, (str, os.PathLike)) and Path(source).is_dir():
                for path, refusal in self._walk(Path(source)):
                    if refusal is not None:
                        yield path, refusal
                    elif self.symlinks == "refuse":
                        yield path, Path(source)
                    else:
                        yield _to_blob(path)
            else:
                yield _to_blob(source)

    def _outcomes(self, index: int, job: Blob | tuple[Path, IngestionRejected | Path]
                  ) -> list[Document | Omission]:
        if isinstance(job, Blob):
            return self.parser.outcomes(job)
        path, found = job
        if isinstance(found, IngestionRejected):
            return [self.parser.refusal(found, where=str(path))]
        # Read here, without following a link swapped in for the file or a folder
        # below the root since the walk checked them, then parsed as the file's bytes.
        try:
            payload = _read(path, self.parser.limits, safe_label(path.name), beneath=found)
        except IngestionRejected as error:
            return [self.parser.refusal(error, where=str(path))]
        return self.parser.outcomes(Blob.from_data(payload, path=str(path)))

    async def alazy_load(self) -> AsyncIterator[Document]:
        """`lazy_load` with every read and parse in worker threads; the loop never waits.

        Documents arrive as `lazy_load` yields them: as files finish with
        ``ordered=False``, in input order otherwise.
        """
        documents = self.lazy_load()
        done = object()
        while (document := await asyncio.to_thread(next, documents, done)) is not done:
            assert isinstance(document, Document)
            yield document

    def _walk(self, folder: Path) -> list[tuple[Path, IngestionRejected | None]]:
        pattern = f"**/{self.glob}" if self.recursive else self.glob
        return list(walk_files(folder, pattern, symlinks=self.symlinks,
                               hidden=self.load_hidden))


def _sources(sources: Source | Iterable[Source]) -> tuple[Source, ...]:
    if isinstance(sources, (str, os.PathLike, Blob)):
        return (sources,)
    if (isinstance(sources, tuple) and len(sources) == 2 and isinstance(sources[0], str)
            and isinstance(sources[1], bytes)):
        return (sources,)
    return tuple(sources)


def _to_blob(source: Source) -> Blob:
    if isinstance(source, Blob):
        return source
    if isinstance(source, tuple):
        name, data = source
        return Blob.from_data(data, path=name, metadata={"source": name})
    return Blob.from_path(Path(source), guess_type=False)


def _blob_label(blob: Blob) -> str:
    source = blob.metadata.get("source") if blob.metadata else None
    if isinstance(blob.path, (str, PurePath)):
        return safe_label(PurePath(blob.path).name)
    return safe_label(str(source) if source is not None else "")


def _read(path: Path, limits: ExtractionLimits, label: str, *,
          beneath: Path | None = None) -> bytes:
    """`read_bounded`; with `beneath`, without following a link below that walked root."""
    try:
        return read_bounded(path, limits, label=label, follow_symlinks=beneath is None,
                            beneath=beneath)
    except OSError as error:  # missing, unreadable: this file's outcome, not the load's
        raise IngestionRejected(f"could not read the file: {error.strerror}", label=label,
                                stage="size", reason="corrupt") from error


def _blob_bytes(blob: Blob, limits: ExtractionLimits, label: str) -> bytes:
    if blob.data is None and blob.path is not None:
        return _read(Path(blob.path), limits, label)
    data = blob.data
    if isinstance(data, str):
        if len(data) > limits.max_bytes:  # every character is at least one byte
            raise IngestionRejected(f"at least {len(data)} bytes, over the limit of "
                                    f"{limits.max_bytes}", label=label, stage="size",
                                    reason="too_large")
        encoding = blob.encoding or "utf-8"
        try:
            data = data.encode(encoding)
        except (LookupError, UnicodeEncodeError) as error:  # this blob's outcome, not the load's
            raise IngestionRejected(f"its text cannot be written in its declared encoding "
                                    f"{encoding!r}: {error}", label=label, stage="size",
                                    reason="undecodable") from error
    return data or b""


def _to_document(item: Extracted, blob: Blob, part: DocumentPart) -> Document:
    metadata: dict[str, Any] = {**(blob.metadata or {}), **part.metadata}
    metadata.setdefault("source", blob.source or item.label)
    if item.parent is not None:
        metadata["capsa_parent"] = item.parent
    metadata.update({
        "capsa_label": item.label,
        "capsa_kind": item.kind,
        "capsa_sha256": item.sha256,
        "capsa_bytes": item.byte_size,
    })
    return Document(id=part.id, page_content=part.text, metadata=metadata)
