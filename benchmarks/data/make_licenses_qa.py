"""Build ``licenses-qa.jsonl``: questions with gold answers over software licence texts.

A third answer-retention set, held out from the work that tuned capsa on the
other two: legal text, the kind an enterprise RAG system serves, instead of
Wikipedia prose (HotpotQA) or a technical manual (``pydocs-qa``). The text is
the licences Debian ships in ``/usr/share/common-licenses/`` (package
``base-files``; the committed copy was built from Debian 12's 12.4+deb12u11):
Apache-2.0, Artistic, BSD, CC0-1.0, GFDL-1.2, GFDL-1.3, GPL-1, GPL-2, GPL-3,
LGPL-2, LGPL-2.1, LGPL-3, MPL-1.1 and MPL-2.0, each once (the ``GPL``, ``LGPL``
and ``GFDL`` names are symlinks to a version and are skipped). Every one of
these licences permits verbatim copying of its text; the chunks hold that text
unchanged, only split at blank lines (and, for a paragraph over the chunk size,
at line ends), so their line wrapping and indentation are the files' own.

The 48 single-hop questions were written by hand against the text before capsa
was run on any of them, and the rule was that no question or answer changes
after seeing whether capsa keeps its answer. They mix numbers and durations,
named parties and places, conditions, versions and short defined phrases,
across every licence and most of their sections, and no answer is the first
words of its chunk (the script asserts it), so keeping a chunk's opening
sentence is not enough.

Each question gets its gold chunk (the chunk of the named licence that holds
the answer, the most similar to the question if several do) and eight
distractors: the chunks of *all* the licences most similar to the question by
plain TF-IDF cosine (not capsa's scorer) that do **not** hold the answer. The
licences copy one another's wording (GPL-2 and LGPL-2.1, GFDL-1.2 and 1.3, the
two MPLs), so the distractors are often near-copies of the gold chunk that lack
only the answering clause. Chunks are paragraphs merged up to about 500
characters, as a splitter would make them. Answers are matched as the
benchmark matches them, after its normalisation, because licence text wraps
lines mid-phrase; the script asserts that each answer is in its gold chunk and
in none of its distractors. Rows use the HotpotQA file's fields, in a seeded
shuffled order.

Run: ``python benchmarks/data/make_licenses_qa.py`` (needs
``/usr/share/common-licenses``; writes ``licenses-qa.jsonl`` beside this file,
which is all the benchmark reads).
"""

from __future__ import annotations

import sys
from pathlib import Path

from qa_sets import build, merge, pieces

SOURCE = Path("/usr/share/common-licenses")
OUT = Path(__file__).with_name("licenses-qa.jsonl")

