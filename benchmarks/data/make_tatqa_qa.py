"""Build ``tatqa-qa.jsonl``: finance questions over chunks of annual reports.

Finance was a gap in the development sets (issue 21). TAT-QA (Zhu et al. 2021)
pairs a table from a real annual report with the report's paragraphs around
it, and has questions written by finance-literate annotators; this keeps only
what a text retriever can answer: questions whose answer is a single span
that occurs in the paragraphs (not only in the table, not counted or
computed). Each item's paragraphs are joined by blank lines and cut into
chunks of whole sentences of up to 700 characters, ending at a paragraph break
once a chunk has 300 (``qa_sets.sentence_spans``, the cuts made without looking
at the answers), and each chunk is titled with its item's table id (TAT-QA
does not name the company). A question's gold chunk is the chunk of its own
item that holds the normalised answer (the one most similar to the question if
several do); its nine distractors are the chunks of all the items most similar
to the question by plain TF-IDF cosine (``qa_sets.TfIdf``, not capsa's scorer)
that do not hold the normalised answer: other notes on tax, pensions, revenue
recognition and share awards, in the same register.

Rows are skipped when the normalised answer (``qa_sets.normalise``, the
benchmark's own) is empty, yes or no, or in the question; when no single chunk
of the item holds it (it crosses a chunk boundary); and when it opens its gold
chunk (keeping a chunk's opening would be enough), as in the hand-written sets.
The builder prints how many each rule skipped.

Source and licence: TAT-QA, ``dataset_raw/tatqa_dataset_dev.json`` in the
public repository ``NExTplusplus/TAT-QA`` (commit
ec12a30c26365ff05face6ffc431aaff9cb67c91); the dataset is CC BY 4.0 (its
README), the repository's code MIT. ``raw/tatqa-extract.jsonl`` is an extract
copied by hand through a file reader: of the first 45 items of the dev file,
the 33 that have a question of answer type ``span``, from ``text`` or
``table-text``, whose answer occurs (normalised) in the item's paragraphs;
each with its table id, all its paragraphs in order, and those questions (id,
question, answer); tables and the other questions are left out. 65
questions. This file, a derived work, is CC BY 4.0 too. capsa was never tuned
on it.

Run: ``python benchmarks/data/make_tatqa_qa.py`` (reads the extract beside this
file; writes ``tatqa-qa.jsonl`` beside this file). Deterministic.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from qa_sets import TfIdf, normalise, row, sentence_spans, ten_passages, write

HERE = Path(__file__).resolve().parent
RAW = HERE / "raw" / "tatqa-extract.jsonl"
OUT = HERE / "tatqa-qa.jsonl"
DISTRACTORS = 9


def main() -> int:
    items = [json.loads(line) for line in RAW.read_text("utf-8").splitlines()]
    corpus: list[tuple[str, str]] = []
    questions: list[tuple[str, str, str, list[int]]] = []  # id, question, answer, item's chunks
    for item in items:
        text = "\n\n".join(item["paragraphs"])
        if not all(normalise(answer) in normalise(text) for _, _, answer in item["questions"]):
            raise ValueError(f"item {item['uid']}: an answer is not in its paragraphs")
        first = len(corpus)
        corpus.extend((f"TAT-QA {item['uid'][:8]}", text[a:b]) for a, b in sentence_spans(text))
        chunks = list(range(first, len(corpus)))
        questions.extend((qid, question, answer, chunks)
                         for qid, question, answer in item["questions"])
    normalised = [normalise(text) for _, text in corpus]
    tfidf = TfIdf([text for _, text in corpus])
    rows: list[dict[str, Any]] = []
    skipped: Counter[str] = Counter()
    for qid, question, answer, chunks in questions:
        gold = normalise(answer)
        if gold in ("", "yes", "no") or gold in normalise(question):
            skipped["answer empty, yes/no or in the question"] += 1
            continue
        cosine = tfidf.similarity(question)
        holding = [k for k in chunks if gold in normalised[k]]
        if not holding:
            skipped["answer crosses a chunk boundary"] += 1
            continue
        best = max(holding, key=lambda k: (cosine(k), -k))
        if normalised[best].startswith(gold):
            skipped["answer opens its gold chunk"] += 1
            continue
        found = ten_passages(corpus, normalised, gold, best, cosine, qid, DISTRACTORS)
        rows.append(row(f"tatqa-{qid}", question.strip(), answer.strip(), found))
    write(rows, OUT)
    print(f"wrote {len(rows)} questions over {len(corpus)} chunks of {len(items)} items "
          f"to {OUT}; skipped: {dict(skipped) or 'none'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
