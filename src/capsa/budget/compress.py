"""Choosing what to keep: sentence selection under a token budget.

Every passage is split into sentences (`capsa.budget.sentences`); each sentence
gets a utility, and a greedy pass keeps the most useful sentences that still
fit, paying for each document's tags the first time one of its sentences is
kept. The utility of a sentence is

    relevance × novelty + passage prior + lead bonus

- *relevance*: the scorer's score for the sentence, divided by the best
  sentence's score;
- *novelty*: the IDF-weighted share of the query terms in the sentence that no
  kept sentence covers yet (a covered term counts `_COVERAGE_DECAY` as much
  each time it is covered again), so the packet spreads over the whole query
  instead of repeating its easiest part: on multi-hop questions the second hop
  shares few terms with the question;
- *passage prior*: the scorer's score for the whole passage (normalised), read
  under its source's words and its title (`capsa.budget.relevance.heading_words`:
  a title, a file's or URL's name), plus the retriever's own score (min-max normalised),
  each weighted;
- *lead bonus*: a small bonus for a passage's first sentence, which usually
  says what the passage is about;
- *the subject beside*: a passage's first sentence, relevant or not, is a
  candidate once the sentence after it is kept and points back to it ("he
  was …"; `_State.queue_subject`);
- *dense bonus*: at tight budgets (under `_DENSE_BELOW` of the passages'
  tokens), a bonus for every sentence of a passage already kept from, so a
  tenth of a retrieval holds a few dense excerpts instead of many fragments
  (`_State.densify`).

Utilities only fall as coverage grows, so the greedy pass is evaluated lazily
(a heap, re-scored on pop), which keeps packing fast on large inputs. The
weights were set on half of HotpotQA's distractor questions and checked on the
other half (``benchmarks/compression.py``); none of them is specific to it.

A most useful sentence too long for the whole budget would be skipped by the
greedy pass; its opening is kept instead, cut to fit, when that is worth more
than the best sentence that fits (`_State.lead_cut`).

Room the greedy pass leaves, too small for any whole sentence, goes to the
opening words of the most useful sentence left out, cut behind a truncation
marker (`_State.fill`): a sentence's subject and first predicate come first.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import math
import re
import string
import threading
from collections import OrderedDict, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from capsa.budget.evidence import link
from capsa.budget.packet import Group, Passage, Shape
from capsa.budget.relevance import (
    _WORD,
    LexicalScorer,
    Scorer,
    analyze,
    analyze_query,
    document_frequency,
    heading_words,
    idf,
    mend,
    passage_scores_of,
    respell,
    scores_of,
    terms_of,
)
from capsa.budget.render import (
    ELLIPSIS,
    TAGGED,
    Body,
    Layout,
    truncation_marker,
)
from capsa.budget.sentences import split_sentences
from capsa.budget.static import StaticScorer
from capsa.budget.tokens import Tokenizer, discounted, estimate_tokens, per_call_tokens

_PASSAGE_WEIGHT = 0.3
"""Weight of the scorer's whole-passage relevance in every sentence's utility."""
_RETRIEVER_WEIGHT = 0.5
"""Weight of the retriever's own (normalised) score."""
_LEAD_BONUS = 0.1
"""Bonus for a passage's first sentence."""
_LINK_WEIGHT = 0.25
"""Weight of a passage's link to the second hop (its subject named by the best evidence)."""
_COVERAGE_DECAY = 0.2
"""How much a query term counts each further time it is covered."""
_DENSE_BONUS = 0.2
"""Added to the utility of every sentence of a passage already kept from, at tight budgets."""
_SUBJECT_BESIDE = True
"""Queue a passage's first sentence, relevant or not, once the sentence after it is kept
and leans on it (`_State.queue_subject`)."""
_ANAPHORS = frozenset({"he", "she", "it", "they", "him", "her", "his", "hers", "its", "them",
                       "their", "theirs"})
"""Words by which an English sentence points back to a subject named before it."""
_LOWER_WORD = re.compile(r"[a-z]+")


def _leans_back(sentence: str) -> bool:
    """Whether a sentence leans on the one before it for its subject.

    It opens in lower case or with a bracket, where a split or a window left
    its subject behind (``(October 23, 1924 – …) was notable as the
    captain``), or it points back with a third-person pronoun ("Prior to the
    presidency, he was …"). A sentence that names its own subject ("The hotel
    cap is EUR 165.") does not, nor does one in a script without case whose
    words are not on this English list: the rule then stays out of the way.

    Examples:
        >>> _leans_back("Prior to the presidency, he was the Governor of Arkansas.")
        True
        >>> _leans_back("The hotel cap is EUR 165.")
        False
    """
    first = sentence.lstrip()[:1]
    if first.islower() or first in ("(", "["):
        return True
    return not _ANAPHORS.isdisjoint(_LOWER_WORD.findall(sentence.lower()))


_DENSE_BELOW = 0.15
"""The budget, as a share of the competing passages' tokens, under which `_DENSE_BONUS` applies."""
_DENSE_REACH = 64
"""Most sentences of a passage re-queued whole when it is opened; a longer one (a large
document) re-queues only the neighbours of each sentence kept, so packing stays linear."""
_FILL_WORDS = 3
"""Fewest words of a sentence worth cutting it for: fewer rarely state anything."""
_FILL_TRIES = 3
"""How many of the most useful sentences left out are tried for the room left."""
_NEAR_DUPLICATE = 0.85
"""Word-set Jaccard similarity above which two sentences count as the same."""
_NEAR_DUPLICATE_WORDS = 6
"""Fewest distinct words a sentence needs to count as another's near duplicate."""

_LEAD_SHARE = 0.5
"""Least share of the best sentence a cut must keep to be packed instead of others."""

_RESPELL = True
"""Read a misspelt query word as the passages' word one edit away (`respell`)."""

_COUNTS_KEPT = 4096
"""Most distinct strings one `Prepared` remembers the count of."""
_QUEUES_KEPT = 64
"""Most starting queues one `Prepared` remembers (one per group, floor and shape in use)."""

_ASCII_WORD = re.compile(_WORD.pattern, re.ASCII)
"""`_WORD` for ASCII text, where both find the same words; a quicker scan."""
_NO_NUMBERS: frozenset[str] = frozenset()
_DIGIT = re.compile(r"\d")
"""A sentence's numbers are its words holding a digit."""


@dataclass(slots=True, unsafe_hash=True)
class Unit:
    """One sentence of a passage, with what selection needs to know about it.

    Immutable by convention, not `frozen`: a frozen dataclass sets each field
    through ``object.__setattr__``, which made building the Units of a packing
    (a few hundred a question) several times slower. Nothing assigns to one
    after `prepare` builds it; equality and hashing are a frozen one's.
    """

    start: int
    end: int
    tokens: int
    relevance: float
    terms: tuple[str, ...]
    key: str
    words: frozenset[str]
    lexicon: Lexicon = field(repr=False, compare=False)
    """Where `numbers` come from, worked out only for sentences that selection
    considers: most of a large input never is."""
    position: int = field(repr=False, compare=False)
    """This sentence's index in `lexicon`."""
    mass: float = field(repr=False, compare=False)
    """The `Prepared.weights` of `terms`, summed in order: what novelty is a share of."""

    @property
    def numbers(self) -> frozenset[str]:
        """The sentence's words holding a digit (near duplicates must share them)."""
        return self.lexicon.numbers(self.position)


