"""`capsa shadow`: the two bundled routes over a queries file, printed as a report."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import pytest

from capsa.shadow._cli import main


def test_bundled_queries_file_holds_one_query_per_line() -> None:
    lines = resources.files("capsa.demo").joinpath("queries.jsonl").read_text("utf-8")
    queries = [json.loads(line)["query"] for line in lines.splitlines() if line.strip()]
    assert len(queries) == len(set(queries)) >= 10
    assert all(isinstance(q, str) and q.strip() for q in queries)


def test_main_without_a_file_reports_on_the_bundled_queries(capsys) -> None:
    assert main([]) == 0
    out = capsys.readouterr().out
    assert "lexical (baseline) vs budgeted (candidate)" in out
    assert "selection overlap (Jaccard)" in out
    assert "queries paired" in out and "20" in out


def test_main_prints_json_when_asked(capsys) -> None:
    assert main(["--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["queries"], report["invalidated"]) == (20, 0)
    assert 0.0 <= report["recall_of_baseline"] <= 1.0


def test_main_compares_a_route_with_itself_as_full_agreement(capsys) -> None:
    assert main(["--format", "json", "--baseline", "lexical", "--candidate", "lexical"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["selection_jaccard"] == 1.0 and report["admission_agreement"] == 1.0


def test_main_reads_a_queries_file(tmp_path: Path, capsys) -> None:
    path = tmp_path / "q.jsonl"
    path.write_text('{"query": "hotel cap in London"}\n\n{"query": "CCTV retention"}\n')
    assert main([str(path), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["queries"] == 2


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"query": "ok"}\nnot json\n', "line 2 is not JSON"),
        ('{"question": "wrong key"}\n', 'line 1 has no non-empty "query"'),
        ('{"query": "   "}\n', 'line 1 has no non-empty "query"'),
        ('["query"]\n', 'line 1 has no non-empty "query"'),
        ("\n\n", "holds no query"),
    ],
)
def test_main_refuses_an_unusable_queries_file(tmp_path: Path, capsys, content, message) -> None:
    path = tmp_path / "q.jsonl"
    path.write_text(content)
    assert main([str(path)]) == 2
    assert message in capsys.readouterr().err


def test_main_refuses_a_missing_queries_file(tmp_path: Path, capsys) -> None:
    assert main([str(tmp_path / "absent.jsonl")]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_main_rejects_an_unknown_route() -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--candidate", "semantic-magic"])
    assert exit_info.value.code == 2


def test_main_writes_the_chart_when_asked(tmp_path: Path, capsys) -> None:
    pytest.importorskip("matplotlib")
    chart = tmp_path / "report.png"
    assert main(["--chart", str(chart)]) == 0
    assert chart.read_bytes().startswith(b"\x89PNG")
    assert "chart written" in capsys.readouterr().err


def test_main_exits_1_when_the_chart_cannot_be_written(tmp_path: Path, capsys) -> None:
    assert main(["--chart", str(tmp_path / "no-such-dir" / "report.png")]) == 1
    assert "no chart" in capsys.readouterr().err
