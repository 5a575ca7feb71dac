"""The demo's four jobs, each inside a real LangChain or LlamaIndex pipeline.

Every function returns plain data (for ``capsa demo --json``) and is what the
demo's console story prints. They take the extracted corpus, so extraction
runs once.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import BaseCallbackHandler, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableConfig, RunnablePassthrough

from capsa.budget import Budget, estimate_tokens
from capsa.demo.corpus_source import QUESTIONS
from capsa.demo.retrieval import Chunk, search

__all__ = [
    "DEMO_QUESTIONS",
    "CorpusRetriever",
    "agent_conversation",
    "llama_index_pipelines",
    "rag_chain",
    "shadow_comparison",
]

DEMO_QUESTIONS: tuple[str, ...] = tuple(q.question for q in QUESTIONS[:3])
"""The three questions every step asks, from the corpus's sample questions."""

_PROMPT = ChatPromptTemplate.from_messages([
    ("system", "Answer from the context only and cite the document id in brackets.\n\n"
               "{context}"),
    ("human", "{question}"),
])


class CorpusRetriever(BaseRetriever):
    """BM25 over the demo's chunks, as a LangChain retriever (`k` field and kwarg)."""

    chunks: list[Chunk]
    k: int = 6

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun,
                                k: int | None = None) -> list[Document]:
        return [Document(id=chunk.id, page_content=chunk.text,
                         metadata={"source": chunk.source, "title": chunk.title,
                                   "score": round(score, 4)})
                for chunk, score in search(query, self.chunks, k or self.k)]


def _answers(question: str) -> str:
    return next(q.answer for q in QUESTIONS if q.question == question)


def rag_chain(chunks: list[Chunk], model: BaseChatModel, *, max_tokens: int = 300
              ) -> list[dict[str, Any]]:
    """An LCEL RAG chain whose retriever is wrapped in `BudgetedRetriever`."""
    from capsa.langchain import BudgetedRetriever, format_packet

    raw = CorpusRetriever(chunks=chunks, k=6)
    budgeted = BudgetedRetriever(retriever=raw, budget=Budget(max_tokens=max_tokens))
    chain = ({"context": budgeted | format_packet, "question": RunnablePassthrough()}
             | _PROMPT | model | StrOutputParser())
    rows = []
    for question in DEMO_QUESTIONS:
        full = format_packet.invoke(raw.invoke(question))
        packed = format_packet.invoke(budgeted.invoke(question))
        answer = chain.invoke(question)
        rows.append({"question": question, "answer": answer,
                     "expected": _answers(question),
                     "found": _answers(question).lower() in answer.lower(),
                     "context_tokens_raw": estimate_tokens(full),
                     "context_tokens_packed": estimate_tokens(packed),
                     "budget": max_tokens})
    return rows


class _Sent(BaseCallbackHandler):
    """Counts the tokens of every message list sent to a chat model."""

    def __init__(self) -> None:
        self.calls: list[int] = []

    def on_chat_model_start(self, serialized: dict[str, Any], messages: list[list[BaseMessage]],
                            **kwargs: Any) -> None:
        self.calls.extend(count_tokens_approximately(batch) for batch in messages)


def agent_conversation(chunks: list[Chunk], model: BaseChatModel) -> dict[str, Any]:
    """Three questions to a `create_agent` agent, with and without the citation capsule."""
    from langchain.agents import create_agent
    from langchain_core.tools import tool
    from langgraph.checkpoint.memory import InMemorySaver

    from capsa.langchain import CitationCapsuleMiddleware, capsa_retriever_tool

    @tool
    def cite(chunk_ids: list[str]) -> str:
        """Declare which chunks the answer relies on."""
        return f"Noted: {', '.join(chunk_ids)}."

    search_tool = capsa_retriever_tool(CorpusRetriever(chunks=chunks, k=4), name="search")
    runs: dict[str, Any] = {}
    # The baseline gets a plain cite tool so both runs store the same messages;
    # capsa's cite_tool checks ids against a ledger only the middleware keeps.
    for label, middleware, tools in (
        ("without capsule", [], [search_tool, cite]),
        ("with capsule", [CitationCapsuleMiddleware(evidence_tools=[search_tool])],
         [search_tool]),
    ):
        agent = create_agent(model, tools=tools, middleware=middleware,
                             checkpointer=InMemorySaver())
        config: RunnableConfig = {"configurable": {"thread_id": label}}
        per_question, answers = [], []
        for question in DEMO_QUESTIONS:
            sent = _Sent()
            state = agent.invoke({"messages": [HumanMessage(question)]},
                                 {**config, "callbacks": [sent]})
            per_question.append(max(sent.calls))
            answers.append(str(state["messages"][-1].content))
        stored = agent.get_state(config).values["messages"]
        runs[label] = {"tokens_per_question": per_question, "answers": answers,
                       "stored_messages": len(stored),
                       "stored_tokens": count_tokens_approximately(stored)}
    return {"questions": list(DEMO_QUESTIONS), **runs}


