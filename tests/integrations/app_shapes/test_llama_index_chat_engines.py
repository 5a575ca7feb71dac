"""LlamaIndex chat engines over several turns, with capsa's postprocessor and capsule block.

``index.as_chat_engine(chat_mode="context" | "condense_plus_context", memory=Memory(
memory_blocks=[CitationCapsuleBlock()]), node_postprocessors=[CapsaNodePostprocessor])``,
driven with ``chat``, ``achat`` and ``astream_chat`` and recorded into the block
after each turn, as the docs show. The LLM is MockLLM answering in four words
(echoing would grow the history with every turn) and keeping each prompt it
was sent, so each test reads what the LLM got.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from typing import Any

import pytest
from llama_index.core import Document, VectorStoreIndex
from llama_index.core.base.llms.types import CompletionResponse, CompletionResponseGen
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.llms.mock import MockLLM
from llama_index.core.memory import Memory
from pydantic import PrivateAttr

from capsa.budget import Budget, estimate_tokens
from capsa.llama_index import CapsaNodePostprocessor, CitationCapsuleBlock

MAX_TOKENS = 60
MODES = ["context", "condense_plus_context"]
TURNS = ["What is the nightly hotel cap in London?", "And the internet stipend?",
         "Which class are trains booked in?"]
CONTEXT = re.compile(  # the context chat template's rules, or the condense one's words
    r"-{5,}\n(.*?)\n-{5,}|for the context:\n\n *(.*?)\n\n *Instruction:", re.DOTALL)


def documents() -> list[Document]:
    return [
        Document(id_="travel", text="The nightly hotel cap is EUR 165. In London it is EUR 230.",
                 metadata={"file_name": "travel.pdf", "tags": ["travel"], "owner": None}),
        Document(id_="remote", text="The internet stipend for remote workers is EUR 30.",
                 metadata={"title": "Remote work", "version": 3}),
        Document(id_="rail", text="Rail travel is booked in standard class, 14 days ahead.",
                 metadata={"file_name": "travel.pdf", "reviewed": {"by": "ops"}}),
    ]


class PromptKeepingLLM(MockLLM):
    """MockLLM that keeps every prompt (chat engines send a non-chat model completions)."""

    _prompts: list[str] = PrivateAttr(default_factory=list)

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        self._prompts.append(prompt)
        return super().complete(prompt, formatted=formatted, **kwargs)

    def stream_complete(self, prompt: str, formatted: bool = False,
                        **kwargs: Any) -> CompletionResponseGen:
        self._prompts.append(prompt)
        return super().stream_complete(prompt, formatted=formatted, **kwargs)

    @property
    def last_prompt(self) -> str:
        return self._prompts[-1]


def chat_engine(mode: str, memory: Memory, corpus: list[Document] | None = None
                ) -> tuple[Any, PromptKeepingLLM]:
    index = VectorStoreIndex.from_documents(corpus or documents(),
                                            embed_model=MockEmbedding(embed_dim=8))
    llm = PromptKeepingLLM(max_tokens=4)
    post = CapsaNodePostprocessor(budget=Budget(max_tokens=MAX_TOKENS))
    engine = index.as_chat_engine(chat_mode=mode, llm=llm, memory=memory,
                                  node_postprocessors=[post], similarity_top_k=3)
    return engine, llm


def retrieved_context(llm: PromptKeepingLLM) -> str:
    match = CONTEXT.search(llm.last_prompt)
    assert match is not None, llm.last_prompt
    return match.group(1) or match.group(2)


@pytest.mark.parametrize("mode", MODES)
def test_chat_engine_turns_keep_the_budget_and_carry_cited_evidence(
        mode: str, sql_memory: Callable[..., Memory]) -> None:
    block = CitationCapsuleBlock()
    memory = sql_memory(session_id=mode, memory_blocks=[block])
    engine, llm = chat_engine(mode, memory)
    cited: list[str] = []
    for turn in TURNS:
        response = engine.chat(turn)
        assert response.source_nodes
        assert estimate_tokens(retrieved_context(llm)) <= MAX_TOKENS
        top = response.source_nodes[0].node
        block.record(response, cited=[top.node_id])
        cited.append(top.get_content())
    assert "<cited_evidence>" in llm.last_prompt  # the last turn was sent what earlier ones cited
    assert cited[0] in llm.last_prompt.split("<cited_evidence>")[1]
    assert [m.role.value for m in memory.get_all()] == ["user", "assistant"] * 3


@pytest.mark.parametrize("mode", MODES)
async def test_chat_engine_async_turns_keep_the_budget(mode: str,
                                                       sql_memory: Callable[..., Memory]) -> None:
    block = CitationCapsuleBlock()
    engine, llm = chat_engine(mode, sql_memory(session_id=mode, memory_blocks=[block]))
    response = await engine.achat(TURNS[0])
    block.record(response, cited=[response.source_nodes[0].node.node_id])
    assert estimate_tokens(retrieved_context(llm)) <= MAX_TOKENS
    streamed = await engine.astream_chat(TURNS[1])
    assert "".join([token async for token in streamed.async_response_gen()]).strip()
    assert estimate_tokens(retrieved_context(llm)) <= MAX_TOKENS
    assert "<cited_evidence>" in llm.last_prompt


def test_chat_engine_leaves_the_indexs_nodes_alone(sql_memory: Callable[..., Memory]) -> None:
    engine, _ = chat_engine("context", sql_memory(session_id="s"))
    stored = copy.deepcopy(engine._retriever._index.docstore.docs)
    for turn in TURNS:
        engine.chat(turn)
    assert engine._retriever._index.docstore.docs == stored


@pytest.mark.parametrize("metadata", [
    {"title": ["Travel", "Policy"]},
    {"title": 2024, "file_name": None},
    {"collection": 7},
    {"collection": {"name": "policies"}},
], ids=["list-title", "int-title", "int-collection", "dict-collection"])
def test_recording_a_turn_over_nodes_with_non_string_labels_succeeds(
        metadata: dict[str, Any], sql_memory: Callable[..., Memory]) -> None:
    block = CitationCapsuleBlock()
    engine, llm = chat_engine("context", sql_memory(session_id="s", memory_blocks=[block]),
                              [Document(id_="travel", metadata=metadata,
                                        text="The nightly hotel cap in London is EUR 230.")])
    response = engine.chat(TURNS[0])
    block.record(response, cited=[response.source_nodes[0].node.node_id])
    engine.chat(TURNS[1])
    assert "EUR 230" in llm.last_prompt.split("<cited_evidence>")[1]


def test_one_picture_reference_given_as_text_is_one_reference() -> None:
    from llama_index.core.schema import NodeWithScore, TextNode

    from capsa.llama_index.capsule_conversion import evidence

    node = TextNode(text="See the floor plan.", metadata={"picture_refs": "fig-1.png"})
    assert evidence(NodeWithScore(node=node, score=0.5)).picture_refs == ("fig-1.png",)
