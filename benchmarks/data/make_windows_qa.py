"""Build the ``*-windows-qa.jsonl`` sets: three sets' passages re-cut into 80-word windows.

Every other set hands capsa whole paragraphs or chunks cut at sentence ends.
Many retrievers do not: DPR's Wikipedia passages are 100-word windows, and a
character or token splitter without sentence rules cuts where the count ends.
Such a window opens and closes in the middle of a sentence, a paragraph's
subject is often in the window before, and at a tenth of ten windows the
budget holds about one of them. This is the shape where passage ranking
beat capsa on the held-out set of issue 21, and none of our sets had it.

For each question of ``hotpot-single``, ``squad-open`` and ``covid``, every
one of its ten paragraphs is cut into windows of `WORDS` words, each under
its paragraph's title. The gold window is the one window of the gold
paragraph that holds the answer (questions whose answer straddles two
windows, or is in none or in two, are skipped); the nine distractors are the
windows of the same ten paragraphs that lack the answer, the closest to the
question by plain TF-IDF cosine (``qa_sets.TfIdf``, never capsa's scorer),
so the gold paragraph's other windows compete too. Question ids are kept, so
a question is set aside here exactly when it is in its source set.

Sources and licences: as the three sets these are cut from (HotpotQA and
SQuAD 2.0, CC BY-SA 4.0; COVID-QA, Apache-2.0 annotations over CC BY
papers); these files, derived works, carry the same terms. Decided on
nothing: no rule of capsa was chosen on them (``docs/benchmarks.md``).

Run: ``python benchmarks/data/make_windows_qa.py`` (reads the three sets
beside this file; writes ``<set>-windows-qa.jsonl`` beside them).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from qa_sets import TfIdf, normalise, row, ten_passages, write

HERE = Path(__file__).resolve().parent
SOURCES = ("hotpot-single", "squad-open", "covid")
WORDS = 80
"""Words a window holds (DPR's are 100; SQuAD's paragraphs are short, so 80 cuts most
paragraphs into two or three windows)."""


def windows(text: str) -> list[str]:
    """`text` cut every `WORDS` words, wherever that falls."""
    words = text.split()
    return [" ".join(words[at:at + WORDS]) for at in range(0, len(words), WORDS)]


def recut(source: dict[str, Any]) -> dict[str, Any] | None:
    """One row of a source set as ten windows, or None when it has no single gold window."""
    answer = source["answers_objects"][0]["spans"][0]
    gold = normalise(answer)
    question = source["question_text"]
    if gold in normalise(question):
        return None
    corpus = [(context["title"], window) for context in source["contexts"]
              for window in windows(context["paragraph_text"])]
    corpus = list(dict.fromkeys(corpus))  # a paragraph repeated in a row is one passage
    supporting = {context["paragraph_text"] for context in source["contexts"]
                  if context["is_supporting"]}
    normalised = [normalise(text) for _, text in corpus]
    holding = [k for k in range(len(corpus)) if gold in normalised[k]]
    if len(holding) != 1 or not any(corpus[holding[0]][1] in " ".join(paragraph.split())
                                    for paragraph in supporting):
        return None
    found = ten_passages(corpus, normalised, gold, holding[0],
                         TfIdf([text for _, text in corpus]).similarity(question),
                         key=source["question_id"])
    if len(found) != 10:
        return None
    return row(source["question_id"], question, answer, found)


def main() -> int:
    for name in SOURCES:
        sources = [json.loads(line) for line in
                   (HERE / f"{name}-qa.jsonl").read_text(encoding="utf-8").splitlines()]
        rows = [found for source in sources if (found := recut(source)) is not None]
        out = HERE / f"{name}-windows-qa.jsonl"
        write(rows, out)
        print(f"wrote {len(rows)} of {len(sources)} questions to {out.name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
