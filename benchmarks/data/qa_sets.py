"""What the answer-retention sets' builders share: chunking, TF-IDF, rows.

Each ``make_*_qa.py`` names its source, its questions and how it finds a
question's gold chunk; the chunks, the distractors (the chunks most similar to
the question by plain TF-IDF cosine that do not hold the answer) and the row
format (the HotpotQA file's fields) are built here, the same way for every set.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
import string
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

DISTRACTORS = 8
CHUNK_CHARS = 500
_WORD = re.compile(r"[a-z0-9_]+")


def normalise(text: str) -> str:
    """The benchmark's answer normalisation (see ``benchmarks/compression.py``)."""
    text = "".join(ch for ch in text.lower() if ch not in set(string.punctuation))
    text = re.sub(r"[^\w\s]", " ", text)
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def pieces(text: str, *, indented: bool = False) -> Iterator[str]:
    """Paragraphs; one longer than a chunk is cut at line ends, as a splitter falls back.

    With `indented`, a paragraph keeps its leading indentation (a man page's
    option list) and only a line of spaces or tabs separates paragraphs.
    """
    separator = r"\n[ \t]*\n" if indented else r"\n\s*\n"

    def trim(piece: str) -> str:
        return piece.rstrip() if indented else piece.strip()

    for paragraph in re.split(separator, text):
        paragraph = paragraph.strip("\n").rstrip() if indented else paragraph.strip()
        if len(paragraph) <= CHUNK_CHARS:
            if paragraph.strip():
                yield paragraph
            continue
        current = ""
        for line in paragraph.split("\n"):
            if current and len(current) + len(line) > CHUNK_CHARS:
                yield trim(current)
                current = ""
            current = f"{current}\n{line}" if current else line
        if current.strip():
            yield trim(current)


def merge(title: str, pieces: Iterable[str], size: int = CHUNK_CHARS) -> list[tuple[str, str]]:
    """(title, chunk) pairs: consecutive pieces joined by a blank line up to `size`."""
    out: list[tuple[str, str]] = []
    current = ""
    for piece in pieces:
        if current and len(current) + len(piece) > size:
            out.append((title, current))
            current = ""
        current = f"{current}\n\n{piece}" if current else piece
    if current:
        out.append((title, current))
    return out


SENTENCE_CHUNK_CHARS = 700
"""Sentence chunks grow up to this many characters (a longer sentence stays whole)."""
SENTENCE_CHUNK_MIN_CHARS = 300
"""A sentence chunk ends at a paragraph break once it holds this many characters."""
_SENTENCE_END = re.compile(r"(?<=[.?!])\s+(?=[A-Z0-9(\[])")


def sentence_spans(text: str, start: int = 0) -> list[tuple[int, int]]:
    """(start, end) of each chunk of ``text[start:]``, cut the way a sentence splitter cuts.

    Sentences (a full stop, question or exclamation mark before a space and a
    capital, digit or bracket) are joined up to `SENTENCE_CHUNK_CHARS`, and a
    chunk ends at a paragraph break (a blank line) once it holds
    `SENTENCE_CHUNK_MIN_CHARS`. The cuts never look at any answer.
    """
    units: list[tuple[int, int, bool]] = []  # sentence start, end, opens a paragraph
    for paragraph in re.finditer(r"[^\n]+(?:\n(?!\n)[^\n]+)*", text[start:]):
        at, begin = start + paragraph.start(), 0
        for gap in _SENTENCE_END.finditer(paragraph.group()):
            units.append((at + begin, at + gap.start(), begin == 0))
            begin = gap.end()
        units.append((at + begin, start + paragraph.end(), begin == 0))
    spans: list[tuple[int, int]] = []
    current: tuple[int, int] | None = None
    for begin, end, opens in units:
        if current is not None and (end - current[0] > SENTENCE_CHUNK_CHARS or (
                opens and current[1] - current[0] >= SENTENCE_CHUNK_MIN_CHARS)):
            spans.append(current)
            current = None
        current = (begin, end) if current is None else (current[0], end)
    if current is not None:
        spans.append(current)
    return spans


