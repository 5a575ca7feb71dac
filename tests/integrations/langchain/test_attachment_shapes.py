"""Every block shape a LangChain message can carry: none reaches the model raw.

The shapes are LangChain's standard blocks (v1, and the v0 ``source_type``
form), every type in `langchain_core.messages.content.KNOWN_BLOCK_TYPES`,
OpenAI's chat and responses blocks and Anthropic's ``document``/``image``
blocks, as a `HumanMessage` holds them. Each goes through a real
`create_agent` graph with `AttachmentMiddleware`; the fake model records what
it was sent.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.messages.content import KNOWN_BLOCK_TYPES
from langchain_core.outputs import ChatResult
from langchain_core.tools import tool

from capsa.budget import Budget
from capsa.guard.extractors import PlainTextExtractor
from capsa.guard.samples import png_blank
from capsa.langchain import AttachmentMiddleware

MARKER = "The hotel cap is EUR 165 a night."
DATA = base64.b64encode(MARKER.encode()).decode()
DATA_URL = f"data:text/plain;base64,{DATA}"
URL = "https://files.example.com/docs/q3.txt"

# (name, block, expected: "read" | a refusal reason)
SHAPES: list[tuple[str, dict[str, Any], str]] = [
    # LangChain v1 standard blocks
    ("v1 file base64", {"type": "file", "base64": DATA, "mime_type": "text/plain",
                        "filename": "q3.txt"}, "read"),
    ("v1 file url", {"type": "file", "url": URL, "mime_type": "text/plain"}, "not_fetched"),
    ("v1 file id", {"type": "file", "file_id": "file-abc", "mime_type": "text/plain"},
     "provider_file"),
    ("v1 text-plain", {"type": "text-plain", "text": MARKER, "mime_type": "text/plain",
                       "extras": {"filename": "q3.txt"}}, "read"),
    ("v1 image base64", {"type": "image", "base64": DATA, "mime_type": "image/png"},
     "type_mismatch"),
    ("v1 image url", {"type": "image", "url": "https://x.example/a.png"}, "not_fetched"),
    ("v1 image id", {"type": "image", "file_id": "file-img"}, "provider_file"),
    # audio has no parser: text bytes sent as audio are read as the text they are
    ("v1 audio base64", {"type": "audio", "base64": DATA, "mime_type": "audio/wav"}, "read"),
    ("v1 video base64", {"type": "video", "base64": DATA, "mime_type": "video/mp4"},
     "unsupported_type"),
    ("v1 non_standard document", {"type": "non_standard", "value": {
        "type": "document", "source": {"type": "base64", "media_type": "text/plain",
                                       "data": DATA}, "title": "q3.txt"}}, "read"),
    # LangChain v0
    ("v0 file base64", {"type": "file", "source_type": "base64", "data": DATA,
                        "mime_type": "text/plain", "filename": "q3.txt"}, "read"),
    ("v0 file url", {"type": "file", "source_type": "url", "url": URL}, "not_fetched"),
    ("v0 file id", {"type": "file", "source_type": "id", "id": "file-abc"}, "provider_file"),
    ("v0 file text", {"type": "file", "source_type": "text", "text": MARKER,
                      "mime_type": "text/plain"}, "read"),
    ("v0 image base64", {"type": "image", "source_type": "base64", "data": DATA,
                         "mime_type": "image/png"}, "type_mismatch"),
    ("v0 audio base64", {"type": "audio", "source_type": "base64", "data": DATA,
                         "mime_type": "audio/wav"}, "read"),
    # OpenAI chat completions
    ("openai file data", {"type": "file", "file": {"file_data": DATA_URL,
                                                   "filename": "q3.txt"}}, "read"),
    ("openai file id", {"type": "file", "file": {"file_id": "file-abc"}}, "provider_file"),
    ("openai image_url data", {"type": "image_url", "image_url": {
        "url": f"data:image/png;base64,{DATA}"}}, "type_mismatch"),
    ("openai image_url https", {"type": "image_url", "image_url": {
        "url": "https://x.example/a.png"}}, "not_fetched"),
    ("openai image_url str", {"type": "image_url", "image_url": "https://x.example/a.png"},
     "not_fetched"),
    ("openai input_audio", {"type": "input_audio", "input_audio": {"data": DATA,
                                                                  "format": "wav"}},
     "read"),
    # OpenAI responses
    ("openai input_file data", {"type": "input_file", "file_data": DATA_URL,
                                "filename": "q3.txt"}, "read"),
    ("openai input_file url", {"type": "input_file", "file_url": URL}, "not_fetched"),
    ("openai input_file id", {"type": "input_file", "file_id": "file-abc"}, "provider_file"),
    ("openai input_image", {"type": "input_image", "image_url": "https://x.example/a.png"},
     "not_fetched"),
    # Anthropic
    ("anthropic document base64", {"type": "document", "source": {
        "type": "base64", "media_type": "text/plain", "data": DATA}, "title": "q3.txt"}, "read"),
    ("anthropic document text", {"type": "document", "source": {
        "type": "text", "media_type": "text/plain", "data": MARKER}}, "read"),
    ("anthropic document content", {"type": "document", "source": {
        "type": "content", "content": [{"type": "text", "text": MARKER}]}}, "read"),
    ("anthropic document url", {"type": "document", "source": {"type": "url", "url": URL}},
     "not_fetched"),
    ("anthropic document file", {"type": "document", "source": {"type": "file",
                                                                "file_id": "file-abc"}},
     "provider_file"),
    ("anthropic image base64", {"type": "image", "source": {
        "type": "base64", "media_type": "image/png", "data": DATA}}, "type_mismatch"),
    ("anthropic image url", {"type": "image", "source": {"type": "url",
                                                         "url": "https://x.example/a.png"}},
     "not_fetched"),
    # blocks capsa does not know
    ("unknown type", {"type": "hologram", "data": DATA}, "unsupported_type"),
    ("no type", {"data": DATA}, "unsupported_type"),
]
SHAPES += [(f"known type {kind}", {"type": kind, "id": "x1", "name": "t", "args": {}},
            "unsupported_type")
           for kind in sorted(KNOWN_BLOCK_TYPES)
           if kind not in {"text", "reasoning", "refusal", "file", "image", "audio", "video",
                           "text-plain", "non_standard"}]


class _Recorder(GenericFakeChatModel):
    seen: list[list[BaseMessage]] = []

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        self.seen.append(list(messages))
        return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)

    def bind_tools(self, tools: Any, **kwargs: Any) -> _Recorder:
        return self


class _Events(BaseCallbackHandler):
    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []

    def on_custom_event(self, name: str, data: Any, **kwargs: Any) -> None:
        self.events.append((name, data))


def _model(*replies: AIMessage) -> _Recorder:
    model = _Recorder(messages=iter(replies or [AIMessage(content="ok")]))
    model.seen = []
    return model


def _run(block: dict[str, Any], **options: Any) -> tuple[list[Any], dict[str, Any]]:
    model = _model()
    events = _Events()
    agent = create_agent(model, middleware=[AttachmentMiddleware(
        budget=Budget(max_tokens=600), extractor=PlainTextExtractor(), **options)])
    agent.invoke({"messages": [HumanMessage(content=[{"type": "text", "text": "Hotel cap?"},
                                                     block])]}, {"callbacks": [events]})
    (report,) = [data for name, data in events.events if name == "capsa.attachments"]
    content = model.seen[0][-1].content
    return content, report


@pytest.mark.parametrize(("name", "block", "expected"), SHAPES, ids=[s[0] for s in SHAPES])
def test_no_block_shape_reaches_the_model_raw(name: str, block: dict[str, Any],
                                              expected: str) -> None:
    content, report = _run(block)
    assert all(isinstance(b, dict) and b["type"] == "text" for b in content), content
    wire = json.dumps(content)
    assert DATA not in wire and URL not in wire and "file-abc" not in wire
    if expected == "read":
        assert MARKER in wire
        assert report["omitted"] == []
    else:
        assert [o["reason"] for o in report["omitted"]] == [expected]
        assert MARKER not in wire


def test_openai_file_keeps_its_file_name() -> None:
    content, _ = _run({"type": "file", "file": {"file_data": DATA_URL, "filename": "q3.txt"}})
    assert '<document id="q3.txt">' in content[0]["text"]


def test_a_url_file_is_read_through_the_callers_fetcher() -> None:
    asked: list[str] = []

    def fetch(url: str) -> bytes:
        asked.append(url)
        return MARKER.encode()

    content, report = _run({"type": "document", "source": {"type": "url", "url": URL}},
                           fetch=fetch)
    assert asked == [URL]
    assert MARKER in content[0]["text"] and "q3.txt" in content[0]["text"]
    assert report["omitted"] == []


def test_a_failing_fetcher_is_a_fetch_failed_refusal() -> None:
    def fetch(url: str) -> bytes:
        raise OSError("connection refused")

    _, report = _run({"type": "file", "url": URL}, fetch=fetch)
    assert [o["reason"] for o in report["omitted"]] == ["fetch_failed"]


def test_an_image_is_kept_only_when_the_caller_sends_images_and_it_is_one() -> None:
    png = base64.b64encode(png_blank(4, 4)).decode()
    block = {"type": "image", "base64": png, "mime_type": "image/png"}
    content, report = _run(block, send_images=True)
    assert block in content and report["omitted"] == []
    forged = {"type": "image", "base64": DATA, "mime_type": "image/png"}
    content, report = _run(forged, send_images=True)
    assert forged not in content
    assert [o["reason"] for o in report["omitted"]] == ["type_mismatch"]


def test_the_report_is_sent_once_per_turn_not_once_per_model_call() -> None:
    @tool
    def lookup(query: str) -> str:
        """Look something up."""
        return "nothing"

    model = _model(AIMessage(content="", tool_calls=[{"name": "lookup", "args": {"query": "a"},
                                                      "id": "1"}]),
                   AIMessage(content="", tool_calls=[{"name": "lookup", "args": {"query": "b"},
                                                      "id": "2"}]),
                   AIMessage(content="done"))
    events = _Events()
    agent = create_agent(model, tools=[lookup], middleware=[AttachmentMiddleware(
        budget=Budget(max_tokens=600), extractor=PlainTextExtractor())])
    gone = {"type": "file", "url": URL}
    agent.invoke({"messages": [HumanMessage(content=[{"type": "text", "text": "Cap?"}, gone])]},
                 {"callbacks": [events]})
    assert len(model.seen) == 3
    reports = [data for name, data in events.events if name == "capsa.attachments"]
    assert len(reports) == 1
    for sent in model.seen:  # each request carries the notice once, in the user's message
        assert json.dumps([m.content for m in sent]).count("not included") == 1


def test_every_conversation_gets_its_report_even_with_the_same_messages() -> None:
    """Two users sending the same form, or a retried stateless request, are two turns."""
    from langgraph.checkpoint.memory import InMemorySaver

    block = {"type": "file", "base64": DATA, "mime_type": "text/plain",
             "extras": {"filename": "form.txt"}}
    question = HumanMessage(content=[{"type": "text", "text": "Hotel cap?"}, block])
    middleware = AttachmentMiddleware(budget=Budget(max_tokens=600),
                                      extractor=PlainTextExtractor())
    saver = InMemorySaver()
    counts = []
    for config in ({"configurable": {"thread_id": "alice"}},
                   {"configurable": {"thread_id": "bob"}}, {}, {}):
        events = _Events()
        agent = create_agent(_model(), middleware=[middleware],
                             checkpointer=saver if config else None)
        agent.invoke({"messages": [question]}, {**config, "callbacks": [events]})
        counts.append(sum(name == "capsa.attachments" for name, _ in events.events))
    assert counts == [1, 1, 1, 1]


def test_the_middleware_deep_copies_and_pickles_with_empty_caches() -> None:
    import copy
    import pickle

    middleware = AttachmentMiddleware(budget=Budget(max_tokens=600),
                                      extractor=PlainTextExtractor())
    _, report = _run_with(middleware)
    for restored in (copy.deepcopy(middleware), pickle.loads(pickle.dumps(middleware))):
        assert restored.budget == middleware.budget and restored._cache is not middleware._cache
        assert _run_with(restored)[1] == report


def _run_with(middleware: AttachmentMiddleware) -> tuple[list[Any], dict[str, Any]]:
    model, events = _model(), _Events()
    block = {"type": "file", "base64": DATA, "mime_type": "text/plain"}
    create_agent(model, middleware=[middleware]).invoke(
        {"messages": [HumanMessage(content=[{"type": "text", "text": "Hotel cap?"}, block])]},
        {"callbacks": [events]})
    (report,) = [data for name, data in events.events if name == "capsa.attachments"]
    return model.seen[0][-1].content, report