class Lexicon:
    """The lower-cased words of every sentence of one packing, and what derives from them.

    Numbers are computed on first use and kept.
    """

    __slots__ = ("_lowered", "_numbers", "_words")

    def __init__(self, lowered: Sequence[str], words: Sequence[Sequence[str]]) -> None:
        self._lowered, self._words = lowered, words
        self._numbers: dict[int, frozenset[str]] = {}

    def numbers(self, position: int) -> frozenset[str]:
        found = self._numbers.get(position)
        if found is None:
            words = self._words[position]
            found = self._numbers[position] = (
                frozenset(filter(_DIGIT.search, words))
                if _DIGIT.search(self._lowered[position]) else _NO_NUMBERS)
        return found


@dataclass(slots=True, unsafe_hash=True)
class Doc:
    """One input passage, segmented and scored.

    Immutable by convention, as `Unit` (and for the same reason: each layout of a
    packing copies every Doc with `dataclasses.replace`); a changed Doc is a new one.
    """

    index: int
    group: Group
    passage: Passage
    units: tuple[Unit, ...]
    joins: tuple[int, ...]
    tokens_full: int
    whole_tokens: int
    overhead: int
    prior: float
    relevance: float
    """The scorer's score for the whole passage, divided by the best passage's."""
    present: frozenset[str]
    """The query terms the passage contains."""
    linked: float
    """How much the passage's subject is a name the best evidence mentions (0 to 1)."""

    spans: tuple[tuple[int, int], ...]
    """Each sentence's ``(start, end)``, as `split_sentences` returned them."""
    spared: bool = False
    """The retriever's top passage, which the relevance floor never drops (`spare_top`)."""


@dataclass(frozen=True, slots=True)
class Prepared:
    """Everything about the inputs that does not depend on the budget."""

    query: str
    """The query as the caller wrote it."""
    respelt: tuple[tuple[str, str], ...]
    """Query words no passage holds, read as the passage word one edit away (`respell`)."""
    tokenizer: Tokenizer
    attached: tuple[Doc, ...]
    retrieved: tuple[Doc, ...]
    weights: dict[str, float]
    gap: int
    bullet: int
    context: dict[Group, int]
    measurable: bool
    """Whether relevance can be told at all: the query has terms, or something scored."""
    layout: Layout = TAGGED
    charge: int = 0
    """What the caller's counter charges once per call (`per_call_tokens`): `tokenizer`
    is that counter less it, the planning count of a piece; the rendered packet pays
    it once, so it is measured with ``tokenizer(text) + charge``."""
    trail: int = 0
    """What a trailing ``…`` costs beyond `gap` because a newline follows it: in compact
    documents, where a tokenizer may charge that newline after ``…`` but not after a
    tag (see `capsa.budget.pack`)."""
    terse_cuts: bool = False
    """End a cut passage with the bare ``<truncated/>`` (`truncation_marker`); `pack`
    sets it for compact documents unless `Budget.mark_excerpts` asks for the numbers."""
    excerpt: int = 0
    """What an excerpt's ``shown="312/1870"`` costs, at most, where `Budget.mark_excerpts`
    asks for it: planned, so a marked packet seldom needs measuring twice."""
    counts: dict[str, int] = field(default_factory=dict, repr=False, compare=False)
    """Memo of `count`: packing one input for several budgets counts the same bodies."""
    bodies: dict[tuple[object, ...], Body] = field(default_factory=dict, repr=False,
                                                   compare=False)
    """Memo of bodies built for a choice (see `capsa.budget.pack`), bounded as `counts`."""
    variants: dict[tuple[object, ...], Prepared] = field(default_factory=dict, repr=False,
                                                        compare=False)
    """Memo of this input as laid out for a budget's markup (see `capsa.budget.pack`):
    few (one per set of the options that shape it), and the same for every budget."""
    queues: dict[tuple[object, ...], tuple[tuple[float, int, int, int], ...]] = field(
        default_factory=dict, repr=False, compare=False)
    """Memo of selection's sorted starting queue (`_State.queue`): one per group, floor and
    shape, the same for every budget (and every layout: the queue holds no cost), bounded
    by `_QUEUES_KEPT`."""

    def measure(self, text: str) -> int:
        """The caller's own count of `text`: what the budget bounds."""
        return self.tokenizer(text) + self.charge

    def count(self, text: str) -> int:
        """`tokenizer(text)`, remembered: tokenizers are deterministic, and bodies recur.

        Bounded to `_COUNTS_KEPT` strings (cleared when full), so a long-lived
        cached `Prepared` never grows without limit.
        """
        counts = self.counts
        known = counts.get(text)
        if known is None:
            known = self.tokenizer(text)
            if len(counts) >= _COUNTS_KEPT:
                counts.clear()
            counts[text] = known
        return known


@dataclass(slots=True)
class Choice:
    """What selection kept of one document: unit indices, and a cut if truncated."""

    kept: list[int]
    cut: int | None = None


@dataclass(slots=True)
class Selection:
    """The outcome of selecting within one group."""

    chosen: dict[int, Choice] = field(default_factory=dict)
    """Kept documents by index, in the order they were first chosen."""
    used: int = 0
    """Planned tokens, group container included when anything was kept."""
    duplicate: set[int] = field(default_factory=set)
    capped: set[int] = field(default_factory=set)
    irrelevant: set[int] = field(default_factory=set)
    """Documents with nothing above the relevance floor."""


