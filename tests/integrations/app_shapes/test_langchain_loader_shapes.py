"""CapsaLoader as LangChain applications load, split, index and re-index a folder.

One folder mixes good files (a PDF, Markdown under names with spaces, unicode
and 200 characters, an e-mail with attachments), hostile ones (a zip-bomb
DOCX, a PDF over the page limit, a file that is not text), an empty file and
a symbolic link. Every test reads it through the real isolated parsers.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.indexing import InMemoryRecordManager, index
from langchain_core.vectorstores import InMemoryVectorStore
from langchain_text_splitters import RecursiveCharacterTextSplitter

from capsa.demo.corpus_source import CORPUS_DIR
from capsa.guard import ExtractionLimits
from capsa.langchain import CapsaLoader

pytestmark = pytest.mark.slow

REALDOCS = Path(__file__).parents[2] / "realdocs" / "files"
LIMITS = ExtractionLimits.for_ingestion().model_copy(update={"max_pages": 2})
LONG_NAME = "n" * 200 + ".md"
GOOD = {"travel-policy.pdf", "notes with spaces.md", "ünïcødé политика.md", LONG_NAME,
        "mail.eml"}
REFUSED = {("quarterly-report.docx", "archive_ratio"), ("annual review.pdf", "too_many_pages"),
           ("noise.bin", "undecodable"), ("empty.txt", "empty"), ("link.md", "symlink")}


def _mixed_folder(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "travel-policy.pdf").write_bytes((CORPUS_DIR / "travel-policy.pdf").read_bytes())
    (folder / "quarterly-report.docx").write_bytes(
        (CORPUS_DIR / "quarterly-report.docx").read_bytes())  # a zip bomb
    (folder / "notes with spaces.md").write_text("# Notes\n\nThe hotel cap is EUR 165.\n")
    (folder / "ünïcødé политика.md").write_text("# Политика\n\nRemote days: three a week.\n")
    (folder / LONG_NAME).write_text("A long name, and a short body about parking.\n")
    (folder / "mail.eml").write_bytes((REALDOCS / "quarterly-with-attachments.eml").read_bytes())
    sub = folder / "sub dir"
    sub.mkdir(exist_ok=True)
    (sub / "annual review.pdf").write_bytes((REALDOCS / "annual-review-writer.pdf").read_bytes())
    (folder / "noise.bin").write_bytes(bytes(range(256)) * 8)
    (folder / "empty.txt").write_bytes(b"")
    (folder / "link.md").symlink_to(folder / "notes with spaces.md")
    return folder


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _mixed_folder(tmp_path_factory.mktemp("inbox"))


@pytest.fixture(scope="module")
def loaded(folder: Path) -> tuple[list[Document], CapsaLoader]:
    loader = CapsaLoader(folder, recursive=True, limits=LIMITS)
    return loader.load(), loader


def _top_labels(docs: list[Document]) -> set[str]:
    return {d.metadata["capsa_label"] for d in docs if "capsa_parent" not in d.metadata}


def _view(docs: list[Document]) -> list[tuple[str | None, str, str]]:
    return [(d.id, d.page_content, json.dumps(d.metadata, sort_keys=True)) for d in docs]


def test_a_mixed_folder_loads_every_good_file_and_reports_every_other_with_its_reason(
        loaded: tuple[list[Document], CapsaLoader], folder: Path) -> None:
    docs, loader = loaded
    assert _top_labels(docs) == GOOD
    assert {(o.label, o.reason) for o in loader.omitted if o.parent is None} == REFUSED
    # each refusal names the file on disk, so a user can find it
    assert all(o.source is not None and Path(o.source).parent in (folder, folder / "sub dir")
               for o in loader.omitted if o.parent is None)


def test_source_metadata_is_the_real_path_even_for_spaces_unicode_and_long_names(
        loaded: tuple[list[Document], CapsaLoader], folder: Path) -> None:
    docs, _ = loaded
    for doc in docs:
        if "capsa_parent" in doc.metadata:
            continue
        assert Path(doc.metadata["source"]) == folder / doc.metadata["capsa_label"]
        assert Path(doc.metadata["source"]).is_file()


def test_lazy_load_load_aload_and_alazy_load_give_the_same_documents_and_omissions(
        loaded: tuple[list[Document], CapsaLoader], folder: Path) -> None:
    docs, loader = loaded

    async def both(one: CapsaLoader, two: CapsaLoader) -> tuple[list[Document], list[Document]]:
        return await one.aload(), [d async for d in two.alazy_load()]

    lazy = CapsaLoader(folder, recursive=True, limits=LIMITS)
    aloaded = CapsaLoader(folder, recursive=True, limits=LIMITS)
    alazy = CapsaLoader(folder, recursive=True, limits=LIMITS)
    from_aload, from_alazy = asyncio.run(both(aloaded, alazy))
    for other, used in ((list(lazy.lazy_load()), lazy), (from_aload, aloaded),
                        (from_alazy, alazy)):
        assert _view(other) == _view(docs)
        assert used.omitted == loader.omitted


def test_ids_are_the_same_on_a_second_load_in_every_shape(folder: Path) -> None:
    good = [folder / "travel-policy.pdf", folder / "notes with spaces.md"]
    for shape in ("file", "page", "element"):
        first = CapsaLoader(good, shape=shape).load()
        second = CapsaLoader(good, shape=shape).load()
        assert [d.id for d in first] == [d.id for d in second]
        assert all(d.id for d in first)
        assert len({d.id for d in first}) == len(first), shape


def test_every_shapes_metadata_survives_a_json_round_trip(folder: Path) -> None:
    sources = [folder / "travel-policy.pdf", folder / "mail.eml", folder / "notes with spaces.md"]
    for shape in ("file", "page", "element"):
        for doc in CapsaLoader(sources, shape=shape).load():
            assert json.loads(json.dumps(doc.metadata)) == doc.metadata


def test_load_and_split_then_a_vector_store_keeps_provenance_on_every_chunk(
        folder: Path) -> None:
    loader = CapsaLoader(folder, recursive=True, limits=LIMITS)
    chunks = loader.load_and_split(RecursiveCharacterTextSplitter(chunk_size=200,
                                                                  chunk_overlap=20))
    assert len(chunks) > len(GOOD)
    assert {(o.label, o.reason) for o in loader.omitted if o.parent is None} == REFUSED
    store = InMemoryVectorStore.from_documents(chunks, DeterministicFakeEmbedding(size=32))
    assert len(store.store) == len(chunks)
    found = store.similarity_search("hotel cap", k=len(chunks))
    assert all({"source", "capsa_label", "capsa_sha256"} <= d.metadata.keys() for d in found)


def test_indexing_twice_with_a_record_manager_adds_nothing_and_cleanup_follows_edits(
        tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.md").write_text("# A\n\nAlpha policy text.\n")
    (folder / "b b.md").write_text("# B\n\nBravo policy text.\n")
    (folder / "empty.md").write_text("")
    (folder / "bomb.docx").write_bytes((CORPUS_DIR / "quarterly-report.docx").read_bytes())
    manager = InMemoryRecordManager("capsa-test")
    manager.create_schema()
    store = InMemoryVectorStore(DeterministicFakeEmbedding(size=16))

    def run(cleanup: Any) -> dict[str, int]:
        loader = CapsaLoader(folder)
        result = index(loader, manager, store, cleanup=cleanup, source_id_key="source",
                       key_encoder="sha256")
        assert {(o.label, o.reason) for o in loader.omitted} == {
            ("empty.md", "empty"), ("bomb.docx", "archive_ratio")}
        return dict(result)

    assert run("incremental") == {"num_added": 2, "num_updated": 0, "num_skipped": 0,
                                  "num_deleted": 0}
    assert run("incremental") == {"num_added": 0, "num_updated": 0, "num_skipped": 2,
                                  "num_deleted": 0}
    (folder / "a.md").write_text("# A\n\nAlpha policy text, revised.\n")
    assert run("incremental")["num_deleted"] == 1
    (folder / "b b.md").unlink()
    assert run("full")["num_deleted"] == 1
    assert [v["text"].strip() for v in store.store.values()] == [
        "# A\n\nAlpha policy text, revised."]


def test_two_copies_of_one_file_share_an_id_and_index_keeps_both_sources(
        tmp_path: Path) -> None:
    # A document's id is its content's digest (docs/langchain.md): a store keyed by it
    # keeps one copy; LangChain's own index() keys by content and source, and keeps both.
    (tmp_path / "policy.md").write_text("# Policy\n\nThe hotel cap is EUR 165.\n")
    (tmp_path / "policy (1).md").write_text("# Policy\n\nThe hotel cap is EUR 165.\n")
    docs = CapsaLoader(tmp_path).load()
    assert len({d.id for d in docs}) == 1 and len(docs) == 2
    manager = InMemoryRecordManager("capsa-copies")
    manager.create_schema()
    store = InMemoryVectorStore(DeterministicFakeEmbedding(size=16))
    index(docs, manager, store, cleanup="incremental", source_id_key="source",
          key_encoder="sha256")
    kept = {v["metadata"]["capsa_label"] for v in store.store.values()}
    assert kept == {"policy.md", "policy (1).md"}


class _Omissions(BaseCallbackHandler):
    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    def on_custom_event(self, name: str, data: Any, *, run_id: UUID, **kwargs: Any) -> None:
        if name == "capsa.omission":
            self.seen.append(data)


def test_directory_loader_style_one_loader_per_file_reports_refusals_through_callbacks(
        folder: Path) -> None:
    # DirectoryLoader(path, loader_cls=CapsaLoader, loader_kwargs={"callbacks": [h]})
    # builds CapsaLoader(str(file), **loader_kwargs) for each file and keeps no loader:
    # the callback is where its user learns what was refused.
    handler = _Omissions()
    docs: list[Document] = []
    for path in sorted(p for p in folder.iterdir() if p.is_file() and not p.is_symlink()):
        docs.extend(CapsaLoader(str(path), callbacks=[handler], limits=LIMITS).load())
    assert {"travel-policy.pdf", "notes with spaces.md"} <= _top_labels(docs)
    assert {(e["label"], e["reason"]) for e in handler.seen} >= {
        ("quarterly-report.docx", "archive_ratio"), ("noise.bin", "undecodable"),
        ("empty.txt", "empty")}
    assert all(e["source"] for e in handler.seen)


def test_the_glob_walks_only_matching_files_and_reports_a_link_it_meets(folder: Path) -> None:
    loader = CapsaLoader(folder, glob="*.md")
    docs = loader.load()
    assert _top_labels(docs) == {"notes with spaces.md", "ünïcødé политика.md", LONG_NAME}
    assert [(o.label, o.reason) for o in loader.omitted] == [("link.md", "symlink")]


@pytest.mark.parametrize(("blocked", "package", "extra"), [
    ("langchain_core", "capsa.langchain", "langchain"),
    ("llama_index.core", "capsa.llama_index", "llama-index"),
])
def test_a_missing_framework_is_an_import_error_naming_the_extra(
        blocked: str, package: str, extra: str) -> None:
    code = (f"import sys; sys.modules[{blocked!r}] = None\n"
            f"try:\n    import {package}\n"
            "except ImportError as e:\n    print(type(e).__name__, e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env={**os.environ, "HF_HUB_OFFLINE": "1"}).stdout
    assert out.startswith("ImportError")
    assert f"capsa[{extra}]" in out
