"""Guarded extraction as a LlamaIndex reader."""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import os
import shutil
import tempfile
import weakref
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from llama_index.core.instrumentation.events import BaseEvent
from llama_index.core.readers.base import BasePydanticReader
from llama_index.core.readers.file.base import default_file_metadata_func
from llama_index.core.schema import Document, MetadataMode
from llama_index_instrumentation import get_dispatcher
from pydantic import ConfigDict, Field, PrivateAttr, model_validator

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
from capsa.guard.pools import shared_pool
from capsa.guard.sandbox.pool import IsolatedExtractor
from capsa.guard.shapes import DocumentPart, Shape, document_parts
from capsa.guard.walk import LinkRule, check_link, walk_files

if TYPE_CHECKING:
    from capsa.llama_index.transforms import CapsaTransform

__all__ = ["CapsaDirectoryReader", "CapsaOmissionEvent", "CapsaReader"]

_dispatcher = get_dispatcher(__name__)


class CapsaOmissionEvent(BaseEvent):
    """A file the reader refused, with the reason a program can switch on."""

    label: str
    stage: str
    reason: str
    detail: str
    source: str | None = None
    parent: str | None = None
    """The label of the file this one was found in (an e-mail's); None for a top-level file."""

    @classmethod
    def class_name(cls) -> str:
        """Stable name for instrumentation handlers."""
        return "CapsaOmissionEvent"


