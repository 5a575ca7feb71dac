"""Guarded extraction as a LlamaIndex reader."""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import weakref
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Literal

from llama_index.core.instrumentation.events import BaseEvent
from llama_index.core.readers.base import BasePydanticReader
from llama_index.core.schema import Document
from llama_index_instrumentation import get_dispatcher
from pydantic import Field, PrivateAttr

from capsa.errors import ExtractionFailed, IngestionRejected
from capsa.guard import (
    Attachment,
    ExtractionLimits,
    Omission,
    TextExtractor,
    extract_attachment,
    media_type_for_name,
    read_bounded,
    safe_label,
)
from capsa.guard.pools import shared_pool
from capsa.guard.sandbox.pool import IsolatedExtractor

__all__ = ["CapsaOmissionEvent", "CapsaReader"]

_dispatcher = get_dispatcher(__name__)


class CapsaOmissionEvent(BaseEvent):
    """A file the reader refused, with the reason a program can switch on."""

    label: str
    stage: str
    reason: str
    detail: str
    source: str | None = None

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
    do all their reading and parsing in a worker thread.

    Documents get ``capsa_label``, ``capsa_kind``, ``capsa_sha256`` and
    ``capsa_bytes`` metadata, kept out of the LLM and embedding text.

    Setup:
        ``pip install 'capsa[llama-index,unstructured,ocr]'``

    Usage:
        .. code-block:: python

            reader = CapsaReader()
            docs = SimpleDirectoryReader("inbox/", file_extractor={".pdf": reader},
                                         ).load_data(num_workers=2)
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

    is_remote: bool = False
    limits: ExtractionLimits = Field(default_factory=ExtractionLimits.for_ingestion)
    on_rejection: Literal["omit", "raise"] = "omit"
    _extractor: TextExtractor | None = PrivateAttr(default=None)
    _omitted: list[Omission] = PrivateAttr(default_factory=list)
    _spool: str | None = PrivateAttr(default=None)
    _owner: int = PrivateAttr(default_factory=os.getpid)

    def __init__(self, *, extractor: TextExtractor | None = None, **data: Any) -> None:
        super().__init__(**data)
        self._extractor = extractor

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
        for index, path in enumerate(paths):
            label = safe_label(Path(path).name, index=index)
            try:
                payload = self._read(Path(path), label, fs)
                declared = media_type_for_name(label)
                item = extract_attachment(Attachment(label=label, media_type=declared,
                                                     payload=payload),
                                          self._extractor, self.limits, index=index)
            except (IngestionRejected, ExtractionFailed) as error:
                if self.on_rejection == "raise":
                    raise
                self._record(Omission.from_error(error).model_copy(
                    update={"source": str(path)}))
                continue
            for found in item.flattened():  # the file, then any file found inside it
                if isinstance(found, Omission):
                    self._record(found.model_copy(update={"source": str(path)}))
                    continue
                metadata = {**(extra_info or {}), "capsa_label": found.label,
                            "capsa_kind": found.kind, "capsa_sha256": found.sha256,
                            "capsa_bytes": found.byte_size}
                if found.parent is not None:
                    metadata["capsa_parent"] = found.parent
                hidden = ["capsa_label", "capsa_kind", "capsa_sha256", "capsa_bytes",
                          "capsa_parent"]
                yield Document(text=found.text, id_=found.sha256, metadata=metadata,
                               excluded_llm_metadata_keys=hidden,
                               excluded_embed_metadata_keys=hidden)

    async def alazy_load_data(self, *args: Any, **load_kwargs: Any) -> Iterable[Document]:
        """Every document of `lazy_load_data`, read and parsed in a worker thread.

        The base class hands back the generator itself, whose work would then
        run on the event loop as the caller iterates it.
        """
        return await asyncio.to_thread(lambda: list(self.lazy_load_data(*args, **load_kwargs)))

    async def aload_data(self, *args: Any, **load_kwargs: Any) -> list[Document]:
        """`load_data` in a worker thread; the event loop keeps running."""
        return await asyncio.to_thread(self.load_data, *args, **load_kwargs)

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
            if fs is None:
                return read_bounded(path, self.limits, label=label)
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
