"""What each of the packer's rules is worth: every rule switched off in turn, on every set.

The house rule for `capsa.budget` (issue 21): change a rule only when it wins
across sets by more than the noise between the development halves, and prefer
fewer rules. This script is that check. For each change (by default, each
weight of `capsa.budget.compress` and `capsa.budget.evidence` set to the value
that switches its rule off) it packs every answerable question of every set
with `benchmarks/compression.py`'s capsa method, at 10, 25 and 50 % of the
question's text, and counts the answers kept against the rules as they are:
over the development parts, each half apart, and the set-aside part, with the
sets that gained and lost at each budget. A rule whose removal loses on both
halves earns its place; one whose removal wins on both is a candidate to go.

Run: ``python benchmarks/ablation.py [--scorer lexical|static] [--limit N]
[--change module.NAME=VALUE ...] [--out FILE]``. ``--change`` replaces the
default list (repeat it; ``a=1,b=2`` changes two constants together). Writes
``benchmarks/results/ablation[-static].json``. HotpotQA comes from
``CAPSA_EVAL_DATA`` as in `compression.py`; without it, the other thirteen
sets are used and the report says so. Each change gets a scorer object of its
own, so no packing prepared under another change is reused (`pack` caches by
scorer).
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import compression

from capsa.budget import LexicalScorer, estimate_tokens
from capsa.budget import compress as compress_module

RESULTS = compression.RESULTS
RULES: tuple[str, ...] = (
    "capsa.budget.compress._PASSAGE_WEIGHT=0",
    "capsa.budget.compress._LEAD_BONUS=0",
    "capsa.budget.compress._LINK_WEIGHT=0",
    "capsa.budget.compress._COVERAGE_DECAY=0",
    "capsa.budget.compress._COVERAGE_DECAY=1",
    "capsa.budget.compress._DENSE_BONUS=0",
    "capsa.budget.compress._SUBJECT_BESIDE=0",
    "capsa.budget.evidence._CUE_WEIGHT=0",
    "capsa.budget.compress._RESPELL=0",
)
"""Each rule off: the passage's own relevance, the first sentence's bonus, the second
hop's link, novelty (a covered term counting nothing more, 0, or as much again, 1),
the tight-budget rule, a passage's opening queued beside its second sentence, the
answer-type cue, typos respelt."""
PARTS = ("dev", "dev-a", "dev-b", "aside")


@contextmanager
def changed(spec: str) -> Iterator[None]:
    """Module constants set as `spec` says (``module.NAME=VALUE[,module.NAME=VALUE]``)."""
    saved: list[tuple[Any, str, Any]] = []
    # packing remembers each passage's reading (its sentences and terms) by its text:
    # readings made under other rules would be reused, so they are forgotten both ways
    # (an older commit's code, run by versus.py, remembers none)
    forget = getattr(compress_module, "_forget_readings", lambda: None)
    forget()
    try:
        for item in filter(None, spec.split(",")):
            target, value = item.split("=", 1)
            module_name, name = target.rsplit(".", 1)
            module = importlib.import_module(module_name)
            if not hasattr(module, name):
                raise SystemExit(f"{module_name} has no {name}")
            old = getattr(module, name)
            saved.append((module, name, old))
            setattr(module, name, type(old)(float(value)))
        yield
    finally:
        for module, name, old in reversed(saved):
            setattr(module, name, old)
        forget()


def scorer_for(kind: str) -> Any:
    if kind == "static":
        from capsa.budget import StaticScorer

        return StaticScorer()
    return LexicalScorer()


def hits(questions: dict[str, list[compression.Question]], kind: str,
         spec: str = "") -> dict[str, list[list[bool]]]:
    """Per set, each question's answer kept or not at the three budgets (`compression.run`)."""
    kept: dict[str, list[list[bool]]] = {}
    with changed(spec):
        methods = {"capsa": compression.capsa_method(True, scorer_for(kind))}
        for key, rows in questions.items():
            tallies = compression.run(rows, methods, estimate_tokens)["capsa"]
            kept[key] = [list(per_question) for per_question in zip(
                *(tallies[f].hit_list for f in compression.FRACTIONS), strict=True)]
    return kept


