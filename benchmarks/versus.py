"""The packer's rules now against an earlier commit's, question by question, on every set.

Issue 21 asks that no set keep fewer answers at any budget than it did before
its work began. `ablation.py` weighs one rule at a time inside today's code;
this script weighs the whole of today's packing against the whole of an
earlier one. It copies ``src/`` of the given commit out of git into a
temporary directory (``git archive``), then, in two child processes, one
importing capsa from that copy and one from this checkout, packs every
answerable question of every set with `compression.py`'s capsa method (as
this checkout's harness has it) at 10, 25 and 50 % of the question's text.
It reports, per set and part (development, set aside), the answers each kept
and how many questions were gained and lost, so a set that is worse at one
budget shows even when the totals rise.

Run: ``python benchmarks/versus.py REV [--scorer lexical|static] [--limit N]
[--out FILE]``. ``static`` needs a commit that has `StaticScorer`. Writes
``benchmarks/results/versus-REV.json``. HotpotQA comes from
``CAPSA_EVAL_DATA`` as in `compression.py`.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import ablation
import compression

ROOT = compression.ROOT
PARTS = ("dev", "aside")


def dump(out: Path, scorer: str, limit: int | None) -> None:
    """In a child: each question's answer kept or not at the three budgets, with the capsa
    this interpreter imports."""
    import capsa

    questions, _ = ablation.load(limit)
    rows = ablation.hits(questions, scorer)
    out.write_text(json.dumps({"capsa": capsa.__file__, "kept": rows}), encoding="utf-8")


def kept_with(src: Path, scorer: str, limit: int | None, out: Path) -> dict[str, Any]:
    """`dump` run in a fresh interpreter whose capsa is the one under `src`."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(src), *filter(None, [os.environ.get("PYTHONPATH")])])}
    command = [sys.executable, __file__, "--dump", str(out), "--scorer", scorer]
    if limit is not None:
        command += ["--limit", str(limit)]
    subprocess.run(command, env=env, check=True)
    result: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    if not Path(result["capsa"]).resolve().is_relative_to(src.resolve()):
        raise RuntimeError(f"the child imported {result['capsa']}, not capsa from {src}")
    return result


def export_src(rev: str, into: Path) -> Path:
    """``src/`` of commit `rev`, written under `into`."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", rev, "src"],
                             check=True, capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        if hasattr(tarfile, "data_filter"):  # Python 3.11.4 and later
            tar.extractall(into, filter="data")
        else:
            tar.extractall(into)  # our own repository's archive
    return into / "src"


def compare(questions: dict[str, list[compression.Question]], then: dict[str, list[list[bool]]],
            now: dict[str, list[list[bool]]]) -> dict[str, Any]:
    """Per set and part: questions, answers kept then and now, questions gained and lost."""
    sets: dict[str, dict[str, dict[str, Any]]] = {}
    for key, rows in questions.items():
        cells = {part: {"questions": 0, "then": [0, 0, 0], "now": [0, 0, 0],
                        "gained": [0, 0, 0], "lost": [0, 0, 0]} for part in PARTS}
        for q, before, after in zip(rows, then[key], now[key], strict=True):
            cell = cells[compression.part(q.id)[0]]
            cell["questions"] += 1
            for n in range(3):
                cell["then"][n] += before[n]
                cell["now"][n] += after[n]
                cell["gained"][n] += after[n] and not before[n]
                cell["lost"][n] += before[n] and not after[n]
        sets[key] = cells
    totals = {part: {field: [sum(sets[key][part][field][n] for key in sets) for n in range(3)]
                     for field in ("then", "now", "gained", "lost")} for part in PARTS}
    worse = [f"{key} {part} {pct}%" for key in sets for part in PARTS
             for n, pct in enumerate((10, 25, 50))
             if sets[key][part]["now"][n] < sets[key][part]["then"][n]]
    return {"sets": sets, "totals": totals, "worse": worse}


def _cells(values: Sequence[int]) -> str:
    return " / ".join(map(str, values))


def report(result: dict[str, Any]) -> None:
    print(f"{'set':<24}{'part':<7}{'q':>5}{'kept then':>20}{'kept now':>20}"
          f"{'gained':>14}{'lost':>14}")
    for key, cells in result["sets"].items():
        for part in PARTS:
            c = cells[part]
            flag = "  <" if any(b < a for a, b in zip(c["then"], c["now"], strict=True)) else ""
            print(f"{key:<24}{part:<7}{c['questions']:>5}{_cells(c['then']):>20}"
                  f"{_cells(c['now']):>20}{_cells(c['gained']):>14}{_cells(c['lost']):>14}{flag}")
    for part in PARTS:
        t = result["totals"][part]
        print(f"{'all sets':<24}{part:<7}{'':>5}{_cells(t['then']):>20}{_cells(t['now']):>20}"
              f"{_cells(t['gained']):>14}{_cells(t['lost']):>14}")
    worse = result["worse"]
    print(f"\nkeeping fewer now ({len(worse)} cells of set, part and budget): "
          f"{', '.join(worse) or 'none'}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("rev", nargs="?", help="the earlier commit")
    parser.add_argument("--scorer", choices=("lexical", "static"), default="lexical")
    parser.add_argument("--limit", type=int, default=None, help="first N questions of each set")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--dump", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.dump is not None:
        dump(args.dump, args.scorer, args.limit)
        return 0
    if not args.rev:
        parser.error("name the earlier commit")
    questions, missing = ablation.load(args.limit)
    if missing:
        print(f"note: {', '.join(missing)} not found (set CAPSA_EVAL_DATA); left out")
    rev = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", args.rev],
                         check=True, capture_output=True, text=True).stdout.strip()
    with tempfile.TemporaryDirectory() as tmp:
        then = kept_with(export_src(rev, Path(tmp)), args.scorer, args.limit,
                         Path(tmp) / "then.json")
        now = kept_with(ROOT / "src", args.scorer, args.limit, Path(tmp) / "now.json")
    print(f"{args.scorer} scorer: capsa at {rev} against this checkout, answers kept at "
          "10 / 25 / 50 %")
    result = compare(questions, then["kept"], now["kept"])
    report(result)
    suffix = "-static" if args.scorer == "static" else ""
    out = args.out or compression.RESULTS / f"versus-{rev}{suffix}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"rev": rev, "scorer": args.scorer, "left_out": missing,
                               **result}, indent=2) + "\n", encoding="utf-8")
    print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
