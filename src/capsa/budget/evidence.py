"""Evidence beyond term matching: second hops and answer-type cues, without a model.

A question often names one thing and asks about another ("the film whose score
Jerry Goldsmith composed: who produced it?"). The sentences that match the
question's terms find the first hop; the answer sits in a passage about the
thing that first hop mentions, which shares few terms with the question. This
module finds those links the way a reader does, from names:

- *entities*: the capitalised words and numbers of a sentence, as terms;
- *second hop*: the entities of the best-matching sentences that the question
  does not contain are the names the answer may hang on; a passage whose
  opening (its subject, in encyclopaedic and reference text) is one of the
  names *another* passage's best sentences mention is *linked*, and the packer
  ranks the passage higher in proportion to the link (a passage naming its own
  subject links nothing, and neither does a name most passages mention: that
  is the text's vocabulary, such as a licence's defined terms). The link
  raises the passage, not its sentences: lifting every relevant sentence of a
  linked passage as well spread tight packets over the passages that the best
  evidence merely mentions, which cost single-hop questions more than it won
  multi-hop ones (`docs/benchmarks.md`, "The second hop raises passages,
  not sentences");
- *answer type*: "when" and "what year" questions favour sentences with a year
  or a date, "how many" and "how much" ones sentences with a number.

All of it is computed from the texts of one packing, deterministically, in
time linear in their length.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from capsa.budget.relevance import analyze, analyze_query

__all__ = ["Evidence", "answer_cue", "entity_terms", "link"]

_SEEDS = 3
"""How many of the best-matching sentences seed the second hop."""
_CUE_WEIGHT = 0.15
"""Bonus for a relevant sentence that holds what the question asks for."""
_SHARED_NAME = 0.5
"""Share of the passages above which a name they mention links none of them.