def compare(questions: dict[str, list[compression.Question]], base: dict[str, list[list[bool]]],
            new: dict[str, list[list[bool]]]) -> dict[str, Any]:
    """Answers gained (+) or lost (−) at each budget: per part over all sets, and per set."""
    totals = {part: [0, 0, 0] for part in PARTS}
    sets: dict[str, dict[str, list[int]]] = {}
    for key, rows in questions.items():
        sets[key] = {part: [0, 0, 0] for part in ("dev", "aside")}
        for q, before, after in zip(rows, base[key], new[key], strict=True):
            parts = compression.part(q.id)
            for n in range(3):
                change = int(after[n]) - int(before[n])
                for part in parts:
                    totals[part][n] += change
                sets[key][parts[0]][n] += change
    gaining = [[key for key in sets if sets[key]["dev"][n] > 0] for n in range(3)]
    losing = [[key for key in sets if sets[key]["dev"][n] < 0] for n in range(3)]
    return {"totals": totals, "sets": sets, "dev_sets_gaining": gaining,
            "dev_sets_losing": losing,
            "both_halves_gain": [totals["dev-a"][n] > 0 and totals["dev-b"][n] > 0
                                 for n in range(3)],
            "both_halves_lose": [totals["dev-a"][n] < 0 and totals["dev-b"][n] < 0
                                 for n in range(3)]}


def load(limit: int | None) -> tuple[dict[str, list[compression.Question]], list[str]]:
    questions, missing = {}, []
    for key, (_, path) in compression.set_paths().items():
        if not path.exists():
            missing.append(key)
            continue
        questions[key] = compression.load(path, limit)
    return questions, missing


def _cells(values: Sequence[int]) -> str:
    return " / ".join(f"{v:+d}" for v in values)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--scorer", choices=("lexical", "static"), default="lexical")
    parser.add_argument("--limit", type=int, default=None, help="first N questions of each set")
    parser.add_argument("--change", action="append", default=None,
                        help="module.NAME=VALUE[,module.NAME=VALUE] (repeatable)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    questions, missing = load(args.limit)
    if missing:
        print(f"note: {', '.join(missing)} not found (set CAPSA_EVAL_DATA); left out")
    counts = {part: sum(1 for rows in questions.values() for q in rows
                        if part in compression.part(q.id)) for part in PARTS}
    print(f"{args.scorer} scorer, {len(questions)} sets; questions: development "
          f"{counts['dev']} (halves {counts['dev-a']} / {counts['dev-b']}), "
          f"set aside {counts['aside']}")
    base = hits(questions, args.scorer)
    kept = {part: [sum(row[n] for key, rows in questions.items()
                       for q, row in zip(rows, base[key], strict=True)
                       if part in compression.part(q.id)) for n in range(3)]
            for part in PARTS}
    print(f"answers kept as the rules are, 10 / 25 / 50 %: development "
          f"{' / '.join(map(str, kept['dev']))}, set aside {' / '.join(map(str, kept['aside']))}")
    print("\nanswers gained (+) or lost (-) by each change, 10 / 25 / 50 %")
    print(f"{'change':<48}{'development':>16}{'half a':>16}{'half b':>16}{'set aside':>16}"
          "   sets gaining / losing at 10 %")
    report: dict[str, Any] = {"scorer": args.scorer, "sets": list(questions),
                              "left_out": missing, "questions": counts, "kept": kept,
                              "changes": {}}
    for spec in args.change or RULES:
        result = compare(questions, base, hits(questions, args.scorer, spec))
        report["changes"][spec] = result
        t = result["totals"]
        label = spec.replace("capsa.budget.", "")
        print(f"{label:<48}{_cells(t['dev']):>16}{_cells(t['dev-a']):>16}"
              f"{_cells(t['dev-b']):>16}{_cells(t['aside']):>16}"
              f"   {len(result['dev_sets_gaining'][0])} / {len(result['dev_sets_losing'][0])}")
    out = args.out or RESULTS / f"ablation{'' if args.scorer == 'lexical' else '-static'}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
