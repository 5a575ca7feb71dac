# %% [markdown]
# # 04 · Citation capsules in a LangChain agent conversation
#
# An agent with a search tool keeps every search result in its checkpointed
# history, so each new question carries all earlier retrievals with it, cited
# or not. `CitationCapsuleMiddleware` changes what is *sent*, never what is
# *stored*: before each model call, earlier search results are replaced by one
# capsule of the chunks earlier answers actually cited, and the rest by short
# receipts.
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
# The tool shows each chunk under its id, so the model can cite it; its
# artifact carries the documents, which is what the middleware records.
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

# %%
import matplotlib.pyplot as plt

fig, ax = plt.subplots(figsize=(7, 4))
for label, style in (("without capsule", "o-"), ("with capsule", "s-")):
    ax.plot(tokens.index, tokens[f"first call, {label}"], style, label=label)
ax.set_ylabel("tokens sent on the question's first call")
ax.set_title("What each new question carries from the conversation so far")
ax.legend()
ax.grid(alpha=0.3)
plt.tight_layout()

# %%
last = tokens.iloc[-1]
saved = 1 - last["first call, with capsule"] / last["first call, without capsule"]
print(f"question {len(conversation)}: {last['first call, without capsule']} -> "
      f"{last['first call, with capsule']} tokens on the first call ({saved:.0%} fewer)")

# %% [markdown]
# The saving is modest here because the answers cite long chunks (the travel
# policy's first chunk is about 500 tokens, and three answers rest on it); the
# capsule keeps cited chunks whole, once. What it drops is everything that was
# retrieved and never cited. At the second question it even costs a little
# more than it saves: the first search returned a single chunk, the answer
# cited it, and the capsule is that same chunk plus its header.
#
# ## What the model saw at the last question
#
# The first request of question 8, message by message. Earlier search results
# became receipts, except the newest one, which carries the capsule:

# %%
request = runs["with capsule"]["questions"][-1]["wire"].requests[0]
pd.DataFrame([{"type": m.type, "tool": getattr(m, "name", None),
               "tokens": count_tokens_approximately([m]),
               "starts with": str(m.content)[:70].replace("\n", " ")} for m in request])

# %%
capsule = next(str(m.content) for m in request if str(m.content).startswith("[Evidence capsule"))
print(f"{count_tokens_approximately([capsule])} tokens; its outline (each chunk follows its line):")
print("\n".join(line for line in capsule.splitlines() if line.startswith("[")))

# %% [markdown]
# The middleware reports each compaction as a `capsa.capsule` custom callback
# event: which chunks the capsule holds, how many returns became receipts, and
# any picture it could not re-attach.

# %%
wire = runs["with capsule"]["questions"][-1]["wire"]
name, event = next(e for e in wire.events if e[0] == "capsa.capsule")
{k: event[k] for k in ("receipts", "capsule_chunk_ids", "capsule_tokens", "omitted_chunk_ids")}

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
# history. Given the stored messages and the ledger, it builds the same view
# the middleware sent:

# %%
from capsa.langchain import capsule_messages

history = stored["with capsule"]["messages"]
view = capsule_messages(history, ledger=ledger, evidence_tools=["search"])
print(f"stored {count_tokens_approximately(history)} tokens -> view "
      f"{count_tokens_approximately(view)} tokens, {len(view)} of {len(history)} messages")

# %% [markdown]
# Without the ledger it cannot tell which earlier evidence was cited, and it
# refuses rather than drop evidence the answers rest on:

# %%
from capsa.errors import CompactionRefused

try:
    capsule_messages(history, ledger=None, evidence_tools=["search"])
except CompactionRefused as error:
    print("CompactionRefused:", error)
