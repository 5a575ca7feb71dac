"""Static word embeddings: paraphrase matching at about the cost of term matching.

A sentence transformer reads a whole sentence to place it, which costs a
hundred milliseconds and torch per question on a CPU. `StaticScorer` keeps
BM25's term matching and adds what it lacks: a question word the text does
not contain can be stood in for by one it does ("car" for "automobile",
"movie" for "film"), judged by the cosine of fixed word vectors distilled
once from all-MiniLM-L6-v2 (``scripts/distil_static.py``: each of the
model's word pieces embedded alone, reduced by PCA, weighted down by how
common it is). The vectors ship inside capsa (``capsa/budget/data``,
Apache-2.0, as the model they come from); scoring needs numpy only
(``pip install 'capsa[static]'``), and `import capsa.budget` loads neither.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
import unicodedata
import zipfile
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from capsa._lazy import require
from capsa.budget.relevance import (
    _HOW_TO,
    _STOPWORDS,
    _WORD,
    LexicalScorer,
    analyze_query,
    idf,
    mend,
    terms_of,
)
from capsa.errors import ModelUnreadable

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["MODEL_PATH", "StaticScorer"]

MODEL_PATH = Path(__file__).resolve().parent / "data" / "static-minilm-128.npz"
"""The shipped model: all-MiniLM-L6-v2's word pieces in 128 int8 dimensions."""

_SPLIT = re.compile(r"[^\W_]+|[^\w\s]|_")
"""BERT's pre-tokenisation: runs of letters and digits, each punctuation mark alone."""
_CJK = re.compile(r"([\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff])")
_MAX_WORD_CHARS = 100
"""BERT's limit: a longer word is one unknown piece."""
_WORD_CACHE_SIZE = 200_000
"""Most words whose word pieces are kept."""
_TABLE_ROWS = 50_000
"""Most word vectors kept: 26 MB at 128 float32 dimensions; then the table starts afresh."""


