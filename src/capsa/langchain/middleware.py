"""`CitationCapsuleMiddleware`: citation capsules for `langchain.agents.create_agent`.

LangChain agents checkpoint every retriever `ToolMessage`, so each question drags
all earlier retrievals along. This middleware rewrites the messages of every model
call (`wrap_model_call` / `awrap_model_call`) so that earlier questions' evidence
shows only what their answers cited, in a wire form fixed once each question ends
(cache-stable), while the checkpointed state keeps the real history. It registers
a cite and a recall tool, and keeps the `EvidenceLedger` in the agent state under
``capsa_ledger``, so any checkpointer persists it and a stateless app can carry it
in the agent's input and output.

Message conversion lives in `capsa.langchain.capsule_conversion`, the tools in
`capsa.langchain.capsule_tools`, the context edit and LCEL step in
`capsa.langchain.capsule_edits`; the decisions live in `capsa.capsule`.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any, Literal, NotRequired, cast

from langchain_core.messages import AnyMessage, BaseMessage, HumanMessage
from langchain_core.tools import BaseTool

try:
    from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest
    from langchain.agents.middleware.types import ModelResponse
    from langgraph.config import get_config
    from langgraph.runtime import Runtime
except ImportError as exc:  # langchain-core alone does not ship the agents package
    raise ImportError(
        "capsa.langchain.middleware needs the 'langchain' extra: pip install 'capsa[langchain]'"
    ) from exc

from capsa.capsule import (
    Compaction,
    EvidenceLedger,
    Message,
    TokenCounter,
    as_tokenizer,
    estimate_tokens,
    group_sizes,
    pictures_needed,
    prune_carried,
    record_messages,
    stable_end,
    view_cut,
    view_notice,
)
from capsa.capsule.compaction import LOW_WATER
from capsa.capsule.session import AnyPictureFetcher, PictureCache, check_tools, start_question
from capsa.langchain.capsule_conversion import (
    LEDGER_KEY,
    Observe,
    aannounce,
    announce,
    compact,
    keys,
    load_ledger,
    to_core,
)
from capsa.langchain.capsule_edits import CitationCapsuleEdit, capsule_messages
from capsa.langchain.capsule_tools import capsa_retriever_tool, cite_tool, recall_tool

__all__ = [
    "DEFAULT_VIEW_TOKENS",
    "LEDGER_KEY",
    "VIEW_SHARE",
    "CapsuleState",
    "CitationCapsuleEdit",
    "CitationCapsuleMiddleware",
    "bound_messages",
    "capsa_retriever_tool",
    "capsule_messages",
    "cite_tool",
    "recall_tool",
]


class CapsuleState(AgentState[Any]):
    """Agent state with the evidence ledger beside the messages."""

    capsa_ledger: NotRequired[str]
    """The `EvidenceLedger` as JSON; written by `CitationCapsuleMiddleware`. A stateless
    app passes the previous output's value back in its next input."""


DEFAULT_VIEW_TOKENS = 64_000
"""The view bound (``max_view_tokens="auto"``) for a model whose profile names no
``max_input_tokens``."""
VIEW_SHARE = 0.5
"""Share of the model profile's ``max_input_tokens`` the messages may take by default;
the rest is left to the system prompt, the tool schemas and the answer."""
_NOTICE_ID = "capsa-view-notice"
"""Id of the message a bounded request puts where the oldest questions were."""

_EARLIER = Message(role="system")
"""Stands in for messages before the current question, which `record_messages` never reads."""


def _thread_id() -> str | None:
    """The LangGraph thread of the running agent: the conversation, when it has one."""
    try:
        configurable = get_config().get("configurable") or {}
    except RuntimeError:  # called outside a graph run
        return None
    thread = configurable.get("thread_id")
    return None if thread is None else str(thread)


def _tool_names(tools: Iterable[str | BaseTool]) -> frozenset[str]:
    return frozenset(t if isinstance(t, str) else t.name for t in tools)


