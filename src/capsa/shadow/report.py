"""Aggregate paired rows into agreement and recall figures.

`ShadowReport.from_rows` reads nothing but released `PairedDecision` rows, so a
report can be built anywhere the rows were shipped: in process, in a notebook
over exported JSON, in an analytics job. It answers the questions a team asks
before switching routes: do the gates agree, do the routes pick the same
passages, does the candidate keep what the baseline selected, and do the two
rank passages alike.
"""

from __future__ import annotations

import io
import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence

from pydantic import BaseModel, ConfigDict, NonNegativeInt

from capsa.shadow.pairing import PairedDecision

__all__ = ["QueryAgreement", "ShadowReport", "spearman"]

_CONFIG = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)


def spearman(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Spearman's rank correlation of two equally long score lists.

    Ties share their average rank, and the coefficient is Pearson's
    correlation of the ranks. It is undefined, and None is returned, for
    fewer than two pairs or when either side ranks everything equal.

    Raises:
        ValueError: the lists differ in length.

    Examples:
        >>> spearman([0.9, 0.5, 0.1], [0.8, 0.6, 0.2])
        1.0
        >>> spearman([0.9, 0.5, 0.1], [0.1, 0.5, 0.9])
        -1.0
    """
    if len(xs) != len(ys):
        raise ValueError("spearman needs two lists of equal length")
    if len(xs) < 2:
        return None
    # Doubled ranks are integers, so every sum below is exact and a perfect
    # (anti-)correlation comes out as exactly 1.0 or -1.0.
    rx, ry, n = _doubled_ranks(xs), _doubled_ranks(ys), len(xs)
    cov = n * sum(a * b for a, b in zip(rx, ry, strict=True)) - sum(rx) * sum(ry)
    vx = n * sum(a * a for a in rx) - sum(rx) ** 2
    vy = n * sum(b * b for b in ry) - sum(ry) ** 2
    if vx == 0 or vy == 0:
        return None
    if cov * cov == vx * vy:
        return 1.0 if cov > 0 else -1.0
    return max(-1.0, min(1.0, cov / math.sqrt(vx * vy)))


def _doubled_ranks(values: Sequence[float]) -> list[int]:
    """Twice the 1-based rank of each value; ties share the average (i + j + 2)."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = i + j + 2
        i = j + 1
    return ranks


class QueryAgreement(BaseModel):
    """How far the two routes agreed on one query, under its released random id."""

    model_config = _CONFIG

    query_id: str
    """The random query id the rows carried."""
    rows: NonNegativeInt
    """Passages either route considered."""
    selection_jaccard: float
    """|selected by both| / |selected by either|; 1.0 when neither selected anything."""
    recall_of_baseline: float | None
    """Share of the baseline's selection the candidate also selected.

    None when the baseline selected nothing."""
    score_rank_correlation: float | None
    """Spearman correlation of the scores of passages both routes scored; None when undefined."""
    selection_rank_correlation: float | None = None
    """Spearman correlation of the ranks of passages both routes selected; None when undefined.

    Defined even where a route's gate gives no scores (a packer)."""
    shared_scores: bool = False
    """Both routes gave each of two or more passages they both scored the same score.

    The routes then read one retrieval's scores (a packer or a new gate over
    the same retriever), and `score_rank_correlation` is 1.0 by construction:
    it says nothing about whether two rankers agree."""


class ShadowReport(BaseModel):
    """Agreement between a baseline and a candidate route, over many queries.

    Agreement rates count every row; a passage one route never considered
    counts as not admitted, not selected and not included on that side, so
    retrieval differences show up as disagreement. Per-query figures are
    averaged over queries, so a query with many candidates weighs no more than
    one with few.

    Examples:
        >>> from capsa.shadow import Candidate, capture_retrieved, pair
        >>> docs = [Candidate(source_id="a", score=0.9, text="Refunds within 30 days."),
        ...         Candidate(source_id="b", score=0.4, text="Returns need a receipt.")]
        >>> rows = pair(capture_retrieved("baseline", "refunds", docs),
        ...             capture_retrieved("candidate", "refunds", docs[:1]))
        >>> report = ShadowReport.from_rows(rows)
        >>> (report.selection_jaccard, report.recall_of_baseline)
        (0.5, 0.5)
    """

    model_config = _CONFIG

    queries: NonNegativeInt
    """Queries whose rows were paired."""
    rows: NonNegativeInt
    """Rows aggregated, one per passage per query."""
    invalidated: NonNegativeInt
    """Queries whose capture was invalidated and produced no rows."""
    unretrieved: NonNegativeInt = 0
    """Queries where neither route retrieved a candidate: nothing to compare, no rows."""
    invalidation_causes: dict[str, int] = {}
    """Invalidated queries by cause (`capsa.errors.RefusalCause`, or the recorder's
    ``candidate_raised`` / ``candidate_timed_out`` / ``cancelled``), where the caller
    counted them."""
    admission_agreement: float | None
    """Share of rows both gates treated alike (admitted on both or on neither)."""
    selection_jaccard: float | None
    """Mean per-query Jaccard overlap of the two selected sets."""
    inclusion_agreement: float | None
    """Share of rows that reached both rendered blocks or neither."""
    baseline_visibility: float | None
    """Share of the baseline's included rows seen on the wire; None when never observed."""
    candidate_visibility: float | None
    """Share of the candidate's included rows seen on the wire; None when never observed."""
    recall_of_baseline: float | None
    """Mean per-query share of the baseline's selection that the candidate also selected."""
    score_rank_correlation: float | None
    """Mean per-query Spearman correlation over passages both routes scored."""
    selection_rank_correlation: float | None = None
    """Mean per-query Spearman correlation of the ranks of passages both routes selected."""
    shared_score_queries: NonNegativeInt = 0
    """Queries behind `score_rank_correlation` whose routes gave every passage they both
    scored the same score (`QueryAgreement.shared_scores`): there the correlation is 1.0
    by construction, and `to_markdown` says so beside the figure."""
    baseline_gate_reasons: dict[str, int]
    """How often the baseline's gate gave each reason."""
    candidate_gate_reasons: dict[str, int]
    """How often the candidate's gate gave each reason."""
    per_query: tuple[QueryAgreement, ...]
    """The per-query figures behind the means, in order of first appearance."""

    @classmethod
    def from_rows(
        cls,
        rows: Sequence[PairedDecision],
        *,
        invalidated: int | None = None,
        causes: Mapping[str, int] | None = None,
        unretrieved: int = 0,
    ) -> ShadowReport:
        """Aggregate released rows, with the queries that produced none.

        Args:
            rows: Released rows, from any number of queries.
            invalidated: How many queries produced no rows; the sum of
                `causes` when omitted (0 without either).
            causes: Those queries by cause, as `ShadowRun.causes` counts them.
            unretrieved: Queries where neither route retrieved anything
                (`ShadowRun.unretrieved`).

        Raises:
            ValueError: a row id repeats (the same rows were passed twice), or
                `causes` do not add up to `invalidated`.
        """
        if len({r.row_id for r in rows}) != len(rows):
            raise ValueError("a row id repeats; were the same rows passed twice?")
        by_cause = dict(sorted((causes or {}).items()))
        if invalidated is None:
            invalidated = sum(by_cause.values())
        elif by_cause and sum(by_cause.values()) != invalidated:
            raise ValueError("the invalidation causes do not add up to the invalidated count")
        by_query: dict[str, list[PairedDecision]] = {}
        for row in rows:
            by_query.setdefault(row.query_id, []).append(row)
        # by query id, random: never in the order the queries (or their rows) came
        per_query = tuple(_agreement(qid, by_query[qid]) for qid in sorted(by_query))
        return cls(
            queries=len(by_query),
            rows=len(rows),
            invalidated=invalidated,
            unretrieved=unretrieved,
            invalidation_causes=by_cause,
            admission_agreement=_share(rows, lambda r: r.baseline_admitted == r.candidate_admitted),
            selection_jaccard=_mean([q.selection_jaccard for q in per_query]),
            inclusion_agreement=_share(rows, lambda r: r.baseline_included == r.candidate_included),
            baseline_visibility=_share(
                [r for r in rows if r.baseline_included and r.baseline_visible is not None],
                lambda r: bool(r.baseline_visible),
            ),
            candidate_visibility=_share(
                [r for r in rows if r.candidate_included and r.candidate_visible is not None],
                lambda r: bool(r.candidate_visible),
            ),
            recall_of_baseline=_mean([q.recall_of_baseline for q in per_query]),
            score_rank_correlation=_mean([q.score_rank_correlation for q in per_query]),
            selection_rank_correlation=_mean([q.selection_rank_correlation for q in per_query]),
            shared_score_queries=sum(1 for q in per_query
                                     if q.shared_scores and q.score_rank_correlation is not None),
            baseline_gate_reasons=_reasons(r.baseline_gate_reason for r in rows),
            candidate_gate_reasons=_reasons(r.candidate_gate_reason for r in rows),
            per_query=per_query,
        )

    def to_json(self) -> str:
        """The report as indented JSON, numbers and ids only."""
        return self.model_dump_json(indent=2)

    def to_markdown(self) -> str:
        """The headline figures as a Markdown table, then the gate reasons.

        A score rank correlation that comes from routes sharing their scores
        is marked beside the figure and explained under the table: a bare
        1.000 there reads as two rankers agreeing.
        """
        scored = sum(1 for q in self.per_query if q.score_rank_correlation is not None)
        score_correlation = _fmt(self.score_rank_correlation)
        if self.shared_score_queries:
            score_correlation += f" (shared scores in {self.shared_score_queries} of {scored})"
        figures = [
            ("queries paired", str(self.queries)),
            ("queries invalidated", str(self.invalidated)),
            ("queries neither route retrieved for", str(self.unretrieved)),
            ("rows", str(self.rows)),
            ("admission agreement", _fmt(self.admission_agreement)),
            ("selection overlap (Jaccard)", _fmt(self.selection_jaccard)),
            ("inclusion agreement", _fmt(self.inclusion_agreement)),
            ("recall of baseline's selection", _fmt(self.recall_of_baseline)),
            ("score rank correlation (Spearman)", score_correlation),
            ("shared selection rank correlation", _fmt(self.selection_rank_correlation)),
            ("baseline visibility", _fmt(self.baseline_visibility)),
            ("candidate visibility", _fmt(self.candidate_visibility)),
        ]
        lines = ["| figure | value |", "| --- | ---: |"]
        lines += [f"| {name} | {value} |" for name, value in figures]
        if self.shared_score_queries:
            lines += ["", f"Both routes gave the same score to each passage they both scored "
                      f"in {self.shared_score_queries} of {scored} queries, as two routes "
                      "reading one retrieval's scores do: the score rank correlation is 1.0 "
                      "there by construction, not a sign that two rankers agree. Compare "
                      "admission, selection and inclusion instead."]
        reasons = sorted(set(self.baseline_gate_reasons) | set(self.candidate_gate_reasons))
        if reasons:
            lines += ["", "| gate reason | baseline | candidate |", "| --- | ---: | ---: |"]
            lines += [
                f"| {r} | {self.baseline_gate_reasons.get(r, 0)} | "
                f"{self.candidate_gate_reasons.get(r, 0)} |"
                for r in reasons
            ]
        if self.invalidation_causes:
            lines += ["", "| invalidation cause | queries |", "| --- | ---: |"]
            lines += [f"| {cause} | {n} |" for cause, n in self.invalidation_causes.items()]
        return "\n".join(lines) + "\n"

    def to_png(self, *, dpi: int = 100) -> bytes:
        """Draw the agreement figures and the per-query overlap as a PNG.

        matplotlib is imported here, not at module import, so the core stays
        usable without it.

        Raises:
            ImportError: matplotlib is missing; the message names the ``plot`` extra.
        """
        try:
            from matplotlib.figure import Figure
        except ImportError as exc:
            raise ImportError(
                "ShadowReport.to_png needs the 'plot' extra: pip install 'capsa[plot]'"
            ) from exc
        figures = {
            "admission": self.admission_agreement,
            "selection\n(Jaccard)": self.selection_jaccard,
            "inclusion": self.inclusion_agreement,
            "recall of\nbaseline": self.recall_of_baseline,
            # shared scores make it 1.0 by construction: the label says so
            ("rank corr.\n(shared scores)" if self.shared_score_queries
             else "rank corr.\n(Spearman)"): self.score_rank_correlation,
        }
        fig = Figure(figsize=(9, 3.6), layout="constrained")
        left, right = fig.subplots(1, 2, width_ratios=(3, 2))
        names = list(figures)
        values = [v if v is not None else 0.0 for v in figures.values()]
        bars = left.bar(names, values, color=["#4c72b0" if v is not None else "#cccccc"
                                              for v in figures.values()])
        left.bar_label(bars, labels=[_fmt(v) for v in figures.values()], fontsize=8)
        left.set_ylim(min(0.0, *values) if values else 0.0, 1.0)
        left.set_title(f"agreement over {self.queries} queries ({self.invalidated} invalidated)")
        left.tick_params(axis="x", labelsize=8)
        right.hist([q.selection_jaccard for q in self.per_query], bins=10, range=(0.0, 1.0),
                   color="#55a868")
        right.set_xlabel("per-query selection overlap (Jaccard)")
        right.set_ylabel("queries")
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", dpi=dpi)
        return buffer.getvalue()


def _agreement(query_id: str, rows: Sequence[PairedDecision]) -> QueryAgreement:
    b_sel = {r.row_id for r in rows if r.baseline_selected}
    c_sel = {r.row_id for r in rows if r.candidate_selected}
    union = b_sel | c_sel
    both = [r for r in rows if r.baseline_score is not None and r.candidate_score is not None]
    ranked = [(r.baseline_rank, r.candidate_rank) for r in rows
              if r.baseline_rank is not None and r.candidate_rank is not None]
    shared = len(both) >= 2 and all(r.baseline_score == r.candidate_score for r in both)
    return QueryAgreement(
        query_id=query_id,
        rows=len(rows),
        shared_scores=shared,
        selection_jaccard=len(b_sel & c_sel) / len(union) if union else 1.0,
        recall_of_baseline=len(b_sel & c_sel) / len(b_sel) if b_sel else None,
        score_rank_correlation=spearman(
            [r.baseline_score for r in both if r.baseline_score is not None],
            [r.candidate_score for r in both if r.candidate_score is not None],
        ),
        # Rank 1 is best, so ranks are negated to correlate like scores.
        selection_rank_correlation=spearman([-float(b) for b, _ in ranked],
                                            [-float(c) for _, c in ranked]),
    )


def _share(
    rows: Sequence[PairedDecision], holds: Callable[[PairedDecision], bool]
) -> float | None:
    return sum(1 for r in rows if holds(r)) / len(rows) if rows else None


def _mean(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


def _reasons(reasons: Iterable[str | None]) -> dict[str, int]:
    return dict(sorted(Counter(r for r in reasons if r is not None).items()))


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"