class CapsaReader(BasePydanticReader):
    """Read files through capsa's guard; usable as a `SimpleDirectoryReader` file extractor.

    `SimpleDirectoryReader` catches a reader's exceptions and prints "Failed
    to load file ... Skipping", so a hostile or broken file vanishes. This
    reader never leaves it at that: each refused file (a missing one too) is
    recorded in `omitted` with its stage, reason and path, and emitted as a
    `CapsaOmissionEvent`; with ``on_rejection="raise"`` (and
    ``raise_on_error=True`` on the directory reader) the typed error stops
    the load instead.

    ``SimpleDirectoryReader(..., num_workers=N)`` pickles the reader into N
    spawned processes. The copies there write their omissions to a spool
    directory this reader owns, and `omitted` here reads it back, so nothing
    refused in a worker is lost; the instrumentation events of those files
    fire in the worker processes. A custom extractor survives the pickling
    (an `IsolatedExtractor` arrives as its inner parsers, each process
    running them in one pool of its own, `capsa.guard.pools.shared_pool`).

    `SimpleDirectoryReader` calls the reader once per file, so a load of a
    folder is many calls: `omitted` therefore gathers every call since the
    reader was built, and `reset()` starts it over.

    The default limits are the ingestion preset
    (`ExtractionLimits.for_ingestion`). `aload_data` and `alazy_load_data`
    do all their reading and parsing in worker threads.

    A call with several files parses `workers` of them at once (by default
    the pool's width: two for the default pool), so one long report does not
    hold the others; documents come in input order (``ordered=True``, the
    default) or as each file finishes (``ordered=False``).

    Symbolic links follow capsa's one link rule (`capsa.guard.walk`):
    ``symlinks="refuse"`` (the default) refuses a file that is a link as
    ``symlink``, even when `SimpleDirectoryReader`'s walk handed it over;
    ``"within_root"`` follows links that stay inside `root`; ``"follow"``
    follows every link.

    Give it to `SimpleDirectoryReader` for *every* extension, or the files it
    does not map go through LlamaIndex's own, unguarded readers; simpler,
    use `CapsaDirectoryReader`, which reads every file of a folder through
    the guard whatever its extension.

    Documents get ``capsa_label``, ``capsa_kind``, ``capsa_sha256`` and
    ``capsa_bytes`` metadata, beside unstructured's ``filename``, ``filetype``,
    ``languages`` and an e-mail's ``sent_from``, ``sent_to`` and ``subject``.
    ``shape="page"`` gives one document per page with ``page_label`` (as
    LlamaIndex's PDF reader writes it) and ``page_number``; ``shape="element"``
    one per element. Only the page, category, heading, e-mail headers and
    ``file_path`` reach the LLM and embedding text; every other key is excluded.

    Setup:
        ``pip install 'capsa[llama-index,unstructured,ocr]'``

    Usage:
        .. code-block:: python

            reader = CapsaReader()
            docs = CapsaDirectoryReader("inbox/", reader=reader).load_data()
            reader.omitted   # [Omission(label='q3.pdf', stage='archive', ...)]

    Examples:
        >>> from capsa.guard.extractors import PlainTextExtractor
        >>> folder = getfixture("tmp_path")
        >>> _ = (folder / "a.txt").write_text("alpha")
        >>> reader = CapsaReader(extractor=PlainTextExtractor())
        >>> [d.text for d in reader.load_data([folder / "a.txt", folder / "gone.txt"])]
        ['alpha']
        >>> [(o.label, o.reason) for o in reader.omitted]
        [('gone.txt', 'corrupt')]
    """

    model_config = ConfigDict(extra="forbid")
    """A misspelt setting (``limit=``) is refused, not ignored: the limits are the guard."""

    is_remote: bool = False
    limits: ExtractionLimits = Field(default_factory=ExtractionLimits.for_ingestion)
    on_rejection: Literal["omit", "raise"] = "omit"
    symlinks: LinkRule = "refuse"
    """The link rule (`capsa.guard.walk`): refuse links, follow those inside `root`, or all."""
    root: str | None = None
    """The folder links must stay inside with ``symlinks="within_root"``."""
    shape: Shape = "file"
    """One document per file, per page (``page_label``) or per element (``category``,
    ``element_id``, ``parent_id``, a table's ``text_as_html``): `capsa.guard.document_parts`."""
    workers: int | None = Field(default=None, ge=1)
    """Files parsed at once by one call; None for the pool's width
    (`capsa.guard.bulk.pool_width`: two for the default pool)."""
    ordered: bool = True
    """Yield in input order (True) or each file's documents as it finishes (False)."""
    _extractor: TextExtractor | None = PrivateAttr(default=None)
    _omitted: list[Omission] = PrivateAttr(default_factory=list)
    _spool: str | None = PrivateAttr(default=None)
    _owner: int = PrivateAttr(default_factory=os.getpid)

    def __init__(self, *, extractor: TextExtractor | None = None, **data: Any) -> None:
        super().__init__(**data)
        self._extractor = extractor

    @model_validator(mode="after")
    def _rule_has_a_root(self) -> CapsaReader:
        if self.symlinks == "within_root" and self.root is None:
            raise ValueError("symlinks='within_root' needs root=, the folder links must stay in")
        return self

    @classmethod
    def class_name(cls) -> str:
        """Stable name for serialisation and caches."""
        return "CapsaReader"

    @property
    def omitted(self) -> list[Omission]:
        """Every file refused since the reader was built or `reset`, worker processes' too.

        This process's own refusals come first, in order, then each worker
        process's, in the order that process met them.
        """
        spooled: list[Omission] = []
        if self._spool is not None and os.getpid() == self._owner:
            for part in sorted(Path(self._spool).glob("*.jsonl")):
                spooled.extend(_spooled(part))
        return [*self._omitted, *spooled]

    def reset(self) -> None:
        """Forget every omission recorded so far, here and in the spool."""
        self._omitted = []
        if self._spool is not None and os.getpid() == self._owner:
            for part in Path(self._spool).glob("*.jsonl"):
                part.unlink()

    def __reduce__(self) -> tuple[Any, ...]:
        # BaseComponent's pickling drops private attributes (the extractor);
        # rebuild from the fields, the extractor's parsers and the spool instead.
        fields = {name: getattr(self, name) for name in type(self).model_fields}
        return (_rebuild_reader, (fields, _portable(self._extractor), self._spool_path(),
                                  self._owner))

    def lazy_load_data(self, file: str | Path | Iterable[str | Path] | None = None,
                       extra_info: dict[str, Any] | None = None, fs: Any = None,
                       **kwargs: Any) -> Iterable[Document]:
        """Yield one document per file that passes every guard.

        Args:
            file: a path or several (``input_file`` is accepted too, as
                `SimpleDirectoryReader` spells it).
            extra_info: metadata merged into every document.
            fs: an fsspec filesystem to read from instead of the local disk.
        """
        target = file if file is not None else kwargs.get("input_file")
        if target is None:
            raise ValueError("CapsaReader needs a file path")
        paths = [target] if isinstance(target, (str, os.PathLike)) else list(target)
        # SimpleDirectoryReader calls once per file: one file needs no threads
        width = 1 if len(paths) == 1 else None
        yield from self._stream(((Path(path), extra_info) for path in paths), fs, workers=width)

    def _stream(self, jobs: Iterable[tuple[Path, dict[str, Any] | None]], fs: Any = None,
                *, workers: int | None = None, ordered: bool | None = None
                ) -> Iterator[Document]:
        """Each job's documents, `workers` files at once; omissions recorded as they arrive."""
        width = workers if workers is not None else self.workers
        if width is None:
            width = pool_width(self._extractor)
        in_order = self.ordered if ordered is None else ordered
        for outcomes in map_streaming(lambda index, job: self._outcomes(index, *job, fs),
                                      jobs, workers=width, ordered=in_order):
            for outcome in outcomes:
                if isinstance(outcome, Document):
                    yield outcome
                else:
                    self._record(outcome)

    def _outcomes(self, index: int, path: Path, extra_info: dict[str, Any] | None,
                  fs: Any) -> list[Document | Omission]:
        """One file's documents and omissions, recording nothing: safe in any thread."""
        label = safe_label(path.name, index=index)
        try:
            if fs is None:
                refusal = check_link(path, symlinks=self.symlinks, root=self.root)
                if refusal is not None:
                    raise refusal
            payload = self._read(path, label, fs)
            declared = media_type_for_name(label)
            item = extract_attachment(Attachment(label=label, media_type=declared,
                                                 payload=payload),
                                      self._extractor, self.limits, index=index)
        except (IngestionRejected, ExtractionFailed) as error:
            if self.on_rejection == "raise":
                raise
            return [Omission.from_error(error).model_copy(update={"source": str(path)})]
        outcomes: list[Document | Omission] = []
        for found in item.flattened():  # the file, then any file found inside it
            if isinstance(found, Omission):
                outcomes.append(found.model_copy(update={"source": str(path)}))
                continue
            outcomes.extend(_to_document(found, part, extra_info)
                            for part in document_parts(found, self.shape))
        return outcomes

    async def alazy_load_data(self, *args: Any, **load_kwargs: Any) -> Iterable[Document]:
        """Every document of `lazy_load_data`, read and parsed in a worker thread.

        The base class hands back the generator itself, whose work would then
        run on the event loop as the caller iterates it.
        """
        return await asyncio.to_thread(lambda: list(self.lazy_load_data(*args, **load_kwargs)))

    async def aload_data(self, *args: Any, **load_kwargs: Any) -> list[Document]:
        """`load_data` in a worker thread; the event loop keeps running."""
        return await asyncio.to_thread(self.load_data, *args, **load_kwargs)

    def refuse(self, error: IngestionRejected | ExtractionFailed, source: str) -> None:
        """Record (or with ``on_rejection="raise"``, raise) a refusal of the file at `source`."""
        if self.on_rejection == "raise":
            raise error
        self._record(Omission.from_error(error).model_copy(update={"source": source}))

    def _record(self, omission: Omission) -> None:
        if os.getpid() == self._owner or self._spool is None:
            self._omitted.append(omission)
        else:  # a pickled copy in a worker process: hand it to the owner through the spool
            part = Path(self._spool) / f"{os.getpid()}.jsonl"
            with part.open("a", encoding="utf-8") as handle:
                handle.write(omission.model_dump_json() + "\n")
        _dispatcher.event(CapsaOmissionEvent(**omission.model_dump(mode="json")))

    def _spool_path(self) -> str:
        if self._spool is None:
            self._spool = tempfile.mkdtemp(prefix="capsa-omissions-")
            weakref.finalize(self, shutil.rmtree, self._spool, True)
        return self._spool

    def _read(self, path: Path, label: str, fs: Any) -> bytes:
        try:
            if fs is None:  # with "refuse", read without following a link swapped in since
                return read_bounded(path, self.limits, label=label,
                                    follow_symlinks=self.symlinks != "refuse", beneath=self.root)
            return self._read_from(fs, path, label)
        except OSError as error:  # missing, unreadable: this file's outcome, not the load's
            raise IngestionRejected(f"could not read the file: {error.strerror or error}",
                                    label=label, stage="size", reason="corrupt") from error

    def _read_from(self, fs: Any, path: Path, label: str) -> bytes:
        size = int(fs.info(str(path)).get("size", 0))
        if size > self.limits.max_bytes:
            raise IngestionRejected(f"{size} bytes, over the limit of {self.limits.max_bytes}",
                                    label=label, stage="size", reason="too_large")
        with fs.open(str(path), "rb") as handle:
            data: bytes = handle.read(self.limits.max_bytes + 1)
        if len(data) > self.limits.max_bytes:
            raise IngestionRejected(f"{len(data)} bytes, over the limit of "
                                    f"{self.limits.max_bytes}", label=label, stage="size",
                                    reason="too_large")
        return data


