"""CapsaReader, CapsaDirectoryReader and CapsaTransform as LlamaIndex applications ingest.

Folders mix good files (names with spaces and unicode), hostile ones (a
zip-bomb DOCX, a PDF over the page limit, bytes that are not text), an empty
file and a symbolic link; documents go through `SimpleDirectoryReader`,
`IngestionPipeline` with a docstore and upserts, and `VectorStoreIndex`.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from llama_index.core import SimpleDirectoryReader, VectorStoreIndex
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.ingestion import DocstoreStrategy, IngestionPipeline
from llama_index.core.llms import MockLLM
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.schema import Document
from llama_index.core.storage.docstore import SimpleDocumentStore
from llama_index.core.vector_stores import SimpleVectorStore

from capsa.demo.corpus_source import CORPUS_DIR
from capsa.guard import ExtractionLimits
from capsa.llama_index import CapsaDirectoryReader, CapsaReader, CapsaTransform

pytestmark = pytest.mark.slow

REALDOCS = Path(__file__).parents[2] / "realdocs" / "files"
LIMITS = ExtractionLimits.for_ingestion().model_copy(update={"max_pages": 2})
GOOD = {"travel-policy.pdf", "notes with spaces.md", "ünïcødé политика.md"}
REFUSED = {("quarterly-report.docx", "archive_ratio"), ("annual review.pdf", "too_many_pages"),
           ("noise.bin", "undecodable"), ("empty.txt", "empty"), ("link.md", "symlink")}


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("inbox")
    (folder / "travel-policy.pdf").write_bytes((CORPUS_DIR / "travel-policy.pdf").read_bytes())
    (folder / "quarterly-report.docx").write_bytes(
        (CORPUS_DIR / "quarterly-report.docx").read_bytes())
    (folder / "notes with spaces.md").write_text("# Notes\n\nThe hotel cap is EUR 165.\n")
    (folder / "ünïcødé политика.md").write_text("# Политика\n\nRemote days: three a week.\n")
    (folder / "sub dir").mkdir()
    (folder / "sub dir" / "annual review.pdf").write_bytes(
        (REALDOCS / "annual-review-writer.pdf").read_bytes())
    (folder / "noise.bin").write_bytes(bytes(range(256)) * 8)
    (folder / "empty.txt").write_bytes(b"")
    (folder / "link.md").symlink_to(folder / "notes with spaces.md")
    return folder


def _editable(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.md").write_text("# A\n\nAlpha policy text.\n")
    (folder / "b b.md").write_text("# B\n\nBravo policy text.\n")
    (folder / "bomb.docx").write_bytes((CORPUS_DIR / "quarterly-report.docx").read_bytes())
    return folder


def _pipeline() -> IngestionPipeline:
    return IngestionPipeline(
        transformations=[CapsaTransform(), SentenceSplitter(chunk_size=64, chunk_overlap=0),
                         MockEmbedding(embed_dim=8)],
        docstore=SimpleDocumentStore(), vector_store=SimpleVectorStore(),
        docstore_strategy=DocstoreStrategy.UPSERTS)


def _stored(pipeline: IngestionPipeline) -> dict[str, int]:
    """Chunks in the vector store per source document id."""
    counts: dict[str, int] = {}
    for ref in pipeline.vector_store.data.text_id_to_ref_doc_id.values():  # type: ignore[union-attr]
        counts[ref] = counts.get(ref, 0) + 1
    return counts


def test_directory_reader_over_a_mixed_folder_loads_the_good_and_reports_the_rest(
        folder: Path) -> None:
    reader = CapsaDirectoryReader(folder, reader=CapsaReader(limits=LIMITS))
    docs = reader.load_data()
    assert {d.metadata["file_name"] for d in docs} == GOOD
    assert {(o.label, o.reason) for o in reader.omitted} == REFUSED
    for doc in docs:
        assert Path(doc.metadata["file_path"]) == folder / doc.metadata["file_name"]
        assert json.loads(json.dumps(doc.metadata)) == doc.metadata
    again = CapsaDirectoryReader(folder, reader=CapsaReader(limits=LIMITS))
    assert [d.id_ for d in again.load_data()] == [d.id_ for d in docs]
    asynchronous = CapsaDirectoryReader(folder, reader=CapsaReader(limits=LIMITS))
    assert [(d.id_, d.text) for d in asyncio.run(asynchronous.aload_data())] == [
        (d.id_, d.text) for d in docs]
    assert asynchronous.omitted == reader.omitted


def test_simple_directory_reader_with_capsa_for_every_extension_and_filename_ids(
        folder: Path) -> None:
    reader = CapsaReader(limits=LIMITS)
    extensions = {".pdf", ".docx", ".md", ".bin", ".txt"}

    def load() -> list[Document]:
        return SimpleDirectoryReader(str(folder), recursive=True, filename_as_id=True,
                                     file_extractor=dict.fromkeys(extensions, reader)
                                     ).load_data()

    docs = load()
    assert {d.metadata["file_name"] for d in docs} == GOOD
    # SimpleDirectoryReader's own walk follows the link; capsa refuses it all the same
    assert {(o.label, o.reason) for o in reader.omitted} == REFUSED
    assert [d.id_ for d in load()] == [d.id_ for d in docs]


def test_deferred_placeholders_keep_their_ids_from_one_load_to_the_next(folder: Path) -> None:
    first = CapsaDirectoryReader(folder, defer=True).load_data()
    second = CapsaDirectoryReader(folder, defer=True).load_data()
    assert [d.id_ for d in first] == [d.id_ for d in second]
    assert len({d.id_ for d in first}) == len(first)


def test_pipeline_upserts_run_twice_duplicate_nothing_and_replace_an_edited_file(
        tmp_path: Path) -> None:
    folder = _editable(tmp_path)
    pipeline = _pipeline()
    pipeline.run(documents=CapsaDirectoryReader(folder, defer=True).load_data())
    first = _stored(pipeline)
    docstore_size = len(pipeline.docstore.docs)
    assert len(first) == 2  # the bomb is refused, nothing of it stored

    assert pipeline.run(documents=CapsaDirectoryReader(folder, defer=True).load_data()) == []
    assert _stored(pipeline) == first
    assert len(pipeline.docstore.docs) == docstore_size

    (folder / "a.md").write_text("# A\n\nAlpha policy text, revised at length: " +
                                 "every clause rewritten. " * 30)
    pipeline.run(documents=CapsaDirectoryReader(folder, defer=True).load_data())
    after = _stored(pipeline)
    assert set(after) == set(first)  # same documents, the edited one replaced in place
    assert after[str(folder / "a.md")] > first[str(folder / "a.md")]
    assert after[str(folder / "b b.md")] == first[str(folder / "b b.md")]
    assert len(pipeline.docstore.docs) == docstore_size


def test_pipeline_upserts_over_a_directory_reader_with_filename_ids(tmp_path: Path) -> None:
    folder = _editable(tmp_path)
    pipeline = _pipeline()
    pipeline.run(documents=CapsaDirectoryReader(folder, filename_as_id=True).load_data())
    first = _stored(pipeline)
    assert set(first) == {str(folder / "a.md"), str(folder / "b b.md")}
    (folder / "a.md").write_text("# A\n\nRevised. " + "More words here. " * 30)
    pipeline.run(documents=CapsaDirectoryReader(folder, filename_as_id=True).load_data())
    after = _stored(pipeline)
    assert set(after) == set(first)
    assert after[str(folder / "a.md")] > first[str(folder / "a.md")]


def test_filename_ids_name_each_part_of_a_file_that_gives_several(tmp_path: Path) -> None:
    mail = tmp_path / "mail.eml"
    mail.write_bytes((REALDOCS / "quarterly-with-attachments.eml").read_bytes())
    docs = CapsaDirectoryReader(tmp_path, filename_as_id=True).load_data()
    assert len(docs) > 1
    assert [d.id_ for d in docs] == [f"{mail}_part_{n}" for n in range(len(docs))]


def test_two_copies_of_one_file_stay_two_sources_when_named_by_file(tmp_path: Path) -> None:
    # by default a document is named by its content's digest, the same for both copies
    # (docs/llama-index.md); filename_as_id keeps them apart, as SimpleDirectoryReader's
    (tmp_path / "policy.md").write_text("# Policy\n\nThe hotel cap is EUR 165.\n")
    (tmp_path / "policy (1).md").write_text("# Policy\n\nThe hotel cap is EUR 165.\n")
    assert len({d.id_ for d in CapsaDirectoryReader(tmp_path).load_data()}) == 1
    docs = CapsaDirectoryReader(tmp_path, filename_as_id=True).load_data()
    index = VectorStoreIndex.from_documents(docs, embed_model=MockEmbedding(embed_dim=8))
    names = sorted(n.metadata["file_name"] for n in index.docstore.docs.values())
    assert names == ["policy (1).md", "policy.md"]


def test_pipeline_arun_gives_what_run_gives(tmp_path: Path) -> None:
    folder = _editable(tmp_path)
    sync = IngestionPipeline(transformations=[CapsaTransform(), SentenceSplitter()]).run(
        documents=CapsaDirectoryReader(folder, defer=True).load_data())
    asynchronous = asyncio.run(IngestionPipeline(
        transformations=[CapsaTransform(), SentenceSplitter()]).arun(
        documents=CapsaDirectoryReader(folder, defer=True).load_data()))
    assert sorted((n.ref_doc_id, n.get_content()) for n in asynchronous) == sorted(
        (n.ref_doc_id, n.get_content()) for n in sync)


def test_an_index_over_a_mixed_folder_answers_and_persists(folder: Path, tmp_path: Path
                                                           ) -> None:
    docs = CapsaDirectoryReader(folder, reader=CapsaReader(limits=LIMITS),
                                shape="page").load_data()
    index = VectorStoreIndex.from_documents(docs, embed_model=MockEmbedding(embed_dim=8))
    response = index.as_query_engine(llm=MockLLM(), similarity_top_k=2).query("hotel cap")
    assert response.source_nodes
    assert all(n.node.metadata["file_name"] in GOOD for n in response.source_nodes)
    assert all(n.node.ref_doc_id in {d.id_ for d in docs} for n in response.source_nodes)
    index.storage_context.persist(str(tmp_path / "store"))  # every metadata value serialises
    reloaded = SimpleDocumentStore.from_persist_dir(str(tmp_path / "store"))
    assert len(reloaded.docs) == len(index.docstore.docs)


def test_the_pipeline_cache_never_serves_one_folders_extraction_for_another(
        tmp_path: Path) -> None:
    pipeline = IngestionPipeline(transformations=[CapsaTransform()])  # the default cache on
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    (tmp_path / "one" / "a.md").write_text("first folder")
    (tmp_path / "two" / "b.md").write_text("second folder")
    first = pipeline.run(documents=CapsaDirectoryReader(tmp_path / "one", defer=True).load_data())
    second = pipeline.run(documents=CapsaDirectoryReader(tmp_path / "two", defer=True).load_data())
    assert [n.get_content() for n in first] == ["first folder"]
    assert [n.get_content() for n in second] == ["second folder"]