class StaticScorer(BaseModel):
    """BM25 that also credits a query word's near-synonyms, found by static embeddings.

    `LexicalScorer` gives a text nothing for a query word it does not contain,
    however close a word it does contain: "automobile" earns nothing from a
    sentence about a car. This scorer adds that credit. Each query word the
    text lacks is compared with every word the text holds, by the cosine of
    their distilled vectors; when the closest is above `threshold`, the text
    earns the word's BM25 weight (its `idf` over the call's texts) scaled by
    how far above: a word at cosine 1 counts as the word itself would, one at
    `threshold` counts nothing. Words the text does contain count exactly as
    in `LexicalScorer`, so names, numbers and rare terms keep their weight.

    Why per word and not per sentence: averaging every word's vector into one
    per sentence, as a sentence transformer's output would be used, ranked
    passages worse than BM25 on every development set (the static vectors
    know words, not sentences), while word-to-word cosines separate synonyms
    ("film", "movie": 0.82) from unrelated words ("film", "stock": 0.02).

    The model is read on first use, once per file for the whole process, and
    shared by every scorer that names the same file; scoring is deterministic
    and safe from several threads.

    Raises:
        ImportError: on first use, when numpy (the ``static`` extra) is missing.
        capsa.errors.ModelUnreadable: on first use, when `path` is not a model.

    Examples:
        >>> scorer = StaticScorer()
        >>> car, tree = scorer.score("Which automobile is fastest?",
        ...                          ["This car is the quickest.", "The oak tree is tall."])
        >>> car > tree == 0.0
        True
        >>> LexicalScorer().score("Which automobile is fastest?", ["This car is the quickest."])
        [0.0]
    """

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    path: Path = MODEL_PATH
    """The distilled model, an ``.npz`` as ``scripts/distil_static.py`` writes it."""
    threshold: float = Field(default=0.5, ge=0.0, lt=1.0)
    """Least cosine between two words for one to stand in for the other.

    At 0.5, "car" stands in for "automobile" (0.83) and "town" for "city"
    (0.74), but "remove" not for "delete" (0.31): the distilled vectors
    place related words lower than a sentence transformer would."""
    strength: float = Field(default=1.0, ge=0.0)
    """Scale of a stand-in's credit; 0 scores as `LexicalScorer` alone."""
    lexical: LexicalScorer = Field(default_factory=LexicalScorer)
    """The exact-match part's settings."""

    @field_validator("path")
    @classmethod
    def _exists(cls, value: Path) -> Path:
        """A missing model file is refused when the scorer is built, not at the first packing."""
        if not value.is_file():
            raise ValueError(f"no static model at {value}")
        return value

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        """Return each text's BM25 score plus its stand-ins' credit (see the class)."""
        return self._score(query, [_content_words(text) for text in texts])

    def score_passages(self, query: str, passages: Sequence[str],
                       sentences: Sequence[Sequence[str]]) -> list[float]:
        """`score` of whole passages, from the words of their sentences.

        The packer calls this after `score` has split every sentence into
        words (see `capsa.budget.compress.prepare`); those splits are cached,
        so a passage is not read a second time. `passages` is unused: a
        passage's words are its sentences' words.
        """
        del passages
        return self._score(query, [tuple(itertools.chain.from_iterable(map(_content_words, group)))
                                   for group in sentences])

    def score_prepared(self, query: str, sentences: Sequence[tuple[str, ...]],
                       terms: Sequence[tuple[str, ...]], passages: Sequence[range],
                       headings: Sequence[str],
                       weights: dict[str, float] | None = None,
                       ) -> tuple[list[float], list[float]]:
        """`score` of every sentence and `score_passages` of every passage, in one pass.

        The packer (`capsa.budget.compress.prepare`) already holds each sentence's
        lower-cased words and their terms; this reuses them instead of reading
        every sentence again, and finds each passage's closest words from its
        sentences' (a maximum over a passage is the maximum over its sentences
        and its heading), so every word's cosines are computed once. The scores
        are those `score` and `score_passages` return.

        Args:
            query: the question.
            sentences: each sentence's lower-cased words, stop words included.
            terms: each sentence's `analyze` terms, from those words.
            passages: the sentences of each passage, as a range of indices.
            headings: each passage's heading (`source_words`), "" for none;
                read as its first sentence, as `score_passages` reads it.
            weights: the query terms' `idf` over `terms`, when the caller has
                it already (the packer does); computed here otherwise.
        """
        model = _load(self.path)
        content = [tuple([w for w in words if w not in _STOPWORDS]) for words in sentences]
        heads = [_content_words(heading) if heading else () for heading in headings]
        head_terms = [terms_of(words) for words in heads]
        whole = [tuple(itertools.chain(head, *terms[span.start:span.stop]))
                 for head, span in zip(head_terms, passages, strict=True)]
        query_terms = set(analyze_query(query))
        by_sentence = idf(query_terms, terms) if weights is None else weights
        by_passage_weights = idf(query_terms, whole)
        exact_sentences = self.lexical.score_terms(by_sentence, terms)
        exact_passages = self.lexical.score_terms(by_passage_weights, whole)
        asked = self._asked(query)
        if self.strength == 0.0 or not asked or not (sentences or passages):
            return exact_sentences, exact_passages
        import numpy as np

        best = self._best(model, list(asked), [*content, *heads])
        count = len(content)
        by_passage = best[:, count:].copy()  # the headings' own, then each passage's sentences'
        for n, span in enumerate(passages):
            if span:
                by_passage[:, n] = np.maximum(by_passage[:, n],
                                              best[:, span.start:span.stop].max(axis=1))
        targets = set(asked.values())
        return ([e + c for e, c in zip(exact_sentences, self._credit(
                    best[:, :count], asked, _within(by_sentence, targets, terms), terms),
                    strict=True)],
                [e + c for e, c in zip(exact_passages, self._credit(
                    by_passage, asked, _within(by_passage_weights, targets, whole), whole),
                    strict=True)])

    def _score(self, query: str, words: Sequence[tuple[str, ...]]) -> list[float]:
        if not words:
            return []
        model = _load(self.path)
        docs = [terms_of(text_words) for text_words in words]  # analyze(text), from its words
        exact = self._exact(set(analyze_query(query)), docs)
        asked = self._asked(query)
        if self.strength == 0.0 or not asked:
            return exact
        best = self._best(model, list(asked), words)
        credit = self._credit(best, asked, idf(set(asked.values()), docs), docs)
        return [e + s for e, s in zip(exact, credit, strict=True)]

    def _exact(self, query_terms: set[str], docs: Sequence[Sequence[str]]) -> list[float]:
        """What ``self.lexical.score(query, texts)`` returns, from the texts' terms."""
        if not query_terms:
            return [0.0] * len(docs)
        return self.lexical.score_terms(idf(query_terms, docs), docs)

    @staticmethod
    def _asked(query: str) -> dict[str, str]:
        """The query's content words that may have stand-ins, each with its term.

        Words with no term are left out, and so are names and numbers
        (`_named`): a name has no synonyms, yet the vectors place it beside
        its kind ("Lewiston" near other towns, "1998" near other years), so a
        sentence about another town or year would be credited for it.
        """
        named = _named(query)
        return {word: terms[0] for word in _content_words(_HOW_TO.sub(r"\1", query))
                if word not in named and (terms := terms_of([word]))}

    @staticmethod
    def _best(model: _StaticModel, query_words: Sequence[str],
              words: Sequence[Sequence[str]]) -> npt.NDArray[np.float32]:
        """For each query word and text, the highest cosine of a word the text holds (0 if none)."""
        import numpy as np

        lengths = np.fromiter(map(len, words), dtype=np.intp, count=len(words))
        held = lengths > 0
        best = np.zeros((len(query_words), len(words)), dtype=np.float32)
        if not held.any():
            return best
        table, rows = model.rows([*query_words, *itertools.chain.from_iterable(words)])
        held_words = table[rows[len(query_words):]]
        # one matrix-vector product per query word: a small matrix-matrix product
        # costs more, since BLAS starts its threads for it
        cosines = np.stack([held_words @ table[row] for row in rows[:len(query_words)]])
        starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))[held]
        best[:, held] = np.maximum.reduceat(cosines, starts, axis=1)
        return best

    def _credit(self, best: npt.NDArray[np.float32], asked: dict[str, str],
                weights: dict[str, float], docs: Sequence[Sequence[str]]) -> list[float]:
        """Each text's credit for the query words it lacks but holds a stand-in for."""
        import numpy as np

        credit = np.clip((best - self.threshold) / (1.0 - self.threshold), 0.0, None)
        terms = list(asked.values())
        candidates = np.nonzero(credit)
        exact = [n for n, (row, column) in enumerate(zip(*map(list, candidates), strict=True))
                 if terms[row] in docs[column]]  # a word the text holds is BM25's, not a stand-in's
        credit[candidates[0][exact], candidates[1][exact]] = 0.0
        scale = np.asarray([weights[term] for term in terms], dtype=np.float32) * self.strength
        return (scale @ credit).tolist()  # type: ignore[no-any-return]


