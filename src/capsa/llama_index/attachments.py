"""Attached files in LlamaIndex chat messages, read through the guard."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from llama_index.core.base.llms.types import (
    AudioBlock,
    CachePoint,
    ChatMessage,
    DocumentBlock,
    ImageBlock,
    TextBlock,
    ThinkingBlock,
    VideoBlock,
)

from capsa.budget import Budget
from capsa.budget.attachments import (
    AttachmentContext,
    ExtractionCache,
    attachment_context,
    read_blocks,
)
from capsa.guard import ExtractionLimits, TextExtractor
from capsa.guard.blocks import Fetcher

__all__ = ["CapsaAttachments"]

_CACHE_SIZE = 256


class CapsaAttachments:
    """Turn the file blocks of a LlamaIndex `ChatMessage` into guarded, packed text.

    A `ChatMessage` can carry `DocumentBlock`, `ImageBlock`, `AudioBlock` and
    `VideoBlock` content, which an LLM integration hands to its provider
    as they are. Call this on a user message before it reaches an LLM, a chat
    engine or an agent (``agent.run(user_msg=attachments(message))``): every
    block that is not text is read through capsa's guard (images by OCR, or
    kept, checked, with ``send_images=True``), refused with its true reason
    (a URL or path without a `fetch` is ``not_fetched``), or, for a block
    capsa does not know (`CitableBlock`, `ToolCallBlock`, ...), refused as
    ``unsupported_type``. The new message opens with one text block holding
    the packed files (``<context source="attached">``) and a notice naming
    each file not included and why; the caller's message is not changed.
    The shapes are read by `capsa.guard.blocks`, the same reader
    `capsa.langchain.AttachmentMiddleware` uses.

    Setup:
        ``pip install 'capsa[llama-index,unstructured,ocr]'``

    Usage:
        .. code-block:: python

            attachments = CapsaAttachments(budget=Budget(max_tokens=4000))
            message = ChatMessage(role="user", blocks=[
                TextBlock(text="What is the hotel cap?"), DocumentBlock(path="policy.pdf")])
            reply = llm.chat([attachments(message)])
            attachments.last.omitted   # (Omission(label='policy.pdf', reason='not_fetched'),)

    Examples:
        >>> from capsa.guard.extractors import PlainTextExtractor
        >>> attachments = CapsaAttachments(budget=Budget(max_tokens=300),
        ...                                extractor=PlainTextExtractor())
        >>> guarded = attachments(ChatMessage(role="user", blocks=[
        ...     TextBlock(text="Cap?"), DocumentBlock(data=b"EUR 165.", title="a.txt")]))
        >>> [type(b).__name__ for b in guarded.blocks], "EUR 165" in guarded.blocks[0].text
        (['TextBlock', 'TextBlock'], True)
    """

    def __init__(self, *, budget: Budget, extractor: TextExtractor | None = None,
                 limits: ExtractionLimits | None = None,
                 tokenizer: Callable[[str], int] | None = None,
                 fetch: Fetcher | None = None, send_images: bool = False) -> None:
        self.budget = budget
        self.extractor = extractor
        self.limits = limits
        self.tokenizer = tokenizer
        self.fetch = fetch
        self.send_images = send_images
        self.last: AttachmentContext | None = None
        """What the latest call packed and refused; None before the first file."""
        self._cache = ExtractionCache(_CACHE_SIZE)

    def __call__(self, message: ChatMessage) -> ChatMessage:
        """The message with its files replaced by their guarded text; unchanged without files."""
        shapes = [_shape(block) for block in message.blocks]
        if all(shape is None for shape in shapes):
            return message
        read = read_blocks([s if s is not None else "" for s in shapes], cache=self._cache,
                           extractor=self.extractor, limits=self.limits, fetch=self.fetch,
                           send_images=self.send_images)
        text = " ".join(b.text for b in message.blocks if isinstance(b, TextBlock))
        context = attachment_context(text, read.extracted, read.omitted, self.budget,
                                     tokenizer=self.tokenizer)
        self.last = context
        kept = [b for i, b in enumerate(message.blocks) if shapes[i] is None or i in read.kept]
        packed = [TextBlock(text=context.text)] if context.text else []
        return message.model_copy(update={"blocks": [*packed, *kept]})

    def guard_all(self, messages: Sequence[ChatMessage]) -> list[ChatMessage]:
        """Every message of a history through `__call__` (for a chat history with files)."""
        return [self(m) for m in messages]


def _shape(block: Any) -> dict[str, Any] | None:
    """A block in the neutral (LangChain v1) shape `capsa.guard.blocks` reads; None for text."""
    if isinstance(block, TextBlock | ThinkingBlock | CachePoint):
        return None
    if isinstance(block, DocumentBlock):
        title = block.title if block.title != "input_document" else None  # LlamaIndex's default
        return _media("file", block.data, block.document_mimetype, title, block.url, block.path)
    if isinstance(block, ImageBlock):
        return _media("image", block.image, block.image_mimetype, None, block.url, block.path)
    if isinstance(block, AudioBlock):
        mime = f"audio/{block.format}" if block.format else None
        return _media("audio", block.audio, mime, None, block.url, block.path)
    if isinstance(block, VideoBlock):
        return _media("video", block.video, block.video_mimetype, None, block.url, block.path)
    return {"type": str(getattr(block, "block_type", type(block).__name__))}


def _media(kind: str, data: Any, mime: str | None, title: str | None, url: Any,
           path: Any) -> dict[str, Any]:
    shape: dict[str, Any] = {"type": kind}
    if isinstance(data, bytes) and data:  # LlamaIndex keeps block data base64-encoded
        shape["base64"] = data.decode("ascii", "replace")
    elif url:
        shape["url"] = str(url)
    elif path:
        shape["path"] = str(path)
    if mime:
        shape["mime_type"] = mime
    if title:
        shape["filename"] = title
    elif path:
        shape["filename"] = str(path)
    return shape