def llama_index_pipelines(chunks: list[Chunk], *, max_tokens: int = 300) -> dict[str, Any]:
    """A query engine with `CapsaNodePostprocessor`, and a chat with `CitationCapsuleBlock`."""
    from llama_index.core.chat_engine import ContextChatEngine
    from llama_index.core.llms.mock import MockLLM
    from llama_index.core.memory import Memory
    from llama_index.core.query_engine import RetrieverQueryEngine
    from llama_index.core.response_synthesizers import ResponseMode

    from capsa.llama_index import CapsaNodePostprocessor, CitationCapsuleBlock

    retriever = _llama_retriever(chunks, k=6)
    # One LLM call: the packed context fits, so nothing needs refining.
    engine = RetrieverQueryEngine.from_args(
        retriever, llm=MockLLM(), response_mode=ResponseMode.SIMPLE_SUMMARIZE,
        node_postprocessors=[CapsaNodePostprocessor(budget=Budget(max_tokens=max_tokens))])
    queries = []
    for question in DEMO_QUESTIONS:
        response = engine.query(question)
        prompt = str(response)  # MockLLM echoes the prompt it was given
        queries.append({"question": question, "prompt_tokens": estimate_tokens(prompt),
                        "answer_in_context": _answers(question).lower() in prompt.lower(),
                        "nodes": len(response.source_nodes)})
    block = CitationCapsuleBlock()
    memory = Memory.from_defaults(session_id="demo", memory_blocks=[block])
    chat = ContextChatEngine.from_defaults(retriever=_llama_retriever(chunks, k=2),
                                           memory=memory, llm=MockLLM(max_tokens=16))
    capsule_tokens = []
    for question in DEMO_QUESTIONS:
        response = chat.chat(question)
        cited = [n.node.node_id for n in response.source_nodes[:1]]
        block.record(response, cited=cited)
        capsule_tokens.append(estimate_tokens(block._capsule_text(None)))
    engine_pool = getattr(memory.sql_store, "_async_engine", None)
    if engine_pool is not None:  # Memory has no close(); release its in-memory SQLite pool
        import asyncio
        from concurrent.futures import ThreadPoolExecutor

        # asyncio.run in a thread of its own: it closes the loop it makes, and
        # never meets a loop the caller (a notebook, a test) is running.
        with ThreadPoolExecutor(1) as thread:
            thread.submit(asyncio.run, engine_pool.dispose()).result()
    return {"query_engine": queries,
            "chat": {"cited_chunks": len(block.ledger.citable_ids()),
                     "capsule_tokens_after_each_turn": capsule_tokens}}


def _llama_retriever(chunks: list[Chunk], *, k: int) -> Any:
    from llama_index.core.retrievers import BaseRetriever as LlamaRetriever
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

    class _Lexical(LlamaRetriever):
        def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
            return [NodeWithScore(node=TextNode(id_=chunk.id, text=chunk.text,
                                                metadata={"source": chunk.source}),
                                  score=score)
                    for chunk, score in search(query_bundle.query_str, chunks, k)]

    return _Lexical()


def shadow_comparison() -> dict[str, Any]:
    """The bundled lexical and capsa-budgeted routes, compared on the bundled queries."""
    from importlib.resources import files

    from capsa.demo.routes import ROUTES, compare_routes
    from capsa.shadow import ShadowReport

    lines = files("capsa.demo").joinpath("queries.jsonl").read_text(encoding="utf-8")
    queries = [json.loads(line)["query"] for line in lines.splitlines() if line.strip()]
    run = compare_routes(queries, ROUTES["lexical"](), ROUTES["budgeted"]())
    report = ShadowReport.from_rows(run.rows, invalidated=run.invalidated)
    return {"queries": len(queries), "rows": len(run.rows), "invalidated": run.invalidated,
            "report": json.loads(report.to_json()), "markdown": report.to_markdown()}


def first_words(text: str, count: int = 12) -> str:
    """The first `count` words of `text`, for tables."""
    words = text.split()
    return " ".join(words[:count]) + (" ..." if len(words) > count else "")


def describe_tokens(values: Sequence[int]) -> str:
    """``a -> b -> c`` for a token series."""
    return " -> ".join(str(v) for v in values)
