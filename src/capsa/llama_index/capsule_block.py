"""`CitationCapsuleBlock`: a `Memory` block that gives chat engines back cited evidence.

Chat engines (`ContextChatEngine`, `CondensePlusContextChatEngine`) put retrieved
nodes into one turn's prompt and store only the text of the exchange, so a
follow-up loses what the previous answer rested on. This block re-injects the
capsule of everything earlier answers cited (`capsa.capsule.build_capsule`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from typing import Any

from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.memory.memory import BaseMemoryBlock
from llama_index.core.schema import NodeWithScore
from pydantic import Field

from capsa.capsule import (
    EvidenceLedger,
    TokenCounter,
    as_tokenizer,
    build_capsule,
    cite_ids,
    estimate_tokens,
    parse_citations,
)
from capsa.llama_index.capsule_conversion import evidence

__all__ = ["CitationCapsuleBlock"]


class CitationCapsuleBlock(BaseMemoryBlock[str]):
    """A `Memory` block that re-injects the evidence earlier chat-engine answers cited.

    After each turn, hand the engine's response to `record`: its source nodes are
    recorded as that exchange's retrieval and its citations (``[node_id]`` markers
    in the answer, or the ids you pass) as what it cited. `Memory` then inserts the
    capsule of everything cited so far wherever it inserts its blocks.

    The ledger belongs to one conversation. When the memory it serves holds no
    messages any more (`Memory.reset()`, `engine.reset()`) or serves another
    session id, the block starts a fresh ledger, so no evidence crosses from one
    conversation into the next.

    Each recorded exchange counts as two messages (the user's and the assistant's),
    the shape chat engines store, which is what the ledger's identities count.

    Usage:
        .. code-block:: python

            block = CitationCapsuleBlock()
            memory = Memory.from_defaults(session_id="s", memory_blocks=[block])
            engine = ContextChatEngine.from_defaults(retriever=retriever, memory=memory, llm=llm)
            response = engine.chat("What is the hotel cap?")
            block.record(response)
    """

    name: str = "cited_evidence"
    description: str | None = "Evidence that earlier answers in this conversation cited."
    priority: int = 1
    accept_short_term_memory: bool = False
    ledger: EvidenceLedger = Field(default_factory=EvidenceLedger)
    """What each exchange retrieved and cited; persist it with ``to_json()``."""
    max_tokens: int | None = Field(default=None, gt=0)
    """Optional hard bound on the capsule, notice included (oldest groups drop first)."""
    tokenizer: TokenCounter = Field(default=estimate_tokens, exclude=True)
    """Counts tokens for `max_tokens`: a counter or an encoder (tiktoken's ``encode``)."""
    tool_name: str = "chat_engine_retrieval"
    """Name recorded as the retrieving tool."""
    session_id: str | None = None
    """The session whose conversation the ledger records; set on first use."""

    def record(
        self,
        response: Any,
        *,
        cited: Iterable[str] | None = None,
        collection: str | None = None,
    ) -> None:
        """Record one finished exchange from a chat engine's response.

        Args:
            response: An `AgentChatResponse` (or anything with ``source_nodes`` and
                ``response``).
            cited: Node ids the answer rests on; by default read from ``[node_id]``
                markers in the answer, accepted only for nodes it was shown.
            collection: Collection to name on nodes whose metadata names none.
        """
        nodes: Sequence[NodeWithScore] = getattr(response, "source_nodes", None) or ()
        boundary = self.ledger.ended_at or 0
        ledger = self.ledger.begin_question(boundary)
        ledger = ledger.record_retrieval(
            [evidence(n, collection) for n in nodes], tool=self.tool_name
        )
        visible = ledger.citable_ids()
        if cited is None:
            wanted = parse_citations(str(getattr(response, "response", "") or ""), visible)
        else:
            wanted = cite_ids(cited, visible).accepted
        self.ledger = ledger.record_citations(wanted).end_question(boundary + 2)

    def reset(self) -> None:
        """Forget the conversation: a fresh ledger."""
        self.ledger = EvidenceLedger()
        self.session_id = None

    def _capsule_text(self, max_tokens: int | None) -> str:
        return build_capsule(self.ledger, max_tokens, tokenizer=self.tokenizer).text

    async def _aget(self, messages: list[ChatMessage] | None = None, **block_kwargs: Any) -> str:
        session = block_kwargs.get("session_id")
        # Memory passes the stored chat plus the current input: nothing but the input
        # means the conversation was reset (or is new).
        restarted = messages is not None and len(messages) <= 1 and self.ledger.question is not None
        if restarted or (self.session_id is not None and session != self.session_id):
            self.reset()
        self.session_id = session
        return await asyncio.to_thread(self._capsule_text, self.max_tokens)

    async def _aput(self, messages: list[ChatMessage]) -> None:
        """Nothing to take from flushed messages: exchanges arrive through `record`."""

    async def atruncate(self, content: str, tokens_to_truncate: int) -> str | None:
        """Drop the oldest cited groups until about `tokens_to_truncate` tokens are freed."""
        current = as_tokenizer(self.tokenizer)(content)
        target = current - tokens_to_truncate
        if target <= 0:
            return None
        bound = target if self.max_tokens is None else min(target, self.max_tokens)
        return await asyncio.to_thread(self._capsule_text, bound) or None