def prepare(
    query: str,
    attachments: Sequence[Passage],
    passages: Sequence[Passage],
    *,
    tokenizer: Tokenizer,
    scorer: Scorer,
    layout: Layout = TAGGED,
) -> Prepared:
    """Segment, count and score every input once, for any number of budgets.

    Pieces are counted without what `tokenizer` charges once per call
    (`per_call_tokens`): the packet pays that once, not once per sentence.
    A passage packed before is not split and read again (`_read`).
    """
    charge = per_call_tokens(tokenizer)
    tokenizer = discounted(tokenizer, charge)
    inputs: list[tuple[Group, Passage]] = [("attached", p) for p in attachments]
    inputs += [("retrieved", p) for p in passages]
    readings = [_read(p.text) for _, p in inputs]
    spans = [reading.spans for reading in readings]
    texts = list(itertools.chain.from_iterable(reading.texts for reading in readings))
    lowered = list(itertools.chain.from_iterable(reading.lowered for reading in readings))
    words = list(itertools.chain.from_iterable(reading.words for reading in readings))
    analysed = list(itertools.chain.from_iterable(reading.terms for reading in readings))
    headings = [heading_words(p.source, p.title) for _, p in inputs]
    asked = query
    respelt: tuple[tuple[str, str], ...] = ()
    query_terms = set(analyze_query(query))
    frequency = document_frequency(query_terms, analysed)
    if _RESPELL:  # a query word no passage holds, read as the passage word it mistypes
        named = [tuple(_WORD.findall(heading.lower())) for heading in headings if heading]
        held = {t for t, n in frequency.items() if n}.union(*map(terms_of, named))
        query, respelt = respell(query, [*words, *named], held)
        if respelt:
            query_terms = set(analyze_query(query))
            frequency = document_frequency(query_terms, analysed)
    weights = idf(query_terms, analysed, frequency) if texts else {}
    separated = [reading.separated for reading in readings]
    # each passage's sentences, as positions in `texts`
    ends = list(itertools.accumulate(len(doc_spans) for doc_spans in spans))
    ranges = [range(end - len(doc_spans), end) for doc_spans, end in zip(spans, ends, strict=True)]
    if type(scorer) is LexicalScorer:  # what score() would compute, from terms already held
        unit_scores = _normalise(scorer.score_terms(weights, analysed))
        whole = [terms + analyze(heading) if heading else terms for terms, heading in zip(
            _passage_terms(inputs, spans, separated, analysed), headings, strict=True)]
        passage_scores = _normalise(scorer.score_terms(idf(query_terms, whole), whole))
    elif type(scorer) is StaticScorer:  # the same scores, from the words already held
        unit_raw, passage_raw = scorer.score_prepared(query, words, analysed, ranges, headings,
                                                      weights)
        unit_scores, passage_scores = _normalise(unit_raw), _normalise(passage_raw)
    else:
        unit_scores = _normalise(scores_of(scorer, query, texts))
        passage_scores = _passage_scores(scorer, query, inputs, spans, headings)
    incoming = _min_max([p.score for _, p in inputs])
    owners = [n for n, sentences in enumerate(ranges) for _ in sentences]
    leads = [sentences.start if sentences else None for sentences in ranges]
    evidence = link(query, texts, analysed, unit_scores, owners, leads, passage_scores)
    lexicon = Lexicon(lowered, words)
    sentence_relevance, isdisjoint = evidence.relevance, query_terms.isdisjoint
    docs: list[Doc] = []
    position = 0
    counters: dict[Group, int] = {"attached": 0, "retrieved": 0}
    join_tokens: dict[str, int] = {}
    for n, ((group, passage), reading) in enumerate(zip(inputs, readings, strict=True)):
        doc_spans = reading.spans
        tokens, joins, tokens_full = _counts(reading, passage.text, tokenizer, join_tokens)
        units = []
        for (start, end), count, sentence_terms, key, said in zip(
                doc_spans, tokens, reading.terms, reading.keys, reading.wordsets, strict=True):
            asked_terms = (() if isdisjoint(sentence_terms)
                           else tuple(sorted(query_terms.intersection(sentence_terms))))
            units.append(Unit(  # positional: a few hundred Units a question
                start, end, count, sentence_relevance[position], asked_terms, key, said,
                lexicon, position, sum([weights[t] for t in asked_terms]) if asked_terms else 0.0))
            position += 1
        docs.append(Doc(
            index=counters[group], group=group, passage=passage, units=tuple(units),
            spans=doc_spans,
            joins=joins,
            tokens_full=tokens_full,
            whole_tokens=sum(tokens) + sum(joins),
            overhead=tokenizer(layout.document_overhead(passage)),
            prior=(_PASSAGE_WEIGHT * passage_scores[n] + _RETRIEVER_WEIGHT * incoming[n]
                   + _LINK_WEIGHT * evidence.linked[n]),
            relevance=passage_scores[n],
            present=frozenset(term for unit in units for term in unit.terms),
            linked=evidence.linked[n],
        ))
        counters[group] += 1
    return Prepared(
        query=asked, respelt=respelt, tokenizer=tokenizer,
        attached=tuple(d for d in docs if d.group == "attached"),
        retrieved=tuple(d for d in docs if d.group == "retrieved"),
        weights=weights, gap=tokenizer(f" {ELLIPSIS} "), bullet=tokenizer("\n- "),
        context={g: tokenizer(layout.context_overhead(g)) for g in ("attached", "retrieved")},
        measurable=bool(query_terms) or any(unit_scores) or any(passage_scores),
        layout=layout, charge=charge,
    )


@dataclass(slots=True)
class _Reading:
    """One passage's text as packing reads it, whatever the query: its sentences and words.

    Immutable but for `estimated`, which is filled in once.
    """

    spans: tuple[tuple[int, int], ...]
    """Each sentence's ``(start, end)`` (`split_sentences`)."""
    texts: tuple[str, ...]
    """Each sentence's text."""
    lowered: tuple[str, ...]
    """Each sentence lower-cased and `mend`-ed, for matching."""
    words: tuple[tuple[str, ...], ...]
    """Each sentence's words (`_WORD`), from `lowered`."""
    terms: tuple[tuple[str, ...], ...]
    """Each sentence's `analyze` terms, from `words`."""
    keys: tuple[str, ...]
    """Each sentence's `Unit.key`: its words, joined."""
    wordsets: tuple[frozenset[str], ...]
    """Each sentence's `Unit.words`."""
    separated: bool
    """`_separated` of the passage."""
    estimated: tuple[tuple[int, ...], tuple[int, ...], int] | None = None
    """`_counts` by `estimate_tokens`, once the passage has been counted by it."""


def _counts(reading: _Reading, text: str, tokenizer: Tokenizer, joins: dict[str, int],
            ) -> tuple[tuple[int, ...], tuple[int, ...], int]:
    """Each sentence's tokens, each join's, and the whole passage's.

    `joins` remembers the whitespace between sentences across one packing's
    passages. Counts by `estimate_tokens` are kept on the reading, so a chunk
    retrieved again is not counted again.
    """
    if tokenizer is estimate_tokens and reading.estimated is not None:
        return reading.estimated
    tokens = tuple([tokenizer(sentence) for sentence in reading.texts])
    between = []
    for (_, end), (start, _) in itertools.pairwise(reading.spans):
        gap = text[end:start]
        if gap not in joins:
            joins[gap] = tokenizer(gap)
        between.append(joins[gap])
    if tokenizer is estimate_tokens and reading.separated:
        full = _estimate_whole(text, reading.spans, sum(tokens) + sum(between))
    else:
        full = tokenizer(text)
    counted = (tokens, tuple(between), full)
    if tokenizer is estimate_tokens:
        reading.estimated = counted
    return counted


