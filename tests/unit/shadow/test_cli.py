"""`capsa shadow`: two routes over the user's documents and queries, reported without identities."""

from __future__ import annotations

import io
import json
import re
import sys
from importlib import resources
from pathlib import Path
from typing import Any

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


def test_main_says_the_default_routes_share_their_scores(capsys) -> None:
    # The bundled budgeted route packs the lexical route's own retrieval: its score
    # correlation is 1.0 by construction, and the report must not pass that off as
    # two rankers agreeing.
    assert main([]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "1.000 (shared scores in 20 of 20)" in out
    assert "same score to each passage they both scored in 20 of 20 queries" in out


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


def test_main_rejects_an_unknown_route(capsys) -> None:
    assert main(["--candidate", "semantic-magic"]) == 2
    assert "neither" in capsys.readouterr().err


def test_main_rejects_a_route_path_that_does_not_import(capsys) -> None:
    assert main(["--candidate", "no_such_module_here:factory"]) == 2
    assert "cannot import route" in capsys.readouterr().err


def test_main_refuses_a_docs_path_that_is_not_a_directory(tmp_path: Path, capsys) -> None:
    assert main(["--docs", str(tmp_path / "absent")]) == 2
    assert "not a directory" in capsys.readouterr().err


def test_main_writes_the_chart_when_asked(tmp_path: Path, capsys) -> None:
    pytest.importorskip("matplotlib")
    chart = tmp_path / "report.png"
    assert main(["--chart", str(chart)]) == 0
    assert chart.read_bytes().startswith(b"\x89PNG")
    assert "chart written" in capsys.readouterr().err


def test_main_exits_1_when_the_chart_cannot_be_written(tmp_path: Path, capsys) -> None:
    assert main(["--chart", str(tmp_path / "no-such-dir" / "report.png")]) == 1
    assert "no chart" in capsys.readouterr().err


def test_main_warns_and_exits_0_without_matplotlib(tmp_path: Path, capsys,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    # None in sys.modules makes `import matplotlib.figure` raise ImportError.
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    assert main(["--out", str(tmp_path), "--chart", str(tmp_path / "chart.png")]) == 0
    err = capsys.readouterr().err
    assert "warning: no chart" in err and "capsa[plot]" in err
    assert (tmp_path / "rows.jsonl").read_text("utf-8")
    assert (tmp_path / "report.json").exists() and not (tmp_path / "report.png").exists()


TRANSFORMING_ROUTE = """
from capsa.demo.routes import LexicalRoute
from capsa.shadow import RenderedBlock, RouteRun


class Annotating:
    name = "annotating"

    def __init__(self, passages):
        self._inner = LexicalRoute("inner", passages)

    def run(self, query):
        run = self._inner.run(query)
        block = RenderedBlock(query=query, text=run.block.text + "\\n\\n(end of context)")
        return RouteRun(run.candidates, run.admitted, run.selected, run.gate, block)


def annotating(passages=None):
    from capsa.demo.routes import sample_passages
    return Annotating(sample_passages() if passages is None else passages)
"""


def test_main_counts_and_prints_invalidated_queries_by_cause(tmp_path: Path, capsys,
                                                             monkeypatch) -> None:
    (tmp_path / "annotating_route_for_cli_test.py").write_text(TRANSFORMING_ROUTE, "utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert main(["--candidate", "annotating_route_for_cli_test:annotating"]) == 0
    captured = capsys.readouterr()
    assert "20 of 20 queries invalidated (20 transformed_block)" in captured.err
    assert "transformed_block" in captured.out and "invalidation cause" in captured.out


# --- the user's own documents, queries and routes ----------------------------------

USER_DOCS = {
    "zephyr-handbook.md": "# Zephyr handbook\n\nQuokka badges open the north door after "
    "eight in the evening.\n\nThe marmalade fund pays for one conference a year per "
    "engineer.\n\nParking near the obsidian tower is reserved for visitors and couriers.",
    "tangerine-notes.txt": "Tangerine servers restart every Sunday at four in the morning."
    "\n\nBackups of the quasar cluster are kept for ninety days in cold storage.",
}
USER_QUERIES = ["when do quokka badges open the door", "how long are quasar backups kept"]

ROUTE_MODULE = """
from capsa.demo.routes import LexicalRoute

def narrow(passages):
    return LexicalRoute("narrow", passages, top_k=1)
"""


@pytest.fixture(scope="module")
def user_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One CLI run over a documents directory, a queries file and an imported route."""
    root = tmp_path_factory.mktemp("user")
    docs = root / "docs"
    docs.mkdir()
    for name, text in USER_DOCS.items():
        (docs / name).write_text(text, "utf-8")
    (docs / "broken.pdf").write_bytes(b"%PDF-1.7 not really a pdf")
    queries = root / "queries.jsonl"
    queries.write_text("".join(json.dumps({"query": q}) + "\n" for q in USER_QUERIES), "utf-8")
    (root / "user_routes_for_cli_test.py").write_text(ROUTE_MODULE, "utf-8")
    out = root / "out"
    sys.path.insert(0, str(root))
    try:
        with pytest.MonkeyPatch.context() as patch:
            stdout, stderr = io.StringIO(), io.StringIO()
            patch.setattr(sys, "stdout", stdout)
            patch.setattr(sys, "stderr", stderr)
            status = main([str(queries), "--docs", str(docs), "--baseline", "lexical",
                           "--candidate", "user_routes_for_cli_test:narrow",
                           "--out", str(out), "--format", "json"])
            captured = {"stdout": stdout.getvalue(), "err": stderr.getvalue()}
    finally:
        sys.path.remove(str(root))
    return {"status": status, "out": out, **captured}


def test_main_compares_an_imported_route_over_the_users_documents(user_run) -> None:
    assert user_run["status"] == 0
    report = json.loads(user_run["out"].joinpath("report.json").read_text("utf-8"))
    assert report["queries"] == len(USER_QUERIES) and report["invalidated"] == 0
    rows = [json.loads(line) for line in
            user_run["out"].joinpath("rows.jsonl").read_text("utf-8").splitlines()]
    selected: dict[str, int] = {}
    for row in rows:
        selected[row["query_id"]] = selected.get(row["query_id"], 0) + row["candidate_selected"]
    assert sorted(selected.values()) == [1, 1]  # the imported route keeps its top 1
    assert json.loads(user_run["stdout"]) == report  # --format json prints the same report


def test_main_counts_files_the_guard_did_not_extract(user_run) -> None:
    assert "2 files extracted, 1 not" in user_run["err"]


def test_main_writes_rows_as_json_lines_beside_the_report(user_run) -> None:
    out = user_run["out"]
    lines = out.joinpath("rows.jsonl").read_text("utf-8").splitlines()
    report = json.loads(out.joinpath("report.json").read_text("utf-8"))
    assert len(lines) == report["rows"] > 0
    assert all(set(json.loads(line)) >= {"query_id", "row_id", "baseline_rank"} for line in lines)
    assert out.joinpath("report.md").read_text("utf-8").startswith("# lexical (baseline)")


def test_main_releases_no_document_name_text_or_query_word(user_run) -> None:
    out = user_run["out"]
    released = "\n".join([
        out.joinpath("rows.jsonl").read_text("utf-8"),
        out.joinpath("report.json").read_text("utf-8"),
        out.joinpath("report.md").read_text("utf-8"),
        user_run["stdout"],
    ]).lower()
    tokens = set(re.findall(r"[a-z0-9_]+", released))
    texts = [*USER_DOCS.values(), *USER_QUERIES]
    words = {w for t in texts for w in re.findall(r"[a-z0-9_]+", t.lower())
             if not w.isdigit() and len(w) > 3}
    words -= {"baseline", "candidate", "lexical", "narrow", "admitted", "over_budget",
              "below_threshold", "filtered", "duplicate", "rows", "query", "queries"}
    assert words & tokens == set()
    assert not any(name.lower() in released for name in USER_DOCS)


def test_every_query_and_file_is_accounted_for_over_a_users_documents(tmp_path: Path,
                                                                     capsys) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "policy.txt").write_text(
        "Hotel stays in London are capped at EUR 230 per night for every traveller.\n")
    (docs / "title.txt").write_text("Passwords rotate quarterly.\n")  # four words: a heading
    (docs / "cjk.txt").write_text(
        "出張のホテル代は一泊二万三千円までとし、領収書を必ず提出すること。\n", encoding="utf-8")
    queries = tmp_path / "q.jsonl"
    queries.write_text('{"query": "hotel cap in London"}\n{"query": "zzyzx qwerty"}\n'
                       '{"query": "ホテル代"}\n')

    assert main([str(queries), "--docs", str(docs), "--format", "json"]) == 0
    captured = capsys.readouterr()
    report = json.loads(captured.out)

    assert report["queries"] + report["invalidated"] + report["unretrieved"] == 3
    assert report["unretrieved"] >= 1  # the nonsense query retrieved nothing
    assert "retrieved nothing on either route" in captured.err
    assert "3 files extracted" in captured.err
    assert "1 of them gave no passage" in captured.err  # the heading, not the CJK sentence
