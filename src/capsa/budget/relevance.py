"""Relevance: how well a sentence or a passage answers the query.

A `Scorer` turns a query and a list of texts into one number per text, higher
meaning more relevant. The packer calls it twice per packing, once over every
sentence and once over the whole passages, and combines both with the
retriever's own score (see `capsa.budget.compress`).

`LexicalScorer`, the default, is BM25 over the texts it is given, with
stemming-light matching (plurals, ``-ed``, ``-ing``), an English stop list and
per-character matching for CJK. It needs no model and is deterministic.
`EmbeddingScorer` wraps any embedding function and scores by cosine similarity.
"""

from __future__ import annotations

import itertools
import math
import operator
import re
import threading
import unicodedata
import urllib.parse
import zipfile
from collections import Counter, OrderedDict
from collections.abc import Callable, Collection, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator

from capsa.budget.tokens import as_tokenizer, estimate_tokens
from capsa.errors import ScorerError

__all__ = ["EmbeddingScorer", "LexicalScorer", "Scorer", "analyze_query", "batches", "fold",
           "known_words", "mend", "passage_scores_of", "respell", "scores_of"]

_WORD = re.compile(r"\w(?:(?<=\d)\d*(?:\.\d+)+|\w*)")
"""A word: a dotted number whole (``3.0``, ``2.6.1``: "0.3" is not "3.0"), else a ``\\w+`` run.

Written ``\\d+(?:\\.\\d+)+|\\w+`` it finds the same words, but a pattern that opens with
one character class lets the engine skip to the next word character in one scan
instead of trying both branches at every space and mark: a fifth faster."""
_PIECE = re.compile(r"\w+|[^\w\s]")
"""A word or a punctuation mark: about one model token each."""
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_STOPWORDS = frozenset({
    "a", "about", "above", "after", "again", "against", "all", "also", "am", "an", "and", "any",
    "are", "as", "at", "be", "been", "before", "being", "below", "between", "both", "but", "by",
    "can", "could", "did", "do", "does", "doing", "down", "during", "each", "few", "for", "from",
    "further", "had", "has", "have", "having", "he", "her", "here", "hers", "him", "his", "how",
    "i", "if", "in", "into", "is", "it", "its", "itself", "just", "me", "more", "most", "my", "no",
    "nor", "not", "of", "off", "on", "once", "only", "or", "other", "our", "ours", "out", "over",
    "own", "same", "she", "should", "so", "some", "such", "than", "that", "the", "their", "theirs",
    "them", "then", "there", "these", "they", "this", "those", "through", "to", "too", "under",
    "until", "up", "very", "was", "we", "were", "what", "when", "where", "which", "while", "who",
    "whom", "whose", "why", "will", "with", "would", "you", "your", "yours",
})


@runtime_checkable
class Scorer(Protocol):
    """Scores texts against a query; higher is more relevant.

    Implementations must be deterministic and return one finite number per
    text, in order. The scale is free: the packer normalises by the largest
    score of each call, and treats negative scores as zero.
    """

    def score(self, query: str, texts: Sequence[str]) -> Sequence[float]:
        """Return one relevance score per text."""
        ...


def scores_of(scorer: Scorer, query: str, texts: Sequence[str]) -> list[float]:
    """`scorer.score(query, texts)`, held to the `Scorer` contract: one finite number per text.

    The packer calls every scorer through here (and `passage_scores_of`), so a
    scorer that answers with too few or too many scores, or a NaN, fails at
    once with a `ScorerError` that names it, instead of ranking the wrong
    sentence or failing later as a bare `IndexError`.

    Raises:
        ScorerError: the wrong number of scores, or one that is not a finite number.

    Examples:
        >>> scores_of(LexicalScorer(), "hotel", ["hotel cap", "trains"])[1]
        0.0
    """
    return _checked(scorer, "score", scorer.score(query, texts), len(texts))


def source_words(source: str | None) -> str:
    """What a passage's source says it is about, as words a scorer can match.

    A retriever over titled passages (Wikipedia's, DPR's) scores each
    passage under its title, because a passage past an article's first lines
    rarely names its subject again: "It was made at Cinecittà in Rome" is
    about *Tosca (1956 film)* only by its title. capsa reads `Passage.source`
    that way: a title as it is, a file or a URL by its last name, without
    directories, query, extension or underscores (``Kiss_and_Tell`` in a
    wiki URL is three words). The packer adds these words to the whole
    passage's score, never to a sentence's, so a source can lift a passage
    that is about the question, not make one of its sentences relevant.

    Examples:
        >>> source_words("Tosca (1956 film)")
        'Tosca (1956 film)'
        >>> source_words("/srv/tenants/acme/q3_travel-policy.pdf")
        'q3 travel-policy'
        >>> source_words("https://en.wikipedia.org/wiki/Kiss_and_Tell_(1945_film)?x=1")
        'Kiss and Tell (1945 film)'
        >>> source_words(None)
        ''
    """
    if not source:
        return ""
    text = source.strip()
    if "://" in text:
        location = urllib.parse.unquote(re.split(r"[?#]", text.split("://", 1)[1], maxsplit=1)[0])
        text = location.rstrip("/").rsplit("/", 1)[-1]
    else:
        text = text.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]
    stem, dot, extension = text.rpartition(".")
    if dot and stem and extension.isalnum() and len(extension) <= 5 and not extension.isdigit():
        text = stem
    return " ".join(text.replace("_", " ").split())


