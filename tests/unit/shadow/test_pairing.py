"""pair: join two captures by source, release anonymous rows, spend both captures."""

from __future__ import annotations

import re

import pytest
from pydantic import ValidationError

from capsa.errors import CaptureInvalid
from capsa.shadow import PairedDecision, RenderedBlock, pair

HEX32 = re.compile(r"^[0-9a-f]{32}$")


def test_pair_releases_one_row_per_source_either_route_considered(finalized) -> None:
    baseline = finalized("baseline", scores={"a": 0.9, "b": 0.6})
    candidate = finalized("candidate", scores={"b": 0.8, "c": 0.4})
    rows = pair(baseline, candidate)
    presence = sorted((r.baseline_present, r.candidate_present) for r in rows)
    assert presence == [(False, True), (True, False), (True, True)]


def test_pair_row_for_a_one_sided_source_has_empty_other_side(finalized) -> None:
    rows = pair(finalized("baseline", scores={"a": 0.9}), finalized("candidate", scores={}))
    (row,) = rows
    assert row.baseline_present and row.baseline_score == 0.9
    assert not row.candidate_present
    assert row.candidate_score is None and row.candidate_gate_reason is None
    assert not (row.candidate_admitted or row.candidate_selected or row.candidate_included)


def test_pair_carries_each_sides_decisions_into_the_row(finalized) -> None:
    baseline = finalized("baseline", scores={"a": 0.9, "b": 0.2}, admitted=["a"], selected=["a"])
    candidate = finalized("candidate", scores={"a": 0.7, "b": 0.6}, admitted=["a", "b"],
                          selected=["b"])
    rows = sorted(pair(baseline, candidate), key=lambda r: -(r.baseline_score or 0))
    a, b = rows
    assert (a.baseline_selected, a.candidate_selected) == (True, False)
    assert (a.baseline_included, a.candidate_included) == (True, False)
    assert (b.baseline_admitted, b.baseline_gate_reason) == (False, "below_threshold")
    assert (b.candidate_admitted, b.candidate_gate_reason) == (True, "admitted")
    assert (b.baseline_score, b.candidate_score) == (0.2, 0.6)


def test_pair_gives_every_row_of_one_call_the_same_fresh_query_id(finalized) -> None:
    rows = pair(finalized("baseline"), finalized("candidate"))
    assert len({r.query_id for r in rows}) == 1
    assert HEX32.match(rows[0].query_id)


def test_pair_gives_each_row_a_distinct_fresh_id(finalized) -> None:
    rows = pair(finalized("baseline"), finalized("candidate"))
    ids = [r.row_id for r in rows]
    assert len(set(ids)) == len(ids) == 3
    assert all(HEX32.match(i) for i in ids)
    assert rows[0].query_id not in ids


def test_two_pair_calls_share_no_id(finalized) -> None:
    first = pair(finalized("baseline"), finalized("candidate"))
    second = pair(finalized("baseline"), finalized("candidate"))
    ids_first = {r.row_id for r in first} | {first[0].query_id}
    ids_second = {r.row_id for r in second} | {second[0].query_id}
    assert not ids_first & ids_second


def test_pair_draws_ids_from_the_injected_source(finalized, counting_bytes) -> None:
    rows = pair(finalized("baseline"), finalized("candidate"), random_bytes=counting_bytes)
    assert counting_bytes.calls == 4
    assert rows[0].query_id == (1).to_bytes(16, "big").hex()
    assert sorted(r.row_id for r in rows) == [(n).to_bytes(16, "big").hex() for n in (2, 3, 4)]


def test_pair_orders_rows_by_their_random_id_not_by_source(finalized) -> None:
    draws = iter([b"\x00" * 16, b"\xff" * 16, b"\x80" * 16, b"\x01" * 16])
    rows = pair(finalized("baseline"), finalized("candidate"), random_bytes=lambda n: next(draws))
    # sources a, b, c received ff.., 80.., 01..: released in id order, so c, b, a
    assert [r.baseline_score for r in rows] == [0.3, 0.6, 0.9]


