"""Build ``manpages-qa.jsonl``: questions with gold answers over Unix manual pages.

A fourth answer-retention set, held out from the work that tuned capsa on the
others: reference text in the man-page layout (indented option lists, a flag
on its own line with its description below, justified lines, words hyphenated
across line ends), the kind a RAG system over an ops knowledge base serves,
instead of prose (HotpotQA), a manual (``pydocs-qa``) or legal text
(``licenses-qa``). The text is sixteen pages as ``man`` renders them here:
``LC_ALL=C.UTF-8 MANWIDTH=80 man -P cat SECTION PAGE | col -bx`` (man-db
2.11.2, groff 1.22.4, Debian 12), so a line-end hyphen is the U+2010 that
groff puts there, and a word broken across lines stays broken. The pages,
their Debian packages (the committed copy was built from these versions) and
the licence that allows copying their text:

- tar(1): tar 1.34+dfsg-1.2+deb12u1, GPL-3+;
- grep(1): grep 3.8-5, GPL-3+;
- find(1), xargs(1): findutils 4.9.0-4, GPL-3+;
- ls(1), sort(1), date(1), du(1): coreutils 9.1-1, GPL-3+;
- gzip(1): gzip 1.12-1, the page's own notice permits verbatim copies;
- make(1): make 4.3-4.1, GPL-3+;
- bash(1): bash 5.2.15-2+b8, GPL-3+;
- ssh(1), ssh_config(5): openssh-client 1:9.2p1-2+deb12u6, BSD;
- passwd(5): passwd 1:4.13+dfsg1-1+deb12u1 (shadow), BSD-3-clause;
- hosts(5): manpages 6.03-2, GPL-2.0-or-later;
- fstab(5): mount 2.38.1-5+deb12u3 (util-linux), GPL-2+.

The chunks hold the rendered text unchanged, indentation included, only split
at blank lines (and, for a paragraph over the chunk size, at line ends) and
merged up to about 500 characters, as a splitter would make them.

The 48 single-hop questions were written by hand against the text before capsa
was run on any of them, and the rule was that no question or answer changes
after seeing whether capsa keeps its answer. They are phrased as a user would
ask, not copied from the sentence that answers them, and mix option flags
(given with their argument, ``--max-depth=N``, because a bare ``-C`` normalises
to one letter that every chunk holds), numbers and defaults, file paths,
environment variables, conditions and short defined phrases; no answer is the
first words of its chunk (the script asserts it).

Each question gets its gold chunk (the chunk of the named page that holds the
answer, the most similar to the question if several do) and eight distractors:
the chunks of *all* the pages most similar to the question by plain TF-IDF
cosine (not capsa's scorer) that do **not** hold the answer. The pages share
options and vocabulary (``--one-file-system`` in tar and du, ``--exclude`` in
tar, grep and du, ssh and ssh_config), so the distractors are often the same
option in another page. Answers are matched as the benchmark matches them,
after its normalisation; the script asserts that each answer is in its gold
chunk and in none of its distractors. Rows use the HotpotQA file's fields, in
a seeded shuffled order.

Run: ``python benchmarks/data/make_manpages_qa.py`` (needs ``man`` and the
pages above installed; writes ``manpages-qa.jsonl`` beside this file, which is
all the benchmark reads).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from qa_sets import build, merge, normalise, pieces

OUT = Path(__file__).with_name("manpages-qa.jsonl")
PAGES: tuple[tuple[str, str], ...] = (
    ("1", "tar"), ("1", "grep"), ("1", "find"), ("1", "xargs"), ("1", "ls"), ("1", "sort"),
    ("1", "date"), ("1", "du"), ("1", "gzip"), ("1", "make"), ("1", "bash"), ("1", "ssh"),
    ("5", "ssh_config"), ("5", "passwd"), ("5", "hosts"), ("5", "fstab"),
)

QUESTIONS: tuple[tuple[str, str, str], ...] = (
    # (page, question, answer as it appears in that page)
    ("tar(1)", "How do I make tar change to another directory before it extracts or adds "
     "anything?", "--directory=DIR"),
    ("tar(1)", "When I unpack an archive with tar, how can I drop the first few path "
     "components from the member names?", "--strip-components=NUMBER"),
    ("tar(1)", "Which tar option leaves version control directories like .git out of the "
     "archive?", "--exclude-vcs"),
    ("tar(1)", "When tar pipes extracted files to a command, which environment variable "
     "gives the command the permissions of the file it is getting?", "TAR_MODE"),
    ("tar(1)", "How do I make tar delete my files once they have been put into the "
     "archive?", "--remove-files"),
    ("grep(1)", "What exit status does grep give when something went wrong, unless it was "
     "run quietly and found a line?", "2 if an error occurred"),
    ("grep(1)", "Which environment variable decides the colours grep uses to highlight "
     "matches?", "GREP_COLORS"),
    ("grep(1)", "How can I make grep give up on a file after it has found a certain number "
     "of matching lines?", "--max-count=NUM"),
    ("grep(1)", "How do I make grep also print a few lines that follow each match?",
     "--after-context=NUM"),
    ("find(1)", "How do I make find check only the paths I give it, without going into "
     "any directory below them?", "-maxdepth 0"),
    ("find(1)", "Which find test picks files whose contents changed a given number of "
     "minutes ago?", "-mmin n"),
    ("find(1)", "How do I make find measure file ages from midnight today rather than from "
     "24 hours back?", "-daystart"),
    ("xargs(1)", "What exit status does xargs return if the command it should run does not "
     "exist?", "127"),
    ("xargs(1)", "How do I get xargs to run several copies of the command in parallel?",
     "--max-procs=max-procs"),
    ("xargs(1)", "How do I keep xargs from running the command at all when its input is "
     "empty?", "--no-run-if-empty"),
    ("ls(1)", "When ls orders entries by size, which ones come at the top?", "largest first"),
    ("ls(1)", "What exit status does ls return when it cannot access a file named on the "
     "command line?", "2 if serious trouble"),
    ("ls(1)", "How can I have ls show directories before ordinary files?",
     "--group-directories-first"),
    ("sort(1)", "How do I tell sort where to put its temporary files?",
     "--temporary-directory=DIR"),
    ("sort(1)", "What should I set so that sort orders lines by their raw bytes whatever my "
     "locale is?", "LC_ALL=C"),
    ("sort(1)", "Which sort option turns off the last-resort comparison between lines?",
     "--stable"),
    ("date(1)", "How do I print a timestamp in ISO 8601 form with date?", "--iso-8601[=FMT]"),
    ("date(1)", "From which moment does date count the seconds printed by %s?",
     "1970-01-01 00:00 UTC"),
    ("date(1)", "How can date show when a file was last modified?", "--reference=FILE"),
    ("du(1)", "How do I make du print totals only down to a certain depth of "
     "subdirectories?", "--max-depth=N"),
    ("du(1)", "How can du report the size a program reading the file would see instead of "
     "the space it takes on disk?", "--apparent-size"),
    ("gzip(1)", "What is the trade-off of gzip's default compression level?",
     "biased towards high compression"),
    ("gzip(1)", "How do I stop gzip from removing the original file after compressing it?",
     "Keep (don't delete) input files"),
    ("gzip(1)", "How do I make gzip give its output files an ending other than .gz?",
     "--suffix .suf"),
    ("make(1)", "In which order does make look for a makefile when none is named?",
     "GNUmakefile, makefile, and Makefile"),
    ("make(1)", "How do I tell make to carry on with other targets after one of them "
     "fails?", "--keep-going"),
    ("make(1)", "What happens to parallelism if make's -j option is given with no "
     "number?", "will not limit the number of jobs"),
    ("bash(1)", "How many commands does bash remember in its history by default?", "500"),
    ("bash(1)", "Which HISTCONTROL value removes older copies of a command from the "
     "history when the same line is saved again?", "erasedups"),
    ("bash(1)", "Which files does a login bash look for in my home directory after "
     "/etc/profile?", "~/.bash_profile, ~/.bash_login, and ~/.profile"),
    ("bash(1)", "Which bash variable holds the exit codes of every command in the last "
     "pipeline?", "PIPESTATUS"),
    ("bash(1)", "Which shopt option makes filename wildcards ignore upper and lower "
     "case?", "nocaseglob"),
    ("bash(1)", "Which variable names a startup file that bash reads before running a "
     "shell script?", "BASH_ENV"),
    ("ssh(1)", "Which environment variable names the terminal device of an ssh session "
     "that has one?", "SSH_TTY"),
    ("ssh(1)", "What exit status does ssh return when it fails itself rather than the "
     "remote command?", "255"),
    ("ssh(1)", "Which environment variable tells ssh where to reach the authentication "
     "agent?", "SSH_AUTH_SOCK"),
    ("ssh_config(5)", "With a keepalive interval of 15 seconds and the default count, after "
     "how long does ssh give up on a dead server?", "approximately 45 seconds"),
    ("ssh_config(5)", "If the same ssh option is set in several places in the config files, "
     "which setting is used?", "first obtained value"),
    ("ssh_config(5)", "Which StrictHostKeyChecking value lets ssh add keys of hosts it has "
     "never seen but still refuse changed keys?", "accept-new"),
    ("passwd(5)", "What does an exclamation mark at the start of the password field in "
     "/etc/passwd mean?", "password is locked"),
    ("passwd(5)", "What shell does a user get when the last field of their /etc/passwd "
     "line is empty?", "/bin/sh"),
    ("hosts(5)", "Which characters are allowed in host names in /etc/hosts?",
     "alphanumeric characters, minus signs"),
    ("fstab(5)", "Besides a label or a UUID, which partition identifiers can an fstab "
     "entry use, on GPT disks for example?", "PARTUUID= and PARTLABEL="),
)


def render(section: str, page: str) -> str:
    """The page as ``man`` prints it to a pipe, at 80 columns, without overstrikes."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C.UTF-8",
           "MANWIDTH": "80", "MAN_KEEP_FORMATTING": ""}
    man = subprocess.run(["man", "-P", "cat", section, page], env=env, check=True,
                         capture_output=True).stdout
    plain = subprocess.run(["col", "-bx"], input=man, env=env, check=True,
                           capture_output=True).stdout
    return plain.decode("utf-8")


def chunks() -> list[tuple[str, str]]:
    """(page, chunk text) for every page: paragraphs merged up to CHUNK_CHARS."""
    out: list[tuple[str, str]] = []
    for section, page in PAGES:
        out += merge(f"{page}({section})", pieces(render(section, page), indented=True))
    return out


def main() -> int:
    if shutil.which("man") is None or shutil.which("col") is None:
        print("man and col are needed (man-db, bsdextrautils)", file=sys.stderr)
        return 1
    assert len(QUESTIONS) == 48, len(QUESTIONS)
    for _, question, answer in QUESTIONS:
        gold = normalise(answer)
        assert gold, answer
        assert gold not in normalise(question), (question, answer)
    return build("manpages", chunks(), QUESTIONS, OUT)


if __name__ == "__main__":
    raise SystemExit(main())
