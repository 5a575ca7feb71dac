"""Build ``pydocs-qa.jsonl``: questions with gold answers over the Python reference manual.

A second answer-retention set beside HotpotQA, so compression is not tuned to
one corpus: technical reference text instead of Wikipedia prose, single-hop
questions written by hand against the manual's topics as shipped in CPython's
``pydoc_data.topics`` (the text ``help()`` shows; PSF licence).

Each question gets its gold chunk (the chunk of the named topic that holds the
answer) and eight distractors: the chunks of the whole manual most similar to
the question by plain TF-IDF cosine (not capsa's scorer) that do **not** hold
the answer, so the answer survives only if the gold chunk's answering sentence
does. Chunks are the manual's paragraphs merged up to about 500 characters, as
a splitter would make them. Rows use the HotpotQA file's fields, in a seeded
shuffled order.

Run: ``python benchmarks/data/make_pydocs_qa.py`` (writes ``pydocs-qa.jsonl``
beside this file; the committed copy was built with CPython 3.11).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from pydoc_data.topics import topics

from qa_sets import TfIdf, contexts, merge, normalise, row, write

OUT = Path(__file__).with_name("pydocs-qa.jsonl")

QUESTIONS: tuple[tuple[str, str, str], ...] = (
    # (topic, question, answer as it appears in the topic)
    ("execmodel", "What exception is raised when a local variable is referenced before it "
     "has been bound?", "UnboundLocalError"),
    ("raise", "Which exception does a bare raise throw when no exception is active?",
     "RuntimeError"),
    ("power", "What exception does raising 0.0 to a negative power produce?",
     "ZeroDivisionError"),
    ("typesmapping", "Since which Python version is dictionary order guaranteed to be "
     "insertion order?", "3.7"),
    ("typesmapping", "Which class method creates a new dictionary with keys from an iterable "
     "and all values set to one value?", "fromkeys"),
    ("typesmapping", "What does popitem() raise when the dictionary is empty?", "KeyError"),
    ("typesmapping", "What do dictionary view objects provide on the dictionary's entries?",
     "dynamic view"),
    ("comparisons", "Which special values make any ordered comparison with a number false?",
     "not-a-number"),
    ("comparisons", "How are bytes objects compared with each other?", "lexicographically"),
    ("lambda", "What can functions created with lambda expressions not contain?",
     "statements or annotations"),
    ("lambda", "What kind of functions do lambda expressions create?", "anonymous functions"),
    ("debugger", "Which module defines an interactive source code debugger for Python "
     "programs?", "pdb"),
    ("debugger", "Which built-in can be inserted at a location to break into the debugger?",
     "breakpoint()"),
    ("string-methods", "Which string method returns a copy suitable for caseless matching?",
     "casefold"),
    ("string-methods", "Which string method splits a string at line boundaries?",
     "splitlines"),
    ("string-methods", "Which method pads a numeric string on the left with zeros?", "zfill"),
    ("string-methods", "Which method splits a string at the first occurrence of a separator "
     "and returns a 3-tuple?", "partition"),
    ("exceptions", "Which model of error handling does Python use?", "termination"),
    ("exceptions", "For which exception does the interpreter not print a stack traceback "
     "when it is unhandled?", "SystemExit"),
    ("floating", "What is the allowed range of floating-point literals?",
     "implementation-dependent"),
    ("floating", "In what radix are the integer and exponent parts of a float literal "
     "always interpreted?", "radix 10"),
    ("pass", "What happens when a pass statement is executed?", "nothing happens"),
    ("return", "Returning from a generator function raises which exception?",
     "StopIteration"),
    ("typesmethods", "What exception results from setting an attribute on a method object?",
     "AttributeError"),
    ("dict", "If a key is given more than once in a dict display, which value is stored?",
     "last one given"),
    ("integers", "Apart from what is there no limit for the length of integer literals?",
     "available memory"),
    ("async", "Which statement iterates over an asynchronous iterable?", "async for"),
    ("formatstrings", "Which alignment option forces the field to be right-aligned?",
     "right-aligned"),
    ("formatstrings", "Which presentation type multiplies the number by 100 and shows it "
     "with a percent sign?", "Percentage"),
    ("class", "In what is a class body executed when the class is defined?",
     "new execution frame"),
    ("typesmodules", "What is the only special operation on a module?", "attribute access"),
    ("bltin-null-object", "How many null objects are there in Python?", "exactly one"),
    ("identifiers", "What are the keywords of the language, which cannot be used as ordinary "
     "identifiers?", "reserved words"),
    ("bitwise", "What does the & operator yield for two integers?", "bitwise AND"),
    ("conversions", "What are numeric arguments of a binary arithmetic operator converted "
     "to?", "common type"),
    ("lists", "What encloses the expressions of a list display?", "square brackets"),
    ("typesseq", "What cost does building a sequence by repeated concatenation of "
     "immutable sequences have?", "quadratic runtime cost"),
    ("typesseq", "Which exception ends iteration over a sequence through the legacy "
     "__getitem__ protocol?", "IndexError"),
    ("typesseq-mutable", "What does remove() raise when the item is not in the list?",
     "ValueError"),
    ("raise", "Which attribute of the raised exception does raise ... from attach the "
     "cause to?", "__cause__"),
    ("typesfunctions", "What is the only operation on a function object?", "call it"),
    ("atom-literals", "What kind of data types do all literals correspond to?", "immutable"),
    ("customization", "Which built-in function calls object.__hash__?", "hash()"),
    ("calls", "What exception is raised when an argument slot is already filled in a call?",
     "TypeError"),
    ("import", "Which module provides import_module() for programmatic imports?",
     "importlib"),
)


def chunks() -> list[tuple[str, str]]:
    """(topic, chunk text) for the whole manual: paragraphs merged up to 500 characters."""
    out: list[tuple[str, str]] = []
    for topic, text in sorted(topics.items()):
        pieces = (p.strip() for p in re.split(r"\n\s*\n", text))
        out += merge(topic, (p for p in pieces if p))
    return out


def main() -> int:
    corpus = chunks()
    normalised = [normalise(text) for _, text in corpus]
    tfidf = TfIdf([text for _, text in corpus])
    rows = []
    for n, (topic, question, answer) in enumerate(QUESTIONS):
        golds = [k for k, (t, text) in enumerate(corpus) if t == topic and answer in text]
        if not golds:
            print(f"answer {answer!r} not in topic {topic!r}", file=sys.stderr)
            return 1
        cosine = tfidf.similarity(question)
        best_gold = max(golds, key=cosine)
        found = contexts(corpus, normalised, normalise(answer), best_gold, cosine, seed=n)
        rows.append(row(f"pydocs-{n:03d}", question, answer, found))
    write(rows, OUT)
    print(f"wrote {len(rows)} questions to {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
