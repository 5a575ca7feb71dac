"""What citation capsules save on the wire, what they keep, and what they cost.

A simulated 20-question RAG conversation over LangChain messages: every question
retrieves 5 chunks of about 300 tokens through a ``search`` tool, and every answer
cites 1 or 2 chunks through a ``cite`` tool, sometimes a chunk an earlier question
cited. The ledger is kept the way `CitationCapsuleMiddleware` keeps it. At each
question, the request the model receives is built four ways:

(a) full history, as a checkpointer stores it;
(b) ``trim_messages`` (strategy "last", ``start_on="human"``) to the token count
    capsa's request has;
(c) ``ClearToolUsesEdit(trigger=0, keep=3)``, i.e. ContextEditingMiddleware's edit
    firing on every call (with its default trigger of 100,000 tokens it never fires
    in this conversation, and the request equals (a));
(d) capsa, `capsule_messages` with the ledger.

Two requests per question are measured: the *first* (the question has just
arrived) and the *answer* request (the question's own 5 chunks are in view, as
they are in every strategy). Tokens are counted for all four with LangChain's
``count_tokens_approximately``. For the last question the table also shows which
share of the chunks earlier answers cited is still visible in full, and whether
every tool call still has its return.

Compaction time is measured on a longer run of the same conversation (a history
of at least 200 messages): the core `compact` on neutral messages, and the
LangChain adapter `capsule_messages` including the conversion both ways, run
interleaved. Wall-clock percentiles are the figures; the thread's CPU time per
call is recorded beside them, because on a loaded machine the wall-clock tail
measures preemption as much as compaction (the load average is in the JSON).

Run ``python benchmarks/capsule.py`` (``--quick`` for few timing repetitions).
Writes ``benchmarks/results/capsule.json`` and, when matplotlib is importable,
``benchmarks/results/capsule_tokens.png``. Nothing here asserts on time.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import time
import uuid
from collections.abc import Callable, Sequence
from copy import deepcopy
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from langchain.agents.middleware import ClearToolUsesEdit
from langchain_core.documents import Document
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.messages.utils import count_tokens_approximately, trim_messages

from capsa.capsule import Evidence, EvidenceLedger, compact, render_evidence
from capsa.langchain.middleware import _to_core, capsule_messages

RESULTS = Path(__file__).resolve().parent / "results"
SEED = 20250401
QUESTIONS = 20
CHUNKS_PER_QUESTION = 5
CHUNK_CHARS = 1200
"""About 300 tokens at four characters a token."""
EARLIER_CITE_SHARE = 0.3
"""Chance that a citation slot goes to a chunk an earlier answer cited."""
TIMING_MESSAGES = 200
GOAL_REDUCTION = 0.75
GOAL_FROM_QUESTION = 10
GOAL_MS = 2.0

_VOCABULARY = (
    "shipment berth crane manifest invoice customs warehouse pallet tariff carrier "
    "container vessel harbour quay freight insurance policy employee approval budget "
    "deadline record retention audit supplier contract weekly monthly quarter report "
    "limit exception manager director region office travel expense rate allowance "
    "receipt claim review schedule notice holiday security incident breach access"
)
_WORDS = tuple(_VOCABULARY.split())


@dataclass
class Conversation:
    """The stored history, its ledger, and the requests worth measuring."""

    rng: random.Random
    citations: tuple[int, ...] = (1, 2)
    """How many chunks an answer may cite; each answer draws one of these."""
    messages: list[BaseMessage] = field(default_factory=list)
    ledger: EvidenceLedger = field(default_factory=EvidenceLedger)
    first_requests: list[int] = field(default_factory=list)
    """Per question: how many messages the first request holds."""
    answer_requests: list[int] = field(default_factory=list)
    """Per question: how many messages the answer request holds."""
    ledgers: list[EvidenceLedger] = field(default_factory=list)
    """Per question: the ledger while it was asked (ledgers are immutable snapshots)."""
    cited: list[list[str]] = field(default_factory=list)
    contents: dict[str, str] = field(default_factory=dict)

    def _chunk(self, question: int, position: int) -> Document:
        words: list[str] = []
        while sum(len(w) + 1 for w in words) < CHUNK_CHARS:
            words.append(self.rng.choice(_WORDS))
        chunk_id = str(uuid.UUID(int=self.rng.getrandbits(128), version=4))
        text = f"Section {question}.{position}: " + " ".join(words) + "."
        self.contents[chunk_id] = text
        return Document(
            page_content=text,
            id=chunk_id,
            metadata={"title": f"Policy {question}", "source": f"policy-{question}.pdf"},
        )

    def ask(self) -> None:
        k = len(self.cited) + 1
        if self.ledger.in_progress:
            self.ledger = self.ledger.end_question(len(self.messages))
        self.ledger = self.ledger.begin_question(len(self.messages))
        self.messages.append(HumanMessage(f"Question {k}: what does the policy say on {k}?"))
        self.first_requests.append(len(self.messages))
        docs = [self._chunk(k, i) for i in range(CHUNKS_PER_QUESTION)]
        evidence = [
            Evidence(
                chunk_id=d.id or "",
                content=d.page_content,
                document_id=d.metadata["source"],
                title=d.metadata["title"],
                uri=d.metadata["source"],
            )
            for d in docs
        ]
        search_id, cite_id = f"q{k}-search", f"q{k}-cite"
        self.messages.append(
            AIMessage(
                "",
                tool_calls=[{"name": "search", "args": {"query": f"topic {k}"}, "id": search_id}],
            )
        )
        self.messages.append(
            ToolMessage(
                render_evidence(evidence), tool_call_id=search_id, name="search", artifact=docs
            )
        )
        self.ledger = self.ledger.record_retrieval(evidence, tool="search")
        self.ledgers.append(self.ledger)
        self.answer_requests.append(len(self.messages))
        earlier = [c for group in self.cited for c in group]
        chosen: list[str] = []
        for _ in range(self.rng.choice(self.citations)):
            pool = [c for c in earlier if c not in chosen]
            if pool and self.rng.random() < EARLIER_CITE_SHARE:
                chosen.append(self.rng.choice(pool))
            else:
                chosen.append(
                    self.rng.choice([e.chunk_id for e in evidence if e.chunk_id not in chosen])
                )
        self.messages.append(
            AIMessage(
                "", tool_calls=[{"name": "cite", "args": {"chunk_ids": chosen}, "id": cite_id}]
            )
        )
        self.messages.append(
            ToolMessage(f"Recorded {len(chosen)} citation(s).", tool_call_id=cite_id, name="cite")
        )
        self.ledger = self.ledger.record_citations(chosen)
        markers = " ".join(f"[{c}]" for c in chosen)
        self.messages.append(
            AIMessage(f"Answer {k}: the policy sets the limit and the deadline. {markers}")
        )
        self.cited.append(chosen)


def _text(messages: Sequence[BaseMessage]) -> str:
    parts = []
    for m in messages:
        if isinstance(m.content, str):
            parts.append(m.content)
        else:
            parts.extend(
                b["text"] for b in m.content if isinstance(b, dict) and b.get("type") == "text"
            )
    return "\n".join(parts)


def _pairs_intact(messages: Sequence[BaseMessage]) -> bool:
    calls = {c["id"] for m in messages if isinstance(m, AIMessage) for c in m.tool_calls}
    returns = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
    return calls == returns


def floor_tokens(
    request: list[BaseMessage], boundary: int, earlier: set[str], contents: dict[str, str]
) -> int:
    """The least any strategy keeping every earlier-cited chunk whole can send.

    Every turn that is not an earlier search result, plus each earlier-cited chunk's
    text once, with no header, label or receipt.
    """
    kept = [
        m
        for i, m in enumerate(request)
        if not (i < boundary and isinstance(m, ToolMessage) and m.name == "search")
    ]
    if earlier:
        kept.append(HumanMessage("\n\n".join(contents[c] for c in sorted(earlier))))
    return count_tokens_approximately(kept)


def strategies(request: list[BaseMessage], ledger: EvidenceLedger) -> dict[str, list[BaseMessage]]:
    """The same request under the four strategies."""
    capsa = capsule_messages(request, ledger=ledger, evidence_tools=["search"])
    budget = count_tokens_approximately(capsa)
    trimmed = trim_messages(
        request,
        max_tokens=budget,
        strategy="last",
        start_on="human",
        token_counter=count_tokens_approximately,
    )
    cleared = deepcopy(request)
    ClearToolUsesEdit(trigger=0, keep=3).apply(cleared, count_tokens=count_tokens_approximately)
    return {
        "full": list(request),
        "trim_messages": trimmed,
        "clear_tool_uses": cleared,
        "capsa": capsa,
    }


def _visible(messages: Sequence[BaseMessage], earlier: set[str], contents: dict[str, str]) -> float:
    if not earlier:
        return 1.0
    text = _text(messages)
    return sum(contents[c] in text for c in earlier) / len(earlier)


def measure_tokens(conversation: Conversation) -> list[dict[str, Any]]:
    """Per question and request: tokens, earlier cited evidence visible, pairs intact."""
    rows = []
    for k in range(1, len(conversation.cited) + 1):
        ledger = conversation.ledgers[k - 1]
        boundary = conversation.first_requests[k - 1] - 1
        earlier = {c for group in conversation.cited[: k - 1] for c in group}
        row: dict[str, Any] = {"question": k, "earlier_cited_chunks": len(earlier)}
        for point, ends in (
            ("first", conversation.first_requests),
            ("answer", conversation.answer_requests),
        ):
            request = conversation.messages[: ends[k - 1]]
            cells = {
                name: {
                    "tokens": count_tokens_approximately(messages),
                    "cited_visible": _visible(messages, earlier, conversation.contents),
                    "pairs_intact": _pairs_intact(messages),
                }
                for name, messages in strategies(request, ledger).items()
            }
            cells["floor"] = {
                "tokens": floor_tokens(request, boundary, earlier, conversation.contents)
            }
            row[point] = cells
        rows.append(row)
    return rows


def reductions(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """From `GOAL_FROM_QUESTION` on: capsa's and the floor's least saving against full history."""
    late = [r for r in rows if r["question"] >= GOAL_FROM_QUESTION]
    out: dict[str, Any] = {}
    for point in ("first", "answer"):
        capsa = [1 - r[point]["capsa"]["tokens"] / r[point]["full"]["tokens"] for r in late]
        floor = [1 - r[point]["floor"]["tokens"] / r[point]["full"]["tokens"] for r in late]
        visible = [r[point]["capsa"]["cited_visible"] for r in late]
        out[point] = {
            "min_reduction": round(min(capsa), 4),
            "min_floor_reduction": round(min(floor), 4),
            "min_cited_visible": min(visible),
            "goal_met": min(capsa) >= GOAL_REDUCTION and min(visible) == 1.0,
        }
    return out


def sensitivity() -> list[dict[str, Any]]:
    """The same measurement with answers citing exactly 1 or exactly 2 chunks."""
    out = []
    for citations in ((1,), (1, 2), (2,)):
        conversation = Conversation(random.Random(SEED), citations=citations)
        for _ in range(QUESTIONS):
            conversation.ask()
        rows = measure_tokens(conversation)
        unique = len({c for group in conversation.cited[:-1] for c in group})
        out.append(
            {
                "citations_per_answer": list(citations),
                "earlier_cited_chunks_at_last_question": unique,
                **reductions(rows),
            }
        )
    return out


def _percentile(samples: Sequence[float], share: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def _summary(samples: list[float]) -> dict[str, float]:
    return {
        "runs": len(samples),
        "p50_ms": round(statistics.median(samples), 4),
        "p95_ms": round(_percentile(samples, 0.95), 4),
        "max_ms": round(max(samples), 4),
    }


def measure_time(runs: int) -> dict[str, Any]:
    """Compaction time on a history of at least `TIMING_MESSAGES` messages.

    The core and the adapter run interleaved, so a machine that gets busier slows both.
    """
    conversation = Conversation(random.Random(SEED + 1))
    while len(conversation.messages) < TIMING_MESSAGES:
        conversation.ask()
    request = conversation.messages[: conversation.answer_requests[-1]]
    ledger = conversation.ledgers[-1]
    neutral = [_to_core(m, i) for i, m in enumerate(request)]
    calls: dict[str, Callable[[], object]] = {
        "core_compact": lambda: compact(neutral, ledger, owned_tools={"search"}),
        "langchain_capsule_messages": lambda: capsule_messages(
            request, ledger=ledger, evidence_tools=["search"]
        ),
    }
    wall: dict[str, list[float]] = {name: [] for name in calls}
    cpu: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(max(5, runs // 10)):
        for call in calls.values():
            call()
    for _ in range(runs):
        for name, call in calls.items():
            began, began_cpu = time.perf_counter_ns(), time.thread_time_ns()
            call()
            cpu[name].append((time.thread_time_ns() - began_cpu) / 1e6)
            wall[name].append((time.perf_counter_ns() - began) / 1e6)
    return {
        "messages": len(request),
        "earlier_questions": len(conversation.cited) - 1,
        "ledger_entries": len(ledger.entries),
        **{name: _summary(values) for name, values in wall.items()},
        "thread_cpu": {name: _summary(values) for name, values in cpu.items()},
    }


def plot(rows: list[dict[str, Any]], path: Path) -> bool:
    """Draw tokens per question for each strategy; False when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import MaxNLocator
    except ImportError:
        return False
    figure, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    questions = [r["question"] for r in rows]
    for axis, point in zip(axes, ("first", "answer"), strict=True):
        for name in (*STRATEGIES, "floor"):
            style = {"linestyle": ":", "color": "grey"} if name == "floor" else {"marker": "."}
            axis.plot(questions, [r[point][name]["tokens"] for r in rows], label=name, **style)
        axis.set_title(f"{point} request of each question")
        axis.set_xlabel("question")
        axis.xaxis.set_major_locator(MaxNLocator(integer=True))
        axis.grid(alpha=0.3)
    axes[0].set_ylabel("tokens sent (count_tokens_approximately)")
    axes[0].legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return True


