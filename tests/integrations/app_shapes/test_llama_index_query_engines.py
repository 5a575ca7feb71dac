"""The query engines LlamaIndex users build, with CapsaNodePostprocessor in node_postprocessors.

``VectorStoreIndex.from_documents(..., embed_model=MockEmbedding(embed_dim=8))`` then
``as_query_engine(llm=MockLLM(), node_postprocessors=[...])``, queried with
``query``, ``aquery`` and ``streaming=True``; a `RetrieverQueryEngine` over an
`IngestionPipeline` with a `SentenceSplitter`; and the nodes retrievers hand
over in practice: no score, `Document`s beside `TextNode`s, `ImageNode`s,
metadata hidden from the LLM, metadata of every JSON type. MockLLM echoes its
prompt, so each test reads the context the LLM got and counts it with the
postprocessor's tokenizer.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from llama_index.core import Document, VectorStoreIndex
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.ingestion import IngestionPipeline
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.instrumentation.events import BaseEvent
from llama_index.core.llms.mock import MockLLM
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import ImageNode, NodeWithScore, QueryBundle, TextNode

from capsa.budget import Budget, estimate_tokens
from capsa.llama_index import CapsaNodePostprocessor
from capsa.llama_index.postprocessors import CapsaCompressionEvent

MAX_TOKENS = 90
QUESTION = "What is the nightly hotel cap in London?"
CONTEXT = re.compile(r"-{5,}\n(.*)\n-{5,}", re.DOTALL)


def documents() -> list[Document]:
    return [
        Document(id_="travel", text="Flights are booked in economy class. The nightly hotel cap "
                 "is EUR 165. In London the hotel cap is EUR 230. Taxis need a receipt.",
                 metadata={"file_name": "travel.pdf", "page_label": "3", "secret": "s3cr3t",
                           "tags": ["travel"], "reviewed": {"by": "ops", "on": None}},
                 excluded_llm_metadata_keys=["secret"]),
        Document(id_="remote", text="The internet stipend for remote workers is EUR 30 a month.",
                 metadata={"title": ["Remote", "work"], "version": 3, "owner": None}),
        Document(id_="rail", text="Rail travel is booked in standard class, 14 days ahead.",
                 metadata={"file_name": "travel.pdf", "score": "high"}),
    ]


class Reports(BaseEventHandler):
    seen: list[CapsaCompressionEvent] = []

    def handle(self, event: BaseEvent, **kwargs: Any) -> None:
        if isinstance(event, CapsaCompressionEvent):
            self.seen.append(event)

    @classmethod
    def class_name(cls) -> str:
        return "Reports"


@pytest.fixture
def reports() -> Iterator[Reports]:
    handler = Reports(seen=[])
    get_dispatcher().add_event_handler(handler)
    yield handler
    get_dispatcher().event_handlers.remove(handler)


@pytest.fixture(scope="module")
def index() -> VectorStoreIndex:
    return VectorStoreIndex.from_documents(documents(), embed_model=MockEmbedding(embed_dim=8))


def context_of(prompt: str) -> str:
    """The context MockLLM was given (it echoes its prompt), between the template's rules."""
    match = CONTEXT.search(prompt)
    assert match is not None, prompt
    return match.group(1)


def engine(index: VectorStoreIndex, **options: Any) -> Any:
    post = CapsaNodePostprocessor(budget=Budget(max_tokens=MAX_TOKENS))
    return index.as_query_engine(llm=MockLLM(), node_postprocessors=[post],
                                 similarity_top_k=3, **options)


def assert_accounted(event: CapsaCompressionEvent, retrieved: int) -> None:
    named = event.kept + [d["id"] for d in event.dropped]
    assert len(named) == len(set(named)) == retrieved
    assert all(d["reason"] for d in event.dropped)


def test_query_engine_sends_a_context_within_the_budget(index: VectorStoreIndex,
                                                         reports: Reports) -> None:
    stored = {k: v.model_dump() for k, v in index.docstore.docs.items()}
    response = engine(index).query(QUESTION)
    context = context_of(str(response))
    assert "EUR 230" in context and estimate_tokens(context) <= MAX_TOKENS
    assert "s3cr3t" not in context and "capsa_receipt" not in context
    assert {k: v.model_dump() for k, v in index.docstore.docs.items()} == stored
    [event] = reports.seen
    assert_accounted(event, retrieved=3)


async def test_query_engine_aquery_sends_what_query_sends(index: VectorStoreIndex,
                                                         reports: Reports) -> None:
    sync = str(engine(index).query(QUESTION))
    assert str(await engine(index).aquery(QUESTION)) == sync
    first, second = reports.seen
    assert first.kept == second.kept and first.used_tokens == second.used_tokens