def _read(text: str) -> _Reading:
    """`_reading(text)`, remembered for the chunks retrieval returns again.

    Retrieval returns the same chunks again and again: for one question's
    several budgets and scorers, and for the next questions about the same
    documents (on seven of the fifteen benchmark sets, most passages had been
    packed for an earlier question). A passage's sentences and words depend on
    its text alone, so a chunk is read once while it is remembered. At most
    `_READ_CHARS` characters of passages are, the least recently used
    forgotten first; a text over a tenth of that is read every time, so one
    large document never pushes the chunks out.
    """
    global _READ_HELD
    with _READINGS_LOCK:
        reading = _READINGS.get(text)
        if reading is not None:
            _READINGS.move_to_end(text)
            return reading
    reading = _reading(text)
    if len(text) <= _READ_CHARS // 10:
        with _READINGS_LOCK:
            if text not in _READINGS:
                _READINGS[text] = reading
                _READ_HELD += len(text)
                while _READ_HELD > _READ_CHARS:
                    _READ_HELD -= len(_READINGS.popitem(last=False)[0])
    return reading


def _reading(text: str) -> _Reading:
    """Split `text` into sentences and read each one's words and terms."""
    spans = split_sentences(text)
    texts = tuple([text[s:e] for s, e in spans])
    lowered = tuple([mend(sentence.lower()) for sentence in texts])
    words = tuple([tuple((_ASCII_WORD if sentence.isascii() else _WORD).findall(sentence))
                   for sentence in lowered])
    return _Reading(spans, texts, lowered, words, tuple(map(terms_of, words)),
                    tuple([" ".join(said) for said in words]), tuple(map(frozenset, words)),
                    _separated(text, spans))


_READ_CHARS = 1_000_000
"""Most characters of passages whose readings `_read` remembers (about 20 MB of readings)."""
_READINGS: OrderedDict[str, _Reading] = OrderedDict()
_READ_HELD = 0
"""Characters of the passages in `_READINGS`."""
_READINGS_LOCK = threading.Lock()


def _forget_readings() -> None:
    """Forget every remembered reading: for a process that changes the splitting or term
    rules between packings (`benchmarks/ablation.py`), whose readings would be stale."""
    global _READ_HELD
    with _READINGS_LOCK:
        _READINGS.clear()
        _READ_HELD = 0


def _separated(text: str, spans: Sequence[tuple[int, int]]) -> bool:
    """Whether only whitespace separates a passage's sentences and surrounds them.

    Then no word, and no piece of `estimate_tokens`, straddles two sentences:
    the passage's terms are its sentences' terms in order, and its estimate is
    theirs plus the whitespace's (see `_estimate_whole`). A sentence cut inside
    a word, or a CJK full stop with no space after it, fails this test.
    """
    if not spans or text[:spans[0][0]].strip() or text[spans[-1][1]:].strip():
        return False
    return all(text[end:start].isspace() for (_, end), (start, _) in itertools.pairwise(spans))


def _passage_terms(inputs: Sequence[tuple[Group, Passage]],
                   spans: Sequence[Sequence[tuple[int, int]]], separated: Sequence[bool],
                   analysed: Sequence[tuple[str, ...]]) -> list[tuple[str, ...]]:
    """Each passage's `analyze` terms: its sentences' joined when `_separated`."""
    whole: list[tuple[str, ...]] = []
    position = 0
    for (_, passage), doc_spans, apart in zip(inputs, spans, separated, strict=True):
        mine = analysed[position:position + len(doc_spans)]
        position += len(doc_spans)
        whole.append(tuple(itertools.chain.from_iterable(mine)) if apart
                     else analyze(passage.text))
    return whole


def _passage_scores(scorer: Scorer, query: str, inputs: Sequence[tuple[Group, Passage]],
                    spans: Sequence[Sequence[tuple[int, int]]],
                    headings: Sequence[str]) -> list[float]:
    """Whole passages' scores, each read under its heading (`heading_words`) when it has one."""
    grouped = [[heading] * bool(heading) + [p.text[s:e] for s, e in doc_spans]
               for (_, p), doc_spans, heading in zip(inputs, spans, headings, strict=True)]
    texts = [f"{heading}\n{p.text}" if heading else p.text
             for (_, p), heading in zip(inputs, headings, strict=True)]
    return _normalise(passage_scores_of(scorer, query, texts, grouped))


def _estimate_whole(text: str, spans: Sequence[tuple[int, int]], inner: int) -> int:
    """`estimate_tokens(text)` of a `_separated` passage, from what is already counted.

    The estimate is additive over whitespace-separated pieces but for one case:
    a newline right after a symbol joins the symbol's piece for free. So the
    whole is the sentences and the whitespace between them (`inner`), plus the
    whitespace around them, less one for each sentence ending in a symbol that
    a newline follows.
    """
    total = inner + estimate_tokens(text[:spans[0][0]]) + estimate_tokens(text[spans[-1][1]:])
    for _, end in spans:
        if text.startswith("\n", end) and text[end - 1] in string.punctuation:
            total -= 1
    return total


def floor_in_force(prepared: Prepared, min_relevance: float | None, demand: int,
                   room: int) -> float | None:
    """The relevance floor selection applies: `pack`'s and `compress_text`'s one rule.

    `min_relevance`, except None when the whole retrieval fits (`demand` within
    `room`: nothing is filler then, the retriever chose it and there is room
    for all of it) or when relevance cannot be told (the query has no terms and
    nothing scored). The retriever's top passage is spared either way, unless
    the floor is strict (`spare_top`).
    """
    if min_relevance is None or demand <= room or not prepared.measurable:
        return None
    return min_relevance


def spare_top(docs: Sequence[Doc], *, strict: bool) -> tuple[Doc, ...]:
    """`docs` with the retriever's top passage marked `Doc.spared`, unless `strict`.

    The retriever's ranking is evidence too: a lexical scorer sees no shared
    term in a paraphrase ("lodging per night" for "the nightly hotel cap")
    that an embedding retriever ranked first. So the floor never drops that
    passage as irrelevant; when nothing in it is above the floor its sentences
    compete by their other merits (the retriever's score, the lead), and it can
    still be dropped for room. The top passage is the highest-scored one
    (`Passage.score`), the first of them on a tie, or the first when none is
    scored; passages with no text are never it.
    """
    candidates = [doc for doc in docs if doc.units]
    if strict or not candidates:
        return tuple(docs)
    scored = [doc for doc in candidates if doc.passage.score is not None]
    top = (max(scored, key=lambda doc: doc.passage.score or 0.0) if scored
           else candidates[0])
    return tuple(replace(doc, spared=True) if doc is top else doc for doc in docs)


def above_floor(doc: Doc, floor: float) -> bool:
    """Whether anything in a document scores above the relevance floor."""
    return (doc.relevance > floor or doc.linked > floor
            or any(unit.relevance > floor for unit in doc.units))


def relevant(doc: Doc, floor: float | None) -> bool:
    """Whether the floor keeps a document: always with no floor, and always if `Doc.spared`."""
    if floor is None or not doc.units or doc.spared:
        return True
    return above_floor(doc, floor)


