"""How far `capsule.py`'s cost ratios hold beyond the three rules its goal is stated on.

`benchmarks/capsule.py` bills its chats under an idealised cache, OpenAI's
automatic caching (0.1x reads, no write premium) and Anthropic's explicit
caching (a 1,024-token minimum, 5-minute writes at 1.25x), with no system
prompt and no output tokens. An audit of those choices against the providers'
documentation found each one favourable to capsa somewhere, so this script
bills the same chats (built by `capsule.py` itself) under the other documented
rules and in the other shapes a real app has:

- Anthropic with a 2,048 or 4,096-token minimum (larger models, as providers
  document them) and with 1-hour writes at 2x;
- OpenAI at 0.25x reads (GPT-4.1 family) and with 1.25x writes (GPT-5.6 and
  later), Gemini's implicit caching (0.1x or 0.25x reads, 2,048 or 4,096-token
  minimum, no write premium);
- a 1,000 or 3,000-token system prompt, cached like the rest;
- the answers' output tokens billed at 5x or 8x the input price;
- a cache that has expired at every question start (a user who pauses);
- tokens counted by a real tokenizer, OpenAI's ``cl100k_base`` (as llama-index-core
  bundles it, so nothing is downloaded), instead of LangChain's characters over
  four: each message's text, its tool calls as JSON and its tool call id, plus
  4 tokens a message of chat format, and each tool's schema as OpenAI's JSON.

Its billing functions are written here independently; before anything else the
script checks that they reproduce `capsule.py`'s own bills under the three goal
rules, to the token, and stops if they do not. Ratios are each row's bill over
full history's under the same rule and shape. Run ``python
benchmarks/capsule_sensitivity.py``; writes
``benchmarks/results/capsule_sensitivity.json`` (about a minute).
"""

from __future__ import annotations

import json
import random
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from langchain_core.messages import BaseMessage
from langchain_core.messages.utils import count_tokens_approximately

sys.path.insert(0, str(Path(__file__).resolve().parent))
import capsule as B

from capsa.capsule.budgeted import render_budgeted

RESULTS = Path(__file__).resolve().parent / "results" / "capsule_sensitivity.json"
Requests = Sequence[Sequence[BaseMessage]]


class _Trie:
    """Block signatures of every earlier request, for the longest shared prefix."""

    def __init__(self) -> None:
        self.root: dict[Any, Any] = {}

    def add(self, sigs: Sequence[str]) -> None:
        node = self.root
        for sig in sigs:
            node = node.setdefault(sig, {})

    def longest(self, sigs: Sequence[str]) -> int:
        node, n = self.root, 0
        while n < len(sigs) and sigs[n] in node:
            node, n = node[sigs[n]], n + 1
        return n


def _blocks(request: Sequence[BaseMessage], tools: Sequence[str],
            system: int) -> tuple[list[str], list[int]]:
    sigs, toks = B._blocks(request, tools)
    if system:  # the system prompt sits after the tools, before the messages
        sigs = [*sigs[:len(tools)], "system", *sigs[len(tools):]]
        toks = [*toks[:len(tools)], system, *toks[len(tools):]]
    return sigs, toks


def ideal(requests: Requests, tools: Sequence[str], read: float, write: float, *,
          minimum: int = 0, system: int = 0, cold: set[int] | None = None) -> float:
    """The longest block prefix shared with any earlier request is read, the rest written."""
    seen, billed = _Trie(), 0.0
    for i, request in enumerate(requests):
        if cold and i in cold:
            seen = _Trie()
        sigs, toks = _blocks(request, tools, system)
        shared = sum(toks[:seen.longest(sigs)])
        hit = shared if shared >= minimum else 0
        billed += hit * read + (sum(toks) - hit) * write
        seen.add(sigs)
    return billed


