# %% [markdown]
# # 04 · Citation capsules in a LangChain agent conversation
#
# An agent with a search tool keeps every search result in its checkpointed
# history, so each new question carries all earlier retrievals with it, cited
# or not. `CitationCapsuleMiddleware` changes what is *sent*, never what is
# *stored*: before each model call, every earlier search result shows only the
# chunks its question's answer cited, whole, and a receipt naming the rest, and
# the question's calls to the `cite` tool leave with their acknowledgements (what
# it cited is what its returns show whole). Once a question ends its wire form
# never changes again, so each request repeats the previous one's prefix, which
# providers bill at a fraction as cached input. A `recall` tool brings any
# receipted chunk back whole from the stored history.
#
# This notebook runs the same eight-question conversation through two agents,
# with and without the middleware, and compares what the model received.
# The model is `ExtractiveChatModel`, a deterministic offline stand-in with
# `bind_tools`: on a new question it calls `search`, then `cite` with the chunk
# it will quote, then answers with that chunk's best sentence.

# %%
import pandas as pd

from capsa.demo.corpus_source import QUESTIONS
from capsa.demo.pipelines import CorpusRetriever
from capsa.demo.retrieval import chunk_corpus
from capsa.demo.run import extract_corpus
from capsa.langchain import capsa_retriever_tool

chunks = chunk_corpus(extract_corpus().extracted)
search = capsa_retriever_tool(CorpusRetriever(chunks=chunks, k=4), name="search")
print(search.invoke({"query": "internet stipend"})[:600])

# %% [markdown]
# The tool shows each chunk as an escaped `<chunk id=...>` element, so the model
# can cite it and no chunk's text can forge another; its artifact carries the
# documents, which is what the middleware records.
#
# ## Two agents, one conversation

# %%
from langchain.agents import create_agent
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import HumanMessage
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from capsa.demo.chat import ExtractiveChatModel
from capsa.langchain import CitationCapsuleMiddleware


class Wire(BaseCallbackHandler):
    """Records every message list sent to the chat model, and capsa's events."""

    def __init__(self) -> None:
        self.requests: list[list] = []
        self.events: list[tuple[str, dict]] = []

    def on_chat_model_start(self, serialized, messages, **kwargs) -> None:
        self.requests.extend(messages)

    def on_custom_event(self, name, data, **kwargs) -> None:
        self.events.append((name, data))


@tool("cite")
def plain_cite(chunk_ids: list[str]) -> str:
    """Record which retrieved chunks your answer relies on."""
    return f"Recorded {len(chunk_ids)} citation: {', '.join(chunk_ids)}."