_SHOWN = frozenset({"page_label", "page_number", "category", "capsa_heading", "subject",
                    "sent_from", "sent_to", "file_path"})
"""Metadata the LLM and the embedding see; every other key (capsa's provenance, ids,
a table's HTML, languages) is kept out of both, as `SimpleDirectoryReader` keeps
its file dates and sizes out."""


def _to_document(found: Extracted, part: DocumentPart,
                 extra_info: dict[str, Any] | None, id_: str | None = None) -> Document:
    """One part as a LlamaIndex document: its page as ``page_label`` as LlamaIndex's PDF
    reader writes it, capsa's provenance, and the big or opaque keys hidden. Its id is
    `id_`, or the part's own (a digest of its content)."""
    metadata = {**(extra_info or {}), **part.metadata, "capsa_label": found.label,
                "capsa_kind": found.kind, "capsa_sha256": found.sha256,
                "capsa_bytes": found.byte_size}
    if "page_number" in part.metadata:
        metadata["page_label"] = str(part.metadata["page_number"])
    if found.parent is not None:
        metadata["capsa_parent"] = found.parent
    hidden = [key for key in metadata if key not in _SHOWN]
    return Document(text=part.text, id_=id_ if id_ is not None else part.id, metadata=metadata,
                    excluded_llm_metadata_keys=hidden, excluded_embed_metadata_keys=hidden)


