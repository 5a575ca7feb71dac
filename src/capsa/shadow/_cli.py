"""`capsa shadow`: run two bundled routes over a queries file and print the report.

Usage::

    capsa shadow [QUERIES.jsonl] [--baseline lexical] [--candidate budgeted]
                 [--format markdown|json] [--chart report.png]

Each line of the queries file is a JSON object with a ``"query"`` string;
without a file the bundled `capsa/demo/queries.jsonl` over the sample corpus
is used. Exit status: 0 on success, 2 for unusable arguments or input, 1 when
the chart cannot be drawn.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

from capsa.shadow.report import ShadowReport
from capsa.shadow.routes import ROUTES, compare_routes

__all__ = ["main"]


class _InputError(Exception):
    """The queries file cannot be read as the CLI expects."""


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
    parser.add_argument("--baseline", choices=sorted(ROUTES), default="lexical",
                        help="the route being served (default: %(default)s)")
    parser.add_argument("--candidate", choices=sorted(ROUTES), default="budgeted",
                        help="the route on trial (default: %(default)s)")
    parser.add_argument("--format", choices=("markdown", "json"), default="markdown",
                        help="how to print the report (default: %(default)s)")
    parser.add_argument("--chart", type=Path, metavar="PNG",
                        help="also draw the report as a PNG here (needs capsa[plot])")
    return parser


def _read_queries(path: Path | None) -> list[str]:
    if path is None:
        text = resources.files("capsa.demo").joinpath("queries.jsonl").read_text("utf-8")
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


def main(argv: Sequence[str] | None = None) -> int:
    """Run `capsa shadow`; return the exit status."""
    from rich.console import Console
    from rich.markdown import Markdown

    args = _parser().parse_args(argv)
    out, err = Console(), Console(stderr=True)
    try:
        queries = _read_queries(args.queries)
    except _InputError as exc:
        err.print(f"capsa shadow: {exc}", markup=False)
        return 2
    run = compare_routes(queries, ROUTES[args.baseline](), ROUTES[args.candidate]())
    report = ShadowReport.from_rows(run.rows, invalidated=run.invalidated)
    if args.format == "json":
        sys.stdout.write(report.to_json() + "\n")
    else:
        out.print(f"# {args.baseline} (baseline) vs {args.candidate} (candidate)", markup=False)
        out.print(Markdown(report.to_markdown()))
    if args.chart is not None:
        try:
            args.chart.write_bytes(report.to_png())
        except (ImportError, OSError) as exc:
            err.print(f"capsa shadow: no chart: {exc}", markup=False)
            return 1
        err.print(f"chart written to {args.chart}", markup=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
