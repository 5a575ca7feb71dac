"""The capsule rewrite without the middleware: a `ContextEdit` and an LCEL step.

- `CitationCapsuleEdit` drops into `ContextEditingMiddleware(edits=[...])`.
- `capsule_messages` is a `trim_messages`-style function, or a `RunnableLambda`
  for LCEL chains.

Neither keeps state: the ledger comes from the caller, as a value or a callable
returning the current one. Both rewrite a copy; the stored history is untouched.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import overload

from langchain_core.messages import AnyMessage, BaseMessage
from langchain_core.runnables import Runnable, RunnableLambda

from capsa.capsule import (
    EvidenceLedger,
    PictureFetcher,
    TokenCounter,
    estimate_tokens,
)
from capsa.langchain.capsule_conversion import announce, compact

__all__ = ["CitationCapsuleEdit", "LedgerSource", "capsule_messages"]

LedgerSource = EvidenceLedger | Callable[[], EvidenceLedger | None] | None
"""A ledger, or a callable returning the current one each time it is needed."""


def _resolve(ledger: LedgerSource) -> EvidenceLedger | None:
    return ledger() if callable(ledger) else ledger


@dataclass
class CitationCapsuleEdit:
    """The capsule rewrite as a `ContextEdit`, for `ContextEditingMiddleware(edits=[...])`.

    `ContextEditingMiddleware` hands edits a deep copy of the request's messages and
    no state, so the ledger comes from the edit itself: a fixed ledger, or a
    callable returning the current one. Use `CitationCapsuleMiddleware` when the
    agent should keep the ledger in its state.

    Usage:
        .. code-block:: python

            edit = CitationCapsuleEdit(ledger=lambda: store.ledger(thread_id),
                                       evidence_tools=["search", "recall"])
            middleware = ContextEditingMiddleware(edits=[edit, ClearToolUsesEdit(
                exclude_tools=["search", "recall", "cite"])])
    """

    ledger: LedgerSource
    """The ledger, or a zero-argument callable returning it."""
    evidence_tools: Sequence[str]
    """Names of the evidence tools (and of a recall tool, if the agent has one)."""
    cite_tools: Sequence[str] = ()
    """Names of the cite tools whose calls and acknowledgements leave the request once
    their question ended (``["cite"]`` for `cite_tool()`); empty: every one stays."""
    trigger: int = 0
    """Compact only when the messages exceed this many tokens (0: always)."""
    fetch_picture: PictureFetcher | None = None
    """Fetches cited pictures' bytes; without it no pictures are attached."""
    max_capsule_tokens: int | None = None
    """Optional hard bound on everything the edit writes."""
    tokenizer: TokenCounter = estimate_tokens
    """Counts tokens for `max_capsule_tokens`: a counter or an encoder."""

    def apply(
        self,
        messages: list[AnyMessage],
        *,
        count_tokens: Callable[[Sequence[BaseMessage]], int],
    ) -> None:
        """Rewrite `messages` in place (the middleware passes its own copy).

        Raises:
            capsa.errors.CompactionRefused: see `capsa.capsule.compact_with_report`.
        """
        if not messages or (self.trigger and count_tokens(messages) <= self.trigger):
            return
        compacted, report = compact(
            messages,
            _resolve(self.ledger),
            evidence_tools=self.evidence_tools,
            fetch_picture=self.fetch_picture,
            max_tokens=self.max_capsule_tokens,
            tokenizer=self.tokenizer,
            cite_tools=self.cite_tools,
        )
        announce(report)
        messages[:] = compacted  # type: ignore[assignment]


@overload
def capsule_messages(
    messages: Sequence[BaseMessage],
    *,
    ledger: LedgerSource,
    evidence_tools: Iterable[str],
    cite_tools: Iterable[str] = (),
    fetch_picture: PictureFetcher | None = None,
    max_capsule_tokens: int | None = None,
    tokenizer: TokenCounter = estimate_tokens,
) -> list[BaseMessage]: ...


@overload
def capsule_messages(
    messages: None = None,
    *,
    ledger: LedgerSource,
    evidence_tools: Iterable[str],
    cite_tools: Iterable[str] = (),
    fetch_picture: PictureFetcher | None = None,
    max_capsule_tokens: int | None = None,
    tokenizer: TokenCounter = estimate_tokens,
) -> Runnable[Sequence[BaseMessage], list[BaseMessage]]: ...


def capsule_messages(
    messages: Sequence[BaseMessage] | None = None,
    *,
    ledger: LedgerSource,
    evidence_tools: Iterable[str],
    cite_tools: Iterable[str] = (),
    fetch_picture: PictureFetcher | None = None,
    max_capsule_tokens: int | None = None,
    tokenizer: TokenCounter = estimate_tokens,
) -> list[BaseMessage] | Runnable[Sequence[BaseMessage], list[BaseMessage]]:
    """Compact a message history like `trim_messages`, but keep what answers cited.

    Called with messages, returns the compacted list (a new list; the input and
    its messages are untouched). Called without, returns a `RunnableLambda` for an
    LCEL chain, which reads the ledger afresh on every call when `ledger` is a callable.

    Args:
        messages: The stored history, or None for a runnable.
        ledger: The `EvidenceLedger` carried beside the history, or a callable returning it.
        evidence_tools: Names of the evidence tools (and of a recall tool, if any).
        cite_tools: Names of the cite tools whose calls and acknowledgements leave
            the copy once their question ended (``["cite"]`` for `cite_tool()`);
            empty (the default): every one stays.
        fetch_picture: Fetches cited pictures' bytes; without it none are attached.
        max_capsule_tokens: Optional hard bound on everything the rewrite writes.
        tokenizer: Counts tokens for the bound: a counter or an encoder.

    Raises:
        capsa.errors.CompactionRefused: see `capsa.capsule.compact_with_report`.

    Usage:
        .. code-block:: python

            chain = (
                capsule_messages(ledger=lambda: ledgers[thread], evidence_tools=["search"])
                | model
            )
    """
    tools = tuple(evidence_tools)
    cites = tuple(cite_tools)

    def run(history: Sequence[BaseMessage]) -> list[BaseMessage]:
        compacted, report = compact(
            history,
            _resolve(ledger),
            evidence_tools=tools,
            fetch_picture=fetch_picture,
            max_tokens=max_capsule_tokens,
            tokenizer=tokenizer,
            cite_tools=cites,
        )
        announce(report)
        return compacted

    if messages is None:
        return RunnableLambda(run, name="capsule_messages")
    return run(messages)
