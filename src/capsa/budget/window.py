"""The whole window: what a model's context holds besides retrieved context.

A budget picked by hand (``Budget(max_tokens=2000)``) is right for one prompt
and wrong for the next: the system prompt grows, the history grows, tools are
added, and the answer needs room too. `plan_window` starts from the model's
own window and reserves each of those, counted, so what is left for context
(attachments and retrieval, split by `Budget.attachment_share`) is what really
fits; `Budget.for_model` is the one-line form.

The model is read by duck typing, so this core module imports no framework:
a LangChain chat model's ``profile["max_input_tokens"]`` (its window) and its
``max_tokens`` setting or ``profile["max_output_tokens"]`` (the answer), a
LlamaIndex LLM's ``metadata.context_window`` and ``metadata.num_output``, or a
plain number of tokens. Messages and tools are counted as text; the adapters
(`capsa.langchain.budget_for_model`, `capsa.llama_index.budget_for_llm`) count
them the way their framework sends them.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, NonNegativeInt, PositiveInt

from capsa.budget.packet import Budget, Packet
from capsa.budget.tokens import TokenizerLike, as_tokenizer
from capsa.errors import BudgetError

__all__ = ["Window", "plan_window", "read_window", "warn_if_empty"]

logger = logging.getLogger("capsa.budget")


class Window(BaseModel):
    """A model's window shared out: each reservation, and what is left for context.

    Examples:
        >>> window = Window(window_tokens=8192, output_tokens=1024, system_tokens=200,
        ...                 history_tokens=1500)
        >>> window.context_tokens
        5468
        >>> window.budget(attachment_share=0.5).max_tokens
        5468
    """

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    window_tokens: PositiveInt
    """The model's whole window: everything sent plus, for most models, the answer."""
    output_tokens: NonNegativeInt = 0
    """Reserved for the answer."""
    system_tokens: NonNegativeInt = 0
    """The system prompt (and any instructions around the context)."""
    history_tokens: NonNegativeInt = 0
    """Earlier messages sent with this request, the question included."""
    tools_tokens: NonNegativeInt = 0
    """Tool definitions sent with the request."""
    margin_tokens: NonNegativeInt = 0
    """Kept free for what is not counted here (message framing, a tokenizer's error)."""

    @property
    def reserved_tokens(self) -> int:
        """Everything the window holds besides context."""
        return (self.output_tokens + self.system_tokens + self.history_tokens
                + self.tools_tokens + self.margin_tokens)

    @property
    def context_tokens(self) -> int:
        """What is left for context (attachments and retrieval); 0 when nothing is."""
        return max(self.window_tokens - self.reserved_tokens, 0)

    def budget(self, **fields: Any) -> Budget:
        """A `Budget` whose ceiling is `context_tokens`; other `Budget` fields as given.

        Raises:
            BudgetError: the reservations leave no room for context.
        """
        if self.context_tokens < 1:
            raise BudgetError(
                f"the {self.window_tokens}-token window holds no context: "
                f"{self.reserved_tokens} tokens are reserved (output {self.output_tokens}, "
                f"system {self.system_tokens}, history {self.history_tokens}, "
                f"tools {self.tools_tokens}, margin {self.margin_tokens})")
        return Budget(max_tokens=self.context_tokens, **fields)


def read_window(model: object, *, output_tokens: int | None = None) -> tuple[int, int]:
    """Read a model's window and its answer's reservation, by duck typing.

    Args:
        model: a LangChain chat model (``profile["max_input_tokens"]``), a
            LlamaIndex LLM (``metadata.context_window``), or the window as an int.
        output_tokens: reserve this for the answer instead of what the model says.

    Returns:
        ``(window_tokens, output_tokens)``.

    Raises:
        ValueError: the model says nothing about its window; pass the size as an int.

    Examples:
        >>> read_window(128_000, output_tokens=4000)
        (128000, 4000)
    """
    window: object = None
    output: object = None
    if isinstance(model, int) and not isinstance(model, bool):
        window = model
    elif (metadata := getattr(model, "metadata", None)) is not None and hasattr(
            metadata, "context_window"):
        window = metadata.context_window
        output = getattr(metadata, "num_output", None)
    else:
        profile = getattr(model, "profile", None)
        if isinstance(profile, Mapping):
            window = profile.get("max_input_tokens")
            output = _first_int(getattr(model, "max_tokens", None),
                                getattr(model, "max_completion_tokens", None),
                                profile.get("max_output_tokens"))
    if not isinstance(window, int) or isinstance(window, bool) or window < 1:
        raise ValueError(
            f"{type(model).__name__} says nothing about its context window (no "
            "profile['max_input_tokens'], no metadata.context_window); pass the window size "
            "as an int")
    reserved = output_tokens if output_tokens is not None else _first_int(output) or 0
    return window, reserved