def heading_words(source: str | None, title: str | None = None) -> str:
    """What a passage is scored under: its `source_words`, and its title when that adds words.

    Examples:
        >>> heading_words("https://example.com/p/8412", "Resetting the router")
        'Resetting the router (8412)'
        >>> heading_words("Tosca (1956 film)", "Tosca (1956 film)")
        'Tosca (1956 film)'
        >>> heading_words(None, None)
        ''
    """
    named = source_words(source)
    titled = " ".join((title or "").split())
    if not titled or titled.casefold() in named.casefold():
        return named
    if not named or named.casefold() in titled.casefold():
        return titled
    return f"{titled} ({named})"


def passage_scores_of(scorer: Scorer, query: str, passages: Sequence[str],
                      sentences: Sequence[Sequence[str]]) -> list[float]:
    """Whole passages' scores: from their sentences where the scorer can (`score_passages`).

    A scorer with a ``score_passages(query, passages, sentences)`` method
    (`EmbeddingScorer`) scores passages from its sentences' cached vectors;
    any other is asked `score` over the passage texts. Checked as `scores_of`.

    Raises:
        ScorerError: the wrong number of scores, or one that is not a finite number.
    """
    pooled = getattr(scorer, "score_passages", None)
    if callable(pooled):
        return _checked(scorer, "score_passages", pooled(query, passages, sentences),
                        len(passages))
    return scores_of(scorer, query, passages)


def _checked(scorer: object, method: str, scores: object, expected: int) -> list[float]:
    name = f"{type(scorer).__name__}.{method}"
    try:
        values = [float(s) for s in scores]  # type: ignore[attr-defined]
    except (TypeError, ValueError) as error:
        raise ScorerError(f"{name} returned {type(scores).__name__} for {expected} texts, "
                          f"not one number per text: {error}", scorer=type(scorer).__name__,
                          expected=expected, got=0) from error
    if len(values) != expected:
        raise ScorerError(f"{name} returned {len(values)} scores for {expected} texts; "
                          f"a scorer returns one score per text, in order",
                          scorer=type(scorer).__name__, expected=expected, got=len(values))
    for n, value in enumerate(values):
        if not math.isfinite(value):
            raise ScorerError(f"{name} returned {value} for text {n + 1} of {expected}; "
                              f"scores must be finite numbers", scorer=type(scorer).__name__,
                              expected=expected, got=len(values))
    return values


class LexicalScorer(BaseModel):
    """BM25 over the given texts, with light stemming; the default scorer.

    Document frequencies come from the texts of the call itself (the sentences
    or passages being packed), so no corpus statistics are needed. Each query
    term counts once, however often the query repeats it.

    Examples:
        >>> scorer = LexicalScorer()
        >>> scores = scorer.score("hotel cap", ["The hotel cap is EUR 165.", "Trains are fine."])
        >>> scores[0] > scores[1] == 0.0
        True
    """

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    k1: float = Field(default=0.3, ge=0.0)
    """Term-frequency saturation: 0 counts each matched term once, higher rewards repeats."""
    b: float = Field(default=0.2, ge=0.0, le=1.0)
    """Length normalisation: 0 ignores length, 1 fully penalises long texts."""

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        """Return the BM25 score of each text for the query's distinct terms."""
        query_terms = set(analyze_query(query))
        if not query_terms or not texts:
            return [0.0] * len(texts)
        docs = [analyze(text) for text in texts]
        return self.score_terms(idf(query_terms, docs), docs)

    def score_terms(self, weights: dict[str, float],
                    docs: Sequence[Sequence[str]]) -> list[float]:
        """`score` from texts already analysed, given the query terms' `idf` over them.

        The packer calls this with the terms it already holds (see
        `capsa.budget.compress.prepare`), so no text is analysed twice.
        """
        if not weights or not docs:
            return [0.0] * len(docs)
        average = sum(len(doc) for doc in docs) / len(docs) or 1.0
        scores = []
        for doc in docs:
            if weights.keys().isdisjoint(doc):  # most sentences match no query term
                scores.append(0.0)
                continue
            counts: dict[str, int] = {}
            for term in doc:
                if term in weights:
                    counts[term] = counts.get(term, 0) + 1
            norm = self.k1 * (1.0 - self.b + self.b * len(doc) / average)
            scores.append(
                sum(
                    (w * counts[t] * (self.k1 + 1.0) / (counts[t] + norm)
                     for t, w in weights.items() if t in counts),
                    0.0,
                )
            )
        return scores