def test_streaming_query_engine_streams_the_packed_context(index: VectorStoreIndex) -> None:
    response = engine(index, streaming=True).query(QUESTION)
    streamed = "".join(response.response_gen)
    assert streamed == str(engine(index).query(QUESTION))
    assert estimate_tokens(context_of(streamed)) <= MAX_TOKENS


async def test_streaming_query_engine_streams_under_aquery(index: VectorStoreIndex) -> None:
    response = await engine(index, streaming=True).aquery(QUESTION)
    streamed = "".join([token async for token in response.async_response_gen()])
    assert estimate_tokens(context_of(streamed)) <= MAX_TOKENS and "EUR 230" in streamed


def test_retriever_query_engine_over_a_sentence_splitter_pipeline(reports: Reports) -> None:
    long = documents()
    long[0] = Document(id_="travel", text=" ".join([long[0].text] * 6),
                       metadata=long[0].metadata, excluded_llm_metadata_keys=["secret"])
    pipeline = IngestionPipeline(transformations=[
        SentenceSplitter(chunk_size=64, chunk_overlap=8), MockEmbedding(embed_dim=8)])
    nodes = pipeline.run(documents=long)
    assert len(nodes) > len(long)
    index = VectorStoreIndex(nodes, embed_model=MockEmbedding(embed_dim=8))
    query_engine = RetrieverQueryEngine.from_args(
        index.as_retriever(similarity_top_k=len(nodes)), llm=MockLLM(),
        node_postprocessors=[CapsaNodePostprocessor(budget=Budget(max_tokens=MAX_TOKENS))])
    context = context_of(str(query_engine.query(QUESTION)))
    assert "EUR 230" in context and estimate_tokens(context) <= MAX_TOKENS
    assert "s3cr3t" not in context
    assert_accounted(reports.seen[-1], retrieved=len(nodes))


class Fixed(BaseRetriever):
    """Hands over the nodes it was built with, as a custom or hybrid retriever does."""

    def __init__(self, nodes: list[NodeWithScore]) -> None:
        super().__init__()
        self.nodes = nodes

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self.nodes


def mixed_nodes() -> list[NodeWithScore]:
    return [
        NodeWithScore(node=TextNode(id_="text", text="The hotel cap in Paris is EUR 210."),
                      score=None),
        NodeWithScore(node=Document(id_="doc", text="In London the hotel cap is EUR 230.",
                                    metadata={"file_name": "travel.pdf"}), score=None),
        NodeWithScore(node=ImageNode(id_="caption", text="A chart of hotel caps by city.",
                                     image="aGVsbG8=", metadata={"page_label": 4}), score=0.7),
        NodeWithScore(node=ImageNode(id_="picture", image="aGVsbG8="), score=0.9),
        NodeWithScore(node=TextNode(id_="hidden", text="Rail is standard class.",
                                    metadata={"internal_ref": "X-99" * 20},
                                    excluded_llm_metadata_keys=["internal_ref"]), score=0.1),
    ]


def test_mixed_node_kinds_and_missing_scores_reach_the_llm_within_the_budget(
        reports: Reports) -> None:
    nodes = mixed_nodes()
    before = [n.model_dump() for n in nodes]
    query_engine = RetrieverQueryEngine.from_args(
        Fixed(nodes), llm=MockLLM(),
        node_postprocessors=[CapsaNodePostprocessor(budget=Budget(max_tokens=MAX_TOKENS))])
    response = query_engine.query(QUESTION)
    context = context_of(str(response))
    assert "EUR 230" in context and estimate_tokens(context) <= MAX_TOKENS
    assert "X-99" not in context
    assert [n.model_dump() for n in nodes] == before
    [event] = reports.seen
    assert_accounted(event, retrieved=5)
    assert {"id": "picture", "reason": "empty", "detail": "the passage has no text"} in (
        event.dropped)


def test_kept_nodes_keep_their_kind_score_and_hidden_keys() -> None:
    nodes = mixed_nodes()
    kept = CapsaNodePostprocessor(budget=Budget(max_tokens=500, min_relevance=None)
                                  ).postprocess_nodes(nodes, query_str=QUESTION)
    by_id = {n.node.node_id: n for n in kept}
    assert type(by_id["doc"].node) is Document and by_id["doc"].score is None
    assert type(by_id["caption"].node) is ImageNode and by_id["caption"].score == 0.7
    assert by_id["caption"].node.image == "aGVsbG8="
    assert "internal_ref" in by_id["hidden"].node.excluded_llm_metadata_keys
