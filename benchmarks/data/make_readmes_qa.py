"""Build ``readmes-qa.jsonl``: developer questions over project READMEs, held out.

What a docs assistant retrieves from: the README of a Python package, in
markdown, with its badges, HTML, shell sessions, code blocks, tables and, for
some, a changelog. The text is the long description in fourteen packages'
metadata (``*.dist-info/METADATA``, the body after the headers), copied
verbatim into ``raw/readmes/`` (``raw/readmes/SOURCES.md`` names each
package's version, licence and file), so the builder never reads what is
installed.

Chunks are cut the way most retrieval pipelines cut them and none of the other
sets does: LangChain's ``RecursiveCharacterTextSplitter(chunk_size=1000,
chunk_overlap=200)`` (``langchain-text-splitters`` 1.1.3: blank lines, then
line ends, then spaces), over each README on its own, blind to the answers;
each chunk's title is its package's name. Chunks overlap, so an answer may be
in two of them: a question's gold chunk is the first chunk of its README that
holds the normalised answer (``qa_sets.normalise``, the benchmark's own), and
no other chunk holding it is used. Its nine distractors are the chunks of all
fourteen READMEs most similar to the question by plain TF-IDF cosine
(``qa_sets.TfIdf``, not capsa's scorer) that do not hold the answer, so some
come from other packages that document the same things (HTTP clients, JSON,
extras, Python versions); the ten passages are ordered by a hash of the
question's id (``qa_sets.ten_passages``).

The questions were written by hand from the READMEs, as a developer asks a
docs assistant ("How do I ...", "Which option ..."), not copied from the
sentence that answers; each answer is a short span of the README (an option or
function name, a value, a version, a short phrase). The set was written after
capsa's rules were frozen, and every question before capsa or any baseline was
run on it; none was changed or dropped after. It is a held-out set: no rule is
ever tuned on it, and ``compression.py`` runs it only when asked by name
(``--dataset readmes``), never in ``all``. A question is dropped, and the
builder prints it with the reason, when its normalised answer is in the
question, is in no chunk of its README, or opens its gold chunk (keeping a
chunk's opening would be enough); question ids keep their place in
`QUESTIONS`, so a drop never renumbers the others. Of the 60 written, the
check drops one, ``readmes-035`` (its answer ``orjsonl`` is also how
``orjson.loads`` begins, at the opening of an earlier chunk of the README),
leaving 59.

Source and licence: the packages' READMEs as their metadata ships them, each
under its package's licence, all permissive (MIT, BSD-3-Clause, Apache-2.0;
orjson's MPL-2.0 AND (Apache-2.0 OR MIT)), each allowing verbatim copies.

Run: ``python benchmarks/data/make_readmes_qa.py`` (needs
``langchain-text-splitters``; reads ``raw/readmes/``; writes
``readmes-qa.jsonl`` beside this file). Deterministic.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from qa_sets import TfIdf, normalise, row, ten_passages, write

HERE = Path(__file__).resolve().parent
RAW = HERE / "raw" / "readmes"
OUT = HERE / "readmes-qa.jsonl"
PACKAGES = ("attrs", "httpx", "orjson", "pandas", "pydantic", "pypdf", "rapidfuzz", "requests",
            "rich", "smart_open", "syrupy", "tiktoken", "typer", "urllib3")
"""Each README is ``raw/readmes/NAME.md``; NAME is its chunks' title."""
CHUNK_SIZE = 1000
CHUNK_OVERLAP = 200
DISTRACTORS = 9