Checked on both halves of HotpotQA (no loss at any budget), pydocs-qa (no
change) and licenses-qa, where defined terms linked boilerplate passages."""
_CAPITALISED = re.compile(r"\b[A-Z][\w'’-]*|\b\d[\d,.]*\b")
_NAME_START = re.compile(r"[\"'“(]*[A-Z][\w'’-]*\s+[A-Z]")
_HEAD = re.compile(
    r"(?:[\"'“(]*[A-Z0-9][\w'’.-]*[\")”]*\s*(?:(?:of|the|de|von|van|and|&|in)\s+)?)+")
_YEAR = re.compile(r"\b(?:1[0-9]{3}|20[0-9]{2})s?\b")
_MONTH = re.compile(
    r"\b(?:January|February|March|April|May|June|July|August|September|October|November"
    r"|December)\b")
_NUMBER = re.compile(r"\d|\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve"
                     r"|hundred|thousand|million|billion|dozen)\b", re.IGNORECASE)
_WHEN = re.compile(r"\b(?:when|what year|which year|what date|in what year|since when"
                   r"|how long ago|what century|which century|what decade)\b", re.IGNORECASE)
_HOW_MANY = re.compile(r"\b(?:how (?:many|much|old|long|far|tall|big|large|high|deep|often)"
                       r"|what (?:number|percentage|amount|population|age|size))\b",
                       re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Evidence:
    """Second-hop and answer-type adjustments for the sentences of one packing."""

    relevance: tuple[float, ...]
    """Each sentence's relevance, the scorer's plus the answer-type cue, 0 to 1."""
    linked: tuple[float, ...]
    """Per passage, from 0 to 1: how much its subject is one of the second-hop entities."""


def entity_terms(text: str) -> frozenset[str]:
    """The terms of a text's capitalised words and numbers, as `analyze` spells them.

    Examples:
        >>> sorted(entity_terms("The film was scored by Jerry Goldsmith in 1979."))
        ['1979', 'goldsmith', 'jerry']
    """
    words = _CAPITALISED.findall(text)
    if words and text.lstrip("\"'“(").startswith(words[0]) and not _NAME_START.match(text):
        words = words[1:]  # a capital that only starts the sentence names nothing
    return frozenset(term for word in words for term in analyze(word))


def answer_cue(query: str) -> re.Pattern[str] | None:
    """What an answering sentence must hold for the kind of question, if the kind is clear.

    Examples:
        >>> answer_cue("When was the hotel built?") is not None
        True
        >>> answer_cue("Who built the hotel?") is None
        True
    """
    if _WHEN.search(query):
        return _DATE
    if _HOW_MANY.search(query):
        return _NUMBER
    return None


_DATE = re.compile(f"{_YEAR.pattern}|{_MONTH.pattern}")


def link(
    query: str,
    texts: Sequence[str],
    terms: Sequence[Sequence[str]],
    scores: Sequence[float],
    owners: Sequence[int],
    leads: Sequence[int | None],
    priors: Sequence[float],
) -> Evidence:
    """Answer-type cues for every sentence and second-hop links for every passage.

    Args:
        query: the question.
        texts: every sentence of every passage.
        terms: each sentence's `analyze` terms.
        scores: each sentence's scorer relevance, 0 to 1.
        owners: the passage each sentence belongs to.
        leads: per passage, the index (into `texts`) of its first sentence, or None.
        priors: per passage, its whole-passage relevance, 0 to 1.

    Returns:
        The sentences' relevance with answer-type evidence, and each passage's
        link (which the packer weighs into the passage's prior, not into its
        sentences).
    """
    query_terms = set(analyze_query(query))
    count = len(texts)
    relevance = list(scores)
    linked = [0.0] * len(leads)
    if not count or not query_terms:
        return Evidence(tuple(relevance), tuple(linked))
    seeds = sorted((k for k in range(count) if scores[k] > 0),
                   key=lambda k: (-(scores[k] + priors[owners[k]]), k))[:_SEEDS]
    named = [(owners[k], entity_terms(texts[k]) - query_terms) for k in seeds]
    hop_terms: set[str] = set().union(*(names for _, names in named))
    if hop_terms:
        frequency: Counter[str] = Counter()
        holders: dict[str, set[int]] = {t: set() for t in hop_terms}
        for unit_terms, owner in zip(terms, owners, strict=True):
            found = hop_terms.intersection(unit_terms)
            if found:
                frequency.update(found)
                for t in found:
                    holders[t].add(owner)
        weights = {t: math.log(1.0 + (count - frequency[t] + 0.5) / (frequency[t] + 0.5))
                   for t in hop_terms}
        # A capitalised word most passages use is vocabulary, not a subject: the defined
        # terms of legal and technical text ("Contributor", "Covered Code"), or the
        # topic every version of one document shares. Naming it links nothing. (A
        # real link always spans two passages: the one naming, the one named.)
        shared = max(2.0, _SHARED_NAME * len(leads))
        specific = {t for t in hop_terms if len(holders[t]) <= shared}
        for n, lead in enumerate(leads):
            if lead is None:
                continue
            head = _head_terms(texts[lead])
            if not head:
                continue
            # Only names from other passages link one: a passage's own best sentence
            # naming its own subject says nothing about where the answer hangs.
            others = set().union(*(names for owner, names in named if owner != n))
            mass = sum(weights[t] for t in head if t in others and t in specific)
            total = sum(weights.get(t, 1.0) for t in head)
            linked[n] = mass / total if total else 0.0
    cue = answer_cue(query)
    if cue is not None:
        relevance = [r + _CUE_WEIGHT if r > 0 and cue.search(texts[k]) else r
                     for k, r in enumerate(relevance)]
    top = max(relevance, default=0.0)
    if top > 0:
        relevance = [r / top for r in relevance]
    return Evidence(tuple(relevance), tuple(linked))


def _head_terms(lead: str) -> frozenset[str]:
    """The terms of the capitalised run a passage opens with: usually its subject."""
    match = _HEAD.match(lead)
    if match is None:
        return frozenset()
    return frozenset(analyze(match.group()))
