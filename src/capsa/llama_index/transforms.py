"""Guarded extraction as a LlamaIndex ingestion step, picklable for parallel pipelines."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from llama_index.core.schema import BaseNode, Document, TransformComponent
from llama_index_instrumentation import get_dispatcher
from pydantic import ConfigDict, Field

from capsa.errors import ExtractionFailed, IngestionRejected, UnguardedInput
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
from capsa.guard.bulk import display_name
from capsa.guard.pools import shared_pool
from capsa.guard.shapes import Shape, document_parts
from capsa.llama_index.readers import CapsaOmissionEvent, _to_document, pending_settings

__all__ = ["CapsaTransform"]

_dispatcher = get_dispatcher(__name__)
_logger = logging.getLogger(__name__)
_PLACEHOLDER_ONLY = ("capsa_pending", "capsa_mtime_ns")


class CapsaTransform(TransformComponent):
    """Read the files of placeholder documents through capsa's guard, in an ingestion pipeline.

    Feed it ``CapsaDirectoryReader(folder, defer=True).load_data()``: each
    placeholder (``capsa_pending`` metadata, no text) names a file by
    ``metadata["file_path"]`` and is replaced by the documents `CapsaReader`
    makes of that file's bytes (sniffed, size- and archive-checked, parsed
    in an isolated, time- and memory-limited worker): one per file, page or
    element as `shape` says, with the same metadata, and the placeholder's
    id (``<id>_part_<n>`` for each of several parts, ``<id>/<sha256>`` for a
    file found inside the file). Several input nodes naming the same file
    become one file's documents, under the first node's id. Nodes without a
    ``file_path``, and documents capsa already read (``capsa_sha256``, from
    `CapsaReader`), pass through unchanged.

    A placeholder records the limits and shape of the reader that deferred
    it. A transform with other settings raises `ValueError` instead of
    reading the files under limits nobody chose for them:
    ``reader.transform()`` (`CapsaDirectoryReader.transform`) builds the
    matching one.

    A node that names a file but was parsed by another reader (the output of
    `SimpleDirectoryReader`'s default readers) is refused loudly: the call
    raises `capsa.errors.UnguardedInput` naming the files. Re-reading the file
    here would not help: the other reader's parser has already run on those
    untrusted bytes, in-process and unbounded (a zip-bomb DOCX inflated before
    capsa saw it), and dropping the nodes quietly would hide that. The fix is
    in the loading code, which the error points at.

    A refused file is dropped from the output and reported twice: as a
    `CapsaOmissionEvent` on LlamaIndex's instrumentation dispatcher and as a
    ``logging`` warning naming the file, stage and reason. With
    ``IngestionPipeline.run(num_workers=N)`` for N > 1 the transform runs in
    spawned worker processes, so those events fire (and the warnings are
    logged) *there*: an event handler registered in the parent does not see
    them; configure logging in the workers or run with one worker to collect them.

    All configuration lives in fields, and the parser pool is never one of
    them: each process uses one pool (`capsa.guard.pools.shared_pool`),
    started on its first batch and reused by every later batch in that
    process. In the pipeline's worker processes that pool has one parser
    worker, since the pipeline already runs one process per core. The
    transform therefore pickles for ``num_workers > 1`` and its cache key
    changes whenever a limit does. The default limits are the ingestion
    preset (`ExtractionLimits.for_ingestion`).
    The cache key covers the input nodes' metadata, not the file's bytes:
    `SimpleDirectoryReader`'s size and modification-date metadata are what
    make an edited file miss the cache.

    Setup:
        ``pip install 'capsa[llama-index,unstructured,ocr]'``

    Usage:
        .. code-block:: python

            from llama_index.core.ingestion import IngestionPipeline
            from llama_index.core.node_parser import SentenceSplitter

            reader = CapsaDirectoryReader("inbox/", defer=True)
            pipeline = IngestionPipeline(transformations=[reader.transform(), SentenceSplitter()])
            nodes = pipeline.run(documents=reader.load_data(), num_workers=2)

    Examples:
        >>> from llama_index.core.schema import TextNode
        >>> CapsaTransform()([TextNode(text="no file here")])[0].text
        'no file here'
    """

    model_config = ConfigDict(extra="forbid")
    """A misspelt setting is refused, not ignored: the limits are the guard."""

    limits: ExtractionLimits = Field(default_factory=ExtractionLimits.for_ingestion)
    """The guard's ceilings for every file this transform reads."""
    shape: Shape = "file"
    """One document per file, page or element (`capsa.guard.document_parts`)."""

    @classmethod
    def class_name(cls) -> str:
        """Stable name for serialisation and the ingestion cache."""
        return "CapsaTransform"

    def __call__(self, nodes: Sequence[BaseNode], **kwargs: Any) -> Sequence[BaseNode]:
        """Return new documents for placeholders; others unchanged, refused files dropped.

        Raises:
            UnguardedInput: a node names a file another reader parsed.
            ValueError: a placeholder was deferred by a reader with other limits or shape.
        """
        _refuse_unguarded(nodes)
        self._refuse_other_settings(nodes)
        firsts: dict[str, int] = {}
        for position, node in enumerate(nodes):
            path = _pending_path(node)
            if path is not None and path not in firsts:
                firsts[path] = position
        outcomes: dict[str, Extracted | Omission] = {}
        if firsts:
            extractor = shared_pool()
            with ThreadPoolExecutor(max_workers=extractor.workers,
                                    thread_name_prefix="capsa-transform") as threads:
                results = threads.map(lambda item: self._extract(item[1], item[0], extractor),
                                      enumerate(firsts))
                outcomes = dict(zip(firsts, results, strict=True))
        output: list[BaseNode] = []
        for position, node in enumerate(nodes):
            path = _pending_path(node)
            if path is None:
                output.append(node)
            elif firsts[path] == position:
                outcome = outcomes[path]
                found = outcome.flattened() if isinstance(outcome, Extracted) else (outcome,)
                for index, item in enumerate(found):  # the file, then files inside it
                    if isinstance(item, Extracted):
                        output.extend(self._documents(item, node, first=index == 0))
                    else:
                        _report(item, path)
        return output

    def _refuse_other_settings(self, nodes: Sequence[BaseNode]) -> None:
        mine = pending_settings(self.limits, self.shape)
        for node in nodes:
            theirs = node.metadata.get("capsa_pending")
            if isinstance(theirs, str) and theirs != mine and _pending_path(node) is not None:
                raise ValueError(
                    f"the placeholder for {node.metadata['file_path']} was deferred by a reader "
                    f"with other settings ({theirs}) than this CapsaTransform's ({mine}); "
                    "build the transform with reader.transform(), or give it the reader's "
                    "limits= and shape=")

    def _documents(self, item: Extracted, source: BaseNode, *, first: bool) -> list[Document]:
        """`CapsaReader`'s documents of `item`, under ids derived from the placeholder's."""
        info = {k: v for k, v in source.metadata.items() if k not in _PLACEHOLDER_ONLY}
        base = source.id_ if first else f"{source.id_}/{item.sha256}"
        parts = document_parts(item, self.shape)
        return [_to_document(item, part, info,
                             base if len(parts) == 1 else f"{base}_part_{number}")
                for number, part in enumerate(parts)]

    async def acall(self, nodes: Sequence[BaseNode], **kwargs: Any) -> Sequence[BaseNode]:
        """The sync path in a thread: the parsing happens in worker processes anyway."""
        return await asyncio.to_thread(self.__call__, nodes, **kwargs)

    def _extract(self, path: str, index: int, extractor: TextExtractor) -> Extracted | Omission:
        label = safe_label(Path(path).name, index=index)
        outcome: Extracted | Omission
        try:
            payload = read_bounded(path, self.limits, label=label)
            outcome = extract_attachment(
                Attachment(label=label, media_type=media_type_for_name(label), payload=payload),
                extractor, self.limits, index=index)
        except (IngestionRejected, ExtractionFailed) as error:
            outcome = Omission.from_error(error)
        except OSError as error:
            outcome = Omission(label=label, stage="size", reason="corrupt",
                               detail=f"could not read the file: {error.strerror}")
        return outcome.model_copy(update={"source": path})


def _pending_path(node: BaseNode) -> str | None:
    path = node.metadata.get("file_path")
    return path if isinstance(path, str) and node.metadata.get("capsa_pending") else None


def _refuse_unguarded(nodes: Sequence[BaseNode]) -> None:
    unguarded = tuple(dict.fromkeys(
        str(node.metadata["file_path"]) for node in nodes
        if node.metadata.get("file_path") is not None
        and not node.metadata.get("capsa_pending") and "capsa_sha256" not in node.metadata))
    if unguarded:
        shown = ", ".join(unguarded[:3]) + (f" and {len(unguarded) - 3} more"
                                            if len(unguarded) > 3 else "")
        raise UnguardedInput(
            f"CapsaTransform was given nodes another reader already parsed from {shown}: "
            "their parser ran without capsa's guard. Load the folder with "
            "CapsaDirectoryReader(folder, defer=True) (or CapsaDirectoryReader(folder)) "
            "instead of SimpleDirectoryReader.", sources=unguarded)


def _report(omission: Omission, path: str) -> None:
    # name the file that was refused: an e-mail's attachment, not the e-mail
    where = display_name(omission.model_copy(update={"source": path}))
    _logger.warning("capsa refused %s at %s (%s): %s", where, omission.stage, omission.reason,
                    omission.detail)
    _dispatcher.event(CapsaOmissionEvent(**omission.model_dump(mode="json")))
