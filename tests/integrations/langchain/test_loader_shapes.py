"""CapsaLoader's three document shapes, and a page cited in an answer of a real chain."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnableLambda, RunnablePassthrough
from langchain_core.vectorstores import InMemoryVectorStore

from capsa.budget import Budget
from capsa.capsule import Evidence
from capsa.guard.samples import pdf_with_text
from capsa.langchain import CapsaCompressor, CapsaLoader, format_packet
from capsa.langchain.capsule_conversion import evidence_of

pytestmark = pytest.mark.slow
REPORT = Path(__file__).resolve().parents[2] / "realdocs" / "files" / "report.docx"
PAGES = ["Travel policy. Flights are booked in economy class.",
         "Hotels. The nightly hotel cap is EUR 165. In high-cost cities the cap is EUR 230.",
         "Meals. Travellers receive a daily allowance of EUR 55."]
POLICY = ("policy.pdf", pdf_with_text(PAGES))
QUESTION = "What is the hotel cap in high-cost cities?"


@pytest.fixture(scope="module")
def by_page() -> list[Document]:
    return CapsaLoader(POLICY, shape="page").load()


def test_loader_page_shape_yields_one_document_per_pdf_page(by_page: list[Document]) -> None:
    assert [d.metadata["page_number"] for d in by_page] == [1, 2, 3]
    assert [d.page_content for d in by_page] == PAGES
    assert len({d.id for d in by_page}) == 3
    assert {d.metadata["filetype"] for d in by_page} == {"application/pdf"}


def test_loader_file_shape_is_still_one_document_per_file() -> None:
    (doc,) = CapsaLoader(POLICY).load()

    assert doc.id == doc.metadata["capsa_sha256"]
    assert doc.page_content == "\n\n".join(PAGES)


def test_loader_element_shape_carries_unstructured_loader_keys() -> None:
    docs = CapsaLoader([REPORT], shape="element").load()
    table = next(d for d in docs if d.metadata["category"] == "Table")
    heading = next(d for d in docs if d.id == table.metadata["parent_id"])

    assert docs[0].metadata["category"] == "Title"
    assert heading.page_content == "Berth figures" == table.metadata["capsa_heading"]
    assert table.metadata["text_as_html"].startswith("<table><tr><td>Berth</td>")
    assert {"element_id", "filename", "filetype", "languages", "source"} <= set(table.metadata)


def test_loader_refuses_a_shape_it_does_not_know() -> None:
    with pytest.raises(ValueError, match="shape must be one of"):
        CapsaLoader(POLICY, shape="single")  # type: ignore[arg-type]


class _Prompts(BaseCallbackHandler):
    def __init__(self) -> None:
        self.seen: list[list[BaseMessage]] = []

    def on_chat_model_start(self, serialized: dict[str, Any], messages: list[list[BaseMessage]],
                            *, run_id: UUID, **kwargs: Any) -> None:
        self.seen.extend(messages)


def test_a_chain_over_pages_shows_the_model_each_passage_page_so_the_answer_cites_it(
        by_page: list[Document]) -> None:
    store = InMemoryVectorStore.from_documents(by_page, DeterministicFakeEmbedding(size=32))
    compressor = CapsaCompressor(budget=Budget(max_tokens=300))
    pack = RunnableLambda(lambda docs: compressor.compress_documents(docs, QUESTION))
    prompt = ChatPromptTemplate.from_messages([
        ("system", "Answer from the context and cite the page.\n{context}"),
        ("human", "{question}")])
    answer = "EUR 230 a night (policy.pdf, page 2)."
    model = GenericFakeChatModel(messages=iter([AIMessage(answer)]))
    chain = ({"context": store.as_retriever(search_kwargs={"k": 3}) | pack | format_packet,
              "question": RunnablePassthrough()} | prompt | model)
    prompts = _Prompts()

    reply = chain.invoke(QUESTION, config={"callbacks": [prompts]})

    shown = str(prompts.seen[0][0].content)
    opener = shown[:shown.index("EUR 230")].rsplit("<document", 1)[1]
    assert 'source="policy.pdf" page="2"' in opener
    assert reply.content == answer


def test_a_capsule_chunk_from_a_page_document_names_its_page(by_page: list[Document]) -> None:
    evidence = evidence_of(by_page[1])

    assert isinstance(evidence, Evidence)
    assert evidence.page == "2"
