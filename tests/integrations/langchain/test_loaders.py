"""CapsaBlobParser and CapsaLoader inside real LangChain pipelines, over the sample corpus."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents.base import Blob
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.vectorstores import InMemoryVectorStore

from capsa.demo.corpus_source import CORPUS_DIR, DOCUMENTS, HOSTILE_FILES
from capsa.errors import IngestionRejected
from capsa.guard import ExtractionLimits
from capsa.guard.extractors import PlainTextExtractor
from capsa.langchain import CapsaBlobParser, CapsaLoader

pytestmark = pytest.mark.slow
CORPUS = [CORPUS_DIR / d.name for d in DOCUMENTS] + [CORPUS_DIR / h.name for h in HOSTILE_FILES]


class _Events(BaseCallbackHandler):
    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []

    def on_custom_event(self, name: str, data: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self.events.append((name, data))


def test_loader_extracts_every_good_corpus_file_and_omits_the_hostile_ones() -> None:
    loader = CapsaLoader(CORPUS)
    docs = loader.load()
    assert sorted(d.metadata["capsa_label"] for d in docs) == sorted(d.name for d in DOCUMENTS)
    assert {(o.label, o.reason) for o in loader.omitted} == {
        ("quarterly-report.docx", "archive_ratio"), ("invoice.pdf", "type_mismatch")}


def test_loader_documents_carry_provenance_metadata_and_a_stable_id() -> None:
    docs = CapsaLoader([CORPUS_DIR / "travel-policy.pdf"]).load()
    (doc,) = docs
    assert doc.id == doc.metadata["capsa_sha256"]
    assert doc.metadata["capsa_kind"] == "pdf"
    assert doc.metadata["capsa_bytes"] == (CORPUS_DIR / "travel-policy.pdf").stat().st_size
    assert doc.metadata["source"].endswith("travel-policy.pdf")
    assert "Travel and Expense Policy" in doc.page_content


def test_loader_output_feeds_a_vector_store_retriever() -> None:
    docs = CapsaLoader(CORPUS).load()
    store = InMemoryVectorStore.from_documents(docs, DeterministicFakeEmbedding(size=32))
    found = store.as_retriever(search_kwargs={"k": 3}).invoke("remote work")
    assert len(found) == 3
    assert all("capsa_label" in d.metadata for d in found)


def test_loader_accepts_name_and_bytes_pairs_and_blobs() -> None:
    loader = CapsaLoader([("a.txt", b"alpha"), Blob.from_data(b"beta", path="b.md")],
                         extractor=PlainTextExtractor())
    assert [d.page_content for d in loader.lazy_load()] == ["alpha", "beta"]


def test_loader_refuses_a_large_path_before_reading_it(tmp_path: Path) -> None:
    big = tmp_path / "big.txt"
    big.write_bytes(b"x" * 2048)
    loader = CapsaLoader([big], extractor=PlainTextExtractor(),
                         limits=ExtractionLimits(max_bytes=1024))
    assert loader.load() == []
    (omission,) = loader.omitted
    assert (omission.stage, omission.reason) == ("size", "too_large")
    assert "2048" in omission.detail and "1024" in omission.detail


def test_loader_raises_the_typed_error_when_asked() -> None:
    loader = CapsaLoader([("empty.txt", b"")], extractor=PlainTextExtractor(),
                         on_rejection="raise")
    with pytest.raises(IngestionRejected) as caught:
        loader.load()
    assert caught.value.reason == "empty"


def test_blob_parser_dispatches_omissions_as_a_custom_event() -> None:
    handler = _Events()
    parser = CapsaBlobParser(extractor=PlainTextExtractor(), callbacks=[handler])
    assert parser.parse(Blob.from_data(b"", path="void.txt")) == []
    assert handler.events == [("capsa.omission", {"label": "void.txt", "stage": "size",
                                                  "reason": "empty",
                                                  "detail": "the file is empty",
                                                  "source": "void.txt"})]


def test_blob_parser_checks_a_string_blob_against_the_size_limit() -> None:
    parser = CapsaBlobParser(extractor=PlainTextExtractor(),
                             limits=ExtractionLimits(max_bytes=10))
    assert parser.parse(Blob.from_data("x" * 11, path="s.txt")) == []
    assert parser.omitted[0].reason == "too_large"
