"""benchmarks/extraction.py: its inputs are what they claim, its quick run reports every figure.

No test here asserts on time: the quick run is checked for shape and internal
consistency (every file measured on both sides with the same text, every bomb
refused at the archive stage, every throughput file extracted).
"""

from __future__ import annotations

import io
import math
import statistics
import zipfile
from types import ModuleType
from typing import Any

import pytest

from capsa.demo.corpus_source import DOCUMENTS, HOSTILE_FILES
from capsa.errors import IngestionRejected
from capsa.guard import ExtractionLimits, inspect_archive


@pytest.fixture(scope="module")
def bench(bench_scripts: Any) -> ModuleType:
    return bench_scripts.load("extraction")


@pytest.fixture(scope="module")
def quick_run(bench: ModuleType, bench_scripts: Any) -> tuple[dict[str, Any], str]:
    with pytest.MonkeyPatch.context() as patch:
        for name, value in bench._WORKER_ENV.items():
            patch.setenv(name, value)  # restored afterwards, whatever main() sets
        patch.delenv("OMP_THREAD_LIMIT", raising=False)
        return bench_scripts.run(bench, "--quick", "--plain")


# ---------------------------------------------------------------- inputs (fast)


@pytest.mark.parametrize("declared", [10**9, 10**10, 10**11])
def test_zip64_bomb_declares_its_size_to_zipfile_in_a_few_hundred_bytes(
        bench: ModuleType, declared: int) -> None:
    payload = bench.zip64_bomb(declared)
    with zipfile.ZipFile(io.BytesIO(payload)) as archive:
        (member,) = archive.infolist()
    assert member.file_size == declared
    assert len(payload) < 1000


@pytest.mark.parametrize("declared", [10**9, 10**10, 10**11])
def test_many_member_bomb_splits_its_size_under_the_member_cap(
        bench: ModuleType, declared: int) -> None:
    payload = bench.many_member_bomb(declared)
    with zipfile.ZipFile(io.BytesIO(payload)) as archive:
        members = archive.infolist()
    assert sum(m.file_size for m in members) == declared
    assert len(members) <= ExtractionLimits().max_members


@pytest.mark.parametrize("builder", ["zip64_bomb", "many_member_bomb"])
def test_bench_bombs_are_refused_by_archive_inspection(bench: ModuleType, builder: str) -> None:
    with pytest.raises(IngestionRejected) as caught:
        inspect_archive(getattr(bench, builder)(10**11), ExtractionLimits(), label="b.zip")
    assert caught.value.stage == "archive"


def test_generated_samples_are_all_over_the_size_threshold(bench: ModuleType) -> None:
    samples = bench.generated_samples()
    assert len(samples) >= 4
    assert all(len(s.payload) > bench.SIZE_THRESHOLD for s in samples)


def test_summary_p95_is_the_nearest_rank(bench: ModuleType) -> None:
    stats = bench._summary([i / 1000 for i in range(1, 21)])  # 1..20 ms
    assert stats == {"median_ms": 10.5, "p95_ms": 19.0, "runs": 20}


def test_aggregate_judges_only_files_over_the_threshold(bench: ModuleType) -> None:
    def row(over: bool, raw: float, guarded: float) -> dict[str, Any]:
        ratio = guarded / raw
        return {"over_threshold": over, "raw": {"median_ms": raw},
                "guarded": {"median_ms": guarded}, "ratio": ratio,
                "meets_target": ratio <= bench.TARGET_RATIO if over else None}

    result = bench.aggregate([row(True, 100, 110), row(True, 100, 200), row(False, 1, 50)])
    assert result["files_over_threshold"] == 2
    assert result["files_meeting_target"] == 1
    assert result["pooled_ratio"] == pytest.approx(1.55)
    assert result["meets_target_every_file"] is False


# ---------------------------------------------------------------- the quick run (slow)


