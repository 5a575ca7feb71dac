"""Invariants of `pair` and `ShadowReport` over generated captures."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from capsa.shadow import (
    Candidate,
    GateObservation,
    GateReason,
    RenderedBlock,
    RouteCapture,
    ShadowReport,
    Side,
    pair,
)

_STOPPED: tuple[GateReason, ...] = ("below_threshold", "over_budget", "filtered", "duplicate")


@dataclass(frozen=True)
class Observation:
    """Everything one route observed for one query; replayable into any capture."""

    query: str
    candidates: tuple[Candidate, ...]
    admitted: tuple[str, ...]
    selected: tuple[str, ...]
    gate: tuple[GateObservation, ...]
    wire: tuple[str, ...] | None

    def capture(self, side: Side) -> RouteCapture:
        capture = RouteCapture(side)
        capture.observe(self.query, self.candidates, self.admitted, self.selected, self.gate)
        texts = {c.source_id: c.text for c in self.candidates}
        block = "\n\n".join(texts[s] for s in self.selected)
        capture.finalize(RenderedBlock(query=self.query, text=block, scaffold=("\n\n",)))
        if self.wire is not None:
            capture.observe_provider(list(self.wire))
        return capture


@st.composite
def observations(draw: st.DrawFn, query: str = "q") -> Observation:
    size = draw(st.integers(0, 12))
    scores = draw(st.lists(st.floats(0.0, 1.0), min_size=size, max_size=size))
    candidates = tuple(
        Candidate(source_id=f"doc-{i}", score=s, text=f"[{i}] passage number {i}.")
        for i, s in enumerate(scores)
    )
    ids = [c.source_id for c in candidates]
    admitted = [i for i in ids if draw(st.booleans())]
    selected = [i for i in admitted if draw(st.booleans())]
    gate = tuple(
        GateObservation(source_id=i, reason="admitted" if i in admitted
                        else draw(st.sampled_from(_STOPPED)))
        for i in ids
    )
    texts = {c.source_id: c.text for c in candidates}
    block = "\n\n".join(texts[s] for s in selected)
    wire = draw(st.sampled_from([None, ("system", f"Context:\n{block}\nQ: {query}"),
                                 ("no context reached the model",)]))
    return Observation(query, candidates, tuple(admitted), tuple(selected), gate, wire)


@settings(max_examples=200, deadline=None)
@given(observations())
def test_pair_of_a_capture_with_itself_reports_full_agreement(observation: Observation) -> None:
    rows = pair(observation.capture("baseline"), observation.capture("candidate"))
    report = ShadowReport.from_rows(rows)
    if not rows:
        assert (report.queries, report.admission_agreement, report.selection_jaccard) == (
            0, None, None)
        return
    assert report.admission_agreement == 1.0
    assert report.selection_jaccard == 1.0
    assert report.inclusion_agreement == 1.0
    assert report.recall_of_baseline == (1.0 if observation.selected else None)
    distinct_scores = len({c.score for c in observation.candidates})
    assert report.score_rank_correlation == (1.0 if distinct_scores > 1 else None)
    assert report.baseline_visibility == report.candidate_visibility
    assert report.baseline_gate_reasons == report.candidate_gate_reasons
    assert all(r.baseline_present and r.candidate_present for r in rows)


@settings(max_examples=50, deadline=None)
@given(st.lists(observations(), min_size=1, max_size=5))
def test_self_pairing_agrees_fully_over_many_queries(batch: list[Observation]) -> None:
    rows = [r for o in batch for r in pair(o.capture("baseline"), o.capture("candidate"))]
    report = ShadowReport.from_rows(rows)
    assert report.queries == sum(1 for o in batch if o.candidates)
    assert report.rows == sum(len(o.candidates) for o in batch)
    if rows:
        assert (report.admission_agreement, report.inclusion_agreement) == (1.0, 1.0)
        assert report.selection_jaccard == 1.0


@settings(max_examples=100, deadline=None)
@given(observations(), observations())
def test_pair_releases_one_row_per_source_in_the_union(left: Observation,
                                                        right: Observation) -> None:
    rows = pair(left.capture("baseline"), right.capture("candidate"))
    union = {c.source_id for c in left.candidates} | {c.source_id for c in right.candidates}
    assert len(rows) == len(union)
    assert len({r.row_id for r in rows}) == len(rows)
    assert sum(r.baseline_present for r in rows) == len(left.candidates)
    assert sum(r.candidate_present for r in rows) == len(right.candidates)
    assert sum(r.baseline_selected for r in rows) == len(left.selected)
    assert sum(r.candidate_included for r in rows) == len(right.selected)


@settings(max_examples=100, deadline=None)
@given(observations(), observations())
def test_report_figures_stay_within_their_ranges(left: Observation, right: Observation) -> None:
    report = ShadowReport.from_rows(pair(left.capture("baseline"), right.capture("candidate")))
    for value in (report.admission_agreement, report.selection_jaccard,
                  report.inclusion_agreement, report.recall_of_baseline,
                  report.baseline_visibility, report.candidate_visibility):
        assert value is None or 0.0 <= value <= 1.0
    assert report.score_rank_correlation is None or -1.0 <= report.score_rank_correlation <= 1.0
