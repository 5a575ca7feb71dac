"""LlamaIndex app shapes the other app-shape tests do not cover.

`Document`s used as nodes (an index built from pre-chunked documents, as
``VectorStoreIndex(documents)`` or an `IngestionPipeline` without a splitter
leaves them), long enough that capsa must shorten them; capsa after
`SimilarityPostprocessor` in ``as_query_engine`` under several response modes;
scores that are NaN or infinite; nodes with relationships shared between
queries. MockLLM echoes its prompt, so each test reads what the LLM was sent.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from llama_index.core import Document, VectorStoreIndex
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.llms.mock import MockLLM
from llama_index.core.postprocessor import SimilarityPostprocessor
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import (
    IndexNode,
    MetadataMode,
    NodeRelationship,
    NodeWithScore,
    QueryBundle,
    RelatedNodeInfo,
    TextNode,
)

from capsa.budget import Budget, estimate_tokens
from capsa.llama_index import CapsaNodePostprocessor

QUESTION = "What is the nightly hotel cap in London?"
CONTEXT = re.compile(r"-{5,}\n(.*)\n-{5,}", re.DOTALL)
MAX_TOKENS = 90


def long_policy() -> str:
    return (" ".join(f"Rule {n}: trains are booked in standard class." for n in range(60))
            + " In London the nightly hotel cap is EUR 230. "
            + " ".join(f"Note {n}: taxis need a receipt." for n in range(60)))


def documents() -> list[Document]:
    return [
        Document(id_="travel", text=long_policy(),
                 metadata={"file_name": "travel.pdf", "secret": "s3cr3t"},
                 excluded_llm_metadata_keys=["secret"]),
        Document(id_="remote", text="The internet stipend for remote workers is EUR 30.",
                 metadata={"file_name": "remote.md"}),
    ]


def context_of(prompt: str) -> str:
    match = CONTEXT.search(prompt)
    assert match is not None, prompt
    return match.group(1)


class Fixed(BaseRetriever):
    def __init__(self, nodes: list[NodeWithScore]) -> None:
        super().__init__()
        self.nodes = nodes

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self.nodes


def test_a_long_document_node_is_shortened_not_charged_twice() -> None:
    """A `Document` keeps its text in text_resource: capsa's copies never changed it."""
    nodes = [NodeWithScore(node=documents()[0], score=0.8)]
    before = [n.model_dump() for n in nodes]
    kept = CapsaNodePostprocessor(budget=Budget(max_tokens=MAX_TOKENS)).postprocess_nodes(
        nodes, query_str=QUESTION)
    assert len(kept) == 1, "the packet came back empty"
    node = kept[0].node
    assert type(node) is Document
    sent = node.get_content(metadata_mode=MetadataMode.LLM)
    assert "EUR 230" in sent and estimate_tokens(sent) <= MAX_TOKENS
    assert node.text == node.get_content() and len(node.text) < len(long_policy())
    assert node.metadata["capsa_receipt"]["whole"] is False
    assert [n.model_dump() for n in nodes] == before


@pytest.mark.parametrize("asynchronous", [False, True], ids=["query", "aquery"])
async def test_an_index_of_documents_answers_within_the_budget(asynchronous: bool) -> None:
    index = VectorStoreIndex(documents(), embed_model=MockEmbedding(embed_dim=8))
    engine = index.as_query_engine(
        llm=MockLLM(), similarity_top_k=2,
        node_postprocessors=[CapsaNodePostprocessor(budget=Budget(max_tokens=MAX_TOKENS))])
    response = await engine.aquery(QUESTION) if asynchronous else engine.query(QUESTION)
    context = context_of(str(response))
    assert "EUR 230" in context and "s3cr3t" not in context
    assert estimate_tokens(context) <= MAX_TOKENS
    assert response.source_nodes
    assert all(type(n.node) is Document for n in response.source_nodes)


@pytest.mark.parametrize("mode", ["compact", "refine", "tree_summarize", "simple_summarize",
                                  "accumulate"])