class EmbeddingScorer(BaseModel):
    """Scores by cosine similarity of embeddings, blended with lexical BM25.

    `embed` is any function from a list of strings to a list of vectors, such
    as LangChain's ``Embeddings.embed_documents`` or a sentence-transformers
    model's ``encode``. It is called only with the texts not seen yet (the
    query among them), in a few calls of similar length (see `batches`), so a
    local model wastes little on padding; set `batch_overhead` to None for one
    call. Vectors are cached by text (up to `cache_size` texts, least recently
    used first out), so packing the same passages for several budgets or
    receivers embeds each sentence and each passage once.

    Embeddings catch paraphrase that term matching misses; term matching
    catches names, numbers and rare words that small embedding models blur.
    So by default half of each score is `LexicalScorer`'s (each part divided by
    its best value in the call); set `lexical_weight` to 0 for cosine alone.
    The cosine part counts only how far a text stands above the call's
    `baseline`, so the packer's relevance floor and second-hop evidence work
    on it as they do on term matches.

    Examples:
        >>> def embed(texts):
        ...     return [[float("hotel" in t), float("train" in t), 1.0] for t in texts]
        >>> scorer = EmbeddingScorer(embed=embed, lexical_weight=0.0)
        >>> scorer.score("hotel", ["hotel cap", "train"])[0] > 0.8
        True
    """

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    embed: Callable[[Sequence[str]], Sequence[Sequence[float]]]
    """Embedding function: texts in, one vector per text out."""
    lexical_weight: float = Field(default=0.5, ge=0.0, le=1.0)
    """Share of the score that comes from `LexicalScorer`; 0 for cosine similarity alone."""
    baseline: float = Field(default=0.33, ge=0.0, le=1.0)
    """Share of each call's texts whose cosine counts as no relevance at all.

    A small model finds every text of a topic somewhat similar to the query:
    cosines crowd into a narrow band, and divided by the best one they would
    make every sentence look relevant, defeating the packer's relevance floor
    and its second-hop evidence, which act on the sentences that score above
    zero. So the cosine at this quantile of the call is subtracted first (the
    rest divided by what the best text has left): with the default, the least
    similar third of the texts scores zero from the embedding. 0 keeps all but
    the least similar. Set on HotpotQA's two halves and pydocs-qa (anything
    from a quarter to a half does about as well)."""
    lexical: LexicalScorer = Field(default_factory=LexicalScorer)
    """The lexical half's settings."""
    cache_size: int = Field(default=20_000, ge=0)
    """Most texts whose vectors are kept; 0 embeds every text on every call."""
    batch_overhead: int | None = Field(default=30, ge=0)
    """What one more `embed` call costs, in tokens of padding (see `batches`).

    The default suits a local model, which pads each call's texts to the
    longest one and spends a few milliseconds a call (all-MiniLM-L6-v2 on one
    CPU thread: about as long as 30 tokens of text). None sends all texts in
    one call, for a remote API that charges per token and per round trip."""
    tokenizer: Any = None
    """The embedding model's own token counter, to group texts into calls of similar length.

    Any form `as_tokenizer` takes; a sentence-transformers model's is
    ``model.tokenizer``. Texts are sorted by it before `batches` cuts them into
    calls, so a call pads to its own longest text in the model's tokens; word
    pieces part from `estimate_tokens` on rare words and code, and sorted by the
    estimate, all-MiniLM-L6-v2's calls carried 10 to 15 % more padding on
    HotpotQA and pydocs-qa. None sorts by `estimate_tokens`."""
    max_words: int | None = Field(default=24, ge=1)
    """Texts are embedded by their first `max_words` words and punctuation marks.

    A sentence's opening says what it is about; the long ones are mostly code,
    lists and tables, where the rest adds cost (a model's time grows with the
    tokens it reads) more than meaning. Words and punctuation marks, not
    characters, because code spends a model token on every bracket. On
    HotpotQA and pydocs-qa, 24 kept as many answers as embedding every
    sentence whole, for less CPU time. The query is always embedded whole;
    None embeds texts whole."""

    passage_words: int = Field(default=256, ge=0)
    """Passages are embedded by their first `passage_words` words and marks; 0 embeds none.

    The packer weighs every sentence by its passage's score (see
    `capsa.budget.compress`), and a passage's own vector, read in context,
    ranks passages better than the mean of its sentences' vectors, each
    embedded alone by its opening: a sentence's "it" or "the company" names
    nothing by itself. On the fourteen sets of ``benchmarks/compression.py``
    with all-MiniLM-L6-v2, embedding the passages kept 23, 34 and 12 more
    answers of 1,425 development questions at 10, 25 and 50 % of the tokens
    (both halves gained at every budget), and 11, 11 and 6 more of the 685
    set aside; the more of a passage embedded, the more kept (48 words: 4,
    27 and 11). It doubles the model's work, as much text again as the
    sentences' openings. The default holds everything all-MiniLM-L6-v2 reads
    (256 word pieces, each word or mark at least one). 0 embeds no passage and
    scores one by the mean of its sentences' vectors instead: half the model
    time, fewer answers."""

    _cache: OrderedDict[str, tuple[float, ...]] = PrivateAttr(default_factory=OrderedDict)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    @field_validator("tokenizer")
    @classmethod
    def _counts_tokens(cls, value: Any) -> Any:
        """Refuse what cannot count now, not at the first packing (`as_tokenizer` raises)."""
        as_tokenizer(value)
        return value

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        """Return each text's cosine similarity to the query, blended with BM25."""
        if not texts:
            return []
        head, *vectors = self.vectors([query, *map(self._opening, texts)])
        return self._blend(query, texts, head, vectors)

    def score_passages(self, query: str, passages: Sequence[str],
                       sentences: Sequence[Sequence[str]]) -> list[float]:
        """Score whole passages by their own vectors, or by their sentences' (`passage_words` 0).

        A passage is embedded by its first `passage_words` words and marks; with
        0, its vector is the mean of its sentences' unit vectors, already cached,
        and no passage is embedded. The lexical half scores the passage text as
        `score` would. The packer calls this when a scorer has it (see
        `capsa.budget.compress.prepare`).
        """
        if not passages:
            return []
        if self.passage_words:
            head, *vectors = self.vectors(
                [query, *(_opening(p, self.passage_words) for p in passages)])
            return self._blend(query, passages, head, vectors)
        head, *flat = self.vectors([query, *(self._opening(s) for group in sentences
                                             for s in group)])
        pooled: list[tuple[float, ...]] = []
        position = 0
        for group in sentences:
            members = flat[position:position + len(group)]
            position += len(group)
            pooled.append(_unit([sum(column) for column in zip(*members, strict=True)])
                          if members else ())
        return self._blend(query, passages, head, pooled)

    def _opening(self, text: str) -> str:
        """What is embedded of a text: its first `max_words` words and marks."""
        return text if self.max_words is None else _opening(text, self.max_words)

    def _blend(self, query: str, texts: Sequence[str], head: Sequence[float],
               vectors: Sequence[Sequence[float]]) -> list[float]:
        cosine = _contrast([sum(map(operator.mul, head, vector)) if vector else 0.0
                            for vector in vectors], self.baseline)
        if self.lexical_weight == 0.0:
            return cosine
        lexical = _scaled(self.lexical.score(query, texts))
        weight = self.lexical_weight
        return [(1.0 - weight) * c + weight * w for c, w in zip(cosine, lexical, strict=True)]

    def vectors(self, texts: Sequence[str]) -> list[tuple[float, ...]]:
        """Unit-length vectors of `texts`, embedding only those not cached yet.

        Raises:
            ScorerError: `embed` returned the wrong number of vectors.
        """
        found: dict[str, tuple[float, ...]] = {}
        with self._lock:
            for text in texts:
                vector = self._cache.get(text)
                if vector is not None:
                    found[text] = vector
                    self._cache.move_to_end(text)
        missing = list(dict.fromkeys(text for text in texts if text not in found))
        length = as_tokenizer(self.tokenizer)
        for batch in batches(missing, self.batch_overhead, length=length):
            fresh = self.embed(batch)
            if len(fresh) != len(batch):
                name = getattr(self.embed, "__qualname__", type(self.embed).__name__)
                raise ScorerError(f"{type(self).__name__}.embed ({name}) returned {len(fresh)} "
                                  f"vectors for {len(batch)} texts", scorer=type(self).__name__,
                                  expected=len(batch), got=len(fresh))
            with self._lock:
                for text, raw in zip(batch, fresh, strict=True):
                    found[text] = self._cache[text] = _unit(raw)
                while len(self._cache) > self.cache_size:
                    self._cache.popitem(last=False)
        return [found[text] for text in texts]