def _spooled(part: Path) -> Iterator[Omission]:
    for line in part.read_text(encoding="utf-8").splitlines():
        try:
            yield Omission.model_validate_json(line)
        except ValueError:
            continue  # a line a worker is still writing


def _portable(extractor: TextExtractor | None) -> tuple[TextExtractor | None, int | None]:
    """An extractor as something that pickles: a pool travels as its parsers and size."""
    if isinstance(extractor, IsolatedExtractor):
        return extractor.inner, extractor.workers
    return extractor, None


def _rebuild_reader(fields: dict[str, Any], parsers: tuple[TextExtractor | None, int | None],
                    spool: str, owner: int) -> CapsaReader:
    inner, workers = parsers
    # the default parsers and any pool run in this process's one shared pool;
    # a bare extractor stays in-process, as its owner chose
    use_pool = workers is not None or inner is None
    extractor = shared_pool(inner, workers=workers) if use_pool else inner
    reader = CapsaReader(extractor=extractor, **fields)
    reader._spool, reader._owner = spool, owner
    return reader


class CapsaDirectoryReader(BasePydanticReader):
    """Read every file of a folder through capsa's guard, whatever its extension.

    `SimpleDirectoryReader` runs LlamaIndex's own readers (pypdf, docx2txt,
    pandas, ...) in this process for every extension its `file_extractor`
    does not map, so a folder with one unmapped zip-bomb DOCX or XLSX is parsed
    unguarded. This reader walks the folder itself and hands every file, of any
    extension, to a `CapsaReader`: one guarded path, no default reader behind it.

    Links follow capsa's one link rule (`capsa.guard.walk`): by default every
    symbolic link met is refused as ``symlink``; ``symlinks="within_root"``
    follows links that stay inside the folder, ``"follow"`` every link.

    Documents carry ``file_path``, ``file_name``, ``file_type``, ``file_size``,
    ``creation_date`` and ``last_modified_date`` metadata, as
    `SimpleDirectoryReader` writes them, beside capsa's provenance keys;
    ``shape="page"`` or ``"element"`` sets the inner reader's `shape`. With
    ``defer=True`` nothing is parsed here: each file becomes an empty
    placeholder (``capsa_pending``), whose id is the file's path, that
    `CapsaTransform` reads in an `IngestionPipeline`, in parallel
    (``num_workers``), into the documents this reader would have made; build
    it with `transform`, which carries the reader's limits and shape (a
    transform set up otherwise refuses the placeholders rather than reading
    them under other limits). A document's id is otherwise its content's digest, the
    same for two copies of one file; ``filename_as_id=True`` names it by its
    path as `SimpleDirectoryReader` does, for docstore upserts of edited files.

    Refusals are in `omitted` (the inner reader's) and fire `CapsaOmissionEvent`.
    Files are parsed `workers` at once, in sorted walk order or, with
    ``ordered=False``, as each finishes; both default to the inner reader's.

    Usage:
        .. code-block:: python

            reader = CapsaDirectoryReader("inbox/")
            docs = reader.load_data()
            reader.omitted   # every file not read, with its reason

    Examples:
        >>> from capsa.guard.extractors import PlainTextExtractor
        >>> folder = getfixture("tmp_path")
        >>> _ = (folder / "a.md").write_text("alpha"); _ = (folder / "b.xyz").write_text("beta")
        >>> reader = CapsaDirectoryReader(str(folder), reader=CapsaReader(
        ...     extractor=PlainTextExtractor()))
        >>> [d.metadata["file_name"] for d in reader.load_data()]
        ['a.md', 'b.xyz']
    """

    model_config = ConfigDict(extra="forbid")

    is_remote: bool = False
    input_dir: str
    """The folder to read."""
    recursive: bool = True
    """Read sub-folders too."""
    load_hidden: bool = False
    """Read files and folders whose names start with a dot."""
    symlinks: LinkRule = "refuse"
    """The link rule (`capsa.guard.walk`)."""
    defer: bool = False
    """Yield unparsed placeholders for `CapsaTransform` instead of parsing here."""
    shape: Shape | None = None
    """One document per file, page or element; None keeps the given reader's `shape`."""
    workers: int | None = Field(default=None, ge=1)
    """Files parsed at once; None for the reader's own setting, then the pool's width."""
    ordered: bool | None = None
    """Input (sorted walk) order, or as files finish; None for the reader's own setting."""
    filename_as_id: bool = False
    """Name each document by its file, as `SimpleDirectoryReader(filename_as_id=True)` does:
    the path for a file that gives one document, ``<path>_part_<n>`` for each of several.
    An edited file then keeps its ids, so `DocstoreStrategy.UPSERTS` replaces it
    instead of keeping the old version beside the new; by default a document's id is its
    content's digest (`capsa.guard.document_parts`)."""
    _reader: CapsaReader = PrivateAttr()

    def __init__(self, input_dir: str | os.PathLike[str] | None = None, *,
                 reader: CapsaReader | None = None, **data: Any) -> None:
        if input_dir is not None:
            data["input_dir"] = os.fspath(input_dir)
        super().__init__(**data)
        if not Path(self.input_dir).is_dir():
            raise ValueError(f"CapsaDirectoryReader needs a folder, got {self.input_dir!r}")
        base = reader if reader is not None else CapsaReader()
        self._reader = base.model_copy(update={"symlinks": self.symlinks,
                                               "root": self.input_dir,
                                               "shape": self.shape or base.shape})
        self._reader._extractor = base._extractor

    @classmethod
    def class_name(cls) -> str:
        """Stable name for serialisation and caches."""
        return "CapsaDirectoryReader"

    @property
    def omitted(self) -> list[Omission]:
        """Every file refused since the reader was built, with its reason."""
        return self._reader.omitted

    def lazy_load_data(self, *args: Any, **load_kwargs: Any) -> Iterable[Document]:
        """Yield the documents of every file of the folder that passes the guard.

        Files are parsed `workers` at once; the order follows `ordered`
        (sorted walk order, or as files finish).
        """
        if self.defer:
            settings = pending_settings(self._reader.limits, self._reader.shape)
            for path, refusal in self._walk():
                if refusal is not None:
                    self._reader.refuse(refusal, str(path))
                else:
                    yield _pending(path, _file_info(
                        path, {"file_path": str(path), "file_name": path.name}), settings)
            return
        documents = self._reader._stream(self._jobs(), workers=self.workers,
                                         ordered=self.ordered)
        if not self.filename_as_id:
            yield from documents
            return
        # each file's documents arrive together, whatever the order of the files
        for path, group in itertools.groupby(documents, lambda d: d.metadata.get("file_path")):
            parts = list(group)
            for number, document in enumerate(parts):
                document.id_ = str(path) if len(parts) == 1 else f"{path}_part_{number}"
                yield document

    def _walk(self) -> Iterator[tuple[Path, IngestionRejected | None]]:
        pattern = "**/*" if self.recursive else "*"
        return walk_files(self.input_dir, pattern, symlinks=self.symlinks,
                          hidden=self.load_hidden)

    def _jobs(self) -> Iterator[tuple[Path, dict[str, Any] | None]]:
        """Every walked file with its metadata; a refused link is recorded as it is met."""
        for path, refusal in self._walk():
            if refusal is not None:
                self._reader.refuse(refusal, str(path))
            else:
                yield path, _file_info(path, {"file_path": str(path), "file_name": path.name})

    async def aload_data(self, *args: Any, **load_kwargs: Any) -> list[Document]:
        """`load_data` in a worker thread; the event loop keeps running."""
        return await asyncio.to_thread(self.load_data, *args, **load_kwargs)

    def transform(self) -> CapsaTransform:
        """The `CapsaTransform` that reads this reader's placeholders as it would have:
        the same limits and shape (a transform with others refuses them)."""
        from capsa.llama_index.transforms import CapsaTransform

        return CapsaTransform(limits=self._reader.limits, shape=self._reader.shape)


