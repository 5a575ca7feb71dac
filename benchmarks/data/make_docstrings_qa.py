"""Build ``docstrings-qa.jsonl`` (short chunks) and ``docstrings-long-qa.jsonl``.

Code documentation as a coding assistant retrieves it: the docstrings of
fifteen standard-library modules as ``pydoc`` renders them in plain text
(signatures, indented parameter lists, doctest examples), instead of the
reference manual's prose (``pydocs-qa``). The same questions are asked twice:
over chunks of about 500 characters (``docstrings-qa``) and over chunks of about
1,500 (``docstrings-long-qa``), so a rule that only helps short passages shows.

The questions were written by hand from what a user of each module would ask,
phrased as a user asks (not copied from the sentence that answers), before
capsa was run on any of them; none was changed after seeing capsa's result.
Answers are parameter names, exception names, defaults and short phrases;
``qa_sets.rows_for`` checks each is in its module's text and does not open its
gold chunk. Memory addresses in rendered defaults (``at 0x7f...``) and the
``FILE``/``MODULE REFERENCE`` sections (paths and URLs of the build machine)
are removed so a rebuild is byte-identical on another machine with the same
Python.

Source and licence: CPython 3.11.7's standard library docstrings, PSF License
Version 2 (Python Software Foundation License), which allows copying with the
notice kept.

Run: ``python benchmarks/data/make_docstrings_qa.py`` (with CPython 3.11; writes
both files beside this one).
"""

from __future__ import annotations

import importlib
import pydoc
import re
import sys
from pathlib import Path

import qa_sets
from qa_sets import build, merge, pieces

OUT = Path(__file__).with_name("docstrings-qa.jsonl")
OUT_LONG = Path(__file__).with_name("docstrings-long-qa.jsonl")
LONG_CHARS = 1500
MODULES = ("json", "functools", "subprocess", "shutil", "textwrap", "heapq", "random",
           "statistics", "tempfile", "base64", "urllib.parse", "uuid", "csv", "zipfile",
           "datetime")