STRATEGIES = ("full", "trim_messages", "clear_tool_uses", "capsa")


def print_report(report: dict[str, Any]) -> None:
    """Print the tables."""
    rows = report["tokens"]
    for point in ("first", "answer"):
        print(f"\nTokens sent at the {point} request of each question")
        header = "".join(f"{n:>16}" for n in (*STRATEGIES, "floor"))
        print(f"  q{header}  capsa saves  floor saves")
        for row in rows:
            cells = "".join(f"{row[point][n]['tokens']:>16,}" for n in (*STRATEGIES, "floor"))
            full = row[point]["full"]["tokens"]
            saved = 1 - row[point]["capsa"]["tokens"] / full
            floor = 1 - row[point]["floor"]["tokens"] / full
            print(f"{row['question']:>3}{cells}  {saved:>11.1%}  {floor:>11.1%}")
    last = rows[-1]["answer"]
    print(
        f"\nQuestion {rows[-1]['question']}, answer request ({rows[-1]['earlier_cited_chunks']} "
        "chunks cited earlier):"
    )
    print(f"  {'strategy':<16}{'cited visible':>14}{'pairs intact':>14}")
    for name in STRATEGIES:
        print(f"  {name:<16}{last[name]['cited_visible']:>14.1%}{last[name]['pairs_intact']!s:>14}")
    timing = report["timing"]
    print(
        f"\nCompaction time: {timing['messages']}-message history, "
        f"{timing['ledger_entries']} ledger entries, load average {report['meta']['loadavg']}"
    )
    for key in ("core_compact", "langchain_capsule_messages"):
        t, c = timing[key], timing["thread_cpu"][key]
        print(
            f"  {key:<28} wall p50 {t['p50_ms']:.3f} ms  p95 {t['p95_ms']:.3f} ms   "
            f"thread CPU p50 {c['p50_ms']:.3f} ms  p95 {c['p95_ms']:.3f} ms  ({t['runs']} runs)"
        )
    print("\nSensitivity: least saving from question 10 on (first / answer request)")
    for case in report["sensitivity"]:
        first, answer = case["first"], case["answer"]
        print(
            f"  cites {case['citations_per_answer']!s:<8} capsa {first['min_reduction']:.1%} / "
            f"{answer['min_reduction']:.1%}   floor {first['min_floor_reduction']:.1%} / "
            f"{answer['min_floor_reduction']:.1%}   cited visible {first['min_cited_visible']:.0%}"
        )
    goals = report["goals"]
    print(
        f"\nGoals: from question {GOAL_FROM_QUESTION} on >= {GOAL_REDUCTION:.0%} fewer tokens "
        f"than full history with 100% cited visible; compaction p95 < {GOAL_MS} ms"
    )
    for point in ("first", "answer"):
        g = goals[point]
        verdict = "met" if g["goal_met"] else "NOT met"
        print(
            f"  {point:<6} request: capsa {g['min_reduction']:.1%} "
            f"(floor {g['min_floor_reduction']:.1%}), "
            f"cited visible {g['min_cited_visible']:.0%}: {verdict}"
        )
    print(
        f"  compaction: core {'met' if goals['core_time_met'] else 'NOT met'}, "
        f"LangChain adapter {'met' if goals['adapter_time_met'] else 'NOT met'}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the simulation, print the tables, write the JSON (and the PNG)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="few timing repetitions")
    parser.add_argument("--out", type=Path, default=RESULTS, help=f"output directory ({RESULTS})")
    args = parser.parse_args(argv)
    loadavg = [round(x, 2) for x in os.getloadavg()]
    conversation = Conversation(random.Random(SEED))
    for _ in range(QUESTIONS):
        conversation.ask()
    rows = measure_tokens(conversation)
    timing = measure_time(30 if args.quick else 1000)
    cited_before = [
        sum(c in {x for g in conversation.cited[:i] for x in g} for c in group)
        for i, group in enumerate(conversation.cited)
    ]
    goals: dict[str, Any] = reductions(rows)
    goals["core_time_met"] = timing["core_compact"]["p95_ms"] < GOAL_MS
    goals["adapter_time_met"] = timing["langchain_capsule_messages"]["p95_ms"] < GOAL_MS
    report: dict[str, Any] = {
        "meta": {
            "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpu_count": os.cpu_count(),
            "loadavg": loadavg,
            "seed": SEED,
            "questions": QUESTIONS,
            "chunks_per_question": CHUNKS_PER_QUESTION,
            "chunk_chars": CHUNK_CHARS,
            "citations_per_answer": [len(group) for group in conversation.cited],
            "citations_of_earlier_chunks_per_answer": cited_before,
            "token_counter": "langchain_core count_tokens_approximately",
            "clear_tool_uses": "ClearToolUsesEdit(trigger=0, keep=3)",
            "trim_messages": "strategy='last', start_on='human', max_tokens=capsa's count",
            "floor": "non-evidence turns plus each earlier-cited chunk's text once",
        },
        "tokens": rows,
        "timing": timing,
        "sensitivity": sensitivity(),
        "goals": goals,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "capsule.json").write_text(json.dumps(report, indent=2) + "\n")
    print_report(report)
    png = args.out / "capsule_tokens.png"
    drawn = plot(rows, png)
    print(f"\nwrote {args.out / 'capsule.json'}" + (f" and {png}" if drawn else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