def select(
    prepared: Prepared,
    docs: Sequence[Doc],
    budget: int,
    *,
    shape: Shape,
    max_items: int | None = None,
    context: int = 0,
    seen: Seen | None = None,
    floor: float | None = None,
    fill: bool = True,
) -> Selection:
    """Greedily keep the most useful sentences of `docs` within `budget` tokens.

    Sentences at or below the relevance `floor` are never chosen for their own
    sake; a document with nothing above it is left out as irrelevant. Room left
    once no relevant sentence fits completes the best documents, in the order
    they were chosen, when a whole one fits: a passage that fits whole stays whole.
    What is left then goes to the opening words of the most useful relevant
    sentence left out, cut behind a truncation marker (`fill`).

    Args:
        prepared: the scored inputs.
        docs: the documents competing for this budget.
        budget: tokens available, the group container's `context` included.
        shape: layout, which sets per-sentence costs (and one sentence per
            document for ``brief``).
        max_items: at most this many documents are kept.
        context: tokens of the group container, paid once if anything is kept.
        seen: sentences already packed elsewhere; duplicates of them are skipped,
            and the sentences kept here are appended.
        floor: the relevance floor; None for none.
        fill: cut the most useful sentence left out into the room no whole one
            fits (`_State.fill`); off where another selection gets that room.
    """
    state = _State(prepared, docs, shape, budget - context, max_items,
                   Seen() if seen is None else seen, floor)
    if fill:
        state.lead_cut()
    state.run()
    state.fallback_cut()
    state.complete()
    if fill:
        state.fill()
    selection = Selection(duplicate=state.duplicate_only(), capped=state.capped,
                          irrelevant=state.irrelevant)
    for n in state.order:
        kept = sorted(state.kept[n])
        doc = docs[n]
        if state.cut.get(n) is None and _body_cost(prepared, doc, kept, shape) >= _whole_cost(
                prepared, doc, shape):
            kept = list(range(len(doc.units)))
        selection.chosen[n] = Choice(kept, state.cut.get(n))
    if selection.chosen:
        selection.used = budget - state.remaining
    return selection


def select_whole(
    prepared: Prepared, docs: Sequence[Doc], budget: int, *, shape: Shape,
    max_items: int | None = None, context: int = 0, floor: float | None = None,
) -> Selection:
    """Keep whole passages in relevance order; cut the first one if it alone is too big."""
    selection = Selection()
    remaining = budget - context
    keys: set[str] = set()
    for n in sorted(range(len(docs)), key=lambda n: (-docs[n].prior, n)):
        doc = docs[n]
        if not doc.units:
            continue
        if not relevant(doc, floor):
            selection.irrelevant.add(n)
            continue
        key = " ".join(u.key for u in doc.units)
        if key in keys:
            selection.duplicate.add(n)
            continue
        if max_items is not None and len(selection.chosen) >= max_items:
            selection.capped.add(n)
            continue
        everything = list(range(len(doc.units)))
        cost = doc.overhead + _body_cost(prepared, doc, everything, shape)
        if cost <= remaining:
            selection.chosen[n] = Choice(everything)
            remaining -= cost
            keys.add(key)
        elif not selection.chosen:
            choice = _cut_prefix(prepared, doc, remaining - doc.overhead, shape)
            if choice is not None:
                selection.chosen[n] = choice
                body = _body_cost(prepared, doc, choice.kept, shape, choice.cut)
                remaining -= doc.overhead + body
                keys.add(key)
    if selection.chosen:
        selection.used = budget - remaining
    return selection


