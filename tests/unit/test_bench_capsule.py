"""benchmarks/capsule.py: the report's parts agree with each other and with the chat.

No test here asserts on time or on how close capsa comes to a goal: the run is
checked for shape (every row, every part of the breakdown accounted for) and for
what the chat and capsa's contract guarantee whatever the numbers.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "capsule.py"

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict:
    out = tmp_path_factory.mktemp("capsule")
    subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--out", str(out)],
        check=True,
        capture_output=True,
    )
    return json.loads((out / "capsule.json").read_text())


def test_capsule_bench_breakdown_accounts_for_every_token(report: dict) -> None:
    where = report["breakdown"]
    strategies = report["strategies"]
    assert sum(where["full, first request"].values()) == strategies["full"][
        "tokens_last_first_request"
    ]
    assert sum(where["capsa, first request"].values()) == strategies["capsa"][
        "tokens_last_first_request"
    ]
    assert where["capsa, first request"]["current question's returns"] == 0
    assert where["capsa, citing request"]["current question's returns"] > 0
    assert all(value >= 0 for parts in where.values() for value in parts.values())


def test_capsule_bench_counts_the_recall_tool_only_for_capsa(report: dict) -> None:
    tools = report["meta"]["tool_schema_tokens"]
    strategies = report["strategies"]
    assert strategies["full"]["tool_schema_tokens"] == tools["search"] + tools["cite"]
    assert strategies["capsa"]["tool_schema_tokens"] == sum(tools.values())


def test_capsule_bench_floors_lie_below_capsa_and_keep_every_citation(report: dict) -> None:
    rows = report["strategies"]
    for price in ("0.1/1.25", "0.5/1.0"):
        floor, citable = (rows[n]["billed"][price]["billed"] for n in ("floor", "floor_citable"))
        assert floor <= citable <= rows["capsa"]["billed"][price]["billed"]
    for name in ("capsa", "floor", "floor_citable"):
        seen = rows[name]["visibility"]
        assert (seen["visible"], seen["late_visible"]) == (seen["cited"], seen["late"])


def test_capsule_bench_repeat_chat_references_save_and_lose_nothing(report: dict) -> None:
    repeat = report["repeat_chat"]
    assert repeat["searches_with_a_repeat"] > 0
    referenced, unreferenced = repeat["capsa"], repeat["capsa_without_current_references"]
    assert referenced["input_tokens"] < unreferenced["input_tokens"]
    assert referenced["visibility"] == unreferenced["visibility"]
    seen = referenced["visibility"]
    assert seen["visible"] == seen["cited"]


def test_capsule_bench_capsa_keeps_every_prefix_and_sends_no_ended_cite_exchange(
    report: dict,
) -> None:
    rows = report["strategies"]
    for name in ("capsa", "capsa_keep_cites", "floor", "floor_citable"):
        assert rows[name]["prefix_checks"]["hold"], name
    assert not rows["capsa_moving"]["prefix_checks"]["hold"]
    first = report["breakdown"]["capsa, first request"]
    assert first["assistant: cite calls"] == first["cite acknowledgements"] == 0
    kept = report["breakdown"]["capsa keeping cite calls, first request"]
    taken_off = kept["assistant: cite calls"] + kept["cite acknowledgements"]
    assert report["arithmetic"]["cite_exchanges_taken_off_tokens"] == taken_off > 0
    assert (
        rows["capsa"]["tokens_last_first_request"] + taken_off
        == rows["capsa_keep_cites"]["tokens_last_first_request"]
    )
    for price in ("0.1/1.25", "0.5/1.0"):
        assert rows["capsa"]["billed"][price]["billed"] < rows["capsa_keep_cites"]["billed"][
            price
        ]["billed"]