class _StaticModel:
    """A loaded static model: word-piece vocabulary, vectors, and a word cache.

    Tokenises as BERT's uncased WordPiece does (lower case, accents stripped,
    punctuation and CJK characters split off, longest known piece first), so
    each word finds the pieces its vectors were distilled for. Each word's
    pieces are cached: prose repeats its words, so most are looked up once.
    """

    def __init__(self, path: Path) -> None:
        import numpy as np

        with np.load(path, allow_pickle=False) as data:
            rows, scales = data["vectors"], data["scales"]
            vocab = bytes(data["vocab"]).decode("utf-8").split("\n")
            self.meta: dict[str, Any] = json.loads(bytes(data["meta"]).decode("utf-8"))
        # kept as stored, int8 and a scale per row (3.9 MB, not 15.6 as float32):
        # only the pieces of words not seen yet are ever scaled
        self.pieces_int8, self.scales = rows, scales.astype(np.float32)
        self.dims = int(rows.shape[1])
        self.ids = {piece: n for n, piece in enumerate(vocab)}
        self.unknown = self.ids["[UNK]"]
        # a word's first piece and its continuations ("##" dropped) apart, each with its
        # longest entry: a match is then tried from that length down, not the word's
        self._heads = {piece: n for piece, n in self.ids.items() if not piece.startswith("##")}
        self._tails = {piece[2:]: n for piece, n in self.ids.items() if piece.startswith("##")}
        self._longest = (max(map(len, self._heads), default=0),
                         max(map(len, self._tails), default=0))
        self._words: dict[str, tuple[int, ...]] = {}
        self._rows: dict[str, int] = {}
        self._table = np.zeros((4096, self.dims), dtype=np.float32)
        self._lock = threading.Lock()

    def rows(self, words: Sequence[str]) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.intp]]:
        """A table of unit word vectors and each word's row in it; each word is embedded once.

        The table grows as words arrive (at most `_TABLE_ROWS` rows, then
        it starts afresh), so a call gathers its words' vectors in one step
        rather than stacking one array per word.
        """
        import numpy as np

        with self._lock:
            missing = sorted(set(words).difference(self._rows))  # sorted: the same layout each run
            if missing:
                if len(self._rows) + len(missing) > _TABLE_ROWS:
                    # a new table, not the old one overwritten: a caller may still be
                    # reading rows of the old one outside the lock
                    self._rows = {}
                    self._table = np.zeros_like(self._table)
                    missing = sorted(set(words))
                fresh = self.embed(missing)
                used = len(self._rows)
                if used + len(missing) > len(self._table):
                    grown = np.zeros((max(2 * len(self._table), used + len(missing)), self.dims),
                                     dtype=np.float32)
                    grown[:used] = self._table[:used]
                    self._table = grown
                self._table[used:used + len(missing)] = fresh
                self._rows.update(zip(missing, range(used, used + len(missing)), strict=True))
            return self._table, np.fromiter(map(self._rows.__getitem__, words), dtype=np.intp,
                                            count=len(words))

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Unit vectors, one per text: the normalised sum of its pieces' vectors."""
        import numpy as np

        ids: list[int] = []
        ends: list[int] = []
        for text in texts:
            ids.extend(self.pieces(text))
            ends.append(len(ids))
        if not ids:
            return np.zeros((len(texts), self.dims), dtype=np.float32)
        running = np.zeros((len(ids) + 1, self.dims), dtype=np.float64)
        chosen = np.asarray(ids)
        vectors = self.pieces_int8[chosen].astype(np.float32) * self.scales[chosen, None]
        np.cumsum(vectors, axis=0, out=running[1:])
        bounds = np.asarray([0, *ends])
        sums = (running[bounds[1:]] - running[bounds[:-1]]).astype(np.float32)
        return _normalised(sums)

    def pieces(self, text: str) -> list[int]:
        """The word-piece ids of `text`, as the model's tokenizer gives them (no [CLS]/[SEP])."""
        text = text.lower()
        if not text.isascii():
            text = _CJK.sub(r" \1 ", "".join(
                ch for ch in unicodedata.normalize("NFD", text)
                if unicodedata.category(ch) != "Mn"))
        out: list[int] = []
        words = self._words
        for word in _SPLIT.findall(text):
            found = words.get(word)
            if found is None:
                if len(words) > _WORD_CACHE_SIZE:
                    words.clear()
                found = words[word] = self._wordpiece(word)
            out.extend(found)
        return out

    def _wordpiece(self, word: str) -> tuple[int, ...]:
        """Greedy longest-match-first split of one word; one [UNK] when no split exists."""
        if len(word) > _MAX_WORD_CHARS:
            return (self.unknown,)
        pieces: list[int] = []
        start, size = 0, len(word)
        table, longest = self._heads, self._longest[0]
        while start < size:
            end = min(size, start + longest)
            while end > start:
                found = table.get(word[start:end])
                if found is not None:
                    pieces.append(found)
                    break
                end -= 1
            else:
                return (self.unknown,)
            start, table, longest = end, self._tails, self._longest[1]
        return tuple(pieces)