class _State:
    """The lazy greedy pass of `select`, one group at a time."""

    def __init__(self, prepared: Prepared, docs: Sequence[Doc], shape: Shape, budget: int,
                 max_items: int | None, seen: Seen, floor: float | None) -> None:
        self.prepared, self.docs, self.shape = prepared, docs, shape
        self.remaining, self.max_items, self.seen = budget, max_items, seen
        self.irrelevant = {n for n, doc in enumerate(docs) if not relevant(doc, floor)}
        # the top passage (`spare_top`) with nothing above the floor: all its sentences compete
        lifted = {n for n, doc in enumerate(docs)
                  if doc.spared and floor is not None and not above_floor(doc, floor)}
        self.kept: dict[int, set[int]] = {}
        self.order: list[int] = []
        self.cut: dict[int, int | None] = {}
        self.covered: dict[str, int] = defaultdict(int)
        """How often each query term is covered; only terms covered at least once are keys."""
        self.covered_terms = self.covered.keys()
        """The terms covered at least once: a live view of `covered`, made once."""
        self.deferred: dict[int, list[int]] = defaultdict(list)
        self.duplicates: dict[int, int] = defaultdict(int)
        self.capped: set[int] = set()
        self.decayed = dict(prepared.weights)
        """Each query term's weight as `utility` counts it now: its `Prepared.weights` entry
        times `_COVERAGE_DECAY` once for each time it is covered (updated in `consider`)."""
        self.version = 0
        """Bumped whenever coverage changes; a heap entry of the current version is exact."""
        self.lead = _LEAD_BONUS if shape != "brief" else 0.0
        inputs = sum(doc.whole_tokens for doc in docs)
        self.dense = (_DENSE_BONUS if shape == "passages" and budget < _DENSE_BELOW * inputs
                      else 0.0)
        """What `utility` adds for a passage already opened (`_DENSE_BONUS`), or 0."""
        self.floor, self.lifted = floor, lifted
        key = (floor, self.lead, tuple((doc.group, doc.index, doc.spared) for doc in docs))
        queue = prepared.queues.get(key)
        if queue is None:
            if len(prepared.queues) >= _QUEUES_KEPT:
                prepared.queues.clear()
            queue = prepared.queues[key] = self.queue()
        self.entries = queue
        """Every sentence that may be chosen for its own sake, best first (`queue`)."""
        self.heap = list(queue)  # sorted, so already a heap

    def queue(self) -> tuple[tuple[float, int, int, int], ...]:
        """The heap's first entries, sorted: `utility` with nothing covered yet, written out
        (novelty is 1 for every sentence).

        The same for every budget of one input (with the same floor and shape), so
        `Prepared.queues` keeps it: packing for three budgets sorts once.
        """
        lead, docs, irrelevant = self.lead, self.docs, self.irrelevant
        return tuple(sorted(
            (-(doc.units[k].relevance + doc.prior + (lead if k == 0 else 0.0)), n, k, 0)
            for n, doc in enumerate(docs) if n not in irrelevant
            for k in range(len(doc.units)) if self.eligible(n, k)))

    def eligible(self, n: int, k: int) -> bool:
        """Whether sentence `k` of passage `n` may be chosen for its own sake: above the floor."""
        floor, doc = self.floor, self.docs[n]
        return (floor is None or n in self.lifted or doc.units[k].relevance > floor
                or (k == 0 and doc.linked > floor))

    def utility(self, n: int, k: int) -> float:
        doc = self.docs[n]
        unit = doc.units[k]
        lead = self.lead if k == 0 else 0.0
        if self.dense and n in self.kept:
            lead += self.dense
        terms = unit.terms
        if not terms or self.covered_terms.isdisjoint(terms):
            return unit.relevance + doc.prior + lead  # novelty 1: none of its terms covered yet
        mass = unit.mass
        novelty = 1.0
        if mass > 0:
            decayed = self.decayed
            novelty = sum([decayed[t] for t in terms]) / mass
        return unit.relevance * novelty + doc.prior + lead

    def run(self) -> None:
        heap, pop, push, utility = self.heap, heapq.heappop, heapq.heappush, self.utility
        kept = self.kept
        while heap:
            negative, n, k, version = pop(heap)
            if k in kept.get(n, ()):
                continue  # an entry `densify` or `queue_subject` outran: already kept
            if version != self.version:  # terms were covered since: its utility may have fallen
                current = utility(n, k)
                if current < -negative - 1e-12:
                    push(heap, (-current, n, k, self.version))
                    continue
            self.consider(n, k)

    def consider(self, n: int, k: int) -> None:
        doc = self.docs[n]
        unit = doc.units[k]
        kept = self.kept.get(n)
        opened = kept is not None
        if self.shape == "brief" and opened:
            return
        if self.seen.covers(unit):
            self.duplicates[n] += 1
            return
        if kept is None:
            if self.max_items is not None and len(self.kept) >= self.max_items:
                self.capped.add(n)
                return
            cost = _body_cost(self.prepared, doc, (k,), self.shape) + doc.overhead
        else:
            cost = self.added_cost(doc, kept, k)
        if cost > self.remaining:
            self.deferred[n].append(k)
            return
        self.remaining -= cost
        if kept is None:
            kept = self.kept[n] = set()
            self.order.append(n)
        kept.add(k)
        self.seen.add(unit)
        if unit.terms:
            covered, decayed, weights = self.covered, self.decayed, self.prepared.weights
            for term in unit.terms:
                covered[term] += 1
                decayed[term] = weights[term] * _COVERAGE_DECAY ** covered[term]
            self.version += 1
        for waiting in self.deferred.pop(n, ()):
            heapq.heappush(self.heap, (-self.utility(n, waiting), n, waiting, self.version))
        if self.dense:
            self.densify(n, k, opened)
        elif (k == 1 and _SUBJECT_BESIDE and not self.eligible(n, 0)
              and _leans_back(doc.passage.text[unit.start:unit.end])):
            self.queue_subject(n)

    def queue_subject(self, n: int) -> None:
        """Passage `n`'s second sentence, kept, leans on its first: that may now be chosen.

        A passage's first sentence often names what the rest is about, and
        the sentences after it lean on it ("Prior to the presidency, he was
        the Governor of Arkansas", after "William Jefferson Clinton … is an
        American politician"). That opening often shares no word with the
        question, so it sits below the relevance floor and was never a
        candidate, and a packet kept the fact about an unnamed "he"; when the
        question asks for that subject ("which former Governor of
        Arkansas?"), the name it needs was the sentence left out. Queued here
        at its own utility (the lead bonus, no other), it competes with what
        is left. Only when the kept sentence leans back (`_leans_back`): a
        policy's first line ("Trains are booked in standard class.") is
        another topic, not the subject of "The hotel cap is EUR 165.". Only
        right before a kept sentence, as `densify` queues only neighbours: it
        then reads as that sentence's opening, never as filler apart from the
        evidence; queueing it before a later kept sentence lost answers.
        Above `_DENSE_BELOW` only; below, `densify` does this and more.
        Measured over every set's development part with
        ``benchmarks/ablation.py`` (docs/benchmarks.md).
        """
        heapq.heappush(self.heap, (-self.utility(n, 0), n, 0, self.version))

    def densify(self, n: int, k: int, opened: bool) -> None:
        """Sentence `k` of passage `n` was kept: the passage's sentences gain `dense`.

        At a tenth of a retrieval's length the greedy pass otherwise spends the
        room on the single best sentence of many passages, fragments that each
        miss the sentence beside them which states the answer (a parameter's
        description under its signature, a fact after the sentence naming its
        subject). Favouring the passages already opened keeps fewer, denser
        excerpts; above `_DENSE_BELOW` of the inputs there is room for both, and
        a multi-hop question needs the spread (measured in
        ``benchmarks/compression.py``: docs/benchmarks.md). Utilities rise
        here, which the lazy heap cannot see, so the passage's sentences are
        pushed again at their new utility when it is opened, and `run` skips
        the stale copies once a sentence is kept. A passage longer than
        `_DENSE_REACH` sentences has only the neighbours of each kept sentence
        pushed (its others are re-scored when the heap reaches them), which
        keeps a large document's packing linear. Like `complete`, this reaches
        sentences at or below the relevance floor too, but only those beside a
        kept sentence: they are chosen for their passage's sake, beside the
        evidence, never apart from it (an irrelevant last sentence after a
        ``…`` is filler).
        """
        kept, units = self.kept[n], len(self.docs[n].units)
        whole = units <= _DENSE_REACH
        if not opened:
            self.version += 1  # the passage's other queued sentences are now worth more
        others: Sequence[int] = range(units) if whole and not opened else (k - 1, k + 1)
        for j in others:
            if not 0 <= j < units or j in kept:
                continue
            # above the floor: queued here unless it was when its passage was opened;
            # at or below it: only beside what is kept, never apart from it
            if not (whole and opened) if self.eligible(n, j) else abs(j - k) == 1:
                heapq.heappush(self.heap, (-self.utility(n, j), n, j, self.version))

    def added_cost(self, doc: Doc, kept: set[int], k: int) -> int:
        """``_body_cost(kept | {k}) - _body_cost(kept)``, from `k`'s neighbours alone."""
        if k in kept:
            return 0
        if not kept or self.shape == "features":
            before = _body_cost(self.prepared, doc, sorted(kept), self.shape) if kept else 0
            return _body_cost(self.prepared, doc, sorted(kept | {k}), self.shape) - before
        order = sorted(kept)
        at = bisect.bisect_left(order, k)
        gap, joins = self.prepared.gap, doc.joins
        # the joins around `k`: its own whitespace to an adjacent kept sentence, else a gap
        previous = order[at - 1] if at else None
        following = order[at] if at < len(order) else None
        cost = doc.units[k].tokens
        if previous is not None:
            if following is not None:  # k falls between two kept sentences
                cost -= joins[previous] if following == previous + 1 else gap
            cost += joins[previous] if k == previous + 1 else gap
        elif k == 0 < order[0]:  # k is the new first: the leading marker goes
            cost -= gap
        if following is not None:
            cost += joins[k] if following == k + 1 else gap
        elif k == len(doc.units) - 1 > order[-1]:  # k is the new last: the trailing marker goes
            cost -= gap + self.prepared.trail
        return cost

    def lead_cut(self) -> None:
        """The most useful sentence can never fit whole: keep its opening, if that is worth more.

        Legal and technical prose states a rule in one long sentence, and at a
        tenth of a retrieval's length that sentence alone can outgrow the
        budget. The greedy pass would then skip it and spend everything on
        lesser sentences, often a sibling document's near-copy of the same
        clause. Cut to fit behind a truncation marker, it is kept instead when
        the cut keeps at least `_LEAD_SHARE` of it and its utility, scaled by
        the share kept, beats the best sentence that does fit whole.
        Only the ``passages`` shape is cut, and only where this selection owns
        the room (as `fill`).
        """
        if self.shape != "passages" or not self.heap or self.kept or self.max_items == 0:
            return
        _, n, k, _ = self.heap[0]  # nothing is covered yet: the heap's top is exact
        doc, unit = self.docs[n], self.docs[n].units[k]
        if (doc.overhead + self.added_cost(doc, set(), k) <= self.remaining
                or self.seen.covers(unit)):
            return
        choice = _cut_unit(self.prepared, doc, k, self.remaining - doc.overhead, self.shape)
        if choice is None or choice.cut is None:
            return
        share = (choice.cut - unit.start) / max(unit.end - unit.start, 1)
        if share < _LEAD_SHARE:
            return
        worth = share * self.utility(n, k)
        for negative, m, j, _ in self.entries:
            if -negative <= worth:
                break  # no sentence left is worth more than the cut, fitting or not
            other = self.docs[m]
            if ((m, j) != (n, k) and not self.seen.covers(other.units[j])
                    and other.overhead + self.added_cost(other, set(), j) <= self.remaining):
                return
        self.take_cut(n, k, choice)
        self.heap = []  # the cut ends its passage and the room is spent

    def take_cut(self, n: int, k: int, choice: Choice) -> None:
        """Keep `choice`, what is kept of passage `n` ending in sentence `k` cut to fit.

        The room paid is what `choice` costs beyond what the passage already held
        (its tags, when it held nothing).
        """
        doc = self.docs[n]
        held = sorted(self.kept.get(n, ()))
        before = (_body_cost(self.prepared, doc, held, self.shape) if held
                  else -doc.overhead)
        if n not in self.kept:
            self.order.append(n)
        self.kept[n] = set(choice.kept)
        self.cut[n] = choice.cut
        self.remaining -= _body_cost(self.prepared, doc, choice.kept, self.shape,
                                     choice.cut) - before
        self.seen.add(doc.units[k])

    def fallback_cut(self) -> None:
        """Nothing fit whole: cut the most useful sentence that can show a few words.

        The best `_FILL_TRIES` are tried in turn: the first may open with long
        words or numbers, or after a ``…``, where the next shows its start.
        """
        if self.kept:
            return
        tries = _FILL_TRIES
        for _, n, k, _ in self.entries:
            doc = self.docs[n]
            if self.seen.covers(doc.units[k]) or n in self.capped:
                continue
            choice = _cut_unit(self.prepared, doc, k, self.remaining - doc.overhead, self.shape)
            if choice is None:
                tries -= 1
                if not tries:
                    return
                continue
            self.take_cut(n, k, choice)
            return

    def complete(self) -> None:
        """Spend what is left on making chosen passages whole, best first, where one fits."""
        if self.shape != "passages" or self.remaining <= 0:
            return
        for n in self.order:
            doc = self.docs[n]
            if self.cut.get(n) is not None or len(self.kept[n]) == len(doc.units):
                continue
            kept = sorted(self.kept[n])
            everything = list(range(len(doc.units)))
            extra = (_whole_cost(self.prepared, doc, self.shape)
                     - _body_cost(self.prepared, doc, kept, self.shape))
            if extra > self.remaining:
                continue  # asked first: it is the cheaper question, and most often the answer
            if any(self.seen.covers(doc.units[k]) for k in everything if k not in self.kept[n]):
                continue  # completing it would repeat what is already packed
            self.remaining -= max(extra, 0)
            for k in everything:
                if k not in self.kept[n]:
                    self.kept[n].add(k)
                    self.seen.add(doc.units[k])

    def fill(self) -> None:
        """Spend the room no whole sentence fits on the opening of the next most useful one.

        At a tenth of a retrieval's length a quarter of packets would leave ten
        tokens or more unused, and a sentence's first words carry its subject
        and often what is said of it ("Heavyweights is a 1995 American
        comedy…"): cut at a word boundary behind the truncation marker, they
        are evidence where there was none.
        Only sentences above the relevance floor are tried (the same as the
        greedy pass), at least `_FILL_WORDS` of their words must fit, and the
        cut sentence comes after everything kept of its passage: a cut always
        ends a passage. Only the ``passages`` shape is filled; a brief keeps
        one whole sentence a passage, and a feature list whole items.
        """
        if self.shape != "passages" or not self.kept:
            return
        terse = self.prepared.terse_cuts
        marker = self.prepared.count(truncation_marker(1, 1, compact=terse))
        if self.remaining < self.prepared.gap + _FILL_WORDS + marker:
            return  # not even the shortest cut can fit
        full = self.max_items is not None and len(self.kept) >= self.max_items
        last = {n: max(kept) for n, kept in self.kept.items()}
        best: list[tuple[float, int, int]] = []
        for bound, n, k, _ in self.entries:  # best first by utility before coverage
            if len(best) == _FILL_TRIES and -bound <= -best[-1][0]:
                break  # utilities only fall: nothing later can enter the best few
            if self.cut.get(n) is not None or k <= last.get(n, -1):
                continue
            if n not in last and (full or n in self.capped):
                continue
            if self.seen.covers(self.docs[n].units[k]):
                continue
            bisect.insort(best, (-self.utility(n, k), n, k))
            del best[_FILL_TRIES:]
        for _, n, k in best:
            doc = self.docs[n]
            held = sorted(self.kept.get(n, ()))
            room = self.remaining + (_body_cost(self.prepared, doc, held, self.shape) if held
                                     else -doc.overhead)
            choice = _cut_after(self.prepared, doc, held, k, room, self.shape)
            if choice is not None:
                self.take_cut(n, k, choice)
                return

    def duplicate_only(self) -> set[int]:
        return {n for n, count in self.duplicates.items()
                if n not in self.kept and count == len(self.docs[n].units)}