def batches(texts: Sequence[str], overhead: int | None, largest: int = 32, *,
            length: Callable[[str], int] = estimate_tokens) -> list[list[str]]:
    """`texts` in calls of similar length, so a model that pads each call wastes little.

    A local transformer pads every text of a call to the call's longest, and
    computes over the padding as over text: one call mixing a ten-word
    sentence with a hundred-word one pays for eleven long ones. Sorted by
    `length` (best the model's own tokenizer; `estimate_tokens`, which at least
    counts punctuation and code as tokenizers do, unlike characters) and cut
    where the padding saved outweighs `overhead` (what one more call costs, in
    tokens), the calls cost least in total; cuts are chosen exactly, by dynamic
    programming over at most `largest` texts a call. With `overhead` None,
    everything goes in one call, in the given order.

    Examples:
        >>> batches(["a much longer text than the others", "short", "tiny"], overhead=2)
        [['short', 'tiny'], ['a much longer text than the others']]
        >>> batches(["a much longer text than the others", "short", "tiny"], overhead=None)
        [['a much longer text than the others', 'short', 'tiny']]
    """
    if not texts:
        return []
    if overhead is None:
        return [list(texts)]
    sizes = {text: length(text) for text in texts}
    ordered = sorted(texts, key=sizes.__getitem__)
    # best[j]: least cost of sending ordered[:j]; a call's cost is overhead plus
    # its size times its longest text, the last one since they are sorted
    best = [0.0] + [math.inf] * len(ordered)
    cut = [0] * (len(ordered) + 1)
    for j in range(1, len(ordered) + 1):
        longest = sizes[ordered[j - 1]]
        for i in range(max(0, j - largest), j):
            cost = best[i] + overhead + (j - i) * longest
            if cost < best[j]:
                best[j], cut[j] = cost, i
    bounds = []
    j = len(ordered)
    while j:
        bounds.append((cut[j], j))
        j = cut[j]
    return [ordered[i:j] for i, j in reversed(bounds)]