QUESTIONS: tuple[tuple[str, str, str], ...] = (
    # (package, question, answer as it appears in that package's README)
    ("httpx", "What do I pip install to get HTTP/2 working in httpx?", "httpx[http2]"),
    ("httpx", "What's the oldest Python that httpx still runs on?", "Python 3.9+"),
    ("httpx", "Which optional package does httpx need to talk through a SOCKS proxy?",
     "socksio"),
    ("httpx", "Which auth class did the newest httpx release add to the public API?",
     "FunctionAuth"),
    ("requests", "Which Python versions does requests officially support now?",
     "Python 3.10+"),
    ("requests", "git clone of the requests repo fails complaining about a bad commit "
     "timestamp; how do I get past it?", "fetch.fsck.badTimezone=ignore"),
    ("requests", "Roughly how many times a week is requests downloaded?",
     "300M downloads / week"),
    ("urllib3", "Which content encodings can urllib3 decompress?",
     "gzip, deflate, brotli, and zstd"),
    ("urllib3", "Where do I send a security vulnerability report for urllib3?",
     "Tidelift security contact"),
    ("urllib3", "If I open a second PR for urllib3 proposing a different fix for the same "
     "issue, what happens to it?", "rejected without review"),
    ("rich", "How do I get pretty-printed, highlighted output for everything in the Python "
     "REPL with rich?", "pretty.install()"),
    ("rich", "How can I preview all the spinner animations rich has?",
     "python -m rich.spinner"),
    ("rich", "What does rich rely on to highlight source code?", "pygments"),
    ("rich", "When I log with rich, how do I also dump the local variables of the calling "
     "function?", "log_locals"),
    ("rich", "How many colours will rich have on the old Windows console?", "16 colors"),
    ("typer", "Since which typer release is Click bundled inside typer instead of installed "
     "separately?", "0.26.0"),
    ("typer", "How do I switch off rich output in typer globally?", "TYPER_USE_RICH"),
    ("typer", "Which library does typer use to figure out what shell I'm on when installing "
     "completion?", "shellingham"),
    ("typer", "My typer app has two commands; can I leave out the command name when I run "
     "it?", "explicitly include the command name"),
    ("tiktoken", "How do I get the tokenizer that a given OpenAI model uses with tiktoken?",
     "encoding_for_model"),
    ("tiktoken", "About how many bytes of text does one BPE token cover on average?",
     "about 4 bytes"),
    ("tiktoken", "What must my module inside tiktoken_ext export so tiktoken can find my "
     "encodings?", "ENCODING_CONSTRUCTORS"),
    ("tiktoken", "Can I pip install -e my tiktoken plugin package while developing it?",
     "**not** to use an editable install"),
    ("attrs", "Which attrs version introduced the define/field style API?", "20.1.0"),
    ("attrs", "How do I declare attrs attributes if I don't want to write type annotations?",
     "attrs.field()"),
    ("attrs", "How can a field_transformer tell whether an attribute's alias was set by the "
     "user?", "alias_is_default"),
    ("attrs", "Besides None, what can a frozen attrs class set on_setattr to?",
     "attrs.setters.NO_OP"),
    ("pypdf", "What extra do I need so pypdf can decrypt AES-protected PDFs?",
     "pypdf[crypto]"),
    ("pypdf", "How do I get the page count of a PDF with pypdf?", "len(reader.pages)"),
    ("pypdf", "Is there a command-line tool built on top of pypdf?", "pdfly"),
    ("orjson", "How do I get indented, pretty-printed output from orjson?", "OPT_INDENT_2"),
    ("orjson", "What does orjson write for NaN or infinite floats?", "as `null`"),
    ("orjson", "How deeply nested can a document be before orjson.loads gives up?",
     "1024 levels deep"),
    ("orjson", "How do I make orjson put a Z at the end of UTC datetimes instead of +00:00?",
     "OPT_UTC_Z"),
    ("orjson", "How long can a dict key be and still go in orjson's key cache?",
     "at most 64 bytes"),
    ("orjson", "orjson won't handle JSON Lines; what should I use instead?", "orjsonl"),
    ("smart_open", "How do I install smart_open with support for every storage backend?",
     "smart_open[all]"),
    ("smart_open", "I want the raw .gz bytes; how do I stop smart_open decompressing on read?",
     "compression='disable'"),
    ("smart_open", "How do I upload to S3 with smart_open in one request instead of a "
     "multipart upload?", '"multipart_upload": False'),
    ("smart_open", "How large can an Azure append blob written by smart_open get?",
     "195 GiB"),
    ("smart_open", "I gave smart_open an S3 client and also put keys in the URL; which "
     "credentials does it use?", "ignore the latter"),
    ("smart_open", "How do I make pathlib's Path.open read gzip files transparently?",
     "patch_pathlib"),
    ("rapidfuzz", "Since when does rapidfuzz stop lowercasing and stripping strings before "
     "comparing them?", "RapidFuzz 3.0.0"),
    ("rapidfuzz", "How do I get rapidfuzz to ignore case and punctuation when scoring?",
     "processor=utils.default_process"),
    ("rapidfuzz", "Importing rapidfuzz on Windows fails with a DLL load error; what's "
     "missing?", "Visual C++ 2019 redistributable"),
    ("rapidfuzz", "Which rapidfuzz call returns only the best match from a list of choices?",
     "extractOne"),
    ("pandas", "What do I need in addition to the normal dependencies to build pandas from "
     "source?", "Cython"),
    ("pandas", "Where was pandas first developed?", "AQR"),
    ("pandas", "Which values does pandas use to mark missing data?", "`NaN`, `NA`, or `NaT`"),
    ("syrupy", "How do I regenerate the stored snapshots after an intended change with "
     "syrupy?", "--snapshot-update"),
    ("syrupy", "What file extension do syrupy's default snapshot files have?", ".ambr"),
    ("syrupy", "syrupy has no inline snapshots; which library do they point to for that?",
     "inline-snapshot"),
    ("syrupy", "How can I get only a warning, not a failed run, when some snapshots are no "
     "longer used?", "--snapshot-warn-unused"),
    ("syrupy", "How do I drop a generated id field from what syrupy stores?", "exclude=props"),
    ("syrupy", "How do I make a fixture whose snapshots always use the JSON extension?",
     "snapshot.with_defaults"),
    ("pydantic", "How can I keep old V1 code running while I migrate to Pydantic V2?",
     "from pydantic import v1 as pydantic_v1"),
    ("pydantic", "Can I still use Python 3.9 with pydantic 2.14?",
     "drops support for Python 3.9"),
    ("pydantic", "How do I install pydantic from conda-forge?",
     "conda install pydantic -c conda-forge"),
    ("pydantic", "After upgrading pydantic, memory use went up because of a JSON parser "
     "release; which bump fixed it?", "jiter to v0.19.0"),
    ("pydantic", "What is pydantic's tool for monitoring applications called?", "Logfire"),
)


