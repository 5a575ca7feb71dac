"""ShadowReport: agreement and recall figures from released rows, and their renderings."""

from __future__ import annotations

import json
import math
import sys
from itertools import count

import pytest

from capsa.shadow import PairedDecision, ShadowReport, spearman

_ids = count(1)


def _id() -> str:
    return next(_ids).to_bytes(16, "big").hex()


def _row(query_id: str, b: str, c: str, *, bs: float | None = None, cs: float | None = None,
         visible: tuple[bool | None, bool | None] = (None, None)) -> PairedDecision:
    """A row from two flag strings: '' absent, 'p' present, 'a' admitted, 's' selected,
    'i' included (each implies the ones before it)."""

    def side(flags: str) -> tuple[bool, bool, bool, bool]:
        level = {"": 0, "p": 1, "a": 2, "s": 3, "i": 4}[flags]
        return level >= 1, level >= 2, level >= 3, level >= 4

    bp, ba, bsel, binc = side(b)
    cp, ca, csel, cinc = side(c)
    return PairedDecision(
        query_id=query_id, row_id=_id(),
        baseline_present=bp, candidate_present=cp,
        baseline_score=bs if bp else None, candidate_score=cs if cp else None,
        baseline_admitted=ba, candidate_admitted=ca,
        baseline_gate_reason=("admitted" if ba else "below_threshold") if bp else None,
        candidate_gate_reason=("admitted" if ca else "over_budget") if cp else None,
        baseline_selected=bsel, candidate_selected=csel,
        baseline_included=binc, candidate_included=cinc,
        baseline_visible=visible[0], candidate_visible=visible[1],
    )


@pytest.fixture
def rows() -> list[PairedDecision]:
    q1, q2 = _id(), _id()
    return [
        # query 1: baseline selects x, y; candidate selects y, z
        _row(q1, "i", "a", bs=0.9, cs=0.5, visible=(True, False)),
        _row(q1, "i", "i", bs=0.6, cs=0.8, visible=(True, True)),
        _row(q1, "p", "i", bs=0.1, cs=0.7, visible=(False, True)),
        _row(q1, "", "p", cs=0.2, visible=(False, False)),
        # query 2: both select w; baseline also admits v
        _row(q2, "i", "i", bs=0.8, cs=0.9),
        _row(q2, "a", "p", bs=0.4, cs=0.3),
    ]


def test_from_rows_counts_queries_rows_and_invalidated(rows) -> None:
    report = ShadowReport.from_rows(rows, invalidated=3)
    assert (report.queries, report.rows, report.invalidated) == (2, 6, 3)


def test_from_rows_keeps_invalidation_causes_and_prints_them(rows) -> None:
    report = ShadowReport.from_rows(rows, causes={"transformed_block": 2, "bad_score": 1})
    assert report.invalidated == 3
    assert report.invalidation_causes == {"bad_score": 1, "transformed_block": 2}
    assert "| transformed_block | 2 |" in report.to_markdown()


def test_from_rows_refuses_causes_that_do_not_add_up(rows) -> None:
    with pytest.raises(ValueError, match="add up"):
        ShadowReport.from_rows(rows, invalidated=1, causes={"bad_score": 2})


def test_admission_agreement_counts_rows_both_gates_treated_alike(rows) -> None:
    # r1 a/a, r2 a/a, r3 not/a, r4 not/not, r5 a/a, r6 a/not -> 4 of 6
    assert ShadowReport.from_rows(rows).admission_agreement == pytest.approx(4 / 6)


def test_selection_jaccard_is_the_mean_of_per_query_overlaps(rows) -> None:
    # query 1: {x,y} vs {y,z} -> 1/3; query 2: {w} vs {w} -> 1
    assert ShadowReport.from_rows(rows).selection_jaccard == pytest.approx((1 / 3 + 1) / 2)


def test_inclusion_agreement_counts_rows_in_both_blocks_or_neither(rows) -> None:
    # r1 i/not, r2 i/i, r3 not/i, r4 not/not, r5 i/i, r6 not/not -> 4 of 6
    assert ShadowReport.from_rows(rows).inclusion_agreement == pytest.approx(4 / 6)