def _body_cost(prepared: Prepared, doc: Doc, kept: Sequence[int], shape: Shape,
               cut: int | None = None) -> int:
    """Planned tokens of a document body: kept sentences, joins and markers."""
    if not kept:
        return 0
    units = doc.units
    if cut is not None:
        last = units[kept[-1]]
        size = len(doc.passage.text)
        marker = prepared.count(truncation_marker(size, size, compact=prepared.terse_cuts))
        head = sum(units[k].tokens for k in kept[:-1])
        tail = prepared.count(doc.passage.text[last.start:cut])
        joins = _joins(prepared, doc, kept) if shape == "passages" else 0
        lead = prepared.gap if kept[0] > 0 and shape != "features" else 0
        bullets = prepared.bullet * len(kept) + 1 if shape == "features" else 0
        return head + tail + marker + joins + lead + bullets
    tokens = sum(units[k].tokens for k in kept)
    if len(kept) < len(units):
        tokens += prepared.excerpt
    if shape == "features":
        return tokens + prepared.bullet * len(kept) + 1
    joins = _joins(prepared, doc, kept)
    markers = (kept[0] > 0) + (kept[-1] < len(units) - 1)
    return tokens + joins + markers * prepared.gap + (kept[-1] < len(units) - 1) * prepared.trail