def _named(query: str) -> frozenset[str]:
    """The words a question writes as names or numbers, as `_content_words` gives them.

    A name is a word capitalised where a sentence does not start; a number
    holds a digit. When every word after the first is capitalised (a question
    in title case) capitalisation tells nothing, and only numbers count.

    Examples:
        >>> sorted(_named("Which arena did the Lewiston Maineiacs use in 1998?"))
        ['1998', 'lewiston', 'maineiacs']
        >>> sorted(_named("Who Wrote The Great Gatsby"))
        []
    """
    capitalised, later = [], 0
    for match in _QUERY_WORD.finditer(query):
        at = match.start()
        while at and query[at - 1] in _OPENERS:
            at -= 1
        if not at or query[at - 1] in _ENDERS:
            continue  # a sentence's first word is capitalised whatever it is
        later += 1
        if match.group()[0].isupper():
            capitalised.append(match.group())
    names = () if later > 1 and len(capitalised) == later else capitalised
    found = {word for name in names for word in _content_words(name)}
    found.update(word for word in _content_words(query) if any(c.isdigit() for c in word))
    return frozenset(found)


_QUERY_WORD = re.compile(r"[^\W_][\w'’.-]*")
_OPENERS = " \t\n\"'“‘([¿¡"
_ENDERS = ".!?:;"