QUESTIONS: tuple[tuple[str, str, str], ...] = (
    # (licence file, question, answer as it appears in that licence)
    ("Apache-2.0", "Under the Apache License, what ownership of the outstanding shares makes "
     "an entity controlled?", "fifty percent (50%)"),
    ("Apache-2.0", "How must the copyright owner designate a communication in writing to "
     "exclude it from the Contributions under the Apache License?", "Not a Contribution"),
    ("Apache-2.0", "Under the Apache License, what besides a direct suit counts as instituting "
     "patent litigation that ends your patent licenses?",
     "cross-claim or counterclaim in a lawsuit"),
    ("Apache-2.0", "When redistributing an Apache-licensed Work, what may you choose to offer "
     "and charge a fee for?", "acceptance of support, warranty, indemnity"),
    ("Apache-2.0", "Besides loss of goodwill, which damages does the Apache License say a "
     "Contributor is not liable for?", "work stoppage, computer failure or malfunction"),
    ("Apache-2.0", "In what should the Apache License boilerplate notice be enclosed when it "
     "is applied to a file?", "appropriate comment syntax for the file format"),
    ("MPL-2.0", "Under MPL 2.0, how long after you come back into compliance must a "
     "Contributor notify you, or your grants are reinstated on an ongoing basis?",
     "60 days"),
    ("MPL-2.0", "Which kinds of patent infringement claims are excluded from the litigation "
     "that ends your rights under MPL 2.0 section 5.2?", "declaratory judgment actions"),
    ("MPL-2.0", "In the courts of which jurisdiction may litigation relating to the Mozilla "
     "Public License 2.0 be brought?",
     "where the defendant maintains its principal place of business"),
    ("MPL-2.0", "For what harm does the MPL 2.0 limitation of liability not apply when it "
     "results from a party's negligence?", "death or personal injury"),
    ("MPL-2.0", "Besides the version under which you received it, under which versions of "
     "the Mozilla Public License may you distribute Covered Software?",
     "any subsequent version published by the license steward"),
    ("GPL-3", "On what date was the WIPO copyright treaty adopted that GPL version 3 cites "
     "about technological measures?", "20 December 1996"),
    ("GPL-3", "Under GPL version 3, within how many days after receiving a first notice of "
     "violation must you cure it to have your license reinstated permanently?",
     "30 days"),
    ("GPL-3", "What must reviewing courts apply when the GPL version 3 disclaimer of "
     "warranty cannot be given local legal effect?",
     "absolute waiver of all civil liability"),
    ("GPL-3", "Besides transferring control of an organization or its assets, which "
     "transactions are entity transactions under GPL version 3?",
     "subdividing an organization, or merging organizations"),
    ("GPL-3", "On what must the Corresponding Source be fixed when object code is conveyed "
     "in a physical product under GPL version 3?",
     "durable physical medium customarily used for software interchange"),
    ("GPL-3", "Under GPL version 3, besides at least three years, for how long must a "
     "written offer for the Corresponding Source of a physical product stay valid?",
     "as long as you offer spare parts or customer support"),
    ("GPL-3", "Which kind of additional term about licensors and authors may supplement "
     "the terms of GPL version 3?", "indemnification of licensors and authors"),
    ("GPL-3", "How are doubtful cases resolved when deciding whether a product is a "
     "consumer product under GPL version 3?", "in favor of coverage"),
    ("GPL-2", "In the sample copyright disclaimer of GPL version 2, what does the program "
     "Gnomovision do?", "makes passes at compilers"),
    ("GPL-2", "Under GPL version 2, passing on the offer you received to distribute "
     "source code is allowed only for what kind of distribution?",
     "noncommercial distribution"),
    ("GPL-2", "What may the original copyright holder add under GPL version 2 when "
     "patents restrict distribution of the Program in certain countries?",
     "explicit geographical distribution limitation"),
    ("GPL-2", "Under GPL version 2, a modified interactive program must print an "
     "announcement when started for interactive use in which way?", "most ordinary way"),
    ("GPL-1", "In the sample disclaimer of GPL version 1, what is the program Gnomovision "
     "described as doing?", "direct compilers to make passes at assemblers"),
    ("LGPL-2.1", "Which earlier license is the Lesser GPL version 2.1 the successor of, "
     "hence its version number?", "GNU Library Public License"),
    ("LGPL-2.1", "Under LGPL 2.1, how long may small inline functions in an object file "
     "that uses library header material be for its use to be unrestricted?",
     "ten lines or less in length"),
    ("LGPL-2.1", "In the LGPL 2.1 sample disclaimer, what is the library Frob for?",
     "tweaking knobs"),
    ("LGPL-2.1", "Under LGPL 2.1, what can you opt to apply to a copy of the Library "
     "instead of the Lesser General Public License?",
     "ordinary GNU General Public License"),
    ("LGPL-3", "Under LGPL version 3, how long may inline functions and templates from a "
     "Library header file be in an Application's object code?",
     "ten or fewer lines in length"),
    ("LGPL-3", "What effort must you make under LGPL version 3 so that a modified "
     "facility still operates when the Application does not supply the function?",
     "good faith effort"),
    ("LGPL-3", "Besides modification of the Library's portions, what must the terms of a "
     "Combined Work not restrict under LGPL version 3?",
     "reverse engineering for debugging such modifications"),
    ("GFDL-1.3", "Under the GNU Free Documentation License 1.3, how long may a Back-Cover "
     "Text be?", "up to 25 words"),
    ("GFDL-1.3", "Before what date could the operator of an MMC Site republish an MMC under "
     "CC-BY-SA?", "August 1, 2009"),
    ("GFDL-1.3", "Where is the principal place of business of the corporation that publishes "
     "the CC-BY-SA license, according to the GFDL?", "San Francisco, California"),
    ("GFDL-1.3", "Which image formats does the GFDL give as examples of transparent image "
     "formats?", "PNG, XCF and JPG"),
    ("GFDL-1.3", "How long after the last Opaque copy is distributed must a Transparent copy "
     "remain accessible at the stated location under the GFDL?",
     "at least one year after the last time"),
    ("GFDL-1.2", "Under GFDL version 1.2, if the Document is less than what part of an "
     "aggregate may its Cover Texts be placed on covers that bracket it?",
     "one half of the entire aggregate"),
    ("GFDL-1.2", "Under GFDL version 1.2, how many of the Document's principal authors must "
     "a Modified Version list on its Title Page?", "at least five of the principal authors"),
    ("CC0-1.0", "Which European directive does CC0 cite as a source of database rights?",
     "Directive 96/9/EC"),
    ("CC0-1.0", "To the detriment of whom does the Affirmer make the CC0 Waiver?",
     "Affirmer's heirs and successors"),
    ("CC0-1.0", "Publicity and privacy rights pertaining to what of a person are among the "
     "rights CC0 covers?", "image or likeness"),
    ("Artistic", "Which major archive site does the Artistic License name as a place for "
     "modifications?", "uunet.uu.net"),
    ("Artistic", "Under the Artistic License, linked C subroutines must not change the "
     "language in a way that makes it fail what?", "regression tests"),
    ("Artistic", "Under the Artistic License, what is embedding the Package's interpreter "
     "within your executable by linking construed as?", "mere form of aggregation"),
    ("BSD", "Under the BSD license, where must redistributions in binary form reproduce "
     "the copyright notice besides the documentation?",
     "other materials provided with the distribution"),
    ("MPL-1.1", "In which county does venue lie for litigation relating to MPL 1.1 in the "
     "Federal Courts?", "Santa Clara County"),
    ("MPL-1.1", "Under MPL 1.1, how long after a subsequent version of a Modification is "
     "made available must its Source Code remain available?", "six (6) months"),
    ("MPL-1.1", "Under MPL 1.1, besides the same media as an Executable version, through "
     "what may a Modification's Source Code be made available?",
     "accepted Electronic Distribution Mechanism"),
)


def chunks() -> list[tuple[str, str]]:
    """(licence, chunk text) for every licence file: paragraphs merged up to CHUNK_CHARS."""
    out: list[tuple[str, str]] = []
    for path in sorted(SOURCE.iterdir()):
        if path.is_symlink() or not path.is_file():
            continue  # GPL, LGPL, GFDL: another name for a versioned file
        out += merge(path.name, pieces(path.read_text(encoding="utf-8")))
    return out


def main() -> int:
    if not SOURCE.is_dir():
        print(f"{SOURCE} not found (Debian's base-files ships it)", file=sys.stderr)
        return 1
    assert 40 <= len(QUESTIONS) <= 50, len(QUESTIONS)
    return build("licenses", chunks(), QUESTIONS, OUT)


if __name__ == "__main__":
    raise SystemExit(main())
