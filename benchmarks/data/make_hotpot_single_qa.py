"""Build ``hotpot-single-qa.jsonl``: HotpotQA questions recast as single-hop retrieval.

The held-out set that showed capsa's last rules hurting (issue 21) is single-hop
and open-domain: one passage answers, nine close passages do not. HotpotQA's
distractor rows are multi-hop: two supporting paragraphs, the answer in one of
them. This recasts each row as that shape. The gold passage is the supporting
paragraph that holds the answer; the other supporting paragraph (the bridge) is
left out, so one passage has to be found, not two; the nine distractors are the
paragraphs of the whole 500-row pool most similar to the question by plain
TF-IDF cosine (``qa_sets.TfIdf``, not capsa's scorer) that do not hold the
answer, the row's own distractors among them when they are the closest. The
questions are HotpotQA's own, written by crowd workers, so they paraphrase
their paragraphs instead of copying a span; they still name the bridge, which
a single-hop question would not need.

Rows are skipped when the answer is yes/no or in no supporting paragraph, or in
both (no single gold passage). Unlike the hand-written sets, an answer may open
its gold passage (a paragraph often starts with its title, and the title is
often the answer): that is how open-domain passages are, and a rule that keeps
openings must not be credited for it without a note: ``compression.py`` reports
how many answers open their gold passage.

Source and licence: ``hotpotqa-distractor-500`` (see its README in the shared
eval data; HotpotQA, Yang et al. 2018, CC BY-SA 4.0). This file, a derived
work, is CC BY-SA 4.0 too. capsa's weights were tuned on the questions of
that file in their multi-hop form: treat this set as development data only.

Run: ``python benchmarks/data/make_hotpot_single_qa.py`` (reads the HotpotQA
file from ``CAPSA_EVAL_DATA``, default ``../shared/eval-data`` beside the
repository; writes ``hotpot-single-qa.jsonl`` beside this file).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

from qa_sets import TfIdf, normalise, row, write

OUT = Path(__file__).with_name("hotpot-single-qa.jsonl")
ROOT = Path(__file__).resolve().parents[2]
SOURCE = Path("hotpotqa-distractor-500") / "hotpotqa_dev_distractor_500.jsonl"
DISTRACTORS = 9


def main() -> int:
    data = Path(os.environ.get("CAPSA_EVAL_DATA", ROOT.parent / "shared" / "eval-data"))
    path = data / SOURCE
    if not path.exists():
        print(f"not found: {path} (set CAPSA_EVAL_DATA)", file=sys.stderr)
        return 2
    source = [json.loads(line) for line in path.read_text("utf-8").splitlines()]
    pool: dict[tuple[str, str], int] = {}
    for item in source:
        for context in item["contexts"]:
            pool.setdefault((context["title"], context["paragraph_text"]), len(pool))
    corpus = sorted(pool, key=pool.__getitem__)
    normalised = [normalise(text) for _, text in corpus]
    tfidf = TfIdf([text for _, text in corpus])
    rows = []
    for item in source:
        answer = item["answers_objects"][0]["spans"][0]
        gold = normalise(answer)
        if gold in ("yes", "no") or not gold:
            continue
        holding = [c for c in item["contexts"]
                   if c["is_supporting"] and gold in normalise(c["paragraph_text"])]
        if len(holding) != 1:
            continue
        best = pool[(holding[0]["title"], holding[0]["paragraph_text"])]
        cosine = tfidf.similarity(item["question_text"])
        bridge = {pool[(c["title"], c["paragraph_text"])] for c in item["contexts"]
                  if c["is_supporting"]}
        distractors = sorted((k for k in range(len(corpus))
                              if k not in bridge and gold not in normalised[k]),
                             key=lambda k: (-cosine(k), k))[:DISTRACTORS]
        chosen = [best, *distractors]
        # A seeded order that does not depend on the row's position in the file.
        chosen.sort(key=lambda k: hashlib.sha256(
            f"{item['question_id']}|{corpus[k][0]}|{k}".encode()).hexdigest())
        found = [{"id": str(i), "title": corpus[k][0], "paragraph_text": corpus[k][1],
                  "is_supporting": k == best} for i, k in enumerate(chosen)]
        rows.append(row(f"hotpot-single-{item['question_id']}", item["question_text"],
                        answer, found))
    write(rows, OUT)
    print(f"wrote {len(rows)} questions over {len(corpus)} paragraphs to {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