@pytest.mark.slow
def test_quick_run_writes_every_section(quick_run: tuple[dict[str, Any], str]) -> None:
    report, _ = quick_run
    assert set(report) == {"meta", "overhead", "zip_bombs", "throughput", "real_documents",
                           "sandbox_cost", "first_file", "ingestion", "preparse"}
    assert [row["kind"] for row in report["preparse"]["rows"]] == [
        "docx", "pptx", "xlsx", "epub", "html", "pdf"]
    for row in report["preparse"]["rows"]:
        assert row["reason"] == "text_too_long", row
        assert row["parsed_chars"] > report["preparse"]["max_text_chars"]
    assert {"cold_text_s", "warm_up_s", "text_after_warm_up_s", "docx_after_warm_up_s",
            "cold_docx_s", "met"} <= set(report["first_file"])
    cost = report["sandbox_cost"]
    assert cost["fork_and_sandbox_ms"] > 0
    assert cost["added_ms"] == cost["fork_and_sandbox_ms"] - cost["fork_ms"]
    assert report["meta"]["quick"] is True
    assert report["meta"]["raw_caches_cleared"] == [
        "_process_cached", "word_tokenize", "pos_tag", "_tokenize_for_cache"]
    assert {"files", "aggregate", "fork_roundtrip", "target_ratio"} <= set(report["overhead"])


@pytest.mark.slow
def test_quick_run_measures_every_good_corpus_file_and_generated_file(
        quick_run: tuple[dict[str, Any], str], bench: ModuleType) -> None:
    report, _ = quick_run
    files = report["overhead"]["files"]
    names = [f["name"] for f in files]
    expected = [d.name for d in DOCUMENTS] + [s.name for s in bench.generated_samples()]
    assert names == expected
    assert [f["name"] for f in files if "error" in f] == []


@pytest.mark.slow
def test_quick_run_guarded_and_raw_produce_the_same_text(
        quick_run: tuple[dict[str, Any], str]) -> None:
    report, _ = quick_run
    for row in report["overhead"]["files"]:
        assert row["texts_match"] is True, row["name"]
        assert row["chars"] > 0


@pytest.mark.slow
def test_quick_run_timings_are_consistent(quick_run: tuple[dict[str, Any], str]) -> None:
    report, _ = quick_run
    for row in report["overhead"]["files"]:
        ocr = row["kind"] == "png"
        sides = ("raw", "guarded", "fork_roundtrip") + (() if ocr else ("raw_in_fresh_fork",))
        for side in sides:
            stats = row[side]
            assert stats["runs"] >= 1
            assert 0 <= stats["median_ms"] <= stats["p95_ms"]
        assert row["guarded"]["median_ms"] > 0
        assert row["ratio"] == pytest.approx(
            row["guarded"]["median_ms"] / max(row["raw"]["median_ms"], 1e-6), rel=1e-2)
        parts = row["breakdown_ms"]
        assert (parts["fresh_child_penalty"] is None) is ocr
        total = sum(v for k, v in parts.items() if k != "overhead" and v is not None)
        assert total == pytest.approx(parts["overhead"], abs=0.01)


@pytest.mark.slow
def test_quick_run_judges_the_target_only_over_the_threshold(
        quick_run: tuple[dict[str, Any], str]) -> None:
    report, _ = quick_run
    overhead = report["overhead"]
    for row in overhead["files"]:
        over = row["bytes"] > overhead["size_threshold_bytes"]
        assert row["over_threshold"] is over
        if over:
            assert row["meets_target"] is (row["ratio"] <= overhead["target_ratio"])
        else:
            assert row["meets_target"] is None
    aggregate = overhead["aggregate"]
    big = [r for r in overhead["files"] if r["over_threshold"]]
    assert aggregate["files_over_threshold"] == len(big) >= 4
    assert aggregate["files_meeting_target"] == sum(1 for r in big if r["meets_target"])


@pytest.mark.slow
def test_quick_run_marks_pdf_as_missing_from_unstructured_auto(
        quick_run: tuple[dict[str, Any], str]) -> None:
    report, _ = quick_run
    by_kind = {row["kind"]: row["unstructured_auto"] for row in report["overhead"]["files"]}
    assert "error" in by_kind["pdf"]
    assert "median_ms" in by_kind["docx"]


@pytest.mark.slow
def test_quick_run_rejects_every_bomb_at_the_archive_stage(
        quick_run: tuple[dict[str, Any], str]) -> None:
    bombs = quick_run[0]["zip_bombs"]
    assert bombs["all_rejected"] is True
    zipped = [c for c in bombs["cases"] if c["shape"] != "corpus (hostile)"]
    assert {c["declared_bytes"] for c in zipped} == {10**9, 10**10, 10**11}
    for case in zipped:
        assert case["stage"] == "archive"
        assert case["declared_by_zipfile"] == case["declared_bytes"]
        assert case["bytes_on_disk"] < 200_000
        assert 0 < case["median_ms"] <= case["p95_ms"]
    hostile = {c["label"]: c for c in bombs["cases"] if c["shape"] == "corpus (hostile)"}
    assert set(hostile) == {h.name for h in HOSTILE_FILES}
    assert all(not math.isinf(v) for v in bombs["spread"].values())
    assert set(bombs["flat_by_shape"]) == set(bombs["spread"])
    assert bombs["flat"] is all(bombs["flat_by_shape"].values())


