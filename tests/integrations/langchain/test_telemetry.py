"""capsa's OpenTelemetry spans inside a LangChain chain: nested under the caller's span."""

from __future__ import annotations

import pytest
from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import ParrotFakeChatModel
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnableLambda, RunnablePassthrough

from capsa.budget import Budget
from capsa.langchain import BudgetedRetriever

pytest.importorskip("opentelemetry.sdk")

DOCS = [Document(id=f"p{i}", page_content=text) for i, text in enumerate([
    "Refunds are accepted within 30 days of delivery.",
    "Damaged items are refunded in full, shipping included, once the courier confirms.",
    "Store credit never expires and can be used online or in any shop.",
    "The returns desk is open on weekdays from nine to five, except public holidays.",
])]


def test_pack_span_nests_under_the_span_around_a_chain_call(otel) -> None:
    from opentelemetry import trace

    retriever = BudgetedRetriever(retriever=RunnableLambda(lambda query: DOCS),
                                  budget=Budget(max_tokens=40))
    prompt = ChatPromptTemplate.from_messages(
        [("human", "Context:\n{context}\n\nQuestion: {question}")])
    chain = ({"context": retriever | (lambda docs: "\n\n".join(d.page_content for d in docs)),
              "question": RunnablePassthrough()}
             | prompt | ParrotFakeChatModel() | StrOutputParser())
    with trace.get_tracer("app").start_as_current_span("app.request") as parent:
        answer = chain.invoke("refund for a damaged item")
    assert "Damaged items" in answer
    (span,) = otel.spans("capsa.pack")
    context = parent.get_span_context()
    assert (span.parent.span_id, span.context.trace_id) == (context.span_id, context.trace_id)
    assert span.attributes["capsa.pack.passages"] == 4
    assert span.attributes["capsa.pack.dropped"] >= 1
