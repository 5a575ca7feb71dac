"""benchmarks/question_forms.py: the forms are what they say, and a quick run adds up.

No test here asserts on retention: what respelling is worth is the script's
output, not something a test can fix in advance.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import capsa.budget.compress as compress

pytestmark = [pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def forms(bench_scripts: Any) -> Any:
    return bench_scripts.load("question_forms")


def _edits(a: str, b: str) -> int:
    """Damerau-Levenshtein distance, for checking the typo is one edit."""
    d = [[i + j if i * j == 0 else 0 for j in range(len(b) + 1)] for i in range(len(a) + 1)]
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1,
                          d[i - 1][j - 1] + (a[i - 1] != b[j - 1]))
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                d[i][j] = min(d[i][j], d[i - 2][j - 2] + 1)
    return d[len(a)][len(b)]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.from_regex(r"[A-Za-z]{1,9}[?,]?", fullmatch=True), min_size=1, max_size=8))
def test_a_typo_changes_one_long_word_by_one_edit_and_always_the_same(forms: Any,
                                                                      words: list[str]) -> None:
    question = " ".join(words)
    mistyped = forms.typo(question)
    assert forms.typo(question) == mistyped
    before, after = question.split(" "), mistyped.split(" ")
    changed = [(a, b) for a, b in zip(before, after, strict=True) if a != b]
    if not re.search(r"[A-Za-z]{5,}", question):
        assert mistyped == question
    else:
        # a swap of two equal letters changes nothing; any other edit changes one word
        assert len(changed) <= 1
        assert all(len(re.sub(r"\W", "", a)) >= 5 and _edits(a, b) == 1 for a, b in changed)


def test_typed_is_lower_case_without_punctuation(forms: Any) -> None:
    assert forms.typed("What's the EU's cap (in 2024)?") == "what's the eu's cap in 2024"


@pytest.mark.slow
def test_a_quick_run_adds_up_and_leaves_respelling_on(bench_scripts: Any) -> None:
    result, printed = bench_scripts.run("question_forms", "--limit", "3")
    assert compress._RESPELL is True
    assert set(result["forms"]) == {"written", "typed", "typo"}
    for form, methods in result["forms"].items():
        assert {"capsa", "capsa-exact", "bm25-passages"} <= set(methods)
        for found in methods.values():
            for part in ("dev", "aside"):
                assert found["all"][part] == [
                    sum(found["sets"][key][part][n] for key in result["sets"]) for n in range(3)]
        for key, change in result["respelling_by_set"][form].items():
            for part in ("dev", "aside"):
                assert change[part] == [methods["capsa"]["sets"][key][part][n]
                                        - methods["capsa-exact"]["sets"][key][part][n]
                                        for n in range(3)]
    assert "what respelling changes" in printed
