"""The tools of a citation-capsule agent: search with chunk ids, cite, recall.

- `capsa_retriever_tool` wraps a retriever as an evidence tool: its text shows
  every chunk as an escaped ``<chunk id=...>`` element, its artifact carries the
  documents the middleware records.
- `cite_tool` is what the model calls to declare what its answer rests on.
- `recall_tool` brings chunks named in an earlier receipt back whole from the
  stored history, which capsa never changes, and makes them citable.

`CitationCapsuleMiddleware` registers a cite and a recall tool itself. All three
read the ledger from the agent state through LangGraph's `ToolRuntime`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from typing import Any

from langchain_core.documents import Document
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool, StructuredTool
from pydantic import BaseModel, Field

try:
    from langchain.tools import ToolRuntime
except ImportError as exc:  # langchain-core alone does not ship the agents package
    raise ImportError(
        "capsa.langchain.capsule_tools needs the 'langchain' extra: pip install 'capsa[langchain]'"
    ) from exc

from capsa.capsule import (
    EvidenceLedger,
    TokenCounter,
    check_tool_budget,
    cite_ids,
    estimate_tokens,
    recall,
    render_budgeted,
    render_evidence,
)
from capsa.capsule.render import CITE_DESCRIPTION, RECALL_DESCRIPTION, SEARCH_DESCRIPTION
from capsa.langchain.capsule_conversion import Observe, evidence_of, load_ledger, stamp, to_core

__all__ = ["capsa_retriever_tool", "cite_tool", "recall_tool"]


class _Query(BaseModel):
    query: str = Field(description="What to search the knowledge base for.")


class _Ids(BaseModel):
    chunk_ids: list[str] = Field(description="Chunk ids, exactly as shown.")


def capsa_retriever_tool(
    retriever: Runnable[str, list[Document]],
    *,
    name: str = "search_knowledge_base",
    description: str = SEARCH_DESCRIPTION,
    collection: str | None = None,
    budget: int | None = None,
    tokenizer: TokenCounter = estimate_tokens,
) -> BaseTool:
    """Wrap a retriever as an evidence tool the capsule middleware can record.

    The tool's text shows every chunk as an escaped ``<chunk id=... title=...>``
    element, so the model can cite ids and no chunk can forge another; its
    artifact (``content_and_artifact``) is the list of documents, each stamped with
    ``capsa_chunk_id`` and ``capsa_document_id`` metadata and an ``id``. A document
    without an id gets a stable one derived from its source and text.

    Args:
        retriever: Any runnable from a query to documents (a `BaseRetriever`).
        name: The tool's name; list it in the middleware's `evidence_tools`.
        description: What the model is told about the tool.
        collection: Stamped as ``collection`` metadata when documents carry none.
        budget: Return a budgeted packet of at most this many tokens (`tokenizer`'s,
            the receipt and recall hint included) instead of every chunk whole
            (`capsa.capsule.render_budgeted`): the most relevant
            chunks whole, as many as fit, the rest by id (parts only when not
            even one fits), and the artifact keeps every document whole, so the
            registered ``recall`` tool brings any back.
            Less is written to the cache each question; a chunk the answer needs
            but the packet cut costs a recall round.
        tokenizer: Counts tokens for `budget`.

    Raises:
        ValueError: `budget` below 1.
        capsa.errors.BudgetError: `budget` below `capsa.capsule.budget_floor`
            (about 34 tokens with `estimate_tokens`); the message names the floor.

    Returns:
        A `StructuredTool` with sync and async paths.

    Usage:
        .. code-block:: python

            search = capsa_retriever_tool(vectorstore.as_retriever(), name="search")
            agent = create_agent(model, tools=[search],
                                 middleware=[CitationCapsuleMiddleware(evidence_tools=[search])],
                                 checkpointer=checkpointer)
    """

    check_tool_budget(budget, tokenizer=tokenizer)

    def _finish(query: str, docs: Sequence[Document]) -> tuple[str, list[Document]]:
        stamped = [stamp(d, collection) for d in docs]
        evidence = [e for e in (evidence_of(d) for d in stamped) if e is not None]
        if budget is None:
            return render_evidence(evidence), stamped
        return render_budgeted(query, evidence, budget, tokenizer=tokenizer), stamped

    def search(query: str) -> tuple[str, list[Document]]:
        return _finish(query, retriever.invoke(query))

    async def asearch(query: str) -> tuple[str, list[Document]]:
        docs = await retriever.ainvoke(query)
        if budget is None:
            return _finish(query, docs)
        return await asyncio.to_thread(_finish, query, docs)  # packing stays off the loop

    return StructuredTool.from_function(
        func=search,
        coroutine=asearch,
        name=name,
        description=description,
        args_schema=_Query,
        response_format="content_and_artifact",
    )


def _cite(chunk_ids: list[str], runtime: ToolRuntime) -> tuple[str, list[str]]:
    ledger = load_ledger(runtime.state) or EvidenceLedger()
    result = cite_ids(chunk_ids, ledger.citable_ids())
    return result.acknowledgement(), list(result.accepted)


def cite_tool(name: str = "cite", *, description: str = CITE_DESCRIPTION) -> BaseTool:
    """The tool a model calls to declare which chunks its answer relies on.

    Ids are checked against what the model could see (this question's retrieval
    and recalls, and earlier cited chunks) with `capsa.capsule.cite_ids`, which
    repairs ids damaged in copying and never attributes an unrelated one. The
    acknowledgement says what was recorded and what was ignored; the artifact is
    the accepted ids, which `CitationCapsuleMiddleware` writes into the ledger.
    """
    return StructuredTool.from_function(
        func=_cite,
        name=name,
        description=description,
        response_format="content_and_artifact",
    )


def _evidence_tools(ledger: EvidenceLedger | None, extra: Iterable[str]) -> frozenset[str]:
    return frozenset((*(ledger.evidence_tools if ledger else ()), *extra))


def _recall(
    chunk_ids: list[str], runtime: ToolRuntime, evidence_tools: frozenset[str]
) -> tuple[str, list[dict[str, Any]]]:
    ledger = load_ledger(runtime.state)
    messages = runtime.state.get("messages", [])
    owned = _evidence_tools(ledger, evidence_tools)
    observe = Observe.of(messages, owned)
    history = [to_core(m, i, observe) for i, m in enumerate(messages)]
    result = recall(chunk_ids, history, ledger, owned_tools=owned)
    return result.text(), [e.model_dump(mode="json") for e in result.evidence]


def recall_tool(
    name: str = "recall",
    *,
    evidence_tools: Iterable[str] = (),
    description: str = RECALL_DESCRIPTION,
) -> BaseTool:
    """The tool a model calls to see earlier chunks again, whole.

    Ids are looked up (and repaired like the cite tool's) among every chunk the
    stored history's evidence returns hold, and the chunks the ledger keeps; the
    text shows them as ``<chunk>`` elements and names ids not found; the artifact
    is the chunks, which `CitationCapsuleMiddleware` records as retrieved by the
    current question, so they can be cited.

    Args:
        name: The tool's name (`CitationCapsuleMiddleware(recall_tool_name=...)`).
        evidence_tools: Names of the evidence tools whose returns hold chunks; the
            ledger's recorded names are added.
        description: What the model is told about the tool.
    """
    owned = frozenset((*evidence_tools, name))

    def recall_chunks(
        chunk_ids: list[str], runtime: ToolRuntime
    ) -> tuple[str, list[dict[str, Any]]]:
        return _recall(chunk_ids, runtime, owned)

    return StructuredTool.from_function(
        func=recall_chunks,
        name=name,
        description=description,
        response_format="content_and_artifact",
    )