def analyze(text: str) -> tuple[str, ...]:
    """Lower-case, split, drop stop words and stem: the terms BM25 matches on.

    CJK characters become one term each, since those scripts do not separate
    words with spaces. Sentence-sized texts are cached, since packing analyses
    each sentence more than once; long texts are not, to bound memory.

    Examples:
        >>> analyze("The hotels were booked")
        ('hotel', 'book')
    """
    if len(text) > _CACHED_TEXT_CHARS:
        return _analyze_cached.__wrapped__(text)
    return _analyze_cached(text)


_CACHED_TEXT_CHARS = 2000


def analyze_query(query: str) -> tuple[str, ...]:
    """The terms of a query, as `analyze` gives them, without a how-to's causative verb.

    "How do I make tar delete files?" asks about tar and deleting; the "make"
    (or get, have, let, tell) only says the user wants something done, and as
    a term it matches every text about make(1), or about making anything.

    Examples:
        >>> analyze_query("How do I make tar delete the files?")
        ('tar', 'delet', 'fil')
        >>> analyze_query("Which company did make the film?")
        ('company', 'mak', 'film')
    """
    return analyze(_HOW_TO.sub(r"\1", query))


_HOW_TO = re.compile(r"\b(how (?:do|can|could|should|would|might|does) (?:i|we|you|one|it|they)"
                     r"|how to) (?:make|get|have|let|tell)\b", re.IGNORECASE)


@lru_cache(maxsize=8192)
def _analyze_cached(text: str) -> tuple[str, ...]:
    return terms_of(_WORD.findall(mend(text.lower())))


_MENDED = re.compile(r"[-\u2010](?<=[^\W\d_][-\u2010])\n[ \t]*(?=[^\W\d_])|\u00ad"
                     r"|['\u2019](?<=\w['\u2019])s\b")
"""A line-end hyphen between letters, a soft hyphen, a possessive 's; each
alternative opens with its rare character, so a scan does not stop at every letter."""


def mend(text: str) -> str:
    """`text` with words made whole before they are split into terms.

    Justified text breaks words at line ends: man pages with groff's U+2010
    (``com‐\\n   mands``), PDFs with a hyphen-minus, and soft hyphens (U+00AD)
    mark where a word may break. Left in, each gives two non-words, and the
    sentence loses the term it holds. A possessive ``'s`` goes too, so
    "gzip's" is the term ``gzip`` and not also an ``s`` that every ``-s`` flag
    and possessive shares. A letter stored as its base and a combining accent
    (decomposed, as macOS file names and some PDFs store text) is composed
    first: the accent is no word character, and would split a decomposed
    "Zurich" with an umlaut in two. Only for matching: kept text is never changed.

    Examples:
        >>> mend("the com\u2010\\n   mands of gzip's")
        'the commands of gzip'
        >>> mend("zu\u0308rich") == "z\u00fcrich"
        True
    """
    if not text.isascii() and not unicodedata.is_normalized("NFC", text):
        text = unicodedata.normalize("NFC", text)
    if "\n" in text or "'" in text or "\u2019" in text or "\u00ad" in text:
        return _MENDED.sub("", text)
    return text  # most sentences: four scans, not a regular expression's walk


def terms_of(words: Sequence[str]) -> tuple[str, ...]:
    """The terms of lower-cased words (``\\w+`` runs), as `analyze` gives them for their text."""
    try:  # most words are known: one pass in C
        return tuple(itertools.chain.from_iterable(map(_TERMS.__getitem__, words)))
    except KeyError:
        pass
    parts = list(map(_TERMS.get, words))
    if None in parts:
        if len(_TERMS) > _TERM_CACHE_SIZE:
            _TERMS.clear()
        for n, part in enumerate(parts):
            if part is None:
                term = _term(words[n])
                parts[n] = _TERMS[words[n]] = tuple(term.split(" ")) if term else ()
    return tuple(itertools.chain.from_iterable(parts))  # type: ignore[arg-type]


