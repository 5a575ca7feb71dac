"""ExtractiveChatModel: the demo's deterministic offline stand-in for an LLM."""

from __future__ import annotations

import base64

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.tools import tool

from capsa.budget import Budget
from capsa.demo.chat import ExtractiveChatModel, best_sentence
from capsa.guard.extractors import PlainTextExtractor
from capsa.langchain import AttachmentMiddleware

CONTEXT = ('<context source="retrieved">\n<document id="travel-3" source="t.pdf">Flights are '
           "economy. In London the hotel cap is EUR 230 a night.</document>\n"
           '<document id="remote-1" source="r.md">Staff may work remotely three days a week.'
           "</document>\n</context>")


def test_best_sentence_picks_the_sentence_sharing_most_words_and_its_chunk() -> None:
    assert best_sentence("hotel cap in London", CONTEXT) == (
        "In London the hotel cap is EUR 230 a night.", "travel-3")


def test_model_answers_from_packed_context_with_a_citation() -> None:
    reply = ExtractiveChatModel().invoke([SystemMessage(CONTEXT),
                                          HumanMessage("What is the hotel cap in London?")])
    assert reply.content == "In London the hotel cap is EUR 230 a night. [travel-3]"


def test_model_says_so_when_nothing_matches() -> None:
    reply = ExtractiveChatModel().invoke([SystemMessage(CONTEXT),
                                          HumanMessage("Who won the cup final?")])
    assert "could not find" in str(reply.content)


def test_model_with_tools_searches_then_cites_then_answers() -> None:
    @tool
    def search(query: str) -> str:
        """Search the knowledge base."""
        return '[travel-3] Source: "Travel"\nIn London the hotel cap is EUR 230 a night.'

    @tool
    def cite(chunk_ids: list[str]) -> str:
        """Declare the chunks the answer relies on."""
        return "noted"

    agent = create_agent(ExtractiveChatModel(), tools=[search, cite])
    messages = agent.invoke({"messages": [HumanMessage("hotel cap in London?")]})["messages"]
    calls = [m.tool_calls[0]["name"] for m in messages if isinstance(m, AIMessage) and m.tool_calls]
    assert calls == ["search", "cite"]
    assert messages[-1].content == "In London the hotel cap is EUR 230 a night. [travel-3]"


def test_model_answers_a_message_rewritten_by_the_attachment_middleware() -> None:
    memo = base64.b64encode(b"Flights are economy. In London the hotel cap is EUR 230.").decode()
    agent = create_agent(ExtractiveChatModel(), middleware=[AttachmentMiddleware(
        budget=Budget(max_tokens=300), extractor=PlainTextExtractor())])
    message = HumanMessage(content=[
        {"type": "text", "text": "What is the hotel cap in London?"},
        {"type": "file", "base64": memo, "mime_type": "text/plain",
         "extras": {"filename": "memo.txt"}}])
    answer = agent.invoke({"messages": [message]})["messages"][-1].content
    assert answer.startswith("In London the hotel cap is EUR 230.")
