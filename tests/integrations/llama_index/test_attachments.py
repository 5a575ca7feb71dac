"""CapsaAttachments: every block a LlamaIndex `ChatMessage` can carry, none sent raw."""

from __future__ import annotations

import base64
import typing

import pytest
from llama_index.core.base.llms import types
from llama_index.core.base.llms.types import (
    AudioBlock,
    ChatMessage,
    DocumentBlock,
    ImageBlock,
    TextBlock,
    VideoBlock,
)
from llama_index.core.llms.mock import MockLLM

from capsa.budget import Budget
from capsa.guard.extractors import PlainTextExtractor
from capsa.guard.samples import png_blank
from capsa.llama_index import CapsaAttachments

MARKER = "The hotel cap is EUR 165 a night."
URL = "https://files.example.com/q3.txt"

BLOCKS: dict[str, tuple[typing.Any, str]] = {
    "document data": (DocumentBlock(data=MARKER.encode(), title="q3.txt",
                                    document_mimetype="text/plain"), "read"),
    "document url": (DocumentBlock(url=URL), "not_fetched"),
    "image data": (ImageBlock(image=MARKER.encode(), image_mimetype="image/png"),
                   "type_mismatch"),
    "image url": (ImageBlock(url="https://x.example/a.png"), "not_fetched"),
    "audio data": (AudioBlock(audio=MARKER.encode(), format="wav"), "read"),
    "video data": (VideoBlock(video=b"\x00\x00\x00\x18ftypmp42", video_mimetype="video/mp4"),
                   "unsupported_type"),
    "citable": (types.CitableBlock(title="t", source="s", content=[TextBlock(text=MARKER)]),
                "unsupported_type"),
    "citation": (types.CitationBlock(cited_content=TextBlock(text=MARKER), source="s",
                                     title="t", additional_location_info={}),
                 "unsupported_type"),
    "tool call": (types.ToolCallBlock(tool_call_id="1", tool_name="t", tool_kwargs={}),
                  "unsupported_type"),
}


def _guard(**options: typing.Any) -> CapsaAttachments:
    return CapsaAttachments(budget=Budget(max_tokens=600), extractor=PlainTextExtractor(),
                            **options)


def test_the_test_covers_every_content_block_type() -> None:
    members = typing.get_args(typing.get_args(types.ContentBlock)[0])
    covered = {type(block) for block, _ in BLOCKS.values()}
    passive = {TextBlock, types.ThinkingBlock, types.CachePoint}
    assert set(members) == covered | passive


@pytest.mark.parametrize("name", sorted(BLOCKS))
def test_no_content_block_reaches_the_llm_raw(name: str) -> None:
    block, expected = BLOCKS[name]
    attachments = _guard()
    message = ChatMessage(role="user", blocks=[TextBlock(text="Hotel cap?"), block])
    guarded = attachments(message)
    assert all(isinstance(b, TextBlock) for b in guarded.blocks)
    assert message.blocks[1] is block  # the caller's message is unchanged
    seen = MockLLM().chat([guarded]).message.content or ""
    assert URL not in seen and base64.b64encode(MARKER.encode()).decode() not in seen
    assert attachments.last is not None
    if expected == "read":
        assert MARKER in seen and attachments.last.omitted == ()
    else:
        assert [o.reason for o in attachments.last.omitted] == [expected]


def test_a_document_title_names_the_file_the_model_sees() -> None:
    guarded = _guard()(ChatMessage(role="user", blocks=[
        TextBlock(text="Cap?"), DocumentBlock(data=MARKER.encode(), title="q3.txt")]))
    assert "q3.txt" in guarded.blocks[0].text


def test_an_image_is_kept_only_when_images_are_sent_and_it_is_one() -> None:
    image = ImageBlock(image=png_blank(4, 4), image_mimetype="image/png")
    guarded = _guard(send_images=True)(ChatMessage(role="user", blocks=[
        TextBlock(text="What is this?"), image]))
    assert image in guarded.blocks


def test_a_url_is_read_through_the_callers_fetcher() -> None:
    attachments = _guard(fetch=lambda url: MARKER.encode())
    guarded = attachments(ChatMessage(role="user", blocks=[TextBlock(text="Cap?"),
                                                           DocumentBlock(url=URL)]))
    assert MARKER in guarded.blocks[0].text and "q3.txt" in guarded.blocks[0].text


def test_a_message_without_files_is_returned_as_it_is() -> None:
    message = ChatMessage(role="user", content="hello")
    assert _guard()(message) is message
