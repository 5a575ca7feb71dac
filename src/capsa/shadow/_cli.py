"""`capsa shadow`: compare two retrieval routes on your documents and queries.

Usage::

    capsa shadow [QUERIES.jsonl] [--docs DIR] [--baseline lexical|budgeted|module:factory]
                 [--candidate ...] [--out DIR] [--format markdown|json] [--chart report.png]

Each line of the queries file is a JSON object with a ``"query"`` string;
without one, the bundled demo queries are used. ``--docs`` extracts every
file under a directory through the guard (`capsa.guard.extract_many`) and
splits the texts into paragraphs; without it the routes run over the bundled
sample corpus. A route is a bundled name or ``module:factory``, a callable
that takes the corpus (a sequence of `CorpusPassage`) and returns a `Route`.
``--out`` writes ``rows.jsonl`` (one released row a line) beside
``report.md``, ``report.json`` and ``report.png``. Nothing written or printed
on stdout names a document, a passage or a query. Queries whose captures were
refused are counted by cause on stderr and in the report. Exit status: 0 when
the report (and, with ``--out``, the rows) were written, 2 for unusable
arguments or input, 1 when a chart path cannot be written. Without
matplotlib the chart is skipped with a warning naming the ``plot`` extra,
and the status stays that of the work done.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import unicodedata
from collections import Counter
from collections.abc import Callable, Sequence
from importlib import resources
from pathlib import Path
from typing import cast

from capsa.shadow.offline import CorpusPassage, Route, compare_routes
from capsa.shadow.report import ShadowReport

__all__ = ["main"]

BUNDLED = {
    "lexical": "capsa.demo.routes:lexical_route",
    "budgeted": "capsa.demo.routes:budgeted_route",
}
"""The bundled routes, by name; they live beside the demo and are imported by path."""

_MIN_WORDS = 6
_MIN_CHARS = 20


class _InputError(Exception):
    """The command's input cannot be used as given."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="capsa shadow",
        description="Compare two retrieval routes on the same queries; "
        "only numeric, anonymous rows are aggregated.",
    )
    parser.add_argument(
        "queries", nargs="?", type=Path, metavar="QUERIES.jsonl",
        help='one JSON object per line with a "query" string (default: the bundled demo queries)',
    )
    parser.add_argument("--docs", type=Path, metavar="DIR",
                        help="extract every file under DIR through the guard and retrieve from "
                        "its paragraphs (default: the bundled sample corpus)")
    parser.add_argument("--baseline", default="lexical", metavar="ROUTE",
                        help="the route being served: lexical, budgeted or module:factory "
                        "(default: %(default)s)")
    parser.add_argument("--candidate", default="budgeted", metavar="ROUTE",
                        help="the route on trial (default: %(default)s)")
    parser.add_argument("--out", type=Path, metavar="DIR",
                        help="write rows.jsonl, report.md, report.json and report.png here")
    parser.add_argument("--format", choices=("markdown", "json"), default="markdown",
                        help="how to print the report (default: %(default)s)")
    parser.add_argument("--chart", type=Path, metavar="PNG",
                        help="also draw the report as a PNG here (needs capsa[plot])")
    return parser


