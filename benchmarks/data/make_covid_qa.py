"""Build ``covid-qa.jsonl``: medical questions over chunks of biomedical papers.

Medical text was the first gap in the development sets (issue 21). COVID-QA
(Möller et al. 2020) has questions written by volunteer biomedical experts on
CORD-19 papers, each answer a span of the paper (often a clause or a whole
sentence, so keeping the answer means keeping the sentence that says it). Each
paper is cut into chunks of about 700 characters the way a splitter cuts them,
without looking at the answers (``qa_sets.sentence_spans``): sentences (a full
stop, question or exclamation mark before a space and a capital, digit or
bracket) are joined up to 700 characters, and a chunk ends at a paragraph
break once it has 300. The
metadata lines before the abstract (address, authors, date, DOI, licence) are
not chunked; each chunk is titled with its paper's title. A question's gold
chunk is the one that holds its answer span; its nine distractors are the
chunks of all the papers most similar to the question by plain TF-IDF cosine
(``qa_sets.TfIdf``, not capsa's scorer) that do not hold the normalised answer,
so most come from the same paper: same terms, same subject, different facts.

Rows are skipped when the normalised answer (``qa_sets.normalise``, the
benchmark's own) is empty, yes or no, or in the question; when the answer span
crosses a chunk boundary (no single chunk holds it); and when it opens its gold
chunk (keeping a chunk's opening would be enough), as in the hand-written sets.
The builder prints how many each rule skipped.

Source: ``data/question-answering/200423_covidQA.json`` in the public
repository ``deepset-ai/COVID-QA`` (commit
471a9d888160b9e5c33f8e42e2a34c1eb4866766, the annotation snapshot of 23 April
2020). The annotations are Apache-2.0 (the dataset card of ``covid_qa_deepset``);
each paper's text is under the licence its header names, CC BY for every paper
used here (the builder refuses any other). ``raw/covid-qa-extract.jsonl`` is an
extract copied by hand through a file reader: of the file's first eleven
papers, in order, all but the one whose header names no Creative Commons
licence (a JAMA viewpoint, the eleventh) and the two with fewer than four
questions answered in the part copied; of each paper, the text from its start to the end of the
paragraph that holds character 8,000 (the whole paper if shorter), with the
questions whose answer lies in that part: id, question, first answer and its
offset, checked against the text (one offset in the source is one character
late, and is accepted at the character before). Eight papers, 62 questions.
This file, a derived work, keeps those licences. capsa was never tuned on it.

Run: ``python benchmarks/data/make_covid_qa.py`` (reads the extract beside this
file; writes ``covid-qa.jsonl`` beside this file). Deterministic.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from qa_sets import TfIdf, normalise, row, sentence_spans, ten_passages, write

HERE = Path(__file__).resolve().parent
RAW = HERE / "raw" / "covid-qa-extract.jsonl"
OUT = HERE / "covid-qa.jsonl"
CUT = 8000
"""Each paper is copied to the end of the paragraph holding this character."""
DISTRACTORS = 9


def chunk_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of each chunk of a paper, from its abstract on; blind to any answer."""
    body = text.find("Abstract:")
    assert body != -1, text[:80]
    return sentence_spans(text, body)


def locate(text: str, answer: str, start: int) -> int:
    """The answer's offset: the source's, or the character before it (one is off by one)."""
    for at in (start, start - 1):
        if text[at:at + len(answer)] == answer:
            return at
    raise ValueError(f"answer {answer!r} not at {start}: the extract was miscopied")


def main() -> int:
    papers = [json.loads(line) for line in RAW.read_text("utf-8").splitlines()]
    corpus: list[tuple[str, str]] = []
    questions: list[tuple[int, str, str, int]] = []  # id, question, answer, gold chunk
    skipped: Counter[str] = Counter()
    for paper in papers:
        text = paper["context"]
        if not paper["license"].startswith("cc"):
            raise ValueError(f"paper {paper['document_id']} is not under a CC licence")
        if text.find("\n\n", CUT) != -1:
            raise ValueError(f"paper {paper['document_id']} is copied past the cut")
        title = text.split("\n", 1)[0]
        spans = chunk_spans(text)
        first = len(corpus)
        corpus.extend((title, text[a:b]) for a, b in spans)
        for qid, question, answer, start in paper["qas"]:
            at = locate(text, answer, start)
            holding = [k for k, (a, b) in enumerate(spans) if a <= at and at + len(answer) <= b]
            if not holding:
                skipped["answer crosses a chunk boundary"] += 1
                continue
            questions.append((qid, question, answer, first + holding[0]))
    normalised = [normalise(text) for _, text in corpus]
    tfidf = TfIdf([text for _, text in corpus])
    rows: list[dict[str, Any]] = []
    for qid, question, answer, best in questions:
        gold = normalise(answer)
        if gold in ("", "yes", "no") or gold in normalise(question):
            skipped["answer empty, yes/no or in the question"] += 1
            continue
        if normalised[best].startswith(gold):
            skipped["answer opens its gold chunk"] += 1
            continue
        cosine = tfidf.similarity(question)
        found = ten_passages(corpus, normalised, gold, best, cosine, qid, DISTRACTORS)
        rows.append(row(f"covid-qa-{qid}", question.strip(), answer.strip(), found))
    write(rows, OUT)
    print(f"wrote {len(rows)} questions over {len(corpus)} chunks of {len(papers)} papers "
          f"to {OUT}; skipped: {dict(skipped) or 'none'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