def test_recall_of_baseline_is_the_share_of_its_selection_the_candidate_kept(rows) -> None:
    # query 1: y of {x,y} -> 0.5; query 2: w of {w} -> 1
    assert ShadowReport.from_rows(rows).recall_of_baseline == pytest.approx(0.75)


def test_visibility_counts_only_included_rows_with_an_observed_wire(rows) -> None:
    report = ShadowReport.from_rows(rows)
    assert report.baseline_visibility == 1.0  # r1, r2 included and visible; r5 unknown
    assert report.candidate_visibility == 1.0  # r2, r3 included and visible


def test_visibility_is_none_when_no_wire_was_observed() -> None:
    q = _id()
    report = ShadowReport.from_rows([_row(q, "i", "i", bs=0.5, cs=0.5)])
    assert (report.baseline_visibility, report.candidate_visibility) == (None, None)


def test_visibility_reports_included_rows_missing_from_the_wire() -> None:
    q = _id()
    report = ShadowReport.from_rows([
        _row(q, "i", "i", bs=0.9, cs=0.9, visible=(True, False)),
        _row(q, "i", "i", bs=0.5, cs=0.5, visible=(True, False)),
    ])
    assert (report.baseline_visibility, report.candidate_visibility) == (1.0, 0.0)


def test_score_rank_correlation_uses_passages_both_routes_scored(rows) -> None:
    report = ShadowReport.from_rows(rows)
    # query 1 pairs (0.9,0.5) (0.6,0.8) (0.1,0.7): ranks (3,1) (2,3) (1,2) -> -0.5
    # query 2 pairs (0.8,0.9) (0.4,0.3) -> 1.0
    assert report.per_query[0].score_rank_correlation == pytest.approx(-0.5)
    assert report.score_rank_correlation == pytest.approx(0.25)


def _same_scores(query_id: str) -> list[PairedDecision]:
    """Two routes reading one retrieval: every passage both scored has one score."""
    return [_row(query_id, "i", "i", bs=0.9, cs=0.9), _row(query_id, "a", "p", bs=0.4, cs=0.4),
            _row(query_id, "p", "", bs=0.2)]


def test_a_query_whose_routes_share_every_score_is_flagged(rows) -> None:
    shared = _id()
    report = ShadowReport.from_rows([*rows, *_same_scores(shared)])
    flags = {q.query_id: q.shared_scores for q in report.per_query}
    assert flags[shared] is True and sorted(flags.values()) == [False, False, True]
    assert report.shared_score_queries == 1


def test_to_markdown_says_plainly_when_the_correlation_comes_from_shared_scores() -> None:
    report = ShadowReport.from_rows([*_same_scores(_id()), *_same_scores(_id())])
    assert report.score_rank_correlation == 1.0
    text = report.to_markdown()
    assert "| score rank correlation (Spearman) | 1.000 (shared scores in 2 of 2) |" in text
    assert "same score to each passage they both scored in 2 of 2 queries" in text


def test_to_markdown_says_nothing_of_shared_scores_when_the_routes_score_apart(rows) -> None:
    text = ShadowReport.from_rows(rows).to_markdown()
    assert "shared scores" not in text and "same score" not in text


def _ranked(query_id: str, b_rank: int | None, c_rank: int | None) -> PairedDecision:
    row = _row(query_id, "i" if b_rank else "p", "i" if c_rank else "p")
    return row.model_copy(update={"baseline_rank": b_rank, "candidate_rank": c_rank})


def test_selection_rank_correlation_uses_ranks_where_no_score_is_given() -> None:
    q1, q2 = _id(), _id()
    rows = [_ranked(q1, 1, 2), _ranked(q1, 2, 1), _ranked(q1, 3, None),   # swapped: -1.0
            _ranked(q2, 1, 1), _ranked(q2, 2, 3), _ranked(q2, 3, 2)]      # 0.5
    report = ShadowReport.from_rows(rows)
    assert report.score_rank_correlation is None  # no scores on either side
    assert [q.selection_rank_correlation for q in report.per_query] == [-1.0, 0.5]
    assert report.selection_rank_correlation == pytest.approx(-0.25)


