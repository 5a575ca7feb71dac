"""Attached files read through the guard, for models without file support."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain_core.callbacks import adispatch_custom_event, dispatch_custom_event
from langchain_core.messages import AnyMessage, HumanMessage
from langchain_core.retrievers import BaseRetriever

from capsa.budget import Budget, Passage
from capsa.budget.attachments import (
    AttachmentContext,
    ExtractionCache,
    attachment_context,
    read_file_block,
)
from capsa.budget.render import source_name
from capsa.guard import Extracted, ExtractionLimits, Omission, TextExtractor

__all__ = ["AttachmentMiddleware"]

REPORT_EVENT = "capsa.attachments"
_CACHE_SIZE = 256


class AttachmentMiddleware(AgentMiddleware[Any, Any, Any]):
    """Turns the file blocks of the newest human message into guarded, packed text.

    Many chat models cannot read ``{"type": "file", ...}`` content blocks, and
    those that can parse untrusted bytes somewhere you cannot bound. This
    middleware, in `wrap_model_call`, takes each base64 file block of the
    newest human message through capsa's guard (isolated parsers, typed
    refusals), packs the extracted text with `capsa.budget` as
    ``<context source="attached">`` (beside retrieval, when a `retriever` is
    given, under `Budget.attachment_share`), and tells the model which files
    it is not reading and why ("report.pdf: parser failed (timeout)"). The
    same report reaches the caller as a ``capsa.attachments`` custom event.

    Only the request sent to the model changes; the checkpointed messages keep
    the original file blocks. Extraction is cached by content hash, so a file
    sent once is not parsed again on later turns.

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

    def wrap_model_call(self, request: ModelRequest[Any],
                        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]]) -> Any:
        """Rewrite the newest human message for this call only."""
        found = _newest_human(request.messages)
        if found is None or not _files(found[1]):
            return handler(request)
        index, message = found
        docs = self.retriever.invoke(_text(message)) if self.retriever is not None else []
        context = self._context(message, docs)
        _dispatch(context)
        return handler(request.override(messages=_replace(request.messages, index, message,
                                                           context)))

    async def awrap_model_call(self, request: ModelRequest[Any],
                               handler: Callable[[ModelRequest[Any]],
                                                 Awaitable[ModelResponse[Any]]]) -> Any:
        """The async twin of `wrap_model_call`; extraction runs in a thread."""
        found = _newest_human(request.messages)
        if found is None or not _files(found[1]):
            return await handler(request)
        index, message = found
        docs = await self.retriever.ainvoke(_text(message)) if self.retriever else []
        context = await asyncio.to_thread(self._context, message, docs)
        await _adispatch(context)
        return await handler(request.override(messages=_replace(request.messages, index,
                                                                 message, context)))

    def _context(self, message: HumanMessage, docs: Sequence[Any]) -> AttachmentContext:
        # a file found inside another (an e-mail's attachment) is its own outcome
        outcomes = [found for position, block in enumerate(_files(message))
                    for found in _flat(read_file_block(block, position, cache=self._cache,
                                                       extractor=self.extractor,
                                                       limits=self.limits))]
        passages = [Passage(id=str(doc.id or f"retrieved-{i}"), text=doc.page_content,
                            source=source_name(doc.metadata.get("source")))
                    for i, doc in enumerate(docs)]
        return attachment_context(
            _text(message),
            [o for o in outcomes if isinstance(o, Extracted)],
            [o for o in outcomes if isinstance(o, Omission)],
            self.budget, passages=passages, tokenizer=self.tokenizer)

def _flat(outcome: Extracted | Omission) -> tuple[Extracted | Omission, ...]:
    return outcome.flattened() if isinstance(outcome, Extracted) else (outcome,)


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


def _replace(messages: Sequence[AnyMessage], index: int, message: HumanMessage,
             context: AttachmentContext) -> list[AnyMessage]:
    kept: list[str | dict[Any, Any]] = [
        b for b in message.content if not (isinstance(b, dict) and b.get("type") == "file")]
    rewritten = message.model_copy(update={
        "content": [{"type": "text", "text": context.text}, *kept]})
    return [*messages[:index], rewritten, *messages[index + 1:]]


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