def plan_window(
    model: object,
    *,
    system: str | int = "",
    history: Sequence[str] | int = (),
    tools: Sequence[str | Mapping[str, Any]] | int = (),
    output_tokens: int | None = None,
    margin_tokens: int = 0,
    tokenizer: TokenizerLike | None = None,
) -> Window:
    """Share out a model's window: reserve output, system prompt, history and tools.

    Each reservation is given as text (counted with `tokenizer`) or as a number
    of tokens already counted. Tools given as JSON schemas are counted as
    their compact JSON. The counter should be the one the model is billed by;
    when it is an estimate, keep a `margin_tokens` for its error.

    Args:
        model: see `read_window`.
        system: the system prompt, or its size.
        history: the messages sent before the context (the question included), or their size.
        tools: the tool definitions sent with the request, or their size.
        output_tokens: room for the answer; what the model declares when None.
        margin_tokens: kept free for what is not counted here.
        tokenizer: counts text reservations (any form `as_tokenizer` takes);
            capsa's estimate when None.

    Returns:
        The plan; ``plan.budget()`` turns it into a `Budget`.

    Examples:
        >>> plan = plan_window(4096, system="Answer from the documents.", history=["Hi"],
        ...                    output_tokens=512)
        >>> plan.context_tokens < 4096 - 512
        True
    """
    count = as_tokenizer(tokenizer)
    window, output = read_window(model, output_tokens=output_tokens)
    return Window(
        window_tokens=window,
        output_tokens=output,
        system_tokens=system if isinstance(system, int) else count(system),
        history_tokens=history if isinstance(history, int) else sum(count(m) for m in history),
        tools_tokens=tools if isinstance(tools, int) else sum(count(_tool_text(t))
                                                               for t in tools),
        margin_tokens=margin_tokens,
    )


def warn_if_empty(packet: Packet, *, what: str = "passages") -> None:
    """Log a warning naming the rule that left a packet with none of the inputs it was given.

    A framework handed an empty context answers "Empty Response" or invents
    one. `Packet.emptied_by` says which rule did it (the budget, the strict
    relevance floor, empty inputs), and this puts the same fact in the log,
    where an operator looks first, without blaming the budget for what the
    floor did.
    """
    if packet.passages or not packet.receipts:
        return
    count = len(packet.receipts)
    if packet.emptied_by == "irrelevant":
        logger.warning(
            "capsa: the strict relevance floor (min_relevance=%s, strict_floor=True) found "
            "nothing relevant to the query in the %d %s; the model gets no context",
            packet.budget.min_relevance, count, what)
    elif packet.emptied_by == "empty":
        logger.warning("capsa: all %d %s are empty; the model gets no context", count, what)
    else:
        smallest = min(r.tokens_full for r in packet.receipts if r.dropped != "empty")
        logger.warning(
            "capsa: the %d-token budget holds none of the %d %s, not even cut (the smallest is "
            "%d tokens before its tags); the model gets no context",
            packet.budget.max_tokens, count, what, smallest)


def _tool_text(tool: str | Mapping[str, Any]) -> str:
    return tool if isinstance(tool, str) else json.dumps(tool, separators=(",", ":"),
                                                         sort_keys=True, default=str)


def _first_int(*values: object) -> int | None:
    for value in values:
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
    return None
