"""Answers kept when questions are typed as people type them: lower case, or mistyped.

The sets' questions were written with care; people asking a search box or a
chat app write "who sang a wonderful world", lower case and without a question
mark (the form Natural Questions keeps), and they mistype. This packs every
answerable question of every set (`compression.py`'s sets and capsa method) at
10, 25 and 50 % of its text in three forms:

- ``written``: as the set has it;
- ``typed``: lower case, with no punctuation but the word's own;
- ``typo``: as written, with one word of five letters or more mistyped by one
  edit (two neighbours swapped, a letter dropped, doubled or changed), the
  word and the edit chosen by a hash of the question, so every run agrees.

Methods: ``capsa`` (the lexical scorer, with its defaults), ``capsa-exact``
(the same with `capsa.budget.relevance.respell` switched off, so a mistyped
word stays unmatched), ``capsa-static`` (`StaticScorer`) and ``bm25-passages``
(`compression.py`'s passage ranking, which matches words exactly). It counts
the answers kept on the development and set-aside parts (`compression.part`),
and for each set what respelling changes (``capsa`` against ``capsa-exact``),
in every form. On ``written`` and ``typed`` it changes only the questions the
sets' own writers mistyped ("supernatrual", "Eurpean"), since a word a passage
holds, or a word of English, is never respelt.

Run: ``python benchmarks/question_forms.py [--limit N] [--out FILE]``. Writes
``benchmarks/results/question_forms.json``. HotpotQA comes from
``CAPSA_EVAL_DATA`` as in `compression.py`.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import random
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import compression
from ablation import changed, load

from capsa.budget import LexicalScorer, estimate_tokens

PARTS = ("dev", "aside")
_LONG_WORD = re.compile(r"[A-Za-z]{5,}")
_PUNCTUATION = re.compile(r"[^\w\s'’-]+|(?<!\w)['’-]|['’-](?!\w)")
_CHANGED_TO = "aeiounrst"
"""Letters a changed letter becomes: the commonest in English, as a slip mostly gives."""


def typed(question: str) -> str:
    """The question as typed into a search box: lower case, no punctuation but a word's own.

    Examples:
        >>> typed("Who wrote \\"Hotel\\" (1965), Arthur Hailey's novel?")
        "who wrote hotel 1965 arthur hailey's novel"
    """
    return " ".join(_PUNCTUATION.sub(" ", question.lower()).split())


def typo(question: str) -> str:
    """The question with one word of five letters or more mistyped by one edit.

    The word, the place and the edit come from a hash of the question, so the
    same question always gets the same typo. A question with no such word is
    returned as it is.

    Examples:
        >>> typo("Which river flows through Zurich?") != "Which river flows through Zurich?"
        True
        >>> typo("Who is he?")
        'Who is he?'
    """
    words = list(_LONG_WORD.finditer(question))
    if not words:
        return question
    chance = random.Random(hashlib.sha256(question.encode("utf-8")).digest())
    match = chance.choice(words)
    word, at = match.group(), chance.randrange(1, len(match.group()) - 1)
    edit = chance.randrange(4)
    if edit == 0:  # two neighbours swapped
        mistyped = word[:at] + word[at + 1] + word[at] + word[at + 2:]
    elif edit == 1:  # a letter dropped
        mistyped = word[:at] + word[at + 1:]
    elif edit == 2:  # a letter doubled
        mistyped = word[:at] + word[at] + word[at:]
    else:  # a letter changed
        mistyped = (word[:at] + chance.choice(_CHANGED_TO.replace(word[at].lower(), ""))
                    + word[at + 1:])
    return question[:match.start()] + mistyped + question[match.end():]


FORMS: dict[str, Callable[[str], str]] = {"written": lambda q: q, "typed": typed, "typo": typo}
EXACT = "capsa.budget.compress._RESPELL=0"
"""`capsa-exact`: the packer with respelling switched off."""


def methods() -> dict[str, tuple[compression.Method, str]]:
    """Each method, with the change (`ablation.changed`) it runs under."""
    chosen: dict[str, tuple[compression.Method, str]] = {
        "capsa": (compression.capsa_method(True, LexicalScorer()), ""),
        "capsa-exact": (compression.capsa_method(True, LexicalScorer()), EXACT),
    }
    static = compression.static_methods()
    if "capsa-static" in static:
        chosen["capsa-static"] = (static["capsa-static"], "")
    chosen["bm25-passages"] = (compression.bm25_passages, "")
    return chosen


def kept(rows: Sequence[compression.Question], method: compression.Method,
         change: str) -> list[list[bool]]:
    """Each question's answer kept or not at the three budgets."""
    with changed(change):
        tallies = compression.run(list(rows), {"m": method}, estimate_tokens)["m"]
    return [list(per_question) for per_question in zip(
        *(tallies[f].hit_list for f in compression.FRACTIONS), strict=True)]


def totals(rows: Sequence[compression.Question], hits: Sequence[Sequence[bool]]
           ) -> dict[str, list[int]]:
    counted = {part: [0, 0, 0] for part in PARTS}
    for q, row in zip(rows, hits, strict=True):
        part = compression.part(q.id)[0]
        for n in range(3):
            counted[part][n] += row[n]
    return counted


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--limit", type=int, default=None, help="first N questions of each set")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    questions, missing = load(args.limit)
    if missing:
        print(f"note: {', '.join(missing)} not found (set CAPSA_EVAL_DATA); left out")
    counts = {part: sum(1 for rows in questions.values() for q in rows
                        if compression.part(q.id)[0] == part) for part in PARTS}
    print(f"{len(questions)} sets; questions: development {counts['dev']}, "
          f"set aside {counts['aside']}")
    chosen = methods()
    report: dict[str, Any] = {"sets": list(questions), "left_out": missing,
                              "questions": counts, "forms": {}, "respelling_by_set": {}}
    print("\nanswers kept, 10 / 25 / 50 %")
    print(f"{'form':<10}{'method':<16}{'development':>22}{'set aside':>20}")
    for form, rewrite in FORMS.items():
        rewritten = {key: [dataclasses.replace(q, text=rewrite(q.text)) for q in rows]
                     for key, rows in questions.items()}
        by_method: dict[str, dict[str, dict[str, list[int]]]] = {}
        for name, (method, change) in chosen.items():
            by_method[name] = {key: totals(rows, kept(rows, method, change))
                               for key, rows in rewritten.items()}
            overall = {part: [sum(by_method[name][key][part][n] for key in rewritten)
                              for n in range(3)] for part in PARTS}
            report["forms"].setdefault(form, {})[name] = {"all": overall,
                                                          "sets": by_method[name]}
            print(f"{form:<10}{name:<16}{' / '.join(map(str, overall['dev'])):>22}"
                  f"{' / '.join(map(str, overall['aside'])):>20}")
        report["respelling_by_set"][form] = {
            key: {part: [by_method["capsa"][key][part][n] - by_method["capsa-exact"][key][part][n]
                         for n in range(3)] for part in PARTS}
            for key in rewritten}
    print("\nwhat respelling changes (capsa against capsa-exact), development, 10 / 25 / 50 %")
    for form, sets in report["respelling_by_set"].items():
        moved = {key: change["dev"] for key, change in sets.items() if any(change["dev"])}
        listed = ", ".join(f"{key} {' / '.join(f'{v:+d}' for v in values)}"
                           for key, values in moved.items())
        print(f"{form:<10}{listed or 'nothing'}")
    out = args.out or compression.RESULTS / "question_forms.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