def _read_queries(path: Path | None) -> list[str]:
    if path is None:
        text = resources.files("capsa").joinpath("demo", "queries.jsonl").read_text("utf-8")
    else:
        try:
            text = path.read_text("utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise _InputError(f"cannot read {path}: {exc}") from exc
    queries = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise _InputError(f"line {number} is not JSON: {exc.msg}") from exc
        query = record.get("query") if isinstance(record, dict) else None
        if not isinstance(query, str) or not query.strip():
            raise _InputError(f'line {number} has no non-empty "query" string')
        queries.append(query)
    if not queries:
        raise _InputError("the queries file holds no query")
    return queries


def _read_corpus(directory: Path, report: Callable[[str], None]) -> list[CorpusPassage] | None:
    """Passages from every file the guard extracts: its paragraphs of six words or more,
    or of 20 Chinese, Japanese or Korean characters (written without spaces),
    so a heading is not a passage. Files refused, and files that gave no passage, are
    counted in the note."""
    from capsa.guard import Extracted, extract_many

    if not directory.is_dir():
        raise _InputError(f"--docs {directory} is not a directory")
    passages: list[CorpusPassage] = []
    lost: Counter[str] = Counter()
    files = barren = 0
    for outcome in extract_many([directory]):
        if not isinstance(outcome, Extracted):
            lost[getattr(outcome, "reason", "skipped")] += 1
            continue
        files += 1
        # The label and path stay in process: they only key passages for pairing.
        key = outcome.source or outcome.label
        found = [CorpusPassage(f"{key}#{number}", block.strip())
                 for number, block in enumerate(outcome.text.split("\n\n")) if _passage(block)]
        barren += not found
        passages.extend(found)
    report(f"{files} files extracted, {sum(lost.values())} not"
           + (f" ({', '.join(f'{n} {r}' for r, n in sorted(lost.items()))})" if lost else "")
           + (f"; {barren} of them gave no passage (no paragraph of {_MIN_WORDS} words or "
              f"{_MIN_CHARS} CJK characters)" if barren else ""))
    if not passages:
        raise _InputError(f"no file under --docs {directory} yielded a paragraph of "
                          f"{_MIN_WORDS} words or {_MIN_CHARS} CJK characters")
    return passages


def _passage(block: str) -> bool:
    """Whether a paragraph is a passage, not a heading: six words, or `_MIN_CHARS` Chinese,
    Japanese or Korean characters (written without spaces, a sentence is one "word")."""
    if len(block.split()) >= _MIN_WORDS:
        return True
    return sum(1 for ch in block if unicodedata.east_asian_width(ch) in "WF") >= _MIN_CHARS


def _load_route(spec: str, passages: Sequence[CorpusPassage] | None) -> Route:
    path = BUNDLED.get(spec, spec)
    module_name, _, attribute = path.partition(":")
    if not module_name or not attribute:
        raise _InputError(f"route {spec!r} is neither {' nor '.join(sorted(BUNDLED))} "
                          "nor module:factory")
    try:
        factory = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as exc:
        raise _InputError(f"cannot import route {spec!r}: {exc}") from exc
    if not callable(factory):
        raise _InputError(f"route {spec!r} is not callable")
    route = factory(passages) if passages is not None else factory()
    if not callable(getattr(route, "run", None)):
        raise _InputError(f"route {spec!r} built an object without a run(query) method")
    return cast(Route, route)


def main(argv: Sequence[str] | None = None) -> int:
    """Run `capsa shadow`; return the exit status."""
    from rich.console import Console
    from rich.markdown import Markdown

    args = _parser().parse_args(argv)
    out, err = Console(), Console(stderr=True)

    def note(message: str) -> None:
        err.print(f"capsa shadow: {message}", markup=False, soft_wrap=True)

    try:
        queries = _read_queries(args.queries)
        passages = _read_corpus(args.docs, note) if args.docs is not None else None
        baseline = _load_route(args.baseline, passages)
        candidate = _load_route(args.candidate, passages)
    except _InputError as exc:
        note(str(exc))
        return 2
    run = compare_routes(queries, baseline, candidate)
    report = ShadowReport.from_rows(run.rows, invalidated=run.invalidated, causes=run.causes,
                                    unretrieved=run.unretrieved)
    if run.invalidated:
        note(f"{run.invalidated} of {len(queries)} queries invalidated ("
             + ", ".join(f"{n} {cause}" for cause, n in run.causes.items()) + ")")
    if run.unretrieved:
        note(f"{run.unretrieved} of {len(queries)} queries retrieved nothing on either route: "
             "no rows to compare")
    title = f"# {args.baseline} (baseline) vs {args.candidate} (candidate)"
    if args.format == "json":
        sys.stdout.write(report.to_json() + "\n")
    else:
        out.print(title, markup=False)
        out.print(Markdown(report.to_markdown()))
    status = 0
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "rows.jsonl").write_text(
            "".join(row.model_dump_json() + "\n" for row in run.rows), "utf-8")
        (args.out / "report.md").write_text(f"{title}\n\n{report.to_markdown()}", "utf-8")
        (args.out / "report.json").write_text(report.to_json() + "\n", "utf-8")
        status = _chart(report, args.out / "report.png", note)
        note(f"{len(run.rows)} rows and the report written to {args.out}")
    if args.chart is not None:
        status = max(status, _chart(report, args.chart, note))
    return status


def _chart(report: ShadowReport, path: Path, note: Callable[[str], None]) -> int:
    """Draw the chart; a missing matplotlib is a warning, an unwritable path a failure."""
    try:
        png = report.to_png()
    except ImportError as exc:
        note(f"warning: no chart: {exc}")
        return 0
    try:
        path.write_bytes(png)
    except OSError as exc:
        note(f"no chart: {exc}")
        return 1
    note(f"chart written to {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
