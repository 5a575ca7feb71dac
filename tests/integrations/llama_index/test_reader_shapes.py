"""CapsaReader's three document shapes, and a page cited through a query engine."""

from __future__ import annotations

from pathlib import Path

import pytest
from llama_index.core import VectorStoreIndex
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.llms.mock import MockLLM
from llama_index.core.schema import Document, MetadataMode

from capsa.budget import Budget
from capsa.guard.samples import pdf_with_text
from capsa.llama_index import CapsaDirectoryReader, CapsaNodePostprocessor, CapsaReader

pytestmark = pytest.mark.slow
REPORT = Path(__file__).resolve().parents[2] / "realdocs" / "files" / "report.docx"
PAGES = ["Travel policy. Flights are booked in economy class.",
         "Hotels. The nightly hotel cap is EUR 165. In high-cost cities the cap is EUR 230.",
         "Meals. Travellers receive a daily allowance of EUR 55."]


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("shapes")
    (root / "policy.pdf").write_bytes(pdf_with_text(PAGES))
    (root / "report.docx").write_bytes(REPORT.read_bytes())
    return root


@pytest.fixture(scope="module")
def pages(folder: Path) -> list[Document]:
    return CapsaDirectoryReader(folder, shape="page").load_data()


def test_reader_page_shape_labels_pages_as_llama_index_pdf_reader_does(
        pages: list[Document]) -> None:
    pdf = [d for d in pages if d.metadata["file_name"] == "policy.pdf"]

    assert [d.metadata["page_label"] for d in pdf] == ["1", "2", "3"]
    assert [d.text for d in pdf] == PAGES
    assert {"file_type", "file_size", "creation_date", "last_modified_date"} <= set(
        pdf[0].metadata)


def test_reader_keeps_big_and_opaque_keys_out_of_llm_and_embedding_text(
        folder: Path) -> None:
    docs = CapsaReader(shape="element").load_data(folder / "report.docx")
    table = next(d for d in docs if d.metadata["category"] == "Table")

    llm_text = table.get_content(metadata_mode=MetadataMode.LLM)
    embed_text = table.get_content(metadata_mode=MetadataMode.EMBED)
    assert "category: Table" in llm_text and "capsa_heading: Berth figures" in llm_text
    assert all("<table>" not in text and "capsa_sha256" not in text and
               "element_id" not in text for text in (llm_text, embed_text))


def test_reader_file_shape_is_still_one_document_per_file(folder: Path) -> None:
    (doc,) = CapsaReader().load_data(folder / "policy.pdf")

    assert doc.id_ == doc.metadata["capsa_sha256"]
    assert "page_label" not in doc.metadata


def test_query_engine_over_pages_shows_the_llm_the_page_of_the_passage_it_answers_from(
        pages: list[Document]) -> None:
    index = VectorStoreIndex.from_documents(pages, embed_model=MockEmbedding(embed_dim=8))
    engine = index.as_query_engine(
        node_postprocessors=[CapsaNodePostprocessor(budget=Budget(max_tokens=400))],
        llm=MockLLM(), similarity_top_k=8)

    response = engine.query("What is the hotel cap in high-cost cities?")

    prompt = str(response.response)  # MockLLM answers with the prompt it was given
    before = prompt[:prompt.index("EUR 230")]
    assert before.rsplit("page_label:", 1)[1].split("\n", 1)[0].strip() == "2"