def test_selection_rank_correlation_is_undefined_with_one_shared_pick() -> None:
    report = ShadowReport.from_rows([_ranked(_id(), 1, 1), _ranked(_id(), 2, None)])
    assert report.selection_rank_correlation is None


def test_recall_is_none_for_a_query_where_the_baseline_selected_nothing() -> None:
    q = _id()
    report = ShadowReport.from_rows([_row(q, "a", "i", bs=0.5, cs=0.5)])
    assert report.per_query[0].recall_of_baseline is None
    assert report.recall_of_baseline is None
    assert report.selection_jaccard == 0.0


def test_gate_reasons_are_counted_per_side(rows) -> None:
    report = ShadowReport.from_rows(rows)
    assert report.baseline_gate_reasons == {"admitted": 4, "below_threshold": 1}
    assert report.candidate_gate_reasons == {"admitted": 4, "over_budget": 2}


def test_from_rows_of_nothing_reports_no_figures() -> None:
    report = ShadowReport.from_rows([], invalidated=2)
    assert (report.queries, report.rows, report.invalidated) == (0, 0, 2)
    assert report.admission_agreement is None and report.selection_jaccard is None
    assert report.per_query == ()


def test_from_rows_refuses_the_same_rows_twice(rows) -> None:
    with pytest.raises(ValueError, match="row id repeats"):
        ShadowReport.from_rows(rows + rows[:1])


def test_to_json_round_trips(rows) -> None:
    report = ShadowReport.from_rows(rows, invalidated=1)
    assert ShadowReport.model_validate_json(report.to_json()) == report
    assert json.loads(report.to_json())["invalidated"] == 1


def test_to_markdown_lists_every_headline_figure(rows) -> None:
    text = ShadowReport.from_rows(rows, invalidated=1).to_markdown()
    assert "| queries invalidated | 1 |" in text
    assert "| selection overlap (Jaccard) | 0.667 |" in text
    assert "| recall of baseline's selection | 0.750 |" in text
    assert "| over_budget | 0 | 2 |" in text


def test_to_markdown_writes_n_a_for_undefined_figures() -> None:
    assert "| admission agreement | n/a |" in ShadowReport.from_rows([]).to_markdown()


def test_to_png_draws_a_png_image(rows) -> None:
    pytest.importorskip("matplotlib")
    png = ShadowReport.from_rows(rows).to_png()
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    assert len(png) > 1000


def test_to_png_names_the_plot_extra_when_matplotlib_is_missing(rows, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    with pytest.raises(ImportError, match=r"capsa\[plot\]"):
        ShadowReport.from_rows(rows).to_png()


# --- spearman ---------------------------------------------------------------------


def test_spearman_is_one_for_the_same_order() -> None:
    assert spearman([0.1, 0.5, 0.9], [10.0, 20.0, 30.0]) == 1.0


def test_spearman_is_minus_one_for_the_reverse_order() -> None:
    assert spearman([0.1, 0.5, 0.9, 1.0], [4.0, 3.0, 2.0, 1.0]) == -1.0


def test_spearman_gives_ties_their_average_rank() -> None:
    # ranks x = 1..5, y = 1, 2, 3.5, 5, 3.5 -> 8 / sqrt(10 * 9.5)
    assert spearman([1, 2, 3, 4, 5], [5, 6, 7, 8, 7]) == pytest.approx(8 / math.sqrt(95))


def test_spearman_is_undefined_for_fewer_than_two_pairs() -> None:
    assert spearman([], []) is None
    assert spearman([0.3], [0.7]) is None


def test_spearman_is_undefined_when_one_side_ranks_everything_equal() -> None:
    assert spearman([0.5, 0.5, 0.5], [0.1, 0.2, 0.3]) is None


def test_spearman_refuses_lists_of_different_length() -> None:
    with pytest.raises(ValueError, match="equal length"):
        spearman([0.1, 0.2], [0.1])
