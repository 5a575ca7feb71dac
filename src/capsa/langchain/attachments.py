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
    BlockOutcomes,
    ExtractionCache,
    RecentCache,
    attachment_context,
    read_blocks,
)
from capsa.budget.render import source_name
from capsa.guard import ExtractionLimits, TextExtractor
from capsa.guard.blocks import TEXT_BLOCK_TYPES, Fetcher, carries_file

__all__ = ["AttachmentMiddleware"]

REPORT_EVENT = "capsa.attachments"
_CACHE_SIZE = 256


class AttachmentMiddleware(AgentMiddleware[Any, Any, Any]):
    """Turns the file blocks of human messages into guarded, packed text.

    Many chat models cannot read ``{"type": "file", ...}`` content blocks, and
    those that can parse untrusted bytes somewhere you cannot bound. This
    middleware, in `wrap_model_call`, takes every block of a human message
    that is not text through capsa's guard, whatever its shape
    (`capsa.guard.blocks`: LangChain's v1 and v0 file, image and audio blocks,
    OpenAI's ``file``, ``input_file``, ``image_url``, ``input_image`` and
    ``input_audio``, Anthropic's ``document`` and ``image``): images are read
    by OCR (or kept as images, checked, with ``send_images=True``); a file
    given by URL or path is read only through your `fetch`; a block capsa
    does not know is refused. Each is read with isolated parsers and typed
    refusals; the middleware packs the extracted text with `capsa.budget` as
    ``<context source="attached">`` (beside retrieval, when a `retriever` is
    given, under `Budget.attachment_share`), and tells
    the model which files it is not reading and why ("report.pdf: parser
    failed (timeout)"). The same report reaches the caller as a
    ``capsa.attachments`` custom event, once per turn: with the turn's first
    model call, the one whose request ends with the user's message (an agent
    calls the model several times in one turn; the event is not repeated).

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
        fetch: reads a file a block gives by URL or path (``bytes`` back);
            None (the default) refuses those files as ``not_fetched``.
        send_images: keep image blocks as images for a model that reads them
            (after checking they are images within the size limit); off by
            default, when images are read by OCR like any file.
    """

    def __init__(self, *, budget: Budget, retriever: BaseRetriever | None = None,
                 extractor: TextExtractor | None = None,
                 limits: ExtractionLimits | None = None,
                 tokenizer: Callable[[str], int] | None = None,
                 fetch: Fetcher | None = None, send_images: bool = False) -> None:
        super().__init__()
        self.budget = budget
        self.retriever = retriever
        self.extractor = extractor
        self.limits = limits
        self.tokenizer = tokenizer
        self.fetch = fetch
        self.send_images = send_images
        self._build()

    def _build(self) -> None:
        self._cache = ExtractionCache(_CACHE_SIZE)
        self._forms: RecentCache[list[str | dict[Any, Any]]] = RecentCache(_CACHE_SIZE)

    def __getstate__(self) -> dict[str, Any]:
        """Settings only: the caches (and their locks) are rebuilt, empty, on load."""
        state = dict(self.__dict__)
        for built in ("_cache", "_forms"):
            state.pop(built, None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._build()

    def wrap_model_call(self, request: ModelRequest[Any],
                        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]]) -> Any:
        """Rewrite every human message that carries files, for this call only."""
        turn = _turn(request.messages)
        if turn is None:
            return handler(request)
        docs = self.retriever.invoke(_text(turn.newest)) if self.retriever is not None else []
        messages, context = self._rewrite(request.messages, turn, docs)
        if _first_call(request.messages, turn):
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
        if _first_call(request.messages, turn):
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
            read = self._read(turn.newest)
            extracted, omitted, kept = list(read.extracted), list(read.omitted), read.kept
        else:  # a follow-up: the earlier files, read again for this question
            earlier = [self._read(cast("HumanMessage", messages[i])).extracted
                       for i in turn.earlier]
            extracted = list({e.sha256: e for group in earlier for e in group}.values())
            omitted, kept = [], ()  # each was named where its file was attached
        context = attachment_context(_text(turn.newest), extracted, omitted, self.budget,
                                     passages=passages, tokenizer=self.tokenizer)
        rewritten[turn.index] = _replaced(turn.newest, context, kept)
        return rewritten, context

    def _earlier_form(self, message: HumanMessage) -> HumanMessage:
        """An earlier message as every later request shows it: packed for its own text.

        A pure function of the message (no retrieval), kept by content digest so
        a long conversation does not re-pack its files on every model call.
        """
        key = _digest(message.content)
        known = self._forms.get(key)
        if known is not None:
            return message.model_copy(update={"content": known})
        read = self._read(message)
        form = _replaced(message, attachment_context(
            _text(message), read.extracted, read.omitted, self.budget,
            tokenizer=self.tokenizer), read.kept)
        self._forms.put(key, cast("list[str | dict[Any, Any]]", form.content))
        return form

    def _read(self, message: HumanMessage) -> BlockOutcomes:
        content = [message.content] if isinstance(message.content, str) else message.content
        return read_blocks(content, cache=self._cache, extractor=self.extractor,
                           limits=self.limits, fetch=self.fetch, send_images=self.send_images)


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


def _first_call(messages: Sequence[AnyMessage], turn: _Turn) -> bool:
    """Whether this is the turn's first model call, which reports it: nothing follows the user.

    Read from the request itself, not remembered, so two conversations holding
    the same messages each get their report, and a later call of the turn (after
    tool rounds) sends none.
    """
    return turn.index == len(messages) - 1


def _newest_human(messages: Sequence[AnyMessage]) -> tuple[int, HumanMessage] | None:
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if isinstance(message, HumanMessage):
            return index, message
    return None


def _digest(content: Any) -> str:
    return hashlib.sha256(json.dumps(content, sort_keys=True, default=str).encode()).hexdigest()


def _files(message: HumanMessage) -> list[Any]:
    """Every block of the message that is not the user's words (`carries_file`)."""
    if isinstance(message.content, str):
        return []
    return [b for b in message.content if carries_file(b)]


def _text(message: HumanMessage) -> str:
    if isinstance(message.content, str):
        return message.content
    return " ".join(b if isinstance(b, str) else str(b.get("text", ""))
                    for b in message.content
                    if isinstance(b, str) or b.get("type") in TEXT_BLOCK_TYPES)


def _replaced(message: HumanMessage, context: AttachmentContext,
              images: Sequence[int] = ()) -> HumanMessage:
    """The message with its text and checked images only, after the packed context."""
    content = [message.content] if isinstance(message.content, str) else message.content
    kept: list[str | dict[Any, Any]] = [
        b for i, b in enumerate(content) if not carries_file(b) or i in images]
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
