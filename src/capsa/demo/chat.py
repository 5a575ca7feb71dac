"""A deterministic, offline chat model that answers from its context, with citations.

`ExtractiveChatModel` stands in for an LLM so the demo runs anywhere with no
key and no network. It is honest about what it is: it picks the sentence of
its context that shares the most words with the question and quotes it,
citing the chunk it came from. With tools bound it behaves like a small
agent: search first, then cite, then answer.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool

from capsa.budget import LexicalScorer, split_sentences

__all__ = ["ExtractiveChatModel", "best_sentence"]

_CHUNK = re.compile(r"^\[([^\]\n]+)\] Source:[^\n]*\n(.*?)(?=^\[[^\]\n]+\] Source:|\Z)",
                    re.MULTILINE | re.DOTALL)
_DOCUMENT = re.compile(r'<(document|chunk) id="([^"]+)"[^>]*(?<!/)>(.*?)</\1>', re.DOTALL)
_COMPACT = re.compile(
    r'<document ([^\s>"=]+)(?: shown="[^"]*")?>(.*?)(?=\n?<document |\n?</context>|\Z)', re.DOTALL)
_TAGS = re.compile(r"<[^>]+>")


def best_sentence(question: str, context: str) -> tuple[str, str | None]:
    """The context sentence that best answers `question`, and its chunk id if known.

    Chunks are recognised in capsa's formats: search-tool output
    (``<chunk id="...">``, formerly ``[id] Source: ...``) and packed
    ``<document id="...">`` containers, or compact ``<document id>`` ones.
    """
    pieces: list[tuple[str | None, str]] = [(m.group(1), m.group(2))
                                            for m in _CHUNK.finditer(context)]
    pieces += [(m.group(2), _TAGS.sub(" ", m.group(3))) for m in _DOCUMENT.finditer(context)]
    pieces += [(m.group(1), _TAGS.sub(" ", m.group(2))) for m in _COMPACT.finditer(context)]
    if not pieces:
        pieces = [(None, context)]
    sentences = [(chunk_id, text[start:end]) for chunk_id, text in pieces
                 for start, end in split_sentences(text) if len(text[start:end].split()) > 3]
    if not sentences:
        return "I could not find that in the documents I was given.", None
    scores = LexicalScorer().score(question, [s for _, s in sentences])
    best = max(range(len(sentences)), key=lambda i: (scores[i], -i))
    if scores[best] <= 0:
        return "I could not find that in the documents I was given.", None
    chunk_id, sentence = sentences[best]
    return " ".join(sentence.split()), chunk_id


class ExtractiveChatModel(BaseChatModel):
    """Answers the newest question by quoting the best-matching context sentence.

    Without tools: the answer is that sentence followed by ``[chunk_id]``.
    With tools bound (`bind_tools`) and a tool named ``search`` (or
    `search_tool`) among them: on a new question it calls search; after a
    search result it calls ``cite`` with the best chunk's id (when a cite tool
    is bound); then it answers. Deterministic: same messages, same reply.
    """

    search_tool: str = "search"
    cite_tool: str = "cite"
    bound_tools: tuple[str, ...] = ()

    @property
    def _llm_type(self) -> str:
        return "capsa-extractive"

    def bind_tools(self, tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
                   *, tool_choice: str | None = None,
                   **kwargs: Any) -> Runnable[LanguageModelInput, AIMessage]:
        """Remember the tool names; the model decides calls from them."""
        names = tuple(str(t.get("name") if isinstance(t, dict) else getattr(t, "name", t))
                      for t in tools)
        return self.model_copy(update={"bound_tools": names})

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: CallbackManagerForLLMRun | None = None,
                  **kwargs: Any) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self._reply(messages))])

    def _reply(self, messages: Sequence[BaseMessage]) -> AIMessage:
        question_at = max((i for i, m in enumerate(messages) if isinstance(m, HumanMessage)),
                          default=-1)
        question = _question(messages[question_at]) if question_at >= 0 else ""
        since = list(messages[question_at + 1:])
        tools = {m.name for m in since if isinstance(m, ToolMessage)}
        if self.search_tool in self.bound_tools and self.search_tool not in tools:
            return _call(self.search_tool, {"query": question}, len(messages))
        context = "\n\n".join(_text(m) for m in messages if not isinstance(m, AIMessage))
        sentence, chunk_id = best_sentence(question, _after_question(context, question))
        if (chunk_id and self.cite_tool in self.bound_tools and self.cite_tool not in tools):
            return _call(self.cite_tool, {"chunk_ids": [chunk_id]}, len(messages))
        return AIMessage(content=f"{sentence} [{chunk_id}]" if chunk_id else sentence)


def _after_question(context: str, question: str) -> str:
    # The question itself is not an answer to itself.
    return context.replace(question, " ") if question else context


def _call(name: str, args: dict[str, Any], number: int) -> AIMessage:
    return AIMessage(content="", tool_calls=[{"name": name, "args": args,
                                              "id": f"call-{name}-{number}"}])


def _question(message: BaseMessage) -> str:
    """The user's own words: text blocks other than a packed ``<context>`` (attachments)."""
    if isinstance(message.content, str):
        return message.content
    texts = [b if isinstance(b, str) else str(b.get("text", "")) for b in message.content]
    return "\n".join(t for t in texts if not t.lstrip().startswith("<context"))


def _text(message: BaseMessage) -> str:
    if isinstance(message.content, str):
        return message.content
    return "\n".join(b if isinstance(b, str) else str(b.get("text", ""))
                     for b in message.content)
