from __future__ import annotations

from capsa.budget.evidence import answer_cue, link
from capsa.budget.relevance import analyze


def linked(query: str, passages: list[list[str]], scores: list[list[float]]) -> tuple[float, ...]:
    """`Evidence.linked` for passages given as sentences, with the sentences' scores."""
    texts = [sentence for passage in passages for sentence in passage]
    owners = [n for n, passage in enumerate(passages) for _ in passage]
    leads: list[int | None] = []
    first = 0
    for passage in passages:
        leads.append(first if passage else None)
        first += len(passage)
    flat = [score for passage in scores for score in passage]
    return link(query, texts, [analyze(t) for t in texts], flat, owners, leads,
                [0.0] * len(passages)).linked


QUERY = "Who produced the film scored by the composer?"
FIRST_HOP = ["The film score was composed by Jerry Goldsmith in 1979."]
SECOND_HOP = ["Jerry Goldsmith was an American composer.", "He wrote over 250 scores."]
DISTRACTOR = ["Totally Unrelated Matters is a board game.", "It has dice."]


def test_a_passage_whose_subject_another_passage_names_is_linked() -> None:
    links = linked(QUERY, [FIRST_HOP, SECOND_HOP, DISTRACTOR], [[1.0], [0.0, 0.0], [0.0, 0.0]])
    assert links[1] > 0.5
    assert links[2] == 0.0


def test_a_passage_naming_its_own_subject_does_not_link_itself() -> None:
    # The second passage's own lead matches the query; its names (Jerry Goldsmith)
    # come from itself alone, so it is not a second hop of anything.
    links = linked(QUERY, [SECOND_HOP, DISTRACTOR], [[1.0, 0.0], [0.0, 0.0]])
    assert links == (0.0, 0.0)


def test_the_same_passage_is_linked_when_another_one_names_it_too() -> None:
    links = linked(QUERY, [FIRST_HOP, SECOND_HOP], [[1.0], [1.0, 0.0]])
    assert links[1] > 0.5


def test_a_name_most_passages_mention_links_none_of_them() -> None:
    # "Contributor" is a defined term of the text, not the subject of the passage
    # that opens with it: every passage uses it, so naming it says nowhere to look.
    query = "What must the licensee pay?"
    seed = ["The licensee must pay each Contributor a fee."]
    defined = ["Contributor means anyone who adds code.", "It is a defined term."]
    others = [[f"Clause {n}: a Contributor may add code."] for n in range(3)]
    links = linked(query, [seed, defined, *others], [[1.0], [0.0, 0.0], *[[0.0]] * 3])
    assert links[1] == 0.0
    named_rarely = linked(query, [seed, defined, ["Trains are fine."]],
                          [[1.0], [0.0, 0.0], [0.0]])
    assert named_rarely[1] > 0.5


def test_answer_cues_follow_the_kind_of_question() -> None:
    when = answer_cue("In what year was the bridge opened?")
    count = answer_cue("How many seats does the arena have?")
    assert when is not None and when.search("It opened in 1932.")
    assert count is not None and count.search("It seats 3,677 people.")
    assert answer_cue("Who designed the bridge?") is None


def test_a_link_raises_its_passage_and_leaves_its_sentences_as_scored() -> None:
    # The link is a passage's prior (`Doc.prior` in the packer). Lifting every
    # relevant sentence of a linked passage too spread tight packets over the
    # passages the best evidence merely mentions.
    query = "Which company did the composer work for?"
    passages = [["The composer was Jerry Goldsmith."],
                ["Jerry Goldsmith was an American.", "He worked for a company called Fox.",
                 "He liked tea."],
                ["Other company news today.", "Nothing else."]]
    texts = [s for p in passages for s in p]
    owners = [n for n, p in enumerate(passages) for _ in p]
    scores = [1.0, 0.0, 0.3, 0.0, 0.3, 0.0]
    evidence = link(query, texts, [analyze(t) for t in texts], scores, owners, [0, 1, 4],
                    [0.0, 0.0, 0.0])
    assert evidence.linked[1] > 0.5 and evidence.linked[2] == 0.0
    assert evidence.relevance == tuple(scores)