def openai(requests: Requests, tools: Sequence[str], read: float, *, write: float = 1.0,
           minimum: int = 1024, step: int = 128, system: int = 0,
           cold: set[int] | None = None) -> float:
    """Automatic caching: a shared prefix of `minimum` tokens and more, in `step` steps; with
    `write` above 1, the whole uncached steps of a prompt past the minimum are written."""
    seen, billed = _Trie(), 0.0
    for i, request in enumerate(requests):
        if cold and i in cold:
            seen = _Trie()
        sigs, toks = _blocks(request, tools, system)
        shared, total = sum(toks[:seen.longest(sigs)]), sum(toks)
        hit = minimum + int(shared - minimum) // step * step if shared >= minimum else 0
        written = max(0, int(total) // step * step - hit) if write != 1.0 and total >= minimum \
            else 0
        billed += hit * read + written * write + (total - hit - written)
        seen.add(sigs)
    return billed


def anthropic(requests: Requests, tools: Sequence[str], *, read: float = 0.1,
              write: float = 1.25, minimum: int = 1024, lookback: int = 20,
              system: int = 0, cold: set[int] | None = None) -> float:
    """Explicit caching with one breakpoint at the request's end: a read ends at an entry an
    earlier breakpoint wrote, within `lookback` blocks; entries need `minimum` tokens."""
    entries: set[int] = set()
    billed = 0.0
    for i, request in enumerate(requests):
        if cold and i in cold:
            entries = set()
        sigs, toks = _blocks(request, tools, system)
        keys = [0]
        for sig in sigs:
            keys.append(hash((keys[-1], sig)))
        end = len(sigs)
        read_to = next((b for b in range(end, max(1, end - lookback) - 1, -1)
                        if keys[b] in entries), 0)
        if sum(toks) >= minimum:
            entries.add(keys[end])
        total, hit = sum(toks), sum(toks[:read_to])
        fresh = total - hit if total >= minimum else 0
        billed += hit * read + fresh * write + (total - hit - fresh)
    return billed


Rule = Callable[..., float]
GOAL_RULES: dict[str, Rule] = {
    "idealised 0.1 / 1.25": lambda r, t, **k: ideal(r, t, 0.1, 1.25, **k),
    "OpenAI 0.1": lambda r, t, **k: openai(r, t, 0.1, **k),
    "Anthropic 5 min, 1,024 minimum": lambda r, t, **k: anthropic(r, t, **k),
}
OTHER_RULES: dict[str, Rule] = {
    "Anthropic 2,048 minimum": lambda r, t, **k: anthropic(r, t, minimum=2048, **k),
    "Anthropic 4,096 minimum": lambda r, t, **k: anthropic(r, t, minimum=4096, **k),
    "Anthropic 1 h (2x writes)": lambda r, t, **k: anthropic(r, t, write=2.0, **k),
    "OpenAI 0.25 (GPT-4.1)": lambda r, t, **k: openai(r, t, 0.25, **k),
    "OpenAI 0.1, 1.25x writes (GPT-5.6)": lambda r, t, **k: openai(r, t, 0.1, write=1.25,
                                                                     **k),
    "Gemini implicit 0.1, 2,048 minimum": lambda r, t, **k: ideal(r, t, 0.1, 1.0,
                                                                  minimum=2048, **k),
    "Gemini implicit 0.1, 4,096 minimum": lambda r, t, **k: ideal(r, t, 0.1, 1.0,
                                                                  minimum=4096, **k),
}
SHAPES: dict[str, dict[str, Any]] = {
    "as benchmarked": {},
    "1,000-token system prompt": {"system": 1000},
    "3,000-token system prompt": {"system": 3000},
    "answers billed at 5x": {"output": 5.0},
    "answers billed at 8x": {"output": 8.0},
    "cache expired at every question": {"cold": True},
    "counted by cl100k": {"tokenizer": "cl100k"},
}
_PER_MESSAGE = 4
"""Tokens of chat format around each message, as OpenAI's own counting recipe adds."""


@contextmanager
def counted_by(count: Callable[[str], int]) -> Iterator[Callable[[BaseMessage], int]]:
    """`capsule.py`'s billing with every message and tool schema counted by `count`;
    yields the message counter. Restores the approximate counts afterwards."""
    from langchain_core.utils.function_calling import convert_to_openai_tool

    def message_tokens(message: BaseMessage) -> int:
        calls = getattr(message, "tool_calls", None) or []
        call_id = getattr(message, "tool_call_id", None) or ""
        return count(message.text + (json.dumps(calls) if calls else "") + call_id) \
            + _PER_MESSAGE

    def measured(message: BaseMessage) -> tuple[str, int]:
        entry = cache.get(id(message))
        if entry is None:
            entry = cache[id(message)] = (message, B._signature(message),
                                          message_tokens(message))
        return entry[1], entry[2]

    cache: dict[int, tuple[BaseMessage, str, int]] = {}
    tools = {"search": B.capsa_retriever_tool(B.RunnableLambda(lambda _query: []),
                                              name="search"),
             "cite": B.cite_tool(), "recall": B.recall_tool(evidence_tools=["search"])}
    approximate, tool_tokens = B._measured, dict(B.TOOL_TOKENS)
    B._measured = measured
    B.TOOL_TOKENS.update({name: count(json.dumps(convert_to_openai_tool(tool)))
                          for name, tool in tools.items()})
    try:
        yield message_tokens
    finally:
        B._measured = approximate
        B.TOOL_TOKENS.update(tool_tokens)


def chats(which: str) -> dict[str, tuple[B.Chat, list[list[BaseMessage]], Sequence[str]]]:
    """Full history and capsa's rows of one of `capsule.py`'s chats, as it builds them."""
    per: int | None = None
    budgets: Sequence[int] = B.EVIDENCE_BUDGETS
    if which == "benchmark":
        plans, _ = B.plan_chat(random.Random(B.SEED))
    elif which == "wide":
        plans, _ = B.plan_chat(random.Random(B.SEED), chunks=B.WIDE_CHUNKS)
        per, budgets = 1, (B.WIDE_EVIDENCE_BUDGET,)
    else:
        plans, _ = B.setaside_plans()
    full = B.render_chat(plans, recall=False, per_search=per)
    rows = {"full history": (full, [full.messages[:r.length] for r in full.requests],
                             B.AGENT_TOOLS["full"])}
    for name, budget in [("capsa", None), *((f"budget {b}", b) for b in budgets)]:
        chat = B.render_chat(plans, recall=True, per_search=per, budget=budget,
                             packet=render_budgeted)
        rows[name] = (chat, B._capsa_requests(chat), B.AGENT_TOOLS["capsa"])
    return rows


def _output(chat: B.Chat, count: Callable[[BaseMessage], int] | None = None) -> int:
    """What the model wrote over the chat: each stored message right after a request."""
    count = count or (lambda message: count_tokens_approximately([message]))
    return sum(count(chat.messages[meta.length])
               for meta in chat.requests if meta.length < len(chat.messages))


def check_reproduction(rows: dict[str, Any]) -> None:
    """This script's goal rules bill each row as `capsule.py` does, or it stops."""
    for name, (_, requests, tools) in rows.items():
        kind = "full" if name == "full history" else "capsa"
        theirs = (B.bill(requests, 0.1, 1.25, B.tools_of(kind))["billed"],
                  B.bill_openai(requests, 0.1, tools)["billed"],
                  B.bill_anthropic(requests, tools)["billed"])
        mine = tuple(rule(requests, tools) for rule in GOAL_RULES.values())
        if any(abs(a - b) > 0.5 for a, b in zip(theirs, mine, strict=True)):
            raise SystemExit(f"{name}: capsule.py bills {theirs}, this script {mine}")


def ratios(rows: dict[str, Any], shape: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Each row's bill over full history's, per rule, in one shape."""
    if shape.get("tokenizer") == "cl100k":
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from tokens import cl100k

        with counted_by(cl100k()) as count:
            return _ratios(rows, shape, count)
    return _ratios(rows, shape, None)


def _ratios(rows: dict[str, Any], shape: dict[str, Any],
            count: Callable[[BaseMessage], int] | None) -> dict[str, dict[str, float]]:
    bills: dict[str, dict[str, float]] = {}
    for name, (chat, requests, tools) in rows.items():
        options: dict[str, Any] = {"system": shape.get("system", 0)}
        if shape.get("cold"):
            options["cold"] = {i for i, meta in enumerate(chat.requests)
                               if meta.phase == "first"}
        output = _output(chat, count) * shape.get("output", 0.0)
        bills[name] = {rule: f(requests, tools, **options) + output
                       for rule, f in {**GOAL_RULES, **OTHER_RULES}.items()}
    full = bills["full history"]
    return {name: {rule: round(bill[rule] / full[rule], 3) for rule in bill}
            for name, bill in bills.items() if name != "full history"}


def main() -> int:
    report: dict[str, Any] = {"goal_rules": list(GOAL_RULES), "other_rules": list(OTHER_RULES),
                              "chats": {}}
    for which in ("benchmark", "wide", "set-aside"):
        rows = chats(which)
        check_reproduction(rows)
        report["chats"][which] = {shape: ratios(rows, options)
                                  for shape, options in SHAPES.items()}
        names = [n for n in rows if n != "full history"]
        for shape, table in report["chats"][which].items():
            print(f"\n{which} chat, {shape}: bill / full history's under the same rule")
            print(f"{'rule':<40}" + "".join(f"{n:>12}" for n in names))
            for rule in [*GOAL_RULES, *OTHER_RULES]:
                mark = "*" if rule in GOAL_RULES else " "
                print(f"{mark}{rule:<39}" + "".join(f"{table[n][rule]:>12.3f}" for n in names))
            met = ["met" if all(table[n][g] <= 0.5 for g in GOAL_RULES) else "not met"
                   for n in names]
            print(f"{'0.50x on every * rule':<40}" + "".join(f"{m:>12}" for m in met))
    RESULTS.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    print(f"\nwrote {RESULTS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