QUESTIONS: tuple[tuple[str, str, str], ...] = (
    # (module, question, answer as it appears in that module's docs)
    ("json", "How can I make the JSON output list dictionary keys in alphabetical order?",
     "sort_keys"),
    ("json", "What should I pass to json.loads so that decimals are read as Decimal "
     "instead of float?", "parse_float=Decimal"),
    ("json", "Which json option lets non-English characters through unescaped?",
     "ensure_ascii"),
    ("json", "If a dictionary has a key that is not a string or number, how can I skip it "
     "instead of getting an error?", "skipkeys"),
    ("json", "How do I get the most compact JSON, with no spaces after commas and colons?",
     "separators=(',', ':')"),
    ("functools", "How do I stop lru_cache from evicting anything so it grows forever?",
     "maxsize is set to None"),
    ("functools", "How do I make the LRU cache keep 3 and 3.0 apart?", "typed"),
    ("functools", "How do I empty a function's LRU cache and reset its statistics?",
     "cache_clear"),
    ("functools", "How can I turn an old-style comparison function into something sorted "
     "accepts?", "cmp_to_key"),
    ("subprocess", "What exception do I get when a command run with check=True exits with "
     "an error code?", "CalledProcessError"),
    ("subprocess", "How do I collect both stdout and stderr of a command without setting "
     "up pipes myself?", "capture_output=True"),
    ("subprocess", "What is raised when a child process runs longer than I allowed?",
     "TimeoutExpired"),
    ("subprocess", "How can I send a child's error output into its normal output stream?",
     "STDOUT"),
    ("subprocess", "Where does output go if I want to throw it away?", "os.devnull"),
    ("shutil", "How can copytree copy into a folder that already exists?", "dirs_exist_ok"),
    ("shutil", "What does copytree use to copy each file unless told otherwise?", "copy2()"),
    ("shutil", "Which helper builds the ignore callable for copytree from glob patterns?",
     "ignore_patterns"),
    ("shutil", "How can I find where an executable lives on the PATH?", "which"),
    ("shutil", "What terminal size does Python assume when it cannot ask the terminal?",
     "(80, 24)"),
    ("textwrap", "How many columns wide are wrapped lines unless I say otherwise?",
     "width=70"),
    ("textwrap", "How do I remove the common leading whitespace from a block of lines?",
     "dedent"),
    ("heapq", "Which heapq call pops the smallest item and pushes a new one in one go?",
     "heapreplace"),
    ("heapq", "How do I get the n biggest items of a list without sorting all of it?",
     "nlargest"),
    ("random", "How can I draw several items with replacement, weighted?", "cum_weights"),
    ("random", "What kinds of value can I seed the random generator with?",
     "None, int, float"),
    ("random", "How do I get an integer made of k random bits?", "getrandbits"),
    ("statistics", "What error do the statistics functions raise for an empty data set?",
     "StatisticsError"),
    ("statistics", "For an even number of values, which median returns the smaller of the "
     "two middle ones?", "median_low"),
    ("statistics", "Which function gives the variance of a whole population rather than "
     "of a sample?", "pvariance"),
    ("tempfile", "Who can read and write the file mkstemp creates?",
     "only by the creating user ID"),
    ("tempfile", "What does mkstemp give back?", "pair (fd, name)"),
    ("tempfile", "Which function tells me the folder temporary files go to by default?",
     "gettempdir"),
    ("base64", "What happens when I decode base64 data that is padded wrongly?",
     "binascii.Error is raised"),
    ("base64", "How can b32decode accept lowercase letters?", "casefold"),
    ("urllib.parse", "When a query string is parsed, what happens by default to "
     "parameters that have no value?", "treated as if they were not included"),
    ("urllib.parse", "What character separates query arguments unless I choose another?",
     "Defaults to &"),
    ("urllib.parse", "How can parse_qs be made to fail on malformed input instead of "
     "ignoring it?", "strict_parsing"),
    ("uuid", "Which function makes a random UUID?", "uuid4"),
    ("uuid", "Which UUID version is built from the host ID and the current time?", "uuid1"),
    ("csv", "How do I make the csv writer put quotes around every field that is not a "
     "number?", "QUOTE_NONNUMERIC"),
    ("csv", "Which class guesses the dialect of a CSV file from a sample?", "Sniffer"),
    ("zipfile", "What exception means a file is not a valid zip archive?", "BadZipFile"),
    ("zipfile", "Which compression constant gives the usual zlib-compressed zip members?",
     "ZIP_DEFLATED"),
    ("zipfile", "How do I check every member's CRC in an archive?", "testzip"),
    ("datetime", "How do I turn a string like 2011-11-04 back into a date?",
     "fromisoformat"),
    ("datetime", "Which method parses a date string given a format?", "strptime"),
)

_ADDRESS = re.compile(r" at 0x[0-9a-f]+")
_SECTION = re.compile(r"^(FILE|MODULE REFERENCE)\n(?:    .*\n|\n)*", re.M)


def render(name: str) -> str:
    """The module's plain-text pydoc, without what depends on the machine."""
    text = pydoc.plaintext.document(importlib.import_module(name))
    return _SECTION.sub("", _ADDRESS.sub("", text))


def corpus(size: int) -> list[tuple[str, str]]:
    return [chunk for name in MODULES
            for chunk in merge(name, pieces(render(name), indented=True), size)]


def main() -> int:
    if sys.version_info[:2] != (3, 11):
        print("build with CPython 3.11: the docstrings differ between versions",
              file=sys.stderr)
        return 2
    status = build("docstrings", corpus(qa_sets.CHUNK_CHARS), QUESTIONS, OUT)
    if status:
        return status
    saved = qa_sets.CHUNK_CHARS
    qa_sets.CHUNK_CHARS = LONG_CHARS
    try:
        return build("docstrings-long", corpus(LONG_CHARS), QUESTIONS, OUT_LONG)
    finally:
        qa_sets.CHUNK_CHARS = saved


if __name__ == "__main__":
    raise SystemExit(main())
