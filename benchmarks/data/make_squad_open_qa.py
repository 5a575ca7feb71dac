"""Build ``squad-open-qa.jsonl``: SQuAD questions recast as open-domain, single-hop retrieval.

The held-out set of issue 21 is single-hop open-domain QA in the shape of
Natural Questions-open with ten retrieved passages: Wikipedia paragraphs of
about a hundred words, each with its article's title, one holding the answer
and nine close ones that do not. No retrieval output of that kind (NQ, TriviaQA
or DPR top-k files) could be had here as plain text with a licence to copy, so
this builds the nearest shape from SQuAD: each question keeps the paragraph it
was written on as its gold passage, and its nine distractors are the paragraphs
of the pool most similar to the question by plain TF-IDF cosine
(``qa_sets.TfIdf`` over title and text, as a sparse retriever indexes them; not
capsa's scorer) that do not hold the normalised answer. The pool is every
paragraph copied (91, from three articles), so most distractors come from the
gold passage's own article: same title, same subject, the answer's neighbours
named around it. Titles are kept in ``contexts[*].title`` (underscores read as
spaces), as NQ-open passages carry them; ``compression.py`` does not give them
to any method.

How this differs from the held-out set, so its numbers are read rightly:
SQuAD's crowd workers wrote each question while reading its paragraph, so
questions share more words with their passage than search-engine queries do,
which favours lexical scorers; and an answer may open its gold passage (a
paragraph often starts with its subject), as in open-domain retrieval and as in
``hotpot-single`` (``compression.py`` reports how many do).

Rows are skipped when the normalised answer (``qa_sets.normalise``, the
benchmark's own) is empty, is yes or no, is in the question (the question gives
it away), or when fewer than nine pool paragraphs lack it (a one-letter answer
such as "P" is in almost every paragraph); the answer is then in the gold
passage and in no distractor by construction. Each question keeps the first of
SQuAD's gold answers.

Source: SQuAD 2.0 development set (Rajpurkar, Jia and Liang 2018), CC BY-SA 4.0,
as stored in the public repository ``VinACE/san_mrc`` at ``dev-v1.1.json``
(commit e2b92bf2c37efe3d7349a1d3518aa67d5619c09a; the file's ``version`` field
says v2.0). ``raw/squad-dev-extract.jsonl`` is an extract of it, copied by hand
through a file reader, in the stored file's order: all 39 paragraphs of
*Normans*; of *Computational complexity theory* the first 11, a later run of
nine (from the hierarchy theorems to Ladner's theorem) and the last one (Blum,
Cook, Karp), the paragraphs between them not read; the first 31 of *Southern
California* (up to San Diego's business districts). Each paragraph's text is
unchanged, with its answerable questions, their SQuAD ids and first gold
answers; the unanswerable (``is_impossible``) questions were left out. This
file, a derived work, is CC BY-SA 4.0 too. capsa was never tuned on these
questions.

Run: ``python benchmarks/data/make_squad_open_qa.py`` (reads the extract beside
this file; writes ``squad-open-qa.jsonl`` beside this file). Deterministic.
"""

from __future__ import annotations

import json
from pathlib import Path

from qa_sets import TfIdf, normalise, row, ten_passages, write

HERE = Path(__file__).resolve().parent
RAW = HERE / "raw" / "squad-dev-extract.jsonl"
OUT = HERE / "squad-open-qa.jsonl"
DISTRACTORS = 9


def main() -> int:
    paragraphs = [json.loads(line) for line in RAW.read_text("utf-8").splitlines()]
    corpus = [(p["title"].replace("_", " "), p["context"]) for p in paragraphs]
    normalised = [normalise(text) for _, text in corpus]
    tfidf = TfIdf([f"{title}\n{text}" for title, text in corpus])
    rows, skipped = [], 0
    for best, paragraph in enumerate(paragraphs):
        for squad_id, question, answer in paragraph["qas"]:
            gold = normalise(answer)
            if gold in ("", "yes", "no") or gold in normalise(question):
                skipped += 1
                continue
            cosine = tfidf.similarity(question)
            found = ten_passages(corpus, normalised, gold, best, cosine, squad_id, DISTRACTORS)
            if len(found) < DISTRACTORS + 1:
                skipped += 1
                continue
            rows.append(row(f"squad-open-{squad_id}", question, answer, found))
    write(rows, OUT)
    print(f"wrote {len(rows)} questions over {len(corpus)} paragraphs to {OUT} "
          f"({skipped} skipped)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