_TERMS: dict[str, tuple[str, ...]] = {}
"""Each word's terms, as `_term` spells them split: () for a stop word."""
_TERM_CACHE_SIZE = 200_000


def _term(word: str) -> str:
    """The term(s) of one lower-cased word, space-separated; "" for a stop word."""
    if not word.isascii():
        if _CJK.search(word):
            return " ".join(ch for ch in word if ch != "_")
        folded = fold(word)
        if _WORD.fullmatch(folded):  # not a spacing mark's form ("ﹰ" folds to a space)
            word = folded
    word = word.strip("_")
    if not word or word in _STOPWORDS:
        return ""
    if "." in word:  # a dotted number (`_WORD`): itself, and its leading part for "Python 3"
        return f"{word} {word.split('.', 1)[0]}"
    return _stem(word)


def fold(word: str) -> str:
    """A lower-cased word with its Latin letters' accents taken off, for matching.

    People type "cafe", "Pokemon" and "Sao Paulo" for what a text spells
    "café", "Pokémon" and "São Paulo", and the other way round; as terms the
    two spellings would never meet. So a Latin letter loses its combining
    marks, the letters no decomposition reaches are spelled out (ß, æ, œ, ø,
    ł, đ, ð, þ, ı), and compatibility forms (full-width letters, ligatures)
    become plain ones, as search engines' ASCII folding does. Marks on other
    scripts' letters stay, since there a mark can make another letter ("й"
    is not an accented "и"). Only for matching: kept text is never changed.

    Examples:
        >>> fold("fiancée"), fold("straße"), fold("ｆｉｌｅ"), fold("йод")
        ('fiancee', 'strasse', 'file', 'йод')
    """
    kept: list[str] = []
    for char in unicodedata.normalize("NFKD", word):
        if kept and unicodedata.combining(char) and kept[-1].isascii():
            continue
        kept.append(char)
    return unicodedata.normalize("NFC", "".join(kept)).translate(_LATIN_LETTERS)


_LATIN_LETTERS = str.maketrans({"ß": "ss", "æ": "ae", "œ": "oe", "ø": "o", "ł": "l", "đ": "d",
                                "ð": "d", "þ": "th", "ı": "i"})
"""Latin letters that Unicode does not decompose into a base letter and a mark."""


def respell(query: str, words: Sequence[Sequence[str]],
            present: Collection[str] | None = None,
            ) -> tuple[str, tuple[tuple[str, str], ...]]:
    """The query with each misspelt word read as the passages' word one edit away.

    People mistype ("recieve", "Eurpean", "snowbaorder"), and a misspelt word
    matches no term, so the sentence that answers loses the question's
    rarest word, often the only one it shared with it. This is search
    engines' fuzzy matching (Lucene's, at one edit), held to words that are
    plainly typos. A query word is respelt only when

    - it has `_RESPELL_LETTERS` letters or more, all Latin (no number: 1979
      is not a typo of 1978);
    - no passage holds any of its terms;
    - a passage word is one edit from it (a letter dropped, added or
      changed, or two neighbours swapped, as Damerau counts them) and starts
      with the same letter, where people seldom slip;
    - it is not a word of English (`known_words`): "country" is asked about,
      not mistyped for "county", even where only "county" is written. A word
      of English is read only as its other spelling, British for American or
      the other way round ("colour" as "color", "organise" as "organize",
      "centre" as "center": `_variant`), so a question typed in London finds
      a manual written in Boston.

    It is read as that word; as the commonest of them when several are. A
    query the passages match already is returned as it is.

    Args:
        query: the question, as the caller wrote it.
        words: every sentence's lower-cased words (``\\w+`` runs).
        present: the query's terms that some passage holds, when already counted
            (`document_frequency`); else found from `words`.

    Returns:
        The query, respelt, and each ``(typed, read as)`` pair, in query order.

    Examples:
        >>> respell("Who did she recieve it from?", [["she", "did", "receive", "it"]])
        ('Who did she receive it from?', (('recieve', 'receive'),))
        >>> respell("Which codec does it encode?", [["decode", "codec"]])[1]
        ()
    """
    asked = [m for m in _QUERY_WORD.finditer(query) if len(m.group()) >= _RESPELL_LETTERS]
    known = known_words() if asked else frozenset()
    if not known:  # no word long enough, or no vocabulary to tell typos by
        return query, ()
    held: Collection[str] | None = present
    vocabulary: dict[tuple[str, int], list[str]] | None = None
    looked = 0
    pairs: list[tuple[str, str]] = []
    pieces: list[str] = []
    last = 0
    for match in asked:
        typed = match.group()
        lowered = typed.lower()
        english = lowered in known
        if english and not _VARIANT_LETTERS.search(lowered):
            continue  # a word of English with no spelling variant: asked about, not mistyped
        if held is None:
            held = set(itertools.chain.from_iterable(map(terms_of, words)))
        terms = terms_of([lowered])
        if not terms or any(t in held for t in terms) or not fold(lowered).isascii():
            continue
        looked += 1
        if looked > _RESPELL_MOST:
            break  # a pasted log or listing, not a typed question: its odd words are no typos
        if vocabulary is None:  # the passages' words by first letter and length
            vocabulary = {}
            for w in set(itertools.chain.from_iterable(words)):
                if len(w) >= _RESPELL_LETTERS - 1 and w.isalpha():
                    vocabulary.setdefault((w[0], len(w)), []).append(w)
        first, size = lowered[0], len(lowered)
        near = [w for length in (size - 1, size, size + 1)
                for w in vocabulary.get((first, length), ())
                if (_variant(lowered, w) if english else _one_edit(lowered, w))]
        if not near:
            continue
        if len(near) > 1:
            wanted = set(near)
            frequency = Counter(w for sentence in words for w in sentence if w in wanted)
            near.sort(key=lambda w: (-frequency[w], w))
        read = near[0]
        if typed[:1].isupper():
            read = typed[0] + read[1:]
        pairs.append((typed, read))
        pieces += [query[last:match.start()], read]
        last = match.end()
    if not pairs:
        return query, ()
    return "".join([*pieces, query[last:]]), tuple(pairs)