def _whole_cost(prepared: Prepared, doc: Doc, shape: Shape) -> int:
    """`_body_cost` of every sentence of `doc`: its `Doc.whole_tokens`, but in a feature list."""
    if shape == "features":
        return _body_cost(prepared, doc, range(len(doc.units)), shape)
    return doc.whole_tokens


def _joins(prepared: Prepared, doc: Doc, kept: Sequence[int]) -> int:
    """Tokens between kept sentences: original whitespace when adjacent, else a gap."""
    total = 0
    for a, b in itertools.pairwise(kept):
        total += doc.joins[a] if b == a + 1 else prepared.gap
    return total


def _cut_prefix(prepared: Prepared, doc: Doc, room: int, shape: Shape) -> Choice | None:
    """The longest run of leading sentences that fits `room` with a truncation marker."""
    best: Choice | None = None
    for k in range(len(doc.units)):
        candidate = Choice(list(range(k + 1)), doc.units[k].end)
        if _body_cost(prepared, doc, candidate.kept, shape, candidate.cut) > room:
            break
        best = candidate
    return best if best is not None else _cut_unit(prepared, doc, 0, room, shape)


def _cut_after(prepared: Prepared, doc: Doc, kept: Sequence[int], k: int, room: int,
               shape: Shape) -> Choice | None:
    """Sentences `kept` and the opening words of `k` after them, cut to fit `room`, or None.

    At least `_FILL_WORDS` words of `k` must fit: fewer say too little to be worth
    the marker ("The<truncated/>"). A sentence with no space in it (a long
    token, CJK) is cut at a character.
    """
    unit = doc.units[k]
    text = doc.passage.text
    words = [unit.start + m.start() for m in re.finditer(r"\s+", text[unit.start:unit.end])
             if m.start() > 0]
    cuts = words[_FILL_WORDS - 1:] if words else list(range(unit.start + 1, unit.end))
    order = [*kept, k]

    def fits(index: int) -> bool:
        return _body_cost(prepared, doc, order, shape, cuts[index]) <= room

    if not cuts:
        return None
    # Start where the sentence's own characters per token say the room ends, then
    # gallop: a real tokenizer is slow, and the guess is seldom more than a word off.
    tail = room - _body_cost(prepared, doc, order, shape, unit.start)
    reach = unit.start + tail * (unit.end - unit.start) / max(unit.tokens, 1)
    guess = min(max(bisect.bisect_right(cuts, reach) - 1, 0), len(cuts) - 1)
    low, high = -1, len(cuts)  # cuts[low] fits (or none does), cuts[high] does not
    step = 1
    if fits(guess):
        low = guess
        while low + step < len(cuts) and fits(low + step):
            low, step = low + step, step * 2
        high = min(low + step, len(cuts))
    else:
        high = guess
        while high - step >= 0 and not fits(high - step):
            high, step = high - step, step * 2
        low = max(high - step, -1)
    while high - low > 1:
        middle = (low + high) // 2
        if fits(middle):
            low = middle
        else:
            high = middle
    return None if low < 0 else Choice(order, cuts[low])


def _cut_unit(prepared: Prepared, doc: Doc, k: int, room: int, shape: Shape) -> Choice | None:
    """Cut sentence `k` alone to fit `room` (see `_cut_after`)."""
    return _cut_after(prepared, doc, [], k, room, shape)


class Seen:
    """Sentences already packed, indexed so duplicate checks stay fast.

    Exact duplicates (same words) are found by key. Near duplicates (word-set
    Jaccard similarity of at least `_NEAR_DUPLICATE`, same numbers, six words
    or more) are found through an index of the packed sentences by word: a
    near duplicate of a sentence holds all but a few of its words, so it holds
    one of any few more than that (`_reach`), and only the packed sentences
    holding one of the sentence's least held words are compared with it.
    """

    def __init__(self) -> None:
        self._keys: set[str] = set()
        self._by_word: dict[str, list[Unit]] = defaultdict(list)
        """The packed sentences of `_NEAR_DUPLICATE_WORDS` words or more holding each word:
        a shorter one is no sentence's near duplicate. Indexing every word costs a few
        appends a sentence; choosing its rarest first cost a sort (most sentences packed
        are never looked up)."""
        self._words: set[str] = set()
        """Every word of the sentences added: a near duplicate's words are mostly in it."""

    def add(self, unit: Unit) -> None:
        self._keys.add(unit.key)
        self._words.update(unit.words)
        if len(unit.words) >= _NEAR_DUPLICATE_WORDS:
            by_word = self._by_word
            for word in unit.words:
                by_word[word].append(unit)

    def covers(self, unit: Unit) -> bool:
        """True when `unit` says what an already packed sentence says."""
        if unit.key in self._keys:
            return True
        size = len(unit.words)
        # a near duplicate shares at least `_NEAR_DUPLICATE` of the union of both word sets,
        # so of `unit`'s words: most sentences fail this before any index is read
        if size < _NEAR_DUPLICATE_WORDS or len(unit.words & self._words) < _NEAR_DUPLICATE * size:
            return False
        by_word = self._by_word
        least_held = sorted(unit.words, key=lambda word: len(by_word.get(word, ())))
        checked: set[int] = set()
        for word in least_held[:_reach(size)]:
            for other in by_word.get(word, ()):
                if id(other) in checked:
                    continue
                checked.add(id(other))
                if (unit.numbers == other.numbers
                        and _NEAR_DUPLICATE * size <= len(other.words)
                        and _NEAR_DUPLICATE * len(other.words) <= size
                        and len(unit.words & other.words)
                        >= _NEAR_DUPLICATE * len(unit.words | other.words)):
                    return True
        return False

    def copy(self) -> Seen:
        clone = Seen()
        clone._keys = set(self._keys)
        clone._by_word = defaultdict(list, {w: list(us) for w, us in self._by_word.items()})
        clone._words = set(self._words)
        return clone


def _reach(size: int) -> int:
    """How many of a sentence's `size` distinct words any near duplicate holds one of.

    A near duplicate holds at least ``ceil(_NEAR_DUPLICATE * size)`` of them, so it
    lacks fewer than this many: prefix filtering's bound, for any choice of the words.
    """
    return size - math.ceil(_NEAR_DUPLICATE * size) + 1


def _normalise(scores: Sequence[float]) -> list[float]:
    top = max((s for s in scores), default=0.0)
    if top <= 0:
        return [0.0] * len(scores)
    return [max(s, 0.0) / top for s in scores]


def _min_max(scores: Sequence[float | None]) -> list[float]:
    known = [s for s in scores if s is not None]
    if len(known) < 2 or max(known) == min(known):
        return [0.0] * len(scores)
    low, span = min(known), max(known) - min(known)
    return [0.0 if s is None else (s - low) / span for s in scores]
