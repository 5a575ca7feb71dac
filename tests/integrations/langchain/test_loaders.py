"""CapsaBlobParser and CapsaLoader inside real LangChain pipelines, over the sample corpus."""

from __future__ import annotations

import asyncio
import threading
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
from capsa.guard.bulk import display_name
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
                                                  "source": "void.txt", "parent": None})]


def test_blob_parser_checks_a_string_blob_against_the_size_limit() -> None:
    parser = CapsaBlobParser(extractor=PlainTextExtractor(),
                             limits=ExtractionLimits(max_bytes=10))
    assert parser.parse(Blob.from_data("x" * 11, path="s.txt")) == []
    assert parser.omitted[0].reason == "too_large"


@pytest.mark.parametrize("encoding", ["latin-1", "no-such-codec"])
def test_a_string_blob_its_encoding_cannot_hold_is_one_omission(encoding: str) -> None:
    """One bad source never ends the load: the files after it still arrive."""
    odd = Blob.from_data("caf\u00e9 \u2013 EUR 230", path="notes.txt", encoding=encoding)
    loader = CapsaLoader([("a.txt", b"alpha"), odd, ("c.txt", b"gamma")],
                         extractor=PlainTextExtractor())
    assert [d.page_content for d in loader.load()] == ["alpha", "gamma"]
    (omission,) = loader.omitted
    assert (omission.label, omission.stage, omission.reason) == ("notes.txt", "size",
                                                                 "undecodable")
    assert encoding in omission.detail


def _tree(root: Path) -> Path:
    (root / "sub").mkdir()
    (root / "sub" / "b.md").write_text("beta")
    (root / "a.txt").write_text("alpha")
    (root / ".hidden.txt").write_text("hidden")
    (root / ".git").mkdir()
    (root / ".git" / "config.txt").write_text("internal")
    return root


def test_loader_walks_a_directory_like_directory_loader(tmp_path: Path) -> None:
    loader = CapsaLoader(_tree(tmp_path), extractor=PlainTextExtractor())
    assert [d.page_content for d in loader.load()] == ["alpha", "beta"]
    assert loader.omitted == []


def test_loader_walk_follows_glob_and_can_load_hidden_files(tmp_path: Path) -> None:
    folder = _tree(tmp_path)
    only_md = CapsaLoader(folder, glob="**/*.md", extractor=PlainTextExtractor())
    assert [d.page_content for d in only_md.load()] == ["beta"]
    top_level = CapsaLoader(folder, glob="*", extractor=PlainTextExtractor())
    assert [d.page_content for d in top_level.load()] == ["alpha"]
    everything = CapsaLoader(folder, load_hidden=True, glob="**/*",
                             extractor=PlainTextExtractor())
    assert sorted(d.page_content for d in everything.load()) == [
        "alpha", "beta", "hidden", "internal"]


def test_loader_refuses_a_symbolic_link_met_in_a_walk(tmp_path: Path) -> None:
    outside = tmp_path / "secret.txt"
    outside.write_text("secret")
    folder = tmp_path / "inbox"
    folder.mkdir()
    (folder / "link.txt").symlink_to(outside)
    loader = CapsaLoader(folder, extractor=PlainTextExtractor())
    assert loader.load() == []
    (omission,) = loader.omitted
    assert (omission.reason, omission.source) == ("symlink", str(folder / "link.txt"))