def test_pair_refuses_a_random_source_that_repeats(finalized) -> None:
    with pytest.raises(ValueError, match="repeated an id"):
        pair(finalized("baseline"), finalized("candidate"), random_bytes=lambda n: b"\x07" * n)


def test_pair_spends_both_captures(finalized) -> None:
    baseline, candidate = finalized("baseline"), finalized("candidate")
    pair(baseline, candidate)
    assert (baseline.state, candidate.state) == ("paired", "paired")
    assert (baseline.query, candidate.query) == (None, None)


def test_pairing_a_spent_capture_again_is_refused(finalized) -> None:
    baseline, candidate = finalized("baseline"), finalized("candidate")
    pair(baseline, candidate)
    with pytest.raises(CaptureInvalid, match="finalized capture"):
        pair(baseline, finalized("candidate"))


def test_pair_refuses_an_unfinalized_capture_and_discards_both(observe, finalized) -> None:
    baseline, candidate = finalized("baseline"), observe("candidate")
    with pytest.raises(CaptureInvalid, match="finalized capture"):
        pair(baseline, candidate)
    assert (baseline.state, candidate.state) == ("invalid", "invalid")


def test_pair_refuses_an_invalidated_capture(finalized) -> None:
    candidate = finalized("candidate")
    candidate.invalidate()
    with pytest.raises(CaptureInvalid):
        pair(finalized("baseline"), candidate)


def test_pair_refuses_captures_of_different_queries(finalized) -> None:
    with pytest.raises(CaptureInvalid, match="different queries"):
        pair(finalized("baseline"), finalized("candidate", query="what is store credit"))


def test_pair_refuses_swapped_sides(finalized) -> None:
    with pytest.raises(ValueError, match="one capture of each side"):
        pair(finalized("candidate"), finalized("baseline"))


def test_pair_refuses_the_same_capture_on_both_sides(finalized) -> None:
    capture = finalized("baseline")
    with pytest.raises(ValueError, match="one capture of each side"):
        pair(capture, capture)


def test_pair_marks_included_rows_visible_when_the_block_reached_the_wire(finalized,
                                                                          texts) -> None:
    baseline = finalized("baseline", selected=["a"])
    baseline.observe_provider([f"Context:\n{texts['a']}"])
    candidate = finalized("candidate", selected=["a"])
    candidate.observe_provider(["no context at all"])
    rows = {r.baseline_score: r for r in pair(baseline, candidate)}
    assert (rows[0.9].baseline_visible, rows[0.9].candidate_visible) == (True, False)
    assert (rows[0.6].baseline_visible, rows[0.6].candidate_visible) == (False, False)


def test_pair_leaves_visibility_unknown_for_an_unobserved_wire(finalized) -> None:
    rows = pair(finalized("baseline"), finalized("candidate"))
    assert {(r.baseline_visible, r.candidate_visible) for r in rows} == {(None, None)}


def test_pair_of_two_empty_retrievals_releases_no_rows(observe) -> None:
    baseline, candidate = observe("baseline", scores={}), observe("candidate", scores={})
    for capture in (baseline, candidate):
        capture.finalize(RenderedBlock(query=capture.query or "", text=""))
    assert pair(baseline, candidate) == ()


def test_paired_decision_refuses_an_id_that_is_not_a_fresh_hex_id() -> None:
    with pytest.raises(ValidationError):
        PairedDecision(
            query_id="travel-policy.pdf#3", row_id="0" * 32,
            baseline_present=True, candidate_present=False,
            baseline_score=0.5, candidate_score=None,
            baseline_admitted=True, candidate_admitted=False,
            baseline_gate_reason="admitted", candidate_gate_reason=None,
            baseline_selected=True, candidate_selected=False,
            baseline_included=True, candidate_included=False,
            baseline_visible=None, candidate_visible=None,
        )


def test_paired_decision_has_only_numeric_boolean_reason_and_id_fields() -> None:
    annotations = {name: str(field.annotation) for name, field in
                   PairedDecision.model_fields.items()}
    text_fields = {name for name, ann in annotations.items() if "str" in ann}
    assert text_fields == {"query_id", "row_id"}
