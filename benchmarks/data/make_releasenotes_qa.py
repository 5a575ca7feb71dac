"""Build ``releasenotes-qa.jsonl``: support questions answered by release notes.

What a support desk's retrieval serves when a user asks why something changed
after an upgrade, or whether a bug is fixed: release notes, where every release
repeats the same vocabulary (``bug introduced in``, ``no longer``, the same
program names), so the close distractors are the same program's entries in
other releases. The text is four ``NEWS`` files Debian 12 installs, unchanged:

- coreutils' upstream ``NEWS`` (coreutils 9.1-1, GPL-3+);
- findutils' upstream ``NEWS`` (findutils 4.9.0-4, GPL-3+);
- apt's ``NEWS.Debian`` (apt 2.6.1, GPL-2+);
- adduser's ``NEWS.Debian`` (adduser 3.134, GPL-2+).

The 32 single-hop questions were written by hand, as a user would ask them
after an upgrade ("why did ls stop colouring ..."), not copied from the entry
that answers; they were written before capsa was run on any of them and none
changed after. Chunks, distractors and checks are ``qa_sets``' (the same as
``make_manpages_qa.py``), with indentation kept.

Run: ``python benchmarks/data/make_releasenotes_qa.py`` (needs the four files
above under ``/usr/share/doc``; writes ``releasenotes-qa.jsonl`` beside this file).
"""

from __future__ import annotations

import gzip
from pathlib import Path

from qa_sets import build, merge, pieces

OUT = Path(__file__).with_name("releasenotes-qa.jsonl")
SOURCES = {
    "coreutils": "/usr/share/doc/coreutils/NEWS.gz",
    "findutils": "/usr/share/doc/findutils/NEWS.gz",
    "apt": "/usr/share/doc/apt/NEWS.Debian.gz",
    "adduser": "/usr/share/doc/adduser/NEWS.Debian.gz",
}

QUESTIONS: tuple[tuple[str, str, str], ...] = (
    # (source, question, answer as it appears in that file)
    ("coreutils", "Why did ls stop colouring files that have capabilities?",
     "increases processing per file by about 30%"),
    ("coreutils", "How do I tell dd to copy an amount of data instead of a number of "
     "blocks?", "'dd count=100KiB'"),
    ("coreutils", "What exit code does timeout return in foreground mode when it had to "
     "kill the command?", "status 137"),
    ("coreutils", "Is there a way to see how precise date's timestamps are?", "--resolution"),
    ("coreutils", "Why does chown now warn me when I write root.root?",
     "long-obsolete \".\" separator"),
    ("coreutils", "Which dd names work like FreeBSD's for skipping input?", "iseek=N"),
    ("coreutils", "How can I print each LS_COLORS entry on its own line, in its colour?",
     "--print-ls-colors"),
    ("coreutils", "Since 9.0, what kind of copies do cp and install make by default when "
     "the file system supports it?", "copy-on-write (COW)"),
    ("coreutils", "How do I pick the digest cksum computes?", "--algorithm"),
    ("coreutils", "Can ls end each entry with a null byte for use with xargs -0?", "--zero"),
    ("coreutils", "How do I get ls to order files by how long their names are?",
     "--sort=width"),
    ("coreutils", "How much quicker did cksum's CRC get?", "up to 4 times faster"),
    ("coreutils", "Will md5sum --check read a checksum file saved on Windows?",
     "CRLF line endings"),
    ("coreutils", "I split a file into N parts and asked for one of them on stdout, but "
     "got the wrong data; when did that happen?", "starting after 128KiB"),
    ("coreutils", "What could go wrong when tail -f followed many files with a large open "
     "file limit?", "overruns a stack buffer"),
    ("coreutils", "Which system call does cat use now for plain file-to-file copies?",
     "copy_file_range"),
    ("coreutils", "What changed in how date prints nanoseconds with %-N?",
     "suppresses excess trailing digits"),
    ("coreutils", "Which file systems did df learn to treat as network mounts?",
     "acfs, coda, fhgfs"),
    ("coreutils", "How do I make stat mount an automounted path again?", "--cached=never"),
    ("apt", "Why is apt's 'Yes, do as I say' confirmation gone?",
     "replaced by an error message"),
    ("apt", "How do I stop apt upgrading sibling packages built from the same source?",
     "APT::Get::Upgrade-By-Source-Package"),
    ("apt", "How long does apt wait for the lock when no terminal is attached?",
     "120 seconds"),
    ("apt", "How can I keep full-upgrade from removing old kernels?",
     "APT::Get::AutomaticRemove::Kernels"),
    ("apt", "Which keys does apt try first when it checks a repository's signature?",
     "trusted.gpg.d keys"),
    ("apt", "What lets a repository roll an update out to only some of its machines?",
     "Phased-Update-Percentage"),
    ("findutils", "How can find take its starting directories from a file safely?",
     "-files0-from"),
    ("findutils", "Which fuse file systems does updatedb now leave out unless told "
     "otherwise?", "s3fs"),
    ("findutils", "Is the find that does not use FTS still around?", "completely removed"),
    ("findutils", "What did xargs change about the trailing blank in its trace output?",
     "no longer outputs a trailing blank"),
    ("adduser", "What should I use instead of adduser's --gecos?", "--comment"),
    ("adduser", "Will deluser keep letting me remove the superuser account?",
     "refuse to delete the root user"),
    ("adduser", "Which bug should I comment on if I rely on the user quota template "
     "setting?", "#1026898"),
)


def corpus() -> list[tuple[str, str]]:
    chunks = []
    for name, path in SOURCES.items():
        text = gzip.decompress(Path(path).read_bytes()).decode("utf-8")
        chunks += merge(name, pieces(text, indented=True))
    return chunks


def main() -> int:
    return build("releasenotes", corpus(), QUESTIONS, OUT)


if __name__ == "__main__":
    raise SystemExit(main())