def test_loader_takes_a_bare_string_as_one_path(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("alpha")
    loader = CapsaLoader(str(tmp_path / "a.md"), extractor=PlainTextExtractor())
    assert [d.page_content for d in loader.load()] == ["alpha"]


def test_loader_takes_one_name_and_bytes_pair() -> None:
    loader = CapsaLoader(("a.txt", b"alpha"), extractor=PlainTextExtractor())
    assert [d.page_content for d in loader.load()] == ["alpha"]


def test_loader_reports_a_missing_path_and_loads_the_rest(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("alpha")
    loader = CapsaLoader([tmp_path / "gone.txt", tmp_path / "a.txt"],
                         extractor=PlainTextExtractor())
    assert [d.page_content for d in loader.load()] == ["alpha"]
    (omission,) = loader.omitted
    assert (omission.label, omission.reason) == ("gone.txt", "corrupt")
    assert omission.source == str(tmp_path / "gone.txt")


def test_loader_omitted_describes_the_latest_load_only() -> None:
    loader = CapsaLoader([("empty.txt", b"")], extractor=PlainTextExtractor())
    loader.load()
    first = loader.omitted
    loader.load()
    assert len(loader.omitted) == 1
    assert len(first) == 1  # the earlier load's list is left as it was


def test_loader_defaults_to_the_ingestion_limits() -> None:
    loader = CapsaLoader([("long.txt", b"word " * 20_000)], extractor=PlainTextExtractor())
    assert loader.parser.limits == ExtractionLimits.for_ingestion()
    assert len(loader.load()) == 1  # 100,000 characters: over the attachment preset


async def test_loader_alazy_load_lets_other_coroutines_run(loop_probe: Any) -> None:
    extractor, other_coroutine = loop_probe
    loader = CapsaLoader([("a.txt", b"alpha")], extractor=extractor)

    async def load() -> list[str]:
        return [d.page_content async for d in loader.alazy_load()]

    texts, _ = await asyncio.gather(load(), other_coroutine())
    assert texts == ["alpha"]
    assert loader.omitted == []


def test_retriever_tool_over_loader_documents_shows_names_not_paths_or_digests(
        tmp_path: Path) -> None:
    from langchain_core.runnables import RunnableLambda

    from capsa.langchain import capsa_retriever_tool

    deep = tmp_path / "srv" / "tenant"
    deep.mkdir(parents=True)
    (deep / "fake-text.txt").write_text("The hotel cap is EUR 165.", encoding="utf-8")
    docs = CapsaLoader(deep, extractor=PlainTextExtractor()).load()
    search = capsa_retriever_tool(RunnableLambda(lambda query: docs))
    text = search.invoke({"type": "tool_call", "name": search.name, "id": "1",
                          "args": {"query": "cap"}}).content
    assert 'uri="fake-text.txt"' in text
    assert str(tmp_path) not in text
    assert docs[0].id not in text and f'id="{docs[0].id[:12]}"' in text


_SLOW_FIRST = [("slow.txt", b"slow"), ("a.txt", b"alpha"), ("b.txt", b"beta"),
               ("c.txt", b"gamma")]


def test_loader_unordered_yields_other_files_while_a_slow_first_file_parses(gated: Any) -> None:
    loader = CapsaLoader(_SLOW_FIRST, extractor=gated, workers=2, ordered=False)
    arrived: list[str] = []
    for document in loader.lazy_load():
        arrived.append(document.metadata["capsa_label"])
        if len(arrived) == 3:
            gated.release.set()  # only now may the slow file finish
    assert arrived == ["a.txt", "b.txt", "c.txt", "slow.txt"]


def test_loader_load_keeps_exactly_the_input_order_by_default(gated: Any) -> None:
    threading.Timer(0.3, gated.release.set).start()
    loader = CapsaLoader(_SLOW_FIRST, extractor=gated, workers=2)
    assert [d.metadata["capsa_label"] for d in loader.load()] == [
        "slow.txt", "a.txt", "b.txt", "c.txt"]


def test_loader_parses_workers_files_at_once() -> None:
    class Together(PlainTextExtractor):
        barrier = threading.Barrier(3, timeout=10)

        def extract(self, kind: str, media_type: str | None, payload: bytes, *,
                    max_pages: int) -> str:
            self.barrier.wait()  # broken (an omission) unless three parse at once
            return super().extract(kind, media_type, payload, max_pages=max_pages)

    loader = CapsaLoader([(f"{n}.txt", n.encode()) for n in "abc"], extractor=Together(),
                         workers=3)
    assert [d.page_content for d in loader.load()] == ["a", "b", "c"]
    assert loader.omitted == []


def test_loader_rejects_fewer_than_one_worker() -> None:
    with pytest.raises(ValueError, match="workers"):
        CapsaLoader([("a.txt", b"a")], workers=0)


async def test_loader_alazy_load_unordered_streams_files_as_they_finish(gated: Any) -> None:
    loader = CapsaLoader(_SLOW_FIRST, extractor=gated, workers=2, ordered=False)
    arrived: list[str] = []
    async for document in loader.alazy_load():
        arrived.append(document.metadata["capsa_label"])
        if len(arrived) == 3:
            gated.release.set()
    assert arrived == ["a.txt", "b.txt", "c.txt", "slow.txt"]


def test_loader_omission_names_the_refused_attachment_and_its_parent(
        photo_mail: Any, tmp_path: Path) -> None:
    mail = tmp_path / "message.txt"
    mail.write_bytes(b"MAIL:Here is my new profile photo.")
    loader = CapsaLoader(mail, extractor=photo_mail)
    assert [d.metadata["capsa_label"] for d in loader.load()] == ["message.txt"]
    (omission,) = loader.omitted
    assert (omission.label, omission.parent, omission.reason) == (
        "message.txt/profilephoto.png", "message.txt", "no_text")
    assert display_name(omission) == f"profilephoto.png in {mail}"
