"""The bundled routes: deterministic, fully observable, and comparable over the sample corpus."""

from __future__ import annotations

import pytest

from capsa.budget import estimate_tokens
from capsa.demo.corpus_source import QUESTIONS
from capsa.demo.routes import (
    ROUTES,
    LexicalRoute,
    Passage,
    capture_route,
    compare_routes,
    prompt_for,
    sample_passages,
)
from capsa.errors import CaptureInvalid
from capsa.shadow import RouteRun, ShadowReport

QUERIES = [q.question for q in QUESTIONS]


def test_sample_passages_have_unique_ids_and_texts_none_inside_another() -> None:
    passages = sample_passages()
    assert len({p.source_id for p in passages}) == len(passages) > 20
    texts = [p.text for p in passages]
    assert not [(a, b) for a in texts for b in texts if a is not b and a in b]


def test_sample_passages_hold_every_sample_answer() -> None:
    texts = [p.text for p in sample_passages()]
    assert all(any(q.answer in t for t in texts) for q in QUESTIONS)


def test_lexical_route_scores_lie_in_zero_to_one_with_the_best_at_one() -> None:
    run = ROUTES["lexical"]().run(QUESTIONS[0].question)
    scores = [c.score for c in run.candidates]
    assert scores[0] == 1.0 and all(0.0 < s <= 1.0 for s in scores)
    assert scores == sorted(scores, reverse=True)


def test_lexical_route_selects_at_most_top_k_admitted_passages() -> None:
    run = ROUTES["lexical"]().run(QUESTIONS[0].question)
    assert len(run.selected) <= 3 and set(run.selected) <= set(run.admitted)
    assert run.selected == run.admitted[: len(run.selected)]


def test_lexical_route_gate_reasons_match_the_admitted_set() -> None:
    run = ROUTES["lexical"]().run(QUESTIONS[3].question)
    admitted = {g.source_id for g in run.gate if g.reason == "admitted"}
    assert admitted == set(run.admitted)
    assert all(g.reason == "below_threshold" for g in run.gate if g.source_id not in admitted)


def test_budgeted_route_renders_a_block_within_its_token_budget() -> None:
    for question in QUESTIONS:
        run = ROUTES["budgeted"]().run(question.question)
        assert 0 < estimate_tokens(run.block.text) <= 160


def test_budgeted_route_refuses_what_the_packet_dropped() -> None:
    run = ROUTES["budgeted"]().run(QUESTIONS[0].question)
    reasons = {g.source_id: g.reason for g in run.gate}
    # the packet's receipts are the gate: out of budget, or under the relevance floor
    refused = [r for r in reasons.values() if r != "admitted"]
    assert refused
    assert set(refused) <= {"over_budget", "below_threshold", "duplicate"}
    assert {s for s, r in reasons.items() if r == "admitted"} == set(run.admitted)
    assert run.selected == run.admitted


def test_budgeted_route_carries_the_compressed_text_it_rendered() -> None:
    runs = [ROUTES["budgeted"]().run(q.question) for q in QUESTIONS]
    kept = [c.text for run in runs for c in run.candidates if c.source_id in run.selected]
    originals = {p.text for p in sample_passages()}
    assert any(text not in originals and "…" in text for text in kept)
    assert all(text in run.block.text for run in runs for text in
               [c.text for c in run.candidates if c.source_id in run.selected])


@pytest.mark.parametrize("name", sorted(ROUTES))
def test_each_bundled_route_renders_the_answer_to_every_sample_question(name) -> None:
    route = ROUTES[name]()
    missed = [q.question for q in QUESTIONS if q.answer not in route.run(q.question).block.text]
    assert missed == []


def test_lexical_route_retrieves_nothing_for_words_outside_the_corpus() -> None:
    run = ROUTES["lexical"]().run("zyzzyva quokka")
    assert run.candidates == () and run.block.text == ""


def test_lexical_route_refuses_an_empty_corpus() -> None:
    with pytest.raises(ValueError, match="at least one passage"):
        LexicalRoute("empty", [])


def test_capture_route_observes_the_block_on_the_wire() -> None:
    capture = capture_route("baseline", QUESTIONS[0].question, ROUTES["lexical"]())
    assert capture.state == "finalized"


def test_prompt_for_puts_the_block_and_the_query_in_the_user_message() -> None:
    messages = prompt_for("q?", "the block")
    assert "the block" in messages[-1]["content"] and "q?" in messages[-1]["content"]


def test_compare_routes_pairs_every_sample_question() -> None:
    run = compare_routes(QUERIES, ROUTES["lexical"](), ROUTES["budgeted"]())
    report = ShadowReport.from_rows(run.rows, invalidated=run.invalidated)
    assert (report.queries, report.invalidated) == (len(QUERIES), 0)
    assert report.baseline_visibility == 1.0 and report.candidate_visibility == 1.0
    assert report.selection_jaccard is not None and report.selection_jaccard < 1.0


def test_compare_routes_of_a_route_with_itself_agrees_fully() -> None:
    run = compare_routes(QUERIES, ROUTES["lexical"](), ROUTES["lexical"]())
    report = ShadowReport.from_rows(run.rows)
    assert (report.admission_agreement, report.selection_jaccard) == (1.0, 1.0)
    assert (report.recall_of_baseline, report.score_rank_correlation) == (1.0, 1.0)


def test_compare_routes_pairs_two_passages_with_the_same_text() -> None:
    same = "refund window rules apply"
    twins = [Passage("x#1", same), Passage("y#1", same)]
    route = LexicalRoute("twins", twins)
    run = compare_routes(["refund window", "nothing matches"], route, route)
    assert (run.invalidated, len({r.query_id for r in run.rows})) == (0, 1)  # one had no rows


class _Repeating:
    """The lexical route, but its block repeats the best passage for one query."""

    name = "repeating"

    def __init__(self, inner: LexicalRoute) -> None:
        self.inner = inner

    def run(self, query: str) -> RouteRun:
        run = self.inner.run(query)
        if query != "refund window":
            return run
        first = next(c.text for c in run.candidates if c.source_id == run.selected[0])
        block = run.block.model_copy(update={"text": f"{run.block.text}\n\n{first}"})
        return RouteRun(run.candidates, run.admitted, run.selected, run.gate, block)


def test_compare_routes_counts_a_query_whose_capture_is_refused_by_cause() -> None:
    route = _Repeating(LexicalRoute("plain", [Passage("x#1", "refund window rules apply"),
                                              Passage("y#1", "shipping takes five days")]))
    run = compare_routes(["refund window", "shipping days"], route, route)
    assert (run.invalidated, dict(run.causes)) == (1, {"repeated_passage": 1})
    with pytest.raises(CaptureInvalid) as refused:
        capture_route("baseline", "refund window", route)
    assert refused.value.cause == "repeated_passage"
