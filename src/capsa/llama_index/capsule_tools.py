"""Tools of a citation-capsule LlamaIndex agent: search with chunk ids, cite, recall.

Each tool acts on the `CapsuleMemory` of the run that calls it, read from the
workflow `Context` (``agent.run(msg, memory=session_memory)``), so one agent
serves many sessions; a tool made by a memory (`CapsuleMemory.retriever_tool`)
falls back to that memory when the run has no `CapsuleMemory` of its own.

This module does not use ``from __future__ import annotations``: `FunctionTool`
finds the ``ctx: Context`` parameter by its annotation object.
"""

import asyncio
from typing import TYPE_CHECKING, Any

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.schema import NodeWithScore
from llama_index.core.tools import FunctionTool
from llama_index.core.workflow import Context

from capsa.capsule import (
    TokenCounter,
    check_tool_budget,
    estimate_tokens,
    render_budgeted,
    render_evidence,
)
from capsa.capsule.render import CITE_DESCRIPTION, RECALL_DESCRIPTION, SEARCH_DESCRIPTION
from capsa.llama_index.capsule_conversion import evidence

if TYPE_CHECKING:
    from capsa.llama_index.memory import CapsuleMemory

__all__ = ["capsule_cite_tool", "capsule_recall_tool", "capsule_retriever_tool"]


async def _memory(ctx: Context, fallback: "CapsuleMemory | None", tool: str) -> "CapsuleMemory":
    from capsa.llama_index.memory import CapsuleMemory

    run_memory: Any = await ctx.store.get("memory", default=None)
    if isinstance(run_memory, CapsuleMemory):
        return run_memory
    if fallback is not None:
        return fallback
    raise ValueError(
        f"the {tool!r} tool needs a CapsuleMemory: run the agent with "
        "agent.run(msg, memory=CapsuleMemory.from_defaults(...))"
    )


def capsule_retriever_tool(
    retriever: BaseRetriever,
    *,
    name: str = "search_knowledge_base",
    description: str = SEARCH_DESCRIPTION,
    collection: str | None = None,
    memory: "CapsuleMemory | None" = None,
    budget: int | None = None,
    tokenizer: TokenCounter = estimate_tokens,
) -> FunctionTool:
    """An evidence tool over `retriever` that records what it returns in the run's memory.

    Its output shows each node as an escaped ``<chunk id=...>`` element, so the
    model can cite node ids; the run's `CapsuleMemory` (or `memory`) records the
    retrieval and learns `name` as an evidence tool.

    Args:
        retriever: Any LlamaIndex retriever.
        name: The tool's name.
        description: What the model is told about the tool.
        collection: Stamped on chunks whose nodes carry no ``collection`` metadata.
        memory: The memory to act on when the run has no `CapsuleMemory`.
        budget: Return a budgeted packet of at most this many tokens (`tokenizer`'s,
            the receipt and recall hint included) instead of every node whole
            (`capsa.capsule.render_budgeted`, the same packet as LangChain's
            ``capsa_retriever_tool(budget=...)``): the most relevant nodes whole,
            as many as fit, the rest by id (parts only when not even one fits).
            The memory keeps every chunk whole beside the stored return (an agent
            stores only the tool's text), so its recall tool brings any of them
            back whole, in this question or a later one. Less is written to the
            prompt cache each question; a chunk the answer needs but the packet
            cut costs a recall round.
        tokenizer: Counts tokens for `budget`.

    Raises:
        ValueError: `budget` below 1.
        capsa.errors.BudgetError: `budget` below `capsa.capsule.budget_floor`
            (about 34 tokens with `estimate_tokens`); the message names the floor.
    """
    check_tool_budget(budget, tokenizer=tokenizer)

    async def search(query: str, ctx: Context) -> str:
        target = await _memory(ctx, memory, name)
        nodes: list[NodeWithScore] = await retriever.aretrieve(query)
        found = [evidence(n, collection) for n in nodes]
        target.record_retrieval(found, tool=name)
        if budget is None:
            return render_evidence(found)
        # packing stays off the event loop
        text = await asyncio.to_thread(render_budgeted, query, found, budget, tokenizer=tokenizer)
        target.keep_whole(text, found)
        return text

    return FunctionTool.from_defaults(async_fn=search, name=name, description=description)


def capsule_cite_tool(
    *,
    name: str = "cite",
    description: str = CITE_DESCRIPTION,
    memory: "CapsuleMemory | None" = None,
) -> FunctionTool:
    """The tool the model calls to declare which chunks its answer relies on.

    Ids are checked with `capsa.capsule.cite_ids` against this question's
    retrieval and recalls and earlier cited chunks; damaged ids are repaired,
    unrelated ones ignored, and the acknowledgement says which.
    """

    async def cite(chunk_ids: list[str], ctx: Context) -> str:
        target = await _memory(ctx, memory, name)
        return target.cite(chunk_ids).acknowledgement()

    return FunctionTool.from_defaults(async_fn=cite, name=name, description=description)


def capsule_recall_tool(
    *,
    name: str = "recall",
    description: str = RECALL_DESCRIPTION,
    memory: "CapsuleMemory | None" = None,
) -> FunctionTool:
    """The tool the model calls to see earlier chunks again, whole, and cite them.

    Ids (or the prefixes receipts show) are looked up in the stored history's
    evidence returns and the ledger; found chunks are recorded as retrieved by
    the current question.
    """

    async def recall(chunk_ids: list[str], ctx: Context) -> str:
        target = await _memory(ctx, memory, name)
        return (await target.arecall(chunk_ids, tool=name)).text()

    return FunctionTool.from_defaults(async_fn=recall, name=name, description=description)