def test_capsa_after_a_similarity_cutoff_in_every_response_mode(mode: str) -> None:
    nodes = [NodeWithScore(node=TextNode(id_="hotel", text="In London the nightly hotel cap is "
                                         "EUR 230. " + long_policy()), score=0.9),
             NodeWithScore(node=TextNode(id_="low", text="Parking is free."), score=0.05),
             NodeWithScore(node=TextNode(id_="none", text="Rail is standard class."), score=None)]
    before = [n.model_dump() for n in nodes]
    engine = RetrieverQueryEngine.from_args(
        Fixed(nodes), llm=MockLLM(), response_mode=mode,
        node_postprocessors=[SimilarityPostprocessor(similarity_cutoff=0.1),
                             CapsaNodePostprocessor(budget=Budget(max_tokens=MAX_TOKENS))])
    response = engine.query(QUESTION)
    ids = [n.node.node_id for n in response.source_nodes]
    assert "low" not in ids and "hotel" in ids
    shown = "\n\n".join(n.node.get_content(metadata_mode=MetadataMode.LLM)
                        for n in response.source_nodes)
    assert estimate_tokens(shown) <= MAX_TOKENS
    assert "EUR 230" in str(response)
    assert [n.model_dump() for n in nodes] == before


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
@pytest.mark.parametrize("max_tokens", [60, 25])
def test_a_non_finite_node_score_counts_as_no_score(bad: float, max_tokens: int) -> None:
    def nodes(score: float | None) -> list[NodeWithScore]:
        return [
            NodeWithScore(node=TextNode(id_="hotel", text="In London the hotel cap is EUR 230."),
                          score=score),
            NodeWithScore(node=TextNode(id_="rail", text="Trains are booked in standard class "
                                        "every day."), score=0.9),
            NodeWithScore(node=TextNode(id_="meals", text="Meals are paid up to EUR 55."),
                          score=0.3),
        ]

    post = CapsaNodePostprocessor(budget=Budget(max_tokens=max_tokens))
    with_bad = post.postprocess_nodes(nodes(bad), query_str=QUESTION)
    without = post.postprocess_nodes(nodes(None), query_str=QUESTION)
    assert [n.node.node_id for n in with_bad] == [n.node.node_id for n in without]
    assert with_bad[0].node.node_id == "hotel"
    assert ([n.node.metadata["capsa_receipt"] for n in with_bad]
            == [n.node.metadata["capsa_receipt"] for n in without])


def test_nodes_shared_between_queries_come_back_unchanged_and_keep_relationships() -> None:
    source = RelatedNodeInfo(node_id="travel-doc", metadata={"file_name": "travel.pdf"})
    shared = [
        NodeWithScore(node=TextNode(id_="hotel", text=long_policy(),
                                    metadata={"file_name": "travel.pdf"},
                                    relationships={NodeRelationship.SOURCE: source}), score=0.8),
        NodeWithScore(node=IndexNode(id_="summary", index_id="sub-index",
                                     text="Summary: hotel caps by city."), score=0.5),
        NodeWithScore(node=Document(id_="remote", text="The internet stipend is EUR 30."),
                      score=0.2),
    ]
    before = [n.model_dump() for n in shared]
    engine: Any = RetrieverQueryEngine.from_args(
        Fixed(shared), llm=MockLLM(),
        node_postprocessors=[CapsaNodePostprocessor(budget=Budget(max_tokens=MAX_TOKENS))])
    first = engine.query(QUESTION)
    second = engine.query("How much is the internet stipend?")
    assert [n.model_dump() for n in shared] == before
    for response in (first, second):
        assert estimate_tokens(context_of(str(response))) <= MAX_TOKENS
        by_id = {n.node.node_id: n.node for n in response.source_nodes}
        if "hotel" in by_id:
            assert by_id["hotel"].relationships[NodeRelationship.SOURCE].node_id == "travel-doc"
        if "summary" in by_id:
            assert isinstance(by_id["summary"], IndexNode)
            assert by_id["summary"].index_id == "sub-index"
    assert "EUR 230" in context_of(str(first)) and "EUR 30" in context_of(str(second))
