"""Guarded extraction as a LangChain blob parser and document loader."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
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
from capsa.guard.limits import DEFAULT_LIMITS

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
    ``capsa_label``, ``capsa_kind``, ``capsa_sha256`` and ``capsa_bytes``.
    A refused file yields nothing, is appended to `omitted` with its reason,
    and is sent to `callbacks` as a ``capsa.omission`` custom event; with
    ``on_rejection="raise"`` the typed error is raised instead.

    Setup:
        ``pip install 'capsa[langchain,unstructured,ocr]'``

    Examples:
        .. code-block:: python

            parser = CapsaBlobParser(limits=ExtractionLimits(max_pages=50))

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
                 callbacks: Sequence[BaseCallbackHandler] | None = None) -> None:
        if on_rejection not in ("omit", "raise"):
            raise ValueError("on_rejection must be 'omit' or 'raise'")
        self.extractor = extractor
        self.limits = limits or DEFAULT_LIMITS
        self.on_rejection = on_rejection
        self.callbacks = list(callbacks or [])
        self.omitted: list[Omission] = []
        """Every blob that did not become a document, with its reason, in order."""

    def lazy_parse(self, blob: Blob) -> Iterator[Document]:
        """Yield the blob's document, or nothing (and record why)."""
        label = _blob_label(blob)
        try:
            payload = _blob_bytes(blob, self.limits, label)
            declared = blob.mimetype or media_type_for_name(label)
            item = extract_attachment(Attachment(label=label, media_type=declared,
                                                 payload=payload),
                                      self.extractor, self.limits)
        except (IngestionRejected, ExtractionFailed) as error:
            if self.on_rejection == "raise":
                raise
            where = str(blob.path) if blob.path is not None else None
            self._omit(Omission.from_error(error).model_copy(update={"source": where}))
            return
        yield _to_document(item, blob)

    def _omit(self, omission: Omission) -> None:
        self.omitted.append(omission)
        if self.callbacks:
            CallbackManager(handlers=self.callbacks).on_custom_event(
                OMISSION_EVENT, omission.model_dump(mode="json"))


class CapsaLoader(BaseLoader):
    """Load paths, ``(name, bytes)`` pairs or blobs through `CapsaBlobParser`.

    Documents stream out one file at a time (`lazy_load`); nothing is read
    before its turn, and a path is stat-ed before it is opened. `omitted`
    lists every file that did not load, with its reason.

    Examples:
        >>> from capsa.guard.extractors import PlainTextExtractor
        >>> loader = CapsaLoader([("a.txt", b"alpha"), ("b.txt", b"")],
        ...                      extractor=PlainTextExtractor())
        >>> [d.metadata["capsa_label"] for d in loader.load()]
        ['a.txt']
        >>> [(o.label, o.reason) for o in loader.omitted]
        [('b.txt', 'empty')]
    """

    def __init__(self, sources: Iterable[Source], *, extractor: TextExtractor | None = None,
                 limits: ExtractionLimits | None = None,
                 on_rejection: Literal["omit", "raise"] = "omit",
                 callbacks: Sequence[BaseCallbackHandler] | None = None) -> None:
        self.sources = sources
        self.parser = CapsaBlobParser(extractor=extractor, limits=limits,
                                      on_rejection=on_rejection, callbacks=callbacks)

    @property
    def omitted(self) -> list[Omission]:
        """Every source that did not become a document, with its reason."""
        return self.parser.omitted

    def lazy_load(self) -> Iterator[Document]:
        """Yield one document per extracted source, in order."""
        for source in self.sources:
            yield from self.parser.lazy_parse(_to_blob(source))


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


def _blob_bytes(blob: Blob, limits: ExtractionLimits, label: str) -> bytes:
    if blob.data is None and blob.path is not None:
        return read_bounded(Path(blob.path), limits, label=label)
    data = blob.data
    if isinstance(data, str):
        if len(data) > limits.max_bytes:  # every character is at least one byte
            raise IngestionRejected(f"at least {len(data)} bytes, over the limit of "
                                    f"{limits.max_bytes}", label=label, stage="size",
                                    reason="too_large")
        data = data.encode(blob.encoding or "utf-8")
    return data or b""


def _to_document(item: Extracted, blob: Blob) -> Document:
    metadata: dict[str, Any] = dict(blob.metadata or {})
    metadata.setdefault("source", blob.source or item.label)
    metadata.update({
        "capsa_label": item.label,
        "capsa_kind": item.kind,
        "capsa_sha256": item.sha256,
        "capsa_bytes": item.byte_size,
    })
    return Document(id=item.sha256, page_content=item.text, metadata=metadata)
