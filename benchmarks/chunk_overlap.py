"""Overlapping chunks: how much of a packet says the same thing twice.

LangChain pipelines usually split documents with
``RecursiveCharacterTextSplitter(chunk_size=1000, chunk_overlap=200)``, so
neighbouring chunks repeat up to 200 characters, cut mid-sentence, and a
retriever often returns both neighbours. This re-splits four sets' passages
that way (and with no overlap, the control), packs every question at 10, 25
and 50 % of its text with `capsa.budget.pack`'s defaults, and measures the
share of the kept text that repeats: six-word runs that occur more than once
across the packet, over all six-word runs kept. It also counts the answers
kept, so a difference in repetition can be read beside what it cost.

Run: ``python benchmarks/chunk_overlap.py [--limit N] [--out FILE]``; writes
``benchmarks/results/chunk_overlap.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import compression
from langchain_text_splitters import RecursiveCharacterTextSplitter

from capsa.budget import Budget, Passage, estimate_tokens, pack

SETS = ("squad-open", "docstrings-long", "covid", "manpages")
SPLITS = ((1000, 200), (1000, 0))
RUN = 6
"""Words in a run: long enough that a repeat is text said twice, not a common phrase."""


def repeated_share(texts: Sequence[str]) -> tuple[int, int]:
    """Runs of `RUN` words that repeat across `texts`, and all runs, counted per text."""
    runs: Counter[str] = Counter()
    total = 0
    for text in texts:
        words = text.split()
        for start in range(len(words) - RUN + 1):
            runs[" ".join(words[start:start + RUN])] += 1
            total += 1
    return sum(count - 1 for count in runs.values() if count > 1), total


def measure(questions: list[compression.Question], size: int, overlap: int) -> dict[str, Any]:
    splitter = RecursiveCharacterTextSplitter(chunk_size=size, chunk_overlap=overlap)
    rows: dict[str, Any] = {}
    for fraction in compression.FRACTIONS:
        repeated = runs = kept = 0
        for q in questions:
            chunks = [chunk for paragraph in q.paragraphs
                      for chunk in splitter.split_text(paragraph)]
            passages = [Passage(id=str(n), text=chunk) for n, chunk in enumerate(chunks)]
            total = estimate_tokens("\n\n".join(q.paragraphs))
            packet = pack(q.text, passages, Budget(max_tokens=max(1, int(fraction * total))))
            again, seen = repeated_share(packet.texts)
            repeated, runs = repeated + again, runs + seen
            kept += compression.normalise(q.answer) in compression.normalise(" ".join(packet.texts))
        rows[f"{fraction:.2f}"] = {"repeated_share": round(repeated / max(runs, 1), 4),
                                   "answers_kept": kept}
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--limit", type=int, default=None, help="first N questions of each set")
    parser.add_argument("--out", type=Path, default=compression.RESULTS / "chunk_overlap.json")
    args = parser.parse_args(argv)
    report: dict[str, Any] = {"run_words": RUN, "sets": {}}
    print("share of kept text repeated (six-word runs), and answers kept, at 10 / 25 / 50 %")
    for key in SETS:
        questions = compression.load(compression.SETS[key][1], args.limit)
        report["sets"][key] = {"questions": len(questions)}
        for size, overlap in SPLITS:
            rows = measure(questions, size, overlap)
            report["sets"][key][f"{size}/{overlap}"] = rows
            shares = " / ".join(f"{rows[f]['repeated_share']:6.1%}" for f in rows)
            kept = " / ".join(str(rows[f]["answers_kept"]) for f in rows)
            print(f"  {key:<16} chunk {size}, overlap {overlap:>3}: {shares}   kept {kept} "
                  f"of {len(questions)}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
