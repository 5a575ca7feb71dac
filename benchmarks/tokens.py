"""How close capsa's offline token estimate is to a real tokenizer, script by script.

The reference is OpenAI's ``cl100k_base``, read from the copy llama-index-core
ships (``llama_index/core/_static/tiktoken_cache``), so nothing is downloaded.
The texts are what a Debian machine already has in many languages:

- the translated messages of the gettext catalogues of apt, glib, GTK,
  gdk-pixbuf and Linux-PAM (``/usr/share/locale/<lang>/LC_MESSAGES/*.mo``),
  one text per translated message of at least 20 characters; English is the
  catalogues' source messages;
- the Vim tutor in each language (``/usr/share/vim/vim90/tutor``), split at
  blank lines: running prose;
- Python source from the standard library (``json``, ``email``), split at blank lines.

For each set the table gives the sum of the estimate over the sum of the true
counts (1.00 is exact, above 1 overcounts) and the same ratio for the usual
four-characters-per-token rule (LangChain's ``count_tokens_approximately``),
measured in the same run. Sets whose files are missing are skipped and said so.

Run ``python benchmarks/tokens.py``; writes ``benchmarks/results/tokens.json``.
"""

from __future__ import annotations

import gettext
import json
import os
import re
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

RESULTS = Path(__file__).parent / "results"
CATALOGUES = ("apt", "glib20", "gtk20", "libapt-pkg6.0", "gdk-pixbuf", "Linux-PAM")
LANGUAGES = ("ar", "zh_CN", "ja", "ko", "ru", "uk", "hi", "el", "he", "th", "de", "fr")
TUTORS = ("zh_cn", "ja", "ko", "ru", "uk", "bg", "el", "vi", "de", "")
LOCALE = Path("/usr/share/locale")
TUTOR = Path("/usr/share/vim/vim90/tutor")


def cl100k() -> Callable[[str], int]:
    import llama_index.core

    cache = Path(llama_index.core.__file__).parent / "_static" / "tiktoken_cache"
    os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(cache))
    import tiktoken

    encoding = tiktoken.get_encoding("cl100k_base")
    return lambda text: len(encoding.encode_ordinary(text))


def catalogue_texts() -> dict[str, list[str]]:
    sets: dict[str, list[str]] = {}
    english: dict[str, None] = {}
    for language in LANGUAGES:
        texts = []
        for name in CATALOGUES:
            path = LOCALE / language / "LC_MESSAGES" / f"{name}.mo"
            if not path.exists():
                continue
            with path.open("rb") as handle:
                catalogue = gettext.GNUTranslations(handle)
            for source, translated in catalogue._catalog.items():  # type: ignore[attr-defined]
                if isinstance(source, str) and source and isinstance(translated, str) and len(
                        translated) >= 20:
                    texts.append(translated)
                    english[source] = None
        if texts:
            sets[f"messages {language}"] = texts
    if english:
        sets["messages en"] = list(english)
    return sets


def tutor_texts() -> dict[str, list[str]]:
    sets = {}
    for language in TUTORS:
        path = TUTOR / (f"tutor.{language}.utf-8" if language else "tutor.utf-8")
        if path.exists():
            text = path.read_text(encoding="utf-8", errors="replace")
            sets[f"vim tutor {language or 'en'}"] = [
                block for block in re.split(r"\n\s*\n", text) if block.strip()]
    return sets


def code_texts() -> dict[str, list[str]]:
    stdlib = Path(os.__file__).parent
    blocks = []
    paths = sorted((stdlib / "json").glob("*.py")) + sorted((stdlib / "email").glob("*.py"))[:6]
    for path in paths:
        blocks += [b for b in re.split(r"\n\s*\n", path.read_text(encoding="utf-8")) if b.strip()]
    return {"python source": blocks}


def main() -> int:
    sys.path.insert(0, str(Path(__file__).parent.parent / "src"))
    from capsa.budget import estimate_tokens

    true_count = cl100k()
    sets = {**catalogue_texts(), **tutor_texts(), **code_texts()}
    if not sets:
        print("no texts found (gettext catalogues, vim tutors); nothing to measure")
        return 1
    rows = []
    print(f"{'set':22} {'texts':>6} {'cl100k':>8} {'capsa':>6} {'chars/4':>8} {'capsa p50':>10}")
    for name, texts in sets.items():
        real = [true_count(t) for t in texts]
        estimate = [estimate_tokens(t) for t in texts]
        quarter = [len(t) / 4 for t in texts]
        per_text = [e / r for e, r in zip(estimate, real, strict=True) if r]
        row = {"set": name, "texts": len(texts), "cl100k_tokens": sum(real),
               "capsa_ratio": round(sum(estimate) / sum(real), 3),
               "chars_per_4_ratio": round(sum(quarter) / sum(real), 3),
               "capsa_median_ratio": round(statistics.median(per_text), 3)}
        rows.append(row)
        print(f"{name:22} {row['texts']:>6} {row['cl100k_tokens']:>8} {row['capsa_ratio']:>6.3f} "
              f"{row['chars_per_4_ratio']:>8.3f} {row['capsa_median_ratio']:>10.3f}")
    missing = [language for language in LANGUAGES if f"messages {language}" not in sets]
    if missing:
        print(f"skipped (no catalogues installed): {', '.join(missing)}")
    RESULTS.mkdir(exist_ok=True)
    report = {"reference": "cl100k_base (tiktoken, llama-index-core's bundled copy)",
              "ratio": "sum of counts over sum of cl100k counts", "rows": rows}
    (RESULTS / "tokens.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {RESULTS / 'tokens.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