_RESPELL_LETTERS = 5
"""Fewest letters of a query word worth respelling: shorter words are one edit from many."""
_RESPELL_MOST = 16
"""Most query words looked up: a question holds a typo or two, and a query with more
words that no passage holds is pasted text, where the look-ups would only cost time."""
_QUERY_WORD = re.compile(r"\b[^\W\d_]+\b")


@lru_cache(maxsize=1)
def known_words() -> frozenset[str]:
    """Words of English as people spell them: the whole words of BERT's vocabulary.

    The vocabulary that `capsa.budget.StaticScorer`'s vectors ship with
    (``data/static-minilm-128.npz``) holds some twenty thousand common words
    whole (a rare or misspelt word it holds only in pieces), which is the
    line `respell` needs. Read here without numpy, from the archive's raw
    bytes; empty if the file cannot be read, so nothing is respelt then.
    """
    try:
        with zipfile.ZipFile(_VOCABULARY) as archive:
            raw = archive.read("vocab.npy")
        wide = raw[6] > 1  # .npy: magic, version, the header's size in 2 bytes (4 from 2.0)
        header = (12 + int.from_bytes(raw[8:12], "little") if wide
                  else 10 + int.from_bytes(raw[8:10], "little"))
        pieces = raw[header:].decode("utf-8").split("\n")
    except (OSError, KeyError, IndexError, UnicodeDecodeError, zipfile.BadZipFile):
        return frozenset()
    return frozenset(p for p in pieces if p.isalpha() and p.islower())


_VOCABULARY = Path(__file__).resolve().parent / "data" / "static-minilm-128.npz"


def _variant(a: str, b: str) -> bool:
    """Whether `a` and `b` are one word's British and American spellings, either way round.

    Each is one edit of a known kind: colour and color, organise and organize
    (analyse, analyze), centre and center (kilometres, kilometers), defence
    and defense, travelled and traveled. A word of English is respelt only so.

    Examples:
        >>> _variant("colours", "colors"), _variant("kilometres", "kilometers")
        (True, True)
        >>> _variant("filling", "filing"), _variant("hours", "hors"), _variant("acres", "acers")
        (False, False, False)
    """
    edit = _edit(a, b)
    if edit is None:
        return False
    kind, k = edit
    if kind == "changed":  # organise/organize, analyse/analyze; defence/defense
        pair = {a[k], b[k]}
        return ((pair == {"s", "z"} and a[k - 1] in "iy" and a[k + 1:k + 2] in ("e", "a", "i"))
                or (pair == {"c", "s"} and a[k - 2:k] == "en" and a[k + 1:k + 2] == "e"))
    if kind == "swapped":  # centre/center, metres/meters
        return ({a[k:k + 2], b[k:k + 2]} == {"re", "er"} and k >= 3
                and a[k + 2:] in ("", "s", "d") and a[k - 1] not in "aeiou")
    long = a if len(a) > len(b) else b  # colour/color: the u of -our; travelled: an e's 2nd l
    return ((long[k] == "u" and k >= 3 and long[k - 1] == "o" and long[k + 1:k + 2] == "r")
            or (long[k] == "l" and long[k - 2:k] == "el" and long[k + 1:k + 2] in ("e", "i")))