def _within(weights: dict[str, float], targets: set[str],
            docs: Sequence[Sequence[str]]) -> dict[str, float]:
    """`idf(targets, docs)`, read from `weights` (the query's terms' idf over the same
    `docs`) when it holds every target, as it does when every stand-in target is a
    query term."""
    if targets <= weights.keys():
        return {term: weights[term] for term in sorted(targets)}
    return idf(targets, docs)


def _content_words(text: str) -> tuple[str, ...]:
    """The lower-cased words of `text` that are not stop words, as BM25 splits them."""
    if len(text) > _CACHED_TEXT_CHARS:
        return _content_words_cached.__wrapped__(text)
    return _content_words_cached(text)


_CACHED_TEXT_CHARS = 2000


@lru_cache(maxsize=8192)
def _content_words_cached(text: str) -> tuple[str, ...]:
    return tuple([w for w in _WORD.findall(mend(text.lower())) if w not in _STOPWORDS])


def _normalised(rows: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """Rows scaled to length 1; an all-zero row stays zero."""
    import numpy as np

    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    unit: npt.NDArray[np.float32] = np.divide(rows, norms, out=np.zeros_like(rows),
                                              where=norms > 0)
    return unit


_MODELS: dict[Path, _StaticModel] = {}
_LOADING = threading.Lock()


def _load(path: Path) -> _StaticModel:
    """The model at `path`, read once per process; concurrent first calls read it once."""
    model = _MODELS.get(path)
    if model is not None:
        return model
    with _LOADING:
        model = _MODELS.get(path)
        if model is None:
            require("numpy", "static", "StaticScorer")
            try:
                model = _MODELS[path] = _StaticModel(path)
            except (OSError, KeyError, ValueError, zipfile.BadZipFile) as exc:
                raise ModelUnreadable(f"{path} is not a static model ({type(exc).__name__}: "
                                      f"{exc})", path=str(path)) from exc
    return model
