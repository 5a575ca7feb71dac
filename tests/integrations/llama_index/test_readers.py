"""CapsaReader inside real LlamaIndex ingestion, over the sample corpus."""

from __future__ import annotations

from pathlib import Path

import pytest
from llama_index.core import SimpleDirectoryReader
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.instrumentation.events import BaseEvent

from capsa.demo.corpus_source import CORPUS_DIR, DOCUMENTS, HOSTILE_FILES
from capsa.errors import IngestionRejected
from capsa.guard.extractors import PlainTextExtractor
from capsa.llama_index import CapsaReader
from capsa.llama_index.readers import CapsaOmissionEvent

pytestmark = pytest.mark.slow


class _Collect(BaseEventHandler):
    events: list[BaseEvent] = []

    @classmethod
    def class_name(cls) -> str:
        return "_Collect"

    def handle(self, event: BaseEvent, **kwargs: object) -> None:
        self.events.append(event)


def _corpus_copy(tmp_path: Path) -> Path:
    for name in [d.name for d in DOCUMENTS] + [h.name for h in HOSTILE_FILES]:
        (tmp_path / name).write_bytes((CORPUS_DIR / name).read_bytes())
    return tmp_path


def test_reader_in_simple_directory_reader_never_skips_silently(tmp_path: Path) -> None:
    reader = CapsaReader()
    folder = _corpus_copy(tmp_path)
    extractors = {ext: reader for ext in (".pdf", ".docx", ".xlsx", ".html", ".eml", ".png",
                                          ".md")}
    docs = SimpleDirectoryReader(str(folder), file_extractor=extractors).load_data()
    assert sorted(d.metadata["capsa_label"] for d in docs) == sorted(d.name for d in DOCUMENTS)
    assert {(o.label, o.reason) for o in reader.omitted} == {
        ("quarterly-report.docx", "archive_ratio"), ("invoice.pdf", "type_mismatch")}


def test_reader_keeps_provenance_out_of_the_llm_text(tmp_path: Path) -> None:
    from llama_index.core.schema import MetadataMode

    (doc,) = CapsaReader().load_data(CORPUS_DIR / "remote-work.md")
    assert doc.metadata["capsa_kind"] == "markdown"
    assert "capsa_sha256" not in doc.get_content(metadata_mode=MetadataMode.LLM)
    assert "capsa_sha256" not in doc.get_content(metadata_mode=MetadataMode.EMBED)


def test_reader_emits_an_instrumentation_event_per_omission(tmp_path: Path) -> None:
    handler = _Collect()
    handler.events.clear()
    get_dispatcher().add_event_handler(handler)
    try:
        empty = tmp_path / "empty.txt"
        empty.write_bytes(b"")
        reader = CapsaReader(extractor=PlainTextExtractor())
        assert reader.load_data(empty) == []
    finally:
        get_dispatcher().event_handlers.remove(handler)
    events = [e for e in handler.events if isinstance(e, CapsaOmissionEvent)]
    assert [(e.label, e.reason) for e in events] == [("empty.txt", "empty")]


def test_reader_raises_when_asked(tmp_path: Path) -> None:
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    with pytest.raises(IngestionRejected):
        CapsaReader(extractor=PlainTextExtractor(), on_rejection="raise").load_data(empty)


def test_reader_has_a_stable_class_name() -> None:
    assert CapsaReader.class_name() == "CapsaReader"
