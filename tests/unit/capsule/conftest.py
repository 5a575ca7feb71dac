"""Builders for capsule tests: chunks and conversations written in code."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import pytest

from capsa.capsule import (
    CitationRef,
    Evidence,
    EvidenceLedger,
    ImagePart,
    Message,
    TextPart,
    ToolCall,
)

SEARCH = "search"
CITE = "cite"


def _make_chunk(
    chunk_id: str,
    *,
    document_id: str = "doc",
    content: str | None = None,
    title: str | None = None,
    uri: str | None = None,
    collection: str | None = None,
    picture_refs: Sequence[str] = (),
) -> Evidence:
    """A chunk whose content names its id, so its presence in a text is checkable."""
    return Evidence(
        chunk_id=chunk_id,
        content=content if content is not None else f"Body of {chunk_id}: " + "policy text " * 20,
        document_id=document_id,
        title=title,
        uri=uri,
        collection=collection,
        picture_refs=tuple(picture_refs),
    )


def _user(text: str) -> Message:
    return Message(role="user", parts=(TextPart(text=text),))


@dataclass
class Conversation:
    """A history and its ledger, grown the way a host grows them."""

    messages: list[Message] = field(default_factory=list)
    ledger: EvidenceLedger = field(default_factory=EvidenceLedger)
    _calls: int = 0

    def ask(self, text: str = "question", *, extra: Sequence[Message] = ()) -> int:
        """Start a question; returns its identity."""
        if self.ledger.in_progress:
            self.end()
        boundary = len(self.messages)
        self.ledger = self.ledger.begin_question(boundary)
        self.messages.append(_user(text))
        self.messages.extend(extra)
        return boundary

    def _call_id(self) -> str:
        self._calls += 1
        return f"call-{self._calls}"

    def search(self, *chunks: Evidence, tool: str = SEARCH, named: bool = True) -> str:
        """The model calls an evidence tool and it returns `chunks`; returns the call id."""
        call_id = self._call_id()
        self.messages.append(
            Message(role="assistant", tool_calls=(ToolCall(id=call_id, name=tool),))
        )
        body = "\n\n".join(f"[{c.chunk_id}] {c.content}" for c in chunks) or "No results."
        self.messages.append(
            Message(
                role="tool",
                tool_call_id=call_id,
                tool_name=tool if named else None,
                parts=(TextPart(text=body),),
                evidence=chunks,
            )
        )
        self.ledger = self.ledger.record_retrieval(chunks, tool=tool)
        return call_id

    def parallel_search(self, *batches: Sequence[Evidence], tool: str = SEARCH) -> None:
        """One assistant message calling the evidence tool once per batch."""
        ids = [self._call_id() for _ in batches]
        calls = tuple(ToolCall(id=i, name=tool) for i in ids)
        self.messages.append(Message(role="assistant", tool_calls=calls))
        for call_id, chunks in zip(ids, batches, strict=True):
            body = "\n\n".join(f"[{c.chunk_id}] {c.content}" for c in chunks)
            self.messages.append(
                Message(
                    role="tool",
                    tool_call_id=call_id,
                    tool_name=tool,
                    parts=(TextPart(text=body),),
                    evidence=tuple(chunks),
                )
            )
            self.ledger = self.ledger.record_retrieval(chunks, tool=tool)

    def cite(self, *chunk_ids: str) -> None:
        """The model calls the cite tool; the acknowledgement names the ids."""
        call_id = self._call_id()
        self.messages.append(
            Message(
                role="assistant",
                tool_calls=(ToolCall(id=call_id, name=CITE, args={"chunk_ids": list(chunk_ids)}),),
            )
        )
        self.messages.append(
            Message(
                role="tool",
                tool_call_id=call_id,
                tool_name=CITE,
                parts=(TextPart(text=f"Recorded {len(chunk_ids)} citation(s)."),),
                citations=tuple(CitationRef(chunk_id=c) for c in chunk_ids),
            )
        )
        self.ledger = self.ledger.record_citations(chunk_ids)

    def other_tool(self, name: str = "calculator", output: str = "42") -> None:
        call_id = self._call_id()
        self.messages.append(
            Message(role="assistant", tool_calls=(ToolCall(id=call_id, name=name),))
        )
        self.messages.append(
            Message(
                role="tool", tool_call_id=call_id, tool_name=name, parts=(TextPart(text=output),)
            )
        )

    def answer(self, text: str = "answer") -> None:
        self.messages.append(Message(role="assistant", parts=(TextPart(text=text),)))

    def end(self) -> None:
        self.ledger = self.ledger.end_question(len(self.messages))

    def turn(self, *chunks: Evidence, cite: Sequence[str] = (), text: str = "question") -> int:
        """A whole question: ask, search, cite, answer, end."""
        boundary = self.ask(text)
        self.search(*chunks)
        if cite:
            self.cite(*cite)
        self.answer(f"answer to {text}")
        self.end()
        return boundary


PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16
"""The smallest thing that passes as a PNG for the core's signature check."""


def _user_image(text: str = "look at this") -> Message:
    return Message(
        role="user",
        parts=(TextPart(text=text), ImagePart(base64="aGVsbG8=", mime_type="image/png")),
    )


@pytest.fixture
def conversation() -> type[Conversation]:
    """The `Conversation` builder class; call it for an empty conversation."""
    return Conversation


@pytest.fixture
def make_chunk() -> Callable[..., Evidence]:
    """Build an `Evidence` whose content names its id."""
    return _make_chunk


@pytest.fixture
def user() -> Callable[[str], Message]:
    """Build a plain user message."""
    return _user


@pytest.fixture
def user_image() -> Callable[..., Message]:
    """Build a user message carrying the user's own picture."""
    return _user_image


@pytest.fixture
def png() -> bytes:
    return PNG