class TfIdf:
    """Plain TF-IDF cosine over the chunks (not capsa's scorer)."""

    def __init__(self, texts: Sequence[str]) -> None:
        self.docs = [Counter(_WORD.findall(text.lower())) for text in texts]
        frequency = Counter(word for doc in self.docs for word in doc)
        self.idf = {w: math.log(len(self.docs) / f) for w, f in frequency.items()}
        self.norms = [math.sqrt(sum((c * self.idf[w]) ** 2 for w, c in doc.items())) or 1.0
                      for doc in self.docs]

    def similarity(self, question: str) -> Callable[[int], float]:
        """Chunk number -> its cosine with `question`."""
        query = Counter(_WORD.findall(question.lower()))

        def cosine(k: int) -> float:
            return sum(c * self.idf.get(w, 0.0) ** 2 * self.docs[k][w]
                       for w, c in query.items()) / self.norms[k]

        return cosine


def contexts(corpus: Sequence[tuple[str, str]], normalised: Sequence[str], gold: str,
             best_gold: int, cosine: Callable[[int], float], seed: int) -> list[dict[str, Any]]:
    """The gold chunk and its distractors, shuffled by `seed`, as the row's contexts."""
    distractors = sorted((k for k in range(len(corpus)) if gold not in normalised[k]),
                         key=lambda k: (-cosine(k), k))[:DISTRACTORS]
    chosen = [best_gold, *distractors]
    random.Random(seed).shuffle(chosen)
    return [{"id": str(i), "title": corpus[k][0], "paragraph_text": corpus[k][1],
             "is_supporting": k == best_gold} for i, k in enumerate(chosen)]


def ten_passages(corpus: Sequence[tuple[str, str]], normalised: Sequence[str], gold: str,
                 best: int, cosine: Callable[[int], float], key: str,
                 distractors: int = 9) -> list[dict[str, Any]]:
    """The gold passage and the `distractors` closest passages that lack the answer, as contexts.

    Closest by `cosine` (plain TF-IDF, never capsa's scorer); ordered by a hash
    of `key` (the question's id) and each passage's index, so the order never
    depends on the row's position in the file. Fewer than `distractors` when
    the pool has fewer passages without the answer: the caller decides.
    """
    chosen = [best, *sorted((k for k in range(len(corpus)) if gold not in normalised[k]),
                            key=lambda k: (-cosine(k), k))[:distractors]]
    chosen.sort(key=lambda k: hashlib.sha256(f"{key}|{k}".encode()).hexdigest())
    return [{"id": str(i), "title": corpus[k][0], "paragraph_text": corpus[k][1],
             "is_supporting": k == best} for i, k in enumerate(chosen)]


def rows_for(prefix: str, corpus: Sequence[tuple[str, str]],
             questions: Sequence[tuple[str, str, str]]) -> list[dict[str, Any]]:
    """One row per ``(source, question, answer)``: its gold chunk and its distractors.

    The gold chunk is the chunk of the named source that holds the answer, the
    most similar to the question if several do.

    Raises:
        ValueError: an answer is not in its source, or opens its gold chunk (so
            keeping a chunk's opening would be enough): write another question.
    """
    normalised = [normalise(text) for _, text in corpus]
    tfidf = TfIdf([text for _, text in corpus])
    rows = []
    for n, (source, question, answer) in enumerate(questions):
        gold = normalise(answer)
        golds = [k for k, (name, _) in enumerate(corpus)
                 if name == source and gold in normalised[k]]
        if not golds:
            raise ValueError(f"answer {answer!r} not in {source!r}")
        cosine = tfidf.similarity(question)
        best_gold = max(golds, key=cosine)
        if normalised[best_gold].startswith(gold):
            raise ValueError(f"answer {answer!r} opens its gold chunk: ask another question")
        found = contexts(corpus, normalised, gold, best_gold, cosine, seed=n)
        assert [c for c in found if gold in normalise(c["paragraph_text"])] == [
            c for c in found if c["is_supporting"]], question
        rows.append(row(f"{prefix}-{n:03d}", question, answer, found))
    return rows


def build(prefix: str, corpus: Sequence[tuple[str, str]],
          questions: Sequence[tuple[str, str, str]], out: Path) -> int:
    """Write the set's rows (`rows_for`) to `out`; the exit status of a builder's ``main``."""
    try:
        rows = rows_for(prefix, corpus, questions)
    except ValueError as error:
        print(error, file=sys.stderr)
        return 1
    write(rows, out)
    print(f"wrote {len(rows)} questions over {len(corpus)} chunks to {out}")
    return 0


def row(question_id: str, question: str, answer: str,
        found: list[dict[str, Any]]) -> dict[str, Any]:
    """One question in the HotpotQA file's fields."""
    return {"question_id": question_id, "question_text": question,
            "answers_objects": [{"spans": [answer]}], "contexts": found}


def write(rows: Sequence[dict[str, Any]], out: Path) -> None:
    out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows),
                   encoding="utf-8")
