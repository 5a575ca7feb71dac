"""Packets of a fixed sample, digested: what `test_pack_pinned` holds `pack` to.

Speed work on `capsa.budget` must not change a single packed byte, so the
digests of the packets built from the sample below are recorded in
``data/pinned-packets.json`` and compared on every run. A change that is meant
to alter selection or rendering regenerates them, in the same commit:

    .venv/bin/python tests/unit/budget/pinned.py --write

The sample is the Python-manual question set in ``benchmarks/data`` (real
prose, code and tables), at three budgets, three shapes, two tokenizers, whole
passages, attachments and `compress_text`.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

from capsa.budget import Budget, Passage, Receipt, compress_text, estimate_tokens, pack

ROOT = Path(__file__).resolve().parents[3]
SAMPLE = ROOT / "benchmarks" / "data" / "pydocs-qa.jsonl"
PINNED = Path(__file__).resolve().parent / "data" / "pinned-packets.json"
FRACTIONS = (0.1, 0.25, 0.5)


def _words(text: str) -> list[str]:
    """A list-returning tokenizer, as tiktoken's ``encode`` is."""
    return text.split()


def _questions() -> Iterator[tuple[str, list[Passage]]]:
    with SAMPLE.open(encoding="utf-8") as handle:
        for line in handle:
            row = json.loads(line)
            passages = [Passage(id=f"p{n}", text=c["paragraph_text"], source=c.get("title"),
                                score=1.0 / (n + 1)) for n, c in enumerate(row["contexts"])]
            yield row["question_text"], passages


def _digest(value: object) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:16]


def _receipt(receipt: Receipt) -> dict[str, object]:
    """A receipt as pinned; ``page`` came later and is left out while None, so the pins hold."""
    dumped = receipt.model_dump(mode="json")
    if dumped.get("page") is None:
        dumped.pop("page", None)
    return dumped


def digests() -> dict[str, str]:
    """One digest per (question, case): the rendered packet, texts and receipts."""
    out: dict[str, str] = {}
    counters: dict[str, Callable[[str], object]] = {"estimate": estimate_tokens, "words": _words}
    for number, (query, passages) in enumerate(_questions()):
        total = estimate_tokens("\n\n".join(p.text for p in passages))
        for fraction in FRACTIONS:
            budget = max(1, int(fraction * total))
            cases: dict[str, dict[str, object]] = {
                "estimate": {},
                "words": {"tokenizer": _words},
                "whole": {"compress": False},
                "brief": {"budget": Budget(max_tokens=budget, shape="brief")},
                "features": {"budget": Budget(max_tokens=budget, shape="features",
                                              mark_excerpts=True)},
                "attached": {"attachments": passages[:2]},
            }
            for case, options in cases.items():
                rest = passages[2:] if case == "attached" else passages
                packet = pack(query, rest, options.pop("budget", Budget(max_tokens=budget)),
                              **options)  # type: ignore[arg-type]
                out[f"{number}/{fraction}/{case}"] = _digest(
                    [packet.rendered, list(packet.texts), packet.used_tokens,
                     [_receipt(r) for r in packet.receipts]])
        for name, counter in counters.items():
            text = "\n\n".join(p.text for p in passages)
            out[f"{number}/compress_text/{name}"] = _digest(
                compress_text(text, query, max(1, total // 8), tokenizer=counter))
    return out


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        raise SystemExit("usage: pinned.py --write")
    PINNED.write_text(json.dumps(digests(), indent=0, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {PINNED}")
