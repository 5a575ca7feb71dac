"""capsa's OpenTelemetry spans inside a LlamaIndex query engine: nested under the caller's span."""

from __future__ import annotations

import pytest
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.llms.mock import MockLLM
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from capsa.budget import Budget
from capsa.llama_index import CapsaNodePostprocessor

pytest.importorskip("opentelemetry.sdk")

TEXTS = [
    "Refunds are accepted within 30 days of delivery.",
    "Damaged items are refunded in full, shipping included, once the courier confirms.",
    "Store credit never expires and can be used online or in any shop.",
    "The returns desk is open on weekdays from nine to five, except public holidays.",
]


class Fixed(BaseRetriever):
    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return [NodeWithScore(node=TextNode(id_=f"n{i}", text=t), score=1.0 - i / 10)
                for i, t in enumerate(TEXTS)]


def test_pack_span_nests_under_the_span_around_a_query_engine_call(otel) -> None:
    from opentelemetry import trace

    engine = RetrieverQueryEngine.from_args(
        Fixed(), llm=MockLLM(),
        node_postprocessors=[CapsaNodePostprocessor(budget=Budget(max_tokens=40))])
    with trace.get_tracer("app").start_as_current_span("app.request") as parent:
        response = engine.query("refund for a damaged item")
    assert response.source_nodes
    (span,) = otel.spans("capsa.pack")
    context = parent.get_span_context()
    assert (span.parent.span_id, span.context.trace_id) == (context.span_id, context.trace_id)
    assert span.attributes["capsa.pack.passages"] == 4
    assert span.attributes["capsa.pack.kept"] == len(response.source_nodes)