conversation = [q.question for q in QUESTIONS[:8]]
model = ExtractiveChatModel()
runs = {}
for label, middleware, tools in (
    ("without capsule", [], [search, plain_cite]),
    ("with capsule", [CitationCapsuleMiddleware(evidence_tools=[search])], [search]),
):
    agent = create_agent(model, tools=tools, middleware=middleware, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": label}}
    per_question = []
    for question in conversation:
        wire = Wire()
        state = agent.invoke({"messages": [HumanMessage(question)]},
                             {**config, "callbacks": [wire]})
        per_question.append({"question": question, "wire": wire,
                             "answer": str(state["messages"][-1].content)})
    runs[label] = {"agent": agent, "config": config, "questions": per_question}

# %% [markdown]
# The middleware registers capsa's `cite` tool itself. That tool checks ids
# against the ledger the middleware keeps, so on its own it would refuse every
# id; the agent without the middleware gets a plain `cite` tool that
# acknowledges the same way instead. Both models then behave identically and
# give the same answers; only the requests differ.

# %%
answers = [[q["answer"] for q in run["questions"]] for run in runs.values()]
assert answers[0] == answers[1]
pd.DataFrame({"question": conversation,
              "answer": [a[:90] + ("…" if len(a) > 90 else "") for a in answers[1]]})

# %% [markdown]
# ## Tokens sent per question
#
# Each question costs three model calls (search, cite, answer). The first
# call is the one that carries the whole earlier conversation; the answer call
# adds this question's own search results, which both agents send in full.

# %%
rows = []
for n in range(len(conversation)):
    row = {"question": f"Q{n + 1}"}
    for label, run in runs.items():
        requests = run["questions"][n]["wire"].requests
        row[f"first call, {label}"] = count_tokens_approximately(requests[0])
        row[f"answer call, {label}"] = count_tokens_approximately(requests[-1])
    rows.append(row)
tokens = pd.DataFrame(rows).set_index("question")
tokens

# %% [markdown]
# ## What it costs with a prompt cache
#
# Providers bill the part of a request that repeats an earlier request's
# prefix as cached input. The bill below follows that model: per request, the
# longest run of leading messages equal to an earlier request's is read from
# the cache (0.1x the input price), the rest is written to it (1.25x).


# %%
def bill(requests, read=0.1, write=1.25):
    """Billed input over a chat: cached prefix at `read`, the rest at `write`."""
    seen, total = [], 0.0
    for request in requests:
        keys = [(m.type, str(m.content), str(getattr(m, "tool_calls", ""))) for m in request]
        tokens = [count_tokens_approximately([m]) for m in request]
        prefix = 0
        for earlier in seen:
            n = 0
            while n < min(len(earlier), len(keys)) and earlier[n] == keys[n]:
                n += 1
            prefix = max(prefix, n)
        total += read * sum(tokens[:prefix]) + write * sum(tokens[prefix:])
        seen.append(keys)
    return total


for label, run in runs.items():
    requests = [r for q in run["questions"] for r in q["wire"].requests]
    tokens[f"billed so far, {label}"] = [
        bill([r for q in run["questions"][: n + 1] for r in q["wire"].requests])
        for n in range(len(conversation))
    ]
    print(f"{label}: billed {bill(requests):,.0f} input-token units over the chat")

# %%
import matplotlib.pyplot as plt

fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
for label, style in (("without capsule", "o-"), ("with capsule", "s-")):
    left.plot(tokens.index, tokens[f"first call, {label}"], style, label=label)
    right.plot(tokens.index, tokens[f"billed so far, {label}"], style, label=label)
left.set_ylabel("tokens sent on the question's first call")
left.set_title("What each new question carries")
right.set_ylabel("billed input so far (cache reads 0.1x, writes 1.25x)")
right.set_title("What the chat has cost")
for axis in (left, right):
    axis.legend()
    axis.grid(alpha=0.3)
plt.tight_layout()

# %%
last = tokens.iloc[-1]
saved = 1 - last["first call, with capsule"] / last["first call, without capsule"]
print(f"question {len(conversation)}: {last['first call, without capsule']} -> "
      f"{last['first call, with capsule']} tokens on the first call ({saved:.0%} fewer)")

# %% [markdown]
# By question 8 the capsule agent's first call is well under half the size.
# Cited chunks stay whole, once (a chunk cited again is named where it was
# already shown); what goes is everything retrieved and never cited, and the
# ended questions' cite exchanges. The bill gains
# less than the tokens in a chat this short: the full history is a cached
# prefix too, and only grows by one retrieval per question. Over longer chats
# the gap widens; `benchmarks/capsule.py` measures both on a 20-question chat
# against `trim_messages`, `ClearToolUsesEdit` and `SummarizationMiddleware`.
#
# ## What the model saw at the last question
#
# The first request of question 8, message by message. Each earlier search
# result shows its own question's cited chunks and names the rest; earlier
# questions' `cite` calls and acknowledgements are not sent (the checkpoint
# keeps them, below):

# %%
request = runs["with capsule"]["questions"][-1]["wire"].requests[0]
pd.DataFrame([{"type": m.type, "tool": getattr(m, "name", None),
               "tokens": count_tokens_approximately([m]),
               "starts with": str(m.content)[:70].replace("\n", " ")} for m in request])

# %%
earlier = next(str(m.content) for m in request if getattr(m, "name", None) == "search")
print("The first search result as question 8 sees it (chunk bodies elided):")
print("\n".join(line for line in earlier.splitlines() if line.startswith("<")))

# %% [markdown]
# ## Where the tokens go
#
# The same request split by what each token is for. Tool schemas ride in every
# request too (the middleware adds `cite` and `recall`); an earlier search
# result splits into the cited chunks' text, their `<chunk>` markup, receipts
# naming uncited chunks, and references to chunks already shown earlier. A
# search of the current question that returns a chunk already visible whole
# earlier shows it as such a reference rather than a second copy.

# %%
from capsa.capsule import parse_evidence
from capsa.capsule.render import escape_body

capsule_agent = runs["with capsule"]["agent"]
tools = [t for t in capsule_agent.nodes["tools"].bound.tools_by_name.values()]
parts = {f"tool schema: {t.name}": count_tokens_approximately([], tools=[t]) for t in tools}
for m in request:
    tokens = count_tokens_approximately([m])
    if m.type != "tool" or m.name not in ("search", "recall"):
        kinds = {"human": "user questions", "ai": "assistant messages"}
        kind = kinds.get(m.type, "cite acknowledgements")
        parts[kind] = parts.get(kind, 0) + tokens
        continue
    text = str(m.content)
    lines = text.splitlines()
    body = sum(len(escape_body(e.content)) for e in parse_evidence(text) or ())
    receipts = sum(len(x) for x in lines if x.startswith("<not-shown"))
    references = sum(len(x) for x in lines if x.endswith('shown="earlier"/>'))
    split = {"earlier returns: chunk text": body / 4, "earlier returns: receipts": receipts / 4,
             "earlier returns: references": references / 4}
    split["earlier returns: markup and framing"] = tokens - sum(split.values())
    for key, value in split.items():
        parts[key] = parts.get(key, 0) + value
where = pd.Series(parts).round().astype(int)
where["total"] = where.sum()
where.to_frame("tokens")

# %% [markdown]
# `benchmarks/capsule.py` makes the same split on a 20-question chat, for the
# full history and for capsa (with and without the cite exchanges). There the
# chat's own messages capsa leaves as they are, the tool schemas and the text of
# the chunks the answers cited (which capsa keeps whole) already come to 26.5 %
# of the full history's request, so no layout that keeps them can reach 25 %;
# what capsa adds on top is `<chunk>` ids and titles and the receipts that make
# `recall` possible. `arithmetic["floor"]` says it in words.

# %%
import json
from pathlib import Path

here = Path.cwd()
results = next(root / "benchmarks" / "results" / "capsule.json"
               for root in (here, *here.parents)
               if (root / "benchmarks" / "results" / "capsule.json").exists())
bench = json.loads(results.read_text())
print(bench["arithmetic"]["floor"])
pd.DataFrame({label: parts for label, parts in bench["breakdown"].items()})

# %%
pd.DataFrame([{"goal": goal, "met": value["met"], "capsa": value["value"]}
              for goal, value in bench["goals"].items()])

# %% [markdown]
# The middleware reports each compaction as a `capsa.capsule` custom callback
# event: which chunks are visible whole, which are only named (and can be
# recalled), and any picture it could not re-attach.

# %%
wire = runs["with capsule"]["questions"][-1]["wire"]
name, event = next(e for e in wire.events if e[0] == "capsa.capsule")
{k: event[k] for k in ("rewritten", "shown", "unshown", "kept_unknown")}

# %% [markdown]
# ## The stored history is untouched
#
# Both checkpointers hold the same messages. The capsule agent's state has one
# extra key, `capsa_ledger`: what each question retrieved and cited, as JSON,
# persisted by whatever checkpointer the agent runs.

# %%
from capsa.capsule import EvidenceLedger

stored = {label: run["agent"].get_state(run["config"]).values for label, run in runs.items()}
assert [m.content for m in stored["with capsule"]["messages"]] == [
    m.content for m in stored["without capsule"]["messages"]]
print({label: (len(values["messages"]), count_tokens_approximately(values["messages"]))
       for label, values in stored.items()})


def cite_acknowledgements(messages):
    return sum(1 for m in messages if m.type == "tool" and m.name == "cite")


print("cite acknowledgements stored:", cite_acknowledgements(stored["with capsule"]["messages"]),
      "| sent on question 8's first call:", cite_acknowledgements(request))
ledger = EvidenceLedger.from_json(stored["with capsule"]["capsa_ledger"])
pd.DataFrame([{"chunk": e.evidence.chunk_id, "retrieved in": e.retrieved_in,
               "cited in": e.cited_in} for e in ledger.entries])

# %% [markdown]
# Question identities are message counts (`retrieved in`, `cited in`): the
# history's length when each question arrived. Chunks retrieved but never
# cited have already left the ledger, so it grows with citations, not with
# retrievals.
#
# ## The same rewrite in an LCEL chain, and its refusal
#
# `capsule_messages` is the function form, for chains that manage their own
# history. Given the stored messages, the ledger and the cite tool's name (so
# ended questions' cite exchanges leave too), it builds the view the middleware
# would send:

# %%
from capsa.langchain import capsule_messages

history = stored["with capsule"]["messages"]
view = capsule_messages(history, ledger=ledger, evidence_tools=["search"], cite_tools=["cite"])
print(f"stored {count_tokens_approximately(history)} tokens -> view "
      f"{count_tokens_approximately(view)} tokens, {len(view)} of {len(history)} messages")

# %% [markdown]
# Without the ledger it cannot tell where the current question begins, and it
# refuses rather than guess; the message says how to adopt a history it never
# recorded. (The middleware adopts such a thread by itself: earlier evidence
# becomes receipts, recallable.)

# %%
from capsa.errors import CompactionRefused

try:
    capsule_messages(history, ledger=None, evidence_tools=["search"])
except CompactionRefused as error:
    print("CompactionRefused:", error)
