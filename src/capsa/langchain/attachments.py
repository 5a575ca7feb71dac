"""Attached files read through the guard, for models without file support."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain_core.callbacks import adispatch_custom_event, dispatch_custom_event
from langchain_core.messages import AnyMessage, HumanMessage
from langchain_core.retrievers import BaseRetriever

from capsa.budget import Budget, Passage
from capsa.budget.attachments import (
    AttachmentContext,
    ExtractionCache,
    RecentCache,
    attachment_context,
    read_file_blocks,
)
from capsa.budget.render import source_name
from capsa.guard import Extracted, ExtractionLimits, Omission, TextExtractor

__all__ = ["AttachmentMiddleware"]

REPORT_EVENT = "capsa.attachments"
_CACHE_SIZE = 256


class AttachmentMiddleware(AgentMiddleware[Any, Any, Any]):
    """Turns the file blocks of human messages into guarded, packed text.

    Many chat models cannot read ``{"type": "file", ...}`` content blocks, and
    those that can parse untrusted bytes somewhere you cannot bound. This
    middleware, in `wrap_model_call`, takes each base64 file block through
    capsa's guard (isolated parsers, typed refusals), packs the extracted text
    with `capsa.budget` as ``<context source="attached">`` (beside retrieval,
    when a `retriever` is given, under `Budget.attachment_share`), and tells
    the model which files it is not reading and why ("report.pdf: parser
    failed (timeout)"). The same report reaches the caller as a
    ``capsa.attachments`` custom event.

    Every turn of a conversation is covered, not only the one that attached:

    - the newest human message's files are packed for its own text, with
      retrieval;
    - an earlier message's files are packed for that message's own text,
      without retrieval: a pure function of the message, so the request
      prefix is byte-identical from turn to turn and a provider's prompt cache
      keeps serving it (and no raw file block ever reaches the model);
    - a follow-up without files gets the conversation's earlier files packed
      again for *its* question, so "and what does section 5 say?" can be
      answered from the file rather than from what the first packet kept.

    Each of these packets fits `budget`. Only the request sent to the model
    changes; the checkpointed messages keep the original file blocks.
    Extraction is cached by content hash, so a file is parsed once, whatever
    the number of turns that show it.

    Setup:
        ``pip install 'capsa[langchain,unstructured,ocr]'``

    Instantiate:
        .. code-block:: python

            agent = create_agent(model, tools, middleware=[
                AttachmentMiddleware(budget=Budget(max_tokens=4000), retriever=retriever)])

    Args:
        budget: the token budget for attached plus retrieved context.
        retriever: optional; queried with the newest human text.
        extractor: the guard's extractor (`None`: the shared isolated pool).
        limits: the guard's limits.
        tokenizer: counts tokens; defaults to capsa's offline estimate.
    """

    def __init__(self, *, budget: Budget, retriever: BaseRetriever | None = None,
                 extractor: TextExtractor | None = None,
                 limits: ExtractionLimits | None = None,
                 tokenizer: Callable[[str], int] | None = None) -> None:
        super().__init__()
        self.budget = budget
        self.retriever = retriever
        self.extractor = extractor
        self.limits = limits
        self.tokenizer = tokenizer
        self._cache = ExtractionCache(_CACHE_SIZE)
        self._forms: RecentCache[list[str | dict[Any, Any]]] = RecentCache(_CACHE_SIZE)

    def wrap_model_call(self, request: ModelRequest[Any],
                        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]]) -> Any:
        """Rewrite every human message that carries files, for this call only."""
        turn = _turn(request.messages)
        if turn is None:
            return handler(request)
        docs = self.retriever.invoke(_text(turn.newest)) if self.retriever is not None else []
        messages, context = self._rewrite(request.messages, turn, docs)
        _dispatch(context)
        return handler(request.override(messages=messages))

    async def awrap_model_call(self, request: ModelRequest[Any],
                               handler: Callable[[ModelRequest[Any]],
                                                 Awaitable[ModelResponse[Any]]]) -> Any:
        """The async twin of `wrap_model_call`; extraction runs in a thread."""
        turn = _turn(request.messages)
        if turn is None:
            return await handler(request)
        docs = await self.retriever.ainvoke(_text(turn.newest)) if self.retriever else []
        messages, context = await asyncio.to_thread(self._rewrite, request.messages, turn, docs)
        await _adispatch(context)
        return await handler(request.override(messages=messages))

    def _rewrite(self, messages: Sequence[AnyMessage], turn: _Turn, docs: Sequence[Any]
                 ) -> tuple[list[AnyMessage], AttachmentContext]:
        """The request's messages with every file block replaced, and the newest packet."""
        rewritten = list(messages)
        for index in turn.earlier:
            rewritten[index] = self._earlier_form(cast("HumanMessage", messages[index]))
        passages = [Passage(id=str(doc.id or f"retrieved-{i}"), text=doc.page_content,
                            source=source_name(doc.metadata.get("source")))
                    for i, doc in enumerate(docs)]
        if _files(turn.newest):
            extracted, omitted = self._read(turn.newest)
        else:  # a follow-up: the earlier files, read again for this question
            earlier = [self._read(cast("HumanMessage", messages[i]))[0] for i in turn.earlier]
            extracted = list({e.sha256: e for group in earlier for e in group}.values())
            omitted = []  # each was named where its file was attached
        context = attachment_context(_text(turn.newest), extracted, omitted, self.budget,
                                     passages=passages, tokenizer=self.tokenizer)
        rewritten[turn.index] = _replaced(turn.newest, context)
        return rewritten, context

    def _earlier_form(self, message: HumanMessage) -> HumanMessage:
        """An earlier message as every later request shows it: packed for its own text.

        A pure function of the message (no retrieval), kept by content digest so
        a long conversation does not re-pack its files on every model call.
        """
        key = hashlib.sha256(json.dumps(message.content, sort_keys=True, default=str)
                             .encode()).hexdigest()
        known = self._forms.get(key)
        if known is not None:
            return message.model_copy(update={"content": known})
        extracted, omitted = self._read(message)
        form = _replaced(message, attachment_context(
            _text(message), extracted, omitted, self.budget, tokenizer=self.tokenizer))
        self._forms.put(key, cast("list[str | dict[Any, Any]]", form.content))
        return form

    def _read(self, message: HumanMessage) -> tuple[list[Extracted], list[Omission]]:
        return read_file_blocks(_files(message), cache=self._cache, extractor=self.extractor,
                                limits=self.limits)


@dataclass(frozen=True)
class _Turn:
    index: int
    """Position of the newest human message."""
    newest: HumanMessage
    earlier: tuple[int, ...]
    """Positions of the earlier human messages that carry files."""


def _turn(messages: Sequence[AnyMessage]) -> _Turn | None:
    """Where the files are, or None when no human message carries one."""
    found = _newest_human(messages)
    if found is None:
        return None
    index, newest = found
    earlier = tuple(i for i, m in enumerate(messages[:index])
                    if isinstance(m, HumanMessage) and _files(m))
    if not earlier and not _files(newest):
        return None
    return _Turn(index=index, newest=newest, earlier=earlier)


def _newest_human(messages: Sequence[AnyMessage]) -> tuple[int, HumanMessage] | None:
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if isinstance(message, HumanMessage):
            return index, message
    return None


def _files(message: HumanMessage) -> list[dict[str, Any]]:
    if isinstance(message.content, str):
        return []
    return [b for b in message.content if isinstance(b, dict) and b.get("type") == "file"]


def _text(message: HumanMessage) -> str:
    if isinstance(message.content, str):
        return message.content
    return " ".join(b if isinstance(b, str) else str(b.get("text", ""))
                    for b in message.content
                    if isinstance(b, str) or b.get("type") in ("text", "text-plain"))


def _replaced(message: HumanMessage, context: AttachmentContext) -> HumanMessage:
    content = [message.content] if isinstance(message.content, str) else message.content
    kept: list[str | dict[Any, Any]] = [
        b for b in content if not (isinstance(b, dict) and b.get("type") == "file")]
    packed: list[str | dict[Any, Any]] = (
        [{"type": "text", "text": context.text}] if context.text else [])  # never an empty block
    return message.model_copy(update={"content": [*packed, *kept]})


def _report(context: AttachmentContext) -> dict[str, Any]:
    return {
        "omitted": [o.model_dump(mode="json") for o in context.omitted],
        "receipts": [r.model_dump(mode="json") for r in context.packet.receipts],
        "notice": context.notice,
        "used_tokens": context.packet.used_tokens,
    }


def _dispatch(context: AttachmentContext) -> None:
    with contextlib.suppress(RuntimeError):  # outside a run the notice still reaches the model
        dispatch_custom_event(REPORT_EVENT, _report(context))


async def _adispatch(context: AttachmentContext) -> None:
    with contextlib.suppress(RuntimeError):
        await adispatch_custom_event(REPORT_EVENT, _report(context))
