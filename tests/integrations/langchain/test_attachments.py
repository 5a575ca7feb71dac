"""AttachmentMiddleware inside a real `create_agent` graph."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatResult
from langgraph.checkpoint.memory import InMemorySaver

from capsa.budget import Budget
from capsa.demo.corpus_source import CORPUS_DIR
from capsa.guard.extractors import PlainTextExtractor
from capsa.langchain import AttachmentMiddleware


class _Recorder(GenericFakeChatModel):
    seen: list[list[BaseMessage]] = []

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        self.seen.append(list(messages))
        return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)


class _CountingExtractor(PlainTextExtractor):
    calls = 0

    def extract(self, kind: str, media_type: str | None, payload: bytes, *,
                max_pages: int) -> str:
        type(self).calls += 1
        return super().extract(kind, media_type, payload, max_pages=max_pages)


class _Events(BaseCallbackHandler):
    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []

    def on_custom_event(self, name: str, data: Any, **kwargs: Any) -> None:
        self.events.append((name, data))


def _file(name: str, data: bytes, mime: str) -> dict[str, Any]:
    return {"type": "file", "base64": base64.b64encode(data).decode(), "mime_type": mime,
            "extras": {"filename": name}}


def _model(replies: int = 2) -> _Recorder:
    model = _Recorder(messages=iter([AIMessage(content=f"answer {i}") for i in range(replies)]))
    model.seen = []
    return model


def _human(*files: dict[str, Any], text: str = "What is the hotel cap?") -> HumanMessage:
    return HumanMessage(content=[{"type": "text", "text": text}, *files])


@pytest.mark.slow
def test_model_reads_guarded_files_and_is_told_what_was_refused() -> None:
    model = _model()
    agent = create_agent(model, middleware=[AttachmentMiddleware(budget=Budget(max_tokens=1500))],
                         checkpointer=InMemorySaver())
    events = _Events()
    config = {"configurable": {"thread_id": "t"}, "callbacks": [events]}
    pdf = (CORPUS_DIR / "travel-policy.pdf").read_bytes()
    fake = (CORPUS_DIR / "invoice.pdf").read_bytes()
    agent.invoke({"messages": [_human(_file("travel-policy.pdf", pdf, "application/pdf"),
                                      _file("invoice.pdf", fake, "application/pdf"))]}, config)
    (sent,) = model.seen
    text = sent[-1].content[0]["text"]
    assert '<context source="attached">' in text
    assert "Travel and Expense Policy" in text
    assert "invoice.pdf: refused (type mismatch)" in text
    assert not any(b.get("type") == "file" for b in sent[-1].content if isinstance(b, dict))
    stored = agent.get_state(config).values["messages"][0]
    assert [b["type"] for b in stored.content] == ["text", "file", "file"]
    (report,) = [data for name, data in events.events if name == "capsa.attachments"]
    assert [o["label"] for o in report["omitted"]] == ["invoice.pdf"]


def test_context_fits_the_budget_and_counts_the_notice() -> None:
    model = _model(1)
    budget = Budget(max_tokens=120)
    agent = create_agent(model, middleware=[AttachmentMiddleware(
        budget=budget, extractor=PlainTextExtractor())])
    long_text = ("The hotel cap is EUR 165 per night. " * 80).encode()
    agent.invoke({"messages": [_human(_file("policy.txt", long_text, "text/plain"),
                                      _file("gone.txt", b"", "text/plain"))]})
    text = model.seen[0][-1].content[0]["text"]
    from capsa.budget import estimate_tokens

    assert estimate_tokens(text) <= budget.max_tokens
    assert "gone.txt: refused (empty)" in text


def test_extraction_is_cached_across_turns() -> None:
    _CountingExtractor.calls = 0
    model = _model(2)
    agent = create_agent(model, middleware=[AttachmentMiddleware(
        budget=Budget(max_tokens=500), extractor=_CountingExtractor())],
        checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "c"}}
    note = _file("note.txt", b"The hotel cap is EUR 165.", "text/plain")
    agent.invoke({"messages": [_human(note)]}, config)
    agent.invoke({"messages": [_human(note, text="And again?")]}, config)
    assert _CountingExtractor.calls == 1
    assert "EUR 165" in model.seen[1][-1].content[0]["text"]


def test_url_files_are_never_fetched_and_are_reported() -> None:
    model = _model(1)
    agent = create_agent(model, middleware=[AttachmentMiddleware(
        budget=Budget(max_tokens=300), extractor=PlainTextExtractor())])
    block = {"type": "file", "url": "https://example.com/x.pdf", "mime_type": "application/pdf",
             "extras": {"filename": "x.pdf"}}
    agent.invoke({"messages": [_human(block)]})
    assert "x.pdf: refused (not fetched)" in model.seen[0][-1].content[0]["text"]


def test_messages_without_files_pass_through_untouched() -> None:
    model = _model(1)
    agent = create_agent(model, middleware=[AttachmentMiddleware(
        budget=Budget(max_tokens=300), extractor=PlainTextExtractor())])
    agent.invoke({"messages": [HumanMessage(content="hello")]})
    assert model.seen[0][-1].content == "hello"


async def test_async_path_rewrites_the_request_too() -> None:
    model = _model(1)
    agent = create_agent(model, middleware=[AttachmentMiddleware(
        budget=Budget(max_tokens=300), extractor=PlainTextExtractor())])
    await agent.ainvoke({"messages": [_human(_file("a.txt", b"Cap: EUR 165.", "text/plain"))]})
    assert "EUR 165" in model.seen[0][-1].content[0]["text"]


_POLICY = (
    "The hotel cap is EUR 165 per night in every city. "
    + "Staff book rooms through the travel desk and keep the receipt. " * 40
    + "The daily meal allowance is EUR 48 and covers breakfast, lunch and dinner."
).encode()


def _raw_files(messages: list[BaseMessage]) -> list[dict[str, Any]]:
    return [b for m in messages if isinstance(m.content, list)
            for b in m.content if isinstance(b, dict) and b.get("type") == "file"]


def test_a_follow_up_reads_the_earlier_file_again_and_no_raw_block_is_sent() -> None:
    model = _model(3)
    agent = create_agent(model, middleware=[AttachmentMiddleware(
        budget=Budget(max_tokens=45), extractor=PlainTextExtractor())],
        checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "follow-up"}}
    agent.invoke({"messages": [_human(_file("policy.txt", _POLICY, "text/plain"))]}, config)
    agent.invoke({"messages": [HumanMessage("What is the daily meal allowance?")]}, config)
    agent.invoke({"messages": [HumanMessage("Thanks!")]}, config)
    first, second, third = model.seen
    assert "EUR 165" in first[-1].content[0]["text"]
    assert "EUR 48" not in first[-1].content[0]["text"]  # the budget kept the hotel cap only
    assert "EUR 48" in second[-1].content[0]["text"]  # read again for the new question
    assert second[-1].content[-1] == "What is the daily meal allowance?"
    assert _raw_files(second) == [] and _raw_files(third) == []
    stored = agent.get_state(config).values["messages"]
    assert [b["type"] for b in stored[0].content] == ["text", "file"]  # history untouched
    assert stored[2].content == "What is the daily meal allowance?"


def test_earlier_turns_are_byte_identical_from_request_to_request() -> None:
    # A prompt cache serves the longest prefix a request shares with the last
    # one: an earlier message's packed form must not change from turn to turn.
    model = _model(3)
    agent = create_agent(model, middleware=[AttachmentMiddleware(
        budget=Budget(max_tokens=60), extractor=PlainTextExtractor())],
        checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "stable"}}
    agent.invoke({"messages": [_human(_file("policy.txt", _POLICY, "text/plain"))]}, config)
    agent.invoke({"messages": [_human(_file("note.txt", b"Taxis need a receipt.", "text/plain"),
                                      text="Do taxis need a receipt?")]}, config)
    agent.invoke({"messages": [HumanMessage("And the hotel cap?")]}, config)
    first, second, third = model.seen
    assert second[:1] == first  # the first turn exactly as it was sent
    assert third[:3] == second
    assert "EUR 165" in third[-1].content[0]["text"]  # both files, packed for the follow-up


def test_a_conversation_without_files_is_never_rewritten() -> None:
    model = _model(2)
    agent = create_agent(model, middleware=[AttachmentMiddleware(
        budget=Budget(max_tokens=60), extractor=PlainTextExtractor())],
        checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "plain"}}
    agent.invoke({"messages": [HumanMessage("hello")]}, config)
    agent.invoke({"messages": [HumanMessage("again")]}, config)
    assert [m.content for m in model.seen[1]] == ["hello", "answer 0", "again"]


async def test_async_follow_up_reads_the_earlier_file_again() -> None:
    model = _model(2)
    agent = create_agent(model, middleware=[AttachmentMiddleware(
        budget=Budget(max_tokens=60), extractor=PlainTextExtractor())],
        checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "async-follow-up"}}
    await agent.ainvoke({"messages": [_human(_file("policy.txt", _POLICY, "text/plain"))]},
                        config)
    await agent.ainvoke({"messages": [HumanMessage("What is the daily meal allowance?")]},
                        config)
    second = model.seen[1]
    assert "EUR 48" in second[-1].content[0]["text"]
    assert second[0] == model.seen[0][0] and _raw_files(second) == []


def test_an_earlier_turn_drops_its_retrieval_and_then_never_changes() -> None:
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever

    class Fixed(BaseRetriever):
        def _get_relevant_documents(self, query: str, *, run_manager: Any) -> list[Document]:
            return [Document(page_content=f"Retrieved for: {query}", id=f"r-{len(query)}")]

    model = _model(3)
    agent = create_agent(model, middleware=[AttachmentMiddleware(
        budget=Budget(max_tokens=200), extractor=PlainTextExtractor(), retriever=Fixed())],
        checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "retrieval"}}
    agent.invoke({"messages": [_human(_file("note.txt", b"The hotel cap is EUR 165.",
                                            "text/plain"))]}, config)
    agent.invoke({"messages": [HumanMessage("And taxis?")]}, config)
    agent.invoke({"messages": [HumanMessage("And trains?")]}, config)
    first, second, third = model.seen
    assert "Retrieved for: What is the hotel cap?" in first[-1].content[0]["text"]
    earlier = second[0].content[0]["text"]
    assert "EUR 165" in earlier and "Retrieved for" not in earlier
    assert third[0] == second[0]  # fixed from the turn after it was asked
    assert "Retrieved for: And taxis?" in second[-1].content[0]["text"]
    assert third[2].content == "And taxis?"  # an answered follow-up is sent as asked


@pytest.mark.parametrize("asynchronous", [False, True], ids=["invoke", "ainvoke"])
def test_retrieval_beside_files_runs_for_the_callers_tenant(asynchronous: bool) -> None:
    import asyncio

    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever
    from langchain_core.runnables import ConfigurableField

    class Tenant(BaseRetriever):
        tenant: str = "a"

        def _get_relevant_documents(self, query: str, *, run_manager: Any) -> list[Document]:
            return [Document(page_content=f"Notes of tenant {self.tenant}: hotel cap.",
                             id=f"{self.tenant}-1")]

    retriever = Tenant().configurable_fields(tenant=ConfigurableField(id="tenant"))
    model = _model(1)
    agent = create_agent(model, middleware=[AttachmentMiddleware(
        budget=Budget(max_tokens=300), extractor=PlainTextExtractor(), retriever=retriever)])
    request = {"messages": [_human(_file("a.txt", b"The hotel cap is EUR 165.", "text/plain"))]}
    config = {"configurable": {"tenant": "b"}}
    if asynchronous:
        asyncio.run(agent.ainvoke(request, config))
    else:
        agent.invoke(request, config)
    text = model.seen[0][-1].content[0]["text"]
    assert "Notes of tenant b" in text and "tenant a" not in text


async def test_a_large_upload_is_packed_off_the_event_loop(monkeypatch) -> None:
    import asyncio
    import threading

    import capsa.langchain.attachments as attachments_module

    threads: list[int] = []
    real = attachments_module.attachment_context

    def recorded(*args: Any, **kwargs: Any) -> Any:
        threads.append(threading.get_ident())
        return real(*args, **kwargs)

    monkeypatch.setattr(attachments_module, "attachment_context", recorded)
    upload = (_POLICY.decode() * 40)[:50_000].encode()
    assert len(upload) == 50_000
    stop = asyncio.Event()

    async def tick() -> None:
        while not stop.is_set():
            await asyncio.sleep(0)

    ticking = asyncio.create_task(tick())
    model = _model(1)
    agent = create_agent(model, middleware=[AttachmentMiddleware(
        budget=Budget(max_tokens=300), extractor=PlainTextExtractor())])
    await agent.ainvoke({"messages": [_human(_file("policy.txt", upload, "text/plain"))]})
    stop.set()
    await ticking
    assert threads and threading.get_ident() not in threads
    assert "EUR 165" in model.seen[0][-1].content[0]["text"]


def super_additive(text: str) -> int:
    """Issue 21's counter: joined text costs more than its parts (see test_pack_hard_bound)."""
    return (len(text) // 15) ** 2 // 8 + len(text) // 15


def per_call_minimum(text: str) -> int:
    return max(3, len(text) // 4)


def non_monotone(text: str) -> int:
    return len(text) // 6 + sum(map(ord, text)) % 5


@pytest.mark.parametrize("tokenizer", [super_additive, per_call_minimum, non_monotone],
                         ids=lambda t: t.__name__)
@pytest.mark.parametrize("max_tokens", [4, 12, 40, 120])
def test_context_fits_the_budget_for_any_tokenizer(tokenizer: Any, max_tokens: int) -> None:
    model = _model(1)
    agent = create_agent(model, middleware=[AttachmentMiddleware(
        budget=Budget(max_tokens=max_tokens), extractor=PlainTextExtractor(),
        tokenizer=tokenizer)])
    long_text = ("The hotel cap is EUR 165 per night. Taxis need a receipt. " * 20).encode()
    agent.invoke({"messages": [_human(_file("policy.txt", long_text, "text/plain"),
                                      _file("quarterly report.txt", b"", "text/plain"))]})
    first = model.seen[0][-1].content[0]["text"]
    packed = "" if first == "What is the hotel cap?" else first  # no block when nothing fits
    assert tokenizer(packed) <= max_tokens