class CitationCapsuleMiddleware(AgentMiddleware[CapsuleState, Any, Any]):
    """Show the model earlier evidence only as what the answers cited, cache-stably.

    Before every model call, earlier questions' evidence returns are rewritten on
    the request alone (`handler(request.override(messages=...))`); the checkpointed
    messages are never changed. Once a question
    ends its returns show the chunks its answer cited, whole, and a receipt naming
    the rest, and that never changes again: each request shares the previous
    request's prefix, which providers bill at a fraction as cached input. Its
    cite calls and their acknowledgements leave the request at the same moment
    (what it cited is what its returns show whole). The registered ``recall``
    tool brings any receipted chunk back whole from the stored history.

    The ledger lives in the agent state under ``capsa_ledger``. A question begins
    in `before_agent` (its identity is the history's length when it arrived);
    retrievals, recalls and citations are recorded in `before_model` and
    `after_agent`, and the question ends in `after_agent`. A run that stops early
    resumes its question under the same identity. A thread that starts with an
    existing conversation adopts it (earlier evidence becomes receipts, recallable);
    a history shortened by `SummarizationMiddleware` or `RemoveMessage` is
    re-anchored on what remains.

    Put it first in `middleware=`, so no other middleware adds messages before it
    reads them.

    Setup:
        ``pip install 'capsa[langchain]'``

    Instantiate:
        .. code-block:: python

            search = capsa_retriever_tool(retriever, name="search")
            capsule = CitationCapsuleMiddleware(evidence_tools=[search])

    Usage:
        .. code-block:: python

            agent = create_agent(model, tools=[search], middleware=[capsule],
                                 checkpointer=SqliteSaver(conn))
            agent.invoke({"messages": [("user", "Hotel cap?")]},
                         {"configurable": {"thread_id": "t1"}})
            # stateless: carry the ledger yourself
            out = agent.invoke({"messages": history, "capsa_ledger": ledger_json})
            ledger_json = out["capsa_ledger"]

    Args:
        evidence_tools: The tools (or tool names) whose returns are evidence.
        cite_tool_name: Name of the cite tool this middleware registers; None to
            register none (citations then come from ``[chunk_id]`` markers and
            native annotations only).
        recall_tool_name: Name of the recall tool this middleware registers; None
            to register none (receipted chunks can then not be brought back).
        keep_cite_calls: Keep ended questions' cite calls and acknowledgements in
            every request, as stored. Off by default: they repeat what the returns
            already show and cost about 50 tokens per question on every later
            request. Turn it on for a model that stops calling the cite tool when
            its history shows no earlier cite calls to follow.
        fetch_picture: Fetches a cited picture's bytes (sync or async) for
            re-attachment; without it no pictures are attached. Each picture is
            fetched once per question of a conversation (a LangGraph
            ``thread_id``); without a thread id, once per model call, since
            nothing then tells one conversation from another.
        max_view_tokens: Bound on the messages of every request, counted by
            `tokenizer`; over it, the oldest questions leave the request (never the
            stored history) in steps down to `low_water` of the bound
            (`capsa.capsule.view_cut`, the policy `CapsuleMemory` follows too), so
            the cached prefix moves at most once per several questions; a notice
            stands where they were, and recall still finds their chunks. ``"auto"``
            (the default): `VIEW_SHARE` of the model profile's ``max_input_tokens``
            (``model.profile``, as `SummarizationMiddleware` reads it), else
            `DEFAULT_VIEW_TOKENS`. None: unbounded, as before.
        max_capsule_tokens: Optional hard bound on everything the middleware writes
            into a request (rewritten returns, receipts, notices, picture labels).
            Over it, the oldest questions' cited chunks are shown by id, then by
            count, in steps down to `low_water` of the bound, so ended questions'
            wire forms change only at those steps.
        low_water: The fraction of `max_view_tokens` or `max_capsule_tokens` a step
            drops or degrades down to
            (0 < low_water <= 1; default 0.6). Lower moves the cached prefix less
            often; 1.0 frees just enough, moving it almost every question.
        tokenizer: Counts tokens for `max_capsule_tokens`: a counter returning an
            int, or an encoder returning tokens (tiktoken's ``encode``).
        cache_breakpoint: Mark the previous question's user message with an
            Anthropic ``cache_control`` breakpoint on every request. When a
            question ends, its returns are rewritten, so the prefix the next
            request shares with the cache ends at that question's user message;
            Anthropic looks for a cached prefix only about 20 content blocks
            before a breakpoint, and after a question of ten or more tool rounds
            the breakpoint at the request's end (``AnthropicPromptCachingMiddleware``)
            no longer reaches it, so the whole history is written again at the
            write price. This breakpoint is read instead. Off by default: it is
            for Anthropic models only (other providers may refuse the key), and
            it is one of the four breakpoints Anthropic allows
            (``AnthropicPromptCachingMiddleware`` sets one). A 5-minute mark:
            leave it off beside ``AnthropicPromptCachingMiddleware(ttl="1h")``,
            since a shorter mark may not come before a longer one.

    Raises:
        ValueError: at construction, with no evidence tool or a bad bound; at the
            first model call, when an evidence tool is not among the agent's tools
            or another tool uses the cite or recall tool's name.
        capsa.errors.CompactionRefused: from a model call, when `max_capsule_tokens`
            cannot hold even a count of the earlier evidence (the message names the
            bound to use).
    """

    state_schema = CapsuleState

    def __init__(
        self,
        *,
        evidence_tools: Iterable[str | BaseTool],
        cite_tool_name: str | None = "cite",
        recall_tool_name: str | None = "recall",
        keep_cite_calls: bool = False,
        fetch_picture: AnyPictureFetcher | None = None,
        max_view_tokens: int | Literal["auto"] | None = "auto",
        max_capsule_tokens: int | None = None,
        tokenizer: TokenCounter = estimate_tokens,
        cache_breakpoint: bool = False,
        low_water: float = LOW_WATER,
    ) -> None:
        super().__init__()
        self.evidence_tools = _tool_names(evidence_tools)
        if not self.evidence_tools:
            raise ValueError("CitationCapsuleMiddleware needs at least one evidence tool")
        if max_capsule_tokens is not None and max_capsule_tokens < 1:
            raise ValueError(f"max_capsule_tokens must be positive, got {max_capsule_tokens}")
        if not 0 < low_water <= 1:
            raise ValueError(f"low_water must lie in (0, 1], got {low_water}")
        if isinstance(max_view_tokens, int) and max_view_tokens < 1:
            raise ValueError(f"max_view_tokens must be positive, got {max_view_tokens}")
        if isinstance(max_view_tokens, str) and max_view_tokens != "auto":
            raise ValueError(
                f"max_view_tokens must be an int, 'auto' or None, got {max_view_tokens!r}"
            )
        if cite_tool_name and cite_tool_name == recall_tool_name:
            raise ValueError(f"the cite and recall tools cannot share the name {cite_tool_name!r}")
        self.cite_tool_name = cite_tool_name
        self.recall_tool_name = recall_tool_name
        self.cite_tools = frozenset({cite_tool_name}) if cite_tool_name else frozenset[str]()
        self.keep_cite_calls = keep_cite_calls
        self.owned_tools = self.evidence_tools | ({recall_tool_name} if recall_tool_name else set())
        self.fetch_picture = fetch_picture
        self.max_view_tokens = max_view_tokens
        self.max_capsule_tokens = max_capsule_tokens
        self.tokenizer = tokenizer
        self.cache_breakpoint = cache_breakpoint
        self.low_water = low_water
        self._build()

    def _build(self) -> None:
        own: dict[str, BaseTool] = {}
        if self.cite_tool_name:
            own[self.cite_tool_name] = cite_tool(self.cite_tool_name)
        if self.recall_tool_name:
            own[self.recall_tool_name] = recall_tool(
                self.recall_tool_name, evidence_tools=self.evidence_tools
            )
        self._own = own
        self.tools = list(own.values())
        self._pictures = PictureCache(self.fetch_picture) if self.fetch_picture else None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        for built in ("_own", "tools", "_pictures"):
            state.pop(built, None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._build()

    # -- the ledger through a question ----------------------------------------------------------

    def _begin(self, state: CapsuleState) -> dict[str, Any] | None:
        before = load_ledger(state)
        ledger = start_question(before, keys(state["messages"]), evidence_tools=self.evidence_tools)
        return None if ledger == before else {LEDGER_KEY: ledger.to_json()}

    def _record(self, state: CapsuleState) -> tuple[EvidenceLedger | None, EvidenceLedger | None]:
        stored = load_ledger(state)
        if stored is None:
            return None, None
        messages = state["messages"]
        ledger = stored.locate(keys(messages))
        start = min(ledger.question or 0, len(messages))
        current = messages[start:]
        observe = Observe.of(current, self.owned_tools, self.cite_tools)
        history = [_EARLIER] * start + [
            to_core(m, start + i, observe) for i, m in enumerate(current)
        ]
        return stored, record_messages(ledger, history, owned_tools=self.owned_tools)

    def _sync(self, state: CapsuleState) -> dict[str, Any] | None:
        before, after = self._record(state)
        if after is None or after == before:
            return None
        return {LEDGER_KEY: after.to_json()}

    def _end(self, state: CapsuleState) -> dict[str, Any] | None:
        _, ledger = self._record(state)
        if ledger is None or ledger.question is None or not ledger.in_progress:
            return None
        messages = state["messages"]
        ended = ledger.end_question(len(messages))
        if ended.carried:  # bound what shortenings carry, against the whole history
            observe = Observe.of(messages, self.owned_tools)
            history = [to_core(m, i, observe) for i, m in enumerate(messages)]
            ended = prune_carried(ended, history, owned_tools=self.owned_tools)
        return {LEDGER_KEY: ended.to_json()}

    # -- the model call -------------------------------------------------------------------------

    def _check(self, request: ModelRequest[Any]) -> None:
        """Check the agent's tools on every call: one instance may serve several agents."""
        available = [
            (t.name if isinstance(t, BaseTool) else str(t.get("name", "")), t)
            for t in request.tools
            if isinstance(t, BaseTool | dict)
        ]
        check_tools(self.evidence_tools, available, self._own, who="CitationCapsuleMiddleware")

    def _ledger(self, request: ModelRequest[Any]) -> EvidenceLedger | None:
        ledger = load_ledger(request.state)
        return None if ledger is None else ledger.locate(keys(request.messages))

    def _pictures_of(self, ledger: EvidenceLedger | None) -> tuple[PictureCache, Hashable] | None:
        """The picture cache for this model call, and the name of its question there.

        The shared cache serves a question of a LangGraph thread; without a thread
        id the call gets a cache of its own, since a question index alone is the
        same number in every conversation.
        """
        if self._pictures is None or ledger is None:
            return None
        thread = _thread_id()
        if thread is None:
            return PictureCache(self._pictures.fetch), ledger.question
        return self._pictures, (thread, ledger.question)

    def _rewrite(
        self,
        request: ModelRequest[Any],
        ledger: EvidenceLedger | None,
        pictures: tuple[PictureCache, Hashable] | None,
    ) -> tuple[ModelRequest[Any], Compaction]:
        fetch = None if pictures is None else pictures[0].lookup(pictures[1])
        messages, report = compact(
            cast("list[BaseMessage]", request.messages),
            ledger,
            evidence_tools=self.owned_tools,
            fetch_picture=fetch,
            max_tokens=self.max_capsule_tokens,
            tokenizer=self.tokenizer,
            cite_tools=() if self.keep_cite_calls else self.cite_tools,
            low_water=self.low_water,
        )
        messages = self._bounded(
            messages, self.view_limit(request.model), cast("list[BaseMessage]", request.messages)
        )
        if self.cache_breakpoint:
            messages = with_cache_breakpoint(messages)
        return request.override(messages=cast("list[AnyMessage]", messages)), report

    def view_limit(self, model: Any) -> int | None:
        """The bound on a request's messages for `model` (see `max_view_tokens`)."""
        if self.max_view_tokens != "auto":
            return self.max_view_tokens
        profile = getattr(model, "profile", None)
        limit = profile.get("max_input_tokens") if isinstance(profile, Mapping) else None
        if isinstance(limit, int) and limit > 0:
            return max(1, int(limit * VIEW_SHARE))
        return DEFAULT_VIEW_TOKENS

    def _bounded(
        self, messages: list[BaseMessage], limit: int | None, stored: Sequence[BaseMessage]
    ) -> list[BaseMessage]:
        if limit is None:
            return messages
        return bound_messages(
            messages, limit, tokenizer=self.tokenizer, low_water=self.low_water, stored=stored
        )

    def _wanted(self, request: ModelRequest[Any], ledger: EvidenceLedger | None) -> Any:
        observe = Observe.of(request.messages, self.owned_tools)
        converted = [to_core(m, i, observe) for i, m in enumerate(request.messages)]
        return pictures_needed(converted, ledger, owned_tools=self.owned_tools)

    def before_agent(self, state: CapsuleState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Begin a question, resume the one in progress, or adopt/re-anchor the history."""
        return self._begin(state)

    async def abefore_agent(
        self, state: CapsuleState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Async twin of `before_agent`; the ledger work runs in a worker thread."""
        return await asyncio.to_thread(self._begin, state)

    def before_model(self, state: CapsuleState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Record the retrievals, recalls and citations so far, so the tools can check ids."""
        return self._sync(state)

    async def abefore_model(
        self, state: CapsuleState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Async twin of `before_model`; the ledger work runs in a worker thread."""
        return await asyncio.to_thread(self._sync, state)

    def after_agent(self, state: CapsuleState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Record the answer's citations and end the question."""
        return self._end(state)

    async def aafter_agent(
        self, state: CapsuleState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Async twin of `after_agent`; the ledger work runs in a worker thread."""
        return await asyncio.to_thread(self._end, state)

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any]:
        """Send the compacted history; the state keeps the real one."""
        self._check(request)
        ledger = self._ledger(request)
        pictures = self._pictures_of(ledger)
        if pictures is not None:
            cache, scope = pictures
            cache.fetch_all(self._wanted(request, ledger), scope)
        compacted, report = self._rewrite(request, ledger, pictures)
        announce(report)
        return handler(compacted)

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any]:
        """Async twin of `wrap_model_call`; an async picture fetcher is awaited here.

        Compaction (and locating the ledger) runs in a worker thread, so a long
        conversation never stalls the event loop.
        """
        self._check(request)
        ledger = await asyncio.to_thread(self._ledger, request)
        pictures = self._pictures_of(ledger)
        if pictures is not None:
            cache, scope = pictures
            wanted = await asyncio.to_thread(self._wanted, request, ledger)
            await cache.afetch_all(wanted, scope)
        compacted, report = await asyncio.to_thread(self._rewrite, request, ledger, pictures)
        await aannounce(report)
        return await handler(compacted)


def bound_messages(
    messages: list[BaseMessage],
    max_tokens: int,
    *,
    tokenizer: TokenCounter = estimate_tokens,
    low_water: float = LOW_WATER,
    stored: Sequence[BaseMessage] | None = None,
) -> list[BaseMessage]:
    """`messages` within `max_tokens`, the oldest questions replaced by a notice, in steps.

    What `CitationCapsuleMiddleware` does to every request under its view bound
    (`capsa.capsule.view_cut`): messages before the first question and the current
    question stay; a question group leaves whole, so tool calls keep their
    returns. The caller's list is never changed: a new list when anything leaves.

    `stored` is the history `messages` were compacted from (the state's
    messages). Each stored question is as large as it was when it was the current
    question, its evidence whole, so the steps keep room for a question that
    large and the next questions fit without moving the start again. Without it
    (or when its questions do not line up with `messages`'), the room kept is the
    largest ended question as compacted, and a question whose returns are larger
    may move the start once more.
    """
    count = as_tokenizer(tokenizer)
    roles = [m.type for m in messages]
    tokens = [count(_wire_text(m)) for m in messages]
    notice = count(view_notice(roles.count("human")))
    peaks = None
    if stored is not None:
        stored_roles = [m.type for m in stored]
        if stored_roles.count("human") == roles.count("human"):
            peaks = group_sizes(stored_roles, [count(_wire_text(m)) for m in stored])
    cut = view_cut(
        roles, tokens, max_tokens, notice_tokens=notice, low_water=low_water, peaks=peaks
    )
    if cut.dropped == 0:
        return messages
    first = roles.index("human")
    message = HumanMessage(view_notice(cut.dropped), id=_NOTICE_ID)
    return [*messages[:first], message, *messages[cut.start :]]


def _wire_text(message: BaseMessage) -> str:
    """What a message puts on the wire as text: its text, and its tool calls' arguments."""
    calls = getattr(message, "tool_calls", None) or []
    if not calls:
        return message.text
    return message.text + json.dumps([[c["name"], c["args"]] for c in calls], default=str)


def with_cache_breakpoint(messages: list[BaseMessage]) -> list[BaseMessage]:
    """`messages` with the previous question's user message marked as an Anthropic breakpoint.

    That message ends the prefix a later request keeps (`capsa.capsule.stable_end`).
    The mark goes on the message's last content block (a string becomes one
    text block), on a copy: the caller's messages are not changed. Nothing is
    marked before the second question, when nothing has been rewritten yet.

    Examples:
        >>> from langchain_core.messages import AIMessage, HumanMessage
        >>> marked = with_cache_breakpoint([HumanMessage("q1"), AIMessage("a1"),
        ...                                 HumanMessage("q2")])
        >>> marked[0].content
        [{'type': 'text', 'text': 'q1', 'cache_control': {'type': 'ephemeral'}}]
    """
    target = stable_end(["notice" if m.id == _NOTICE_ID else m.type for m in messages])
    if target is None:
        return messages
    message = messages[target]
    content = message.content
    blocks: list[Any] = (
        [{"type": "text", "text": content}] if isinstance(content, str) else list(content)
    )
    if not blocks:
        return messages
    last = blocks[-1]
    last = {"type": "text", "text": last} if isinstance(last, str) else dict(last)
    blocks[-1] = {**last, "cache_control": {"type": "ephemeral"}}
    marked = list(messages)
    marked[target] = message.model_copy(update={"content": blocks})
    return marked