def corpus() -> list[tuple[str, str]]:
    """(package, chunk) pairs: each README cut on its own by LangChain's recursive splitter."""
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    splitter = RecursiveCharacterTextSplitter(chunk_size=CHUNK_SIZE, chunk_overlap=CHUNK_OVERLAP)
    return [(name, chunk) for name in PACKAGES
            for chunk in splitter.split_text((RAW / f"{name}.md").read_text("utf-8"))]


def check(package: str, question: str, answer: str, chunks: list[tuple[str, str]],
          normalised: list[str]) -> tuple[int | None, str]:
    """The question's gold chunk (the first of its README holding the answer), or why none."""
    gold = normalise(answer)
    if gold in normalise(question):
        return None, "answer in the question"
    holding = [k for k, (name, _) in enumerate(chunks)
               if name == package and gold in normalised[k]]
    if not holding:
        return None, "answer in no chunk of its README"
    if normalised[holding[0]].startswith(gold):
        return None, "answer opens its gold chunk"
    return holding[0], ""


def rows() -> tuple[list[dict[str, Any]], list[str], int]:
    """The set's rows, each dropped question with its reason, and the number of chunks."""
    chunks = corpus()
    normalised = [normalise(text) for _, text in chunks]
    tfidf = TfIdf([text for _, text in chunks])
    built: list[dict[str, Any]] = []
    dropped: list[str] = []
    for n, (package, question, answer) in enumerate(QUESTIONS):
        question_id = f"readmes-{n:03d}"
        best, reason = check(package, question, answer, chunks, normalised)
        if best is None:
            dropped.append(f"{question_id} ({package}, {answer!r}): {reason}")
            continue
        found = ten_passages(chunks, normalised, normalise(answer), best,
                             tfidf.similarity(question), question_id, DISTRACTORS)
        built.append(row(question_id, question, answer, found))
    return built, dropped, len(chunks)


def main() -> int:
    built, dropped, chunks = rows()
    write(built, OUT)
    print(f"wrote {len(built)} questions over {chunks} chunks of {len(PACKAGES)} READMEs "
          f"to {OUT}; dropped {len(dropped)}" + "".join(f"\n  {d}" for d in dropped))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
