"""Guarded extraction as a LlamaIndex reader."""

from __future__ import annotations

from collections.abc import Iterable
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
    reader never leaves it at that: each refused file is appended to
    `omitted` with its stage and reason and emitted as a `CapsaOmissionEvent`;
    with ``on_rejection="raise"`` (and ``raise_on_error=True`` on the
    directory reader) the typed error stops the load instead.

    Documents get ``capsa_label``, ``capsa_kind``, ``capsa_sha256`` and
    ``capsa_bytes`` metadata, kept out of the LLM and embedding text.

    Usage:
        .. code-block:: python

            reader = CapsaReader()
            docs = SimpleDirectoryReader("inbox/", file_extractor={".pdf": reader}).load_data()
            reader.omitted   # [Omission(label='q3.pdf', stage='archive', ...)]
    """

    is_remote: bool = False
    limits: ExtractionLimits = Field(default_factory=ExtractionLimits)
    on_rejection: Literal["omit", "raise"] = "omit"
    _extractor: TextExtractor | None = PrivateAttr(default=None)
    _omitted: list[Omission] = PrivateAttr(default_factory=list)

    def __init__(self, *, extractor: TextExtractor | None = None, **data: Any) -> None:
        super().__init__(**data)
        self._extractor = extractor

    @classmethod
    def class_name(cls) -> str:
        """Stable name for serialisation and caches."""
        return "CapsaReader"

    @property
    def omitted(self) -> list[Omission]:
        """Every file that did not become a document, with its reason, in order."""
        return self._omitted

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
        paths = [target] if isinstance(target, (str, Path)) else list(target)
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
                omission = Omission.from_error(error).model_copy(update={"source": str(path)})
                self._omitted.append(omission)
                _dispatcher.event(CapsaOmissionEvent(**omission.model_dump(mode="json")))
                continue
            metadata = {**(extra_info or {}), "capsa_label": item.label,
                        "capsa_kind": item.kind, "capsa_sha256": item.sha256,
                        "capsa_bytes": item.byte_size}
            hidden = ["capsa_label", "capsa_kind", "capsa_sha256", "capsa_bytes"]
            yield Document(text=item.text, id_=item.sha256, metadata=metadata,
                           excluded_llm_metadata_keys=hidden, excluded_embed_metadata_keys=hidden)

    def _read(self, path: Path, label: str, fs: Any) -> bytes:
        if fs is None:
            return read_bounded(path, self.limits, label=label)
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