@pytest.mark.slow
def test_quick_run_throughput_extracts_every_file_on_both_pools(
        quick_run: tuple[dict[str, Any], str]) -> None:
    flow = quick_run[0]["throughput"]
    for workers in (1, 2):
        assert flow[f"workers_{workers}"]["failures"] == 0
        assert flow[f"workers_{workers}"]["files_per_s"] > 0
    assert flow["batch_files"] > 0
    assert flow["ratio"] == pytest.approx(
        flow["workers_2"]["files_per_s"] / flow["workers_1"]["files_per_s"], rel=1e-2)


@pytest.mark.slow
def test_quick_run_prints_every_table(quick_run: tuple[dict[str, Any], str]) -> None:
    _, printed = quick_run
    for title in ("Guarded vs raw", "Where the overhead goes", "Zip-bomb rejection",
                  "Throughput", "Real documents through extract_many"):
        assert title in printed
    assert "travel-policy.pdf" in printed


@pytest.mark.slow
def test_quick_run_real_documents_give_each_file_one_row_and_refuse_the_big_docx(
        quick_run: tuple[dict[str, Any], str]) -> None:
    section = quick_run[0]["real_documents"]
    rows = section["rows"]
    assert section["summary"]["files"] == len(rows) >= 25
    assert all(row["outcome"] in (row["expected"], "extracted") for row in rows)
    assert all(row["agreement"] is None or 0 <= row["agreement"] <= 1 for row in rows)
    refusal = section["large_docx_refusal"]
    assert (refusal["reason"], refusal["limits"]) == (
        "text_too_long", "ExtractionLimits.for_attachments()")
    assert "(max_text_chars)" in refusal["detail"]
    big = [f for f in section["overhead"]["files"] if "ratio" in f]
    assert all(f["bytes"] > 50_000 for f in big)


@pytest.mark.slow
def test_quick_run_reports_isolations_cost_on_small_office_files(
        quick_run: tuple[dict[str, Any], str]) -> None:
    report, _ = quick_run
    rows = report["overhead"]["files"]
    cost = report["overhead"]["aggregate"]["small_office_fixed_cost"]
    small = [r for r in rows if r["kind"] in {"docx", "xlsx", "pptx"} and not r["over_threshold"]]
    assert cost["files"] == [r["name"] for r in small] and small
    assert cost["isolation_fixed_ms"] == pytest.approx(
        statistics.median(r["isolation_fixed_ms"] for r in small), abs=1e-3)
    for row in small:
        assert row["isolation_fixed_ms"] == pytest.approx(
            row["guarded"]["median_ms"] - row["raw_in_fresh_fork"]["median_ms"], abs=1e-2)
    assert cost["isolation_fixed_meets_target"] is (cost["isolation_fixed_ms"] < 20.0)
    assert cost["target_ms"] == 20.0


@pytest.mark.slow
def test_quick_run_loads_the_same_documents_with_one_and_two_workers_through_both_adapters(
        quick_run: tuple[dict[str, Any], str]) -> None:
    rows = quick_run[0]["ingestion"]["throughput"]
    assert [(r["adapter"], r["workers"], r["order"]) for r in rows] == [
        (adapter, workers, order) for adapter in ("CapsaLoader", "CapsaReader")
        for workers, order in ((1, "input"), (2, "input"), (2, "as finished"))]
    assert len({(r["documents"], r["omitted"]) for r in rows}) == 1
    for row in rows:
        base = next(r for r in rows if r["adapter"] == row["adapter"] and r["workers"] == 1)
        assert row["ratio_to_one_worker"] == round(row["seconds"] / base["seconds"], 2)
        if row["order"] == "input":  # the slow file is first: nothing comes before it
            assert row["documents_before_slow_file"] == 0


@pytest.mark.slow
def test_quick_run_times_the_first_document_from_a_cold_start_both_ways(
        quick_run: tuple[dict[str, Any], str]) -> None:
    cold = quick_run[0]["ingestion"]["cold_start"]
    assert [row["start"] for row in cold] == ["eager", "lazy"] * 2  # the PDF, then warm_up()
    assert cold[0]["file"].endswith(".pdf")
    assert cold[-1]["file"] == "warm_up(), 2 workers"
    assert all(row["seconds"] > 0 for row in cold)