_VARIANT_LETTERS = re.compile(r"ou?r|[iy][sz][eai]|[^aeiou](?:re|er)[sd]?$|en[cs]e|ell?[ei]")
"""Where a British and an American spelling part (`_variant`): a word without any of
these has one spelling, and a word of English without them is never respelt."""


def _one_edit(a: str, b: str) -> bool:
    """Whether `b` is `a` with one letter dropped, added or changed, or two neighbours swapped."""
    return _edit(a, b) is not None


def _edit(a: str, b: str) -> tuple[str, int] | None:
    """The one edit between `a` and `b`, as Damerau counts it, and where; None for none or more.

    ``("changed", k)``: the letter at `k` differs; ``("swapped", k)``: the letters at `k`
    and `k + 1` trade places; ``("added", k)``: the longer word has one more letter, at `k`.
    """
    if a == b or abs(len(a) - len(b)) > 1:
        return None
    if len(a) == len(b):
        diffs = [k for k in range(len(a)) if a[k] != b[k]]
        if len(diffs) == 1:
            return "changed", diffs[0]
        k = diffs[0]
        if diffs == [k, k + 1] and a[k] == b[k + 1] and a[k + 1] == b[k]:
            return "swapped", k
        return None
    short, long = (a, b) if len(a) < len(b) else (b, a)
    k = 0
    while k < len(short) and short[k] == long[k]:
        k += 1
    return ("added", k) if short[k:] == long[k + 1:] else None


def idf(query_terms: set[str], docs: Sequence[Sequence[str]],
        frequency: dict[str, int] | None = None) -> dict[str, float]:
    """Return the BM25 inverse document frequency of each query term over `docs`.

    `frequency`, when given, is `document_frequency(query_terms, docs)`, already counted.
    """
    total = len(docs)
    if frequency is None:
        frequency = document_frequency(query_terms, docs)
    return {
        term: math.log(1.0 + (total - frequency[term] + 0.5) / (frequency[term] + 0.5))
        for term in sorted(query_terms)
    }


def document_frequency(query_terms: set[str], docs: Sequence[Sequence[str]]) -> dict[str, int]:
    """How many of `docs` hold each query term."""
    frequency = dict.fromkeys(query_terms, 0)
    for doc in docs:
        for term in query_terms.intersection(doc):
            frequency[term] += 1
    return frequency


def _stem(word: str) -> str:
    """Strip the commonest English inflections, so "seated" matches "seat"."""
    if len(word) <= 3 or not word.isalpha():
        return word
    if word.endswith("sses"):
        word = word[:-2]
    elif word.endswith("ies") and len(word) > 4:
        word = word[:-3] + "y"
    elif word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    if word.endswith("ing") and len(word) > 5:
        word = word[:-3]
    elif word.endswith("ed") and len(word) > 4:
        word = word[:-2]
    if word.endswith("e") and len(word) > 3:
        word = word[:-1]
    return word


def _opening(text: str, limit: int) -> str:
    """`text` up to the end of its `limit`-th word or punctuation mark (`_PIECE`).

    Examples:
        >>> _opening("Tosca was made in Rome, in 1956.", 5)
        'Tosca was made in Rome'
    """
    if len(text) <= limit:  # no more pieces than characters
        return text
    pieces = list(itertools.islice(_PIECE.finditer(text), limit + 1))
    return text if len(pieces) <= limit else text[:pieces[limit - 1].end()]


def _scaled(scores: Sequence[float]) -> list[float]:
    """Negative scores to zero, then divided by the best one (all zero stays zero)."""
    top = max(scores, default=0.0)
    return [max(s, 0.0) / top if top > 0 else 0.0 for s in scores]


def _contrast(cosines: Sequence[float], baseline: float) -> list[float]:
    """Cosines above the `baseline` quantile of the call, divided by the best's lead.

    When no text stands out (all equal, or a single text), the cosines are only
    divided by the best one: there is nothing to contrast them with.
    """
    ordered = sorted(cosines)
    if not ordered:
        return []
    floor, top = ordered[min(len(ordered) - 1, int(len(ordered) * baseline))], ordered[-1]
    if top <= floor:
        return _scaled(cosines)
    return [max(c - floor, 0.0) / (top - floor) for c in cosines]


def _unit(vector: Sequence[float]) -> tuple[float, ...]:
    """The vector scaled to length 1 (all zeros stays all zeros), so a dot product is a cosine.

    An array's own ``tolist`` and `math.hypot` do the per-element work in C: a
    question's sentences are a few hundred vectors of a few hundred floats.

    Examples:
        >>> _unit([3, 4])
        (0.6000000000000001, 0.8)
        >>> _unit((0.0, 0.0))
        (0.0, 0.0)
    """
    tolist = getattr(vector, "tolist", None)
    values = [float(v) for v in (tolist() if callable(tolist) else vector)]
    norm = math.hypot(*values)
    return tuple(map((1.0 / norm).__mul__, values)) if norm else tuple(values)