def pending_settings(limits: ExtractionLimits, shape: Shape) -> str:
    """What a placeholder records of the reader that deferred it (``capsa_pending``): the
    shape and a digest of the limits, so a transform set up otherwise can tell."""
    digest = hashlib.sha256(limits.model_dump_json().encode()).hexdigest()[:16]
    return f"shape={shape};limits={digest}"


def _file_info(path: Path, info: dict[str, Any]) -> dict[str, Any]:
    """`SimpleDirectoryReader`'s file metadata (type, size, dates) under its own names."""
    try:
        found: dict[str, Any] = default_file_metadata_func(str(path))
    except OSError:  # gone since the walk: the reader records why
        return info
    return {**found, **info}


def _pending(path: Path, info: dict[str, Any], settings: str) -> Document:
    """An unparsed placeholder for `CapsaTransform`; size and time make an edit miss its cache.

    It carries `SimpleDirectoryReader`'s file metadata, which the documents read from
    it keep, the file's modification time to the nanosecond (``capsa_mtime_ns``, which
    they do not), and the deferring reader's settings (`pending_settings`). Its id is
    the file's path, so the same folder read twice gives the same ids and a docstore's
    upserts (`DocstoreStrategy.UPSERTS`) replace an edited file's documents rather than
    adding every file again; `CapsaTransform` keeps the id.
    """
    stat = path.stat()
    metadata = {**info, "file_size": stat.st_size, "capsa_mtime_ns": stat.st_mtime_ns,
                "capsa_pending": settings}
    hidden = list(metadata)
    return _Placeholder(text="", id_=str(path), metadata=metadata,
                    excluded_llm_metadata_keys=hidden, excluded_embed_metadata_keys=hidden)


class _Placeholder(Document):
    """A `Document` whose full content shows its metadata even with no text.

    `IngestionPipeline`'s cache keys a batch by ``get_content(MetadataMode.ALL)``,
    which for an empty text leaves the metadata out: every batch of empty
    placeholders would share one key, and a second run (an edited file, another
    folder) would be served the first run's extraction. Stored or pickled, it is
    a plain `Document` (same class name and fields).
    """

    def get_content(self, metadata_mode: MetadataMode = MetadataMode.NONE) -> str:
        """The text; with an empty text and ``MetadataMode.ALL``, the metadata instead."""
        if self.text_resource is not None or metadata_mode != MetadataMode.ALL:
            return super().get_content(metadata_mode=metadata_mode)
        return self.get_metadata_str(mode=metadata_mode)
