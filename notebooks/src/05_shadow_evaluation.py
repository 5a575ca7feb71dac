# %% [markdown]
# # 05 · Shadow evaluation of two retrieval routes
#
# Before replacing a retrieval route you want to know where the new one
# disagrees with the current one, on real queries, without writing document
# ids, titles, passages or queries into your analytics. `capsa.shadow` runs the
# candidate beside the baseline, compares the two *inside the process*, and
# releases only anonymous numeric rows.
#
# The routes here are the two bundled with `capsa shadow`, over the sample
# corpus: `lexical` (BM25, a score gate, the top 3 passages whole) and
# `budgeted` (the same retrieval, a lower gate, then `capsa.budget.pack` into
# 160 tokens). Row ids are random by design; a seeded source makes this
# notebook repeatable.

# %%
import json
import random
from importlib.resources import files

import pandas as pd

from capsa.demo.routes import ROUTES

lines = files("capsa.demo").joinpath("queries.jsonl").read_text(encoding="utf-8")
queries = [json.loads(line)["query"] for line in lines.splitlines() if line.strip()]
baseline, candidate = ROUTES["lexical"](), ROUTES["budgeted"]()
seeded = random.Random(2025).randbytes
print(f"{len(queries)} queries, e.g. {queries[3]!r}")

# %% [markdown]
# ## One query, inside the process
#
# Each route reports what it did with every candidate: its score, the gate's
# decision and reason, whether ranking selected it, and the block it rendered.
# Here the identities are still visible, because we are still inside the
# process:

# %%
query = queries[3]
runs = {"lexical": baseline.run(query), "budgeted": candidate.run(query)}
inside = []
for name, run in runs.items():
    reasons = {g.source_id: g.reason for g in run.gate}
    inside += [{"route": name, "passage": c.source_id, "score": round(c.score or 0.0, 3),
                "gate": reasons[c.source_id], "selected": c.source_id in run.selected}
               for c in run.candidates]
pd.DataFrame(inside).pivot(index="passage", columns="route", values=["score", "gate", "selected"])

# %% [markdown]
# ## What leaves the process
#
# `pair()` joins the two captures by passage identity and then forgets it. Each
# `PairedDecision` row holds booleans, scores, a gate reason from a closed set,
# and two fresh random ids:

# %%
from capsa.demo.routes import capture_route
from capsa.shadow import pair

rows = pair(capture_route("baseline", query, baseline),
            capture_route("candidate", query, candidate), random_bytes=seeded)
released = pd.DataFrame([r.model_dump() for r in rows])
released

# %% [markdown]
# Every string in the released rows is either a random hex id or a gate
# reason; no passage id, no word of the query:

# %%
strings = {v for row in rows for v in row.model_dump().values() if isinstance(v, str)}
ids = {s for s in strings if len(s) == 32 and all(c in "0123456789abcdef" for c in s)}
print("non-id strings:", sorted(strings - ids))
serialised = json.dumps([r.model_dump(mode="json") for r in rows])
assert not any(c.source_id in serialised for run in runs.values() for c in run.candidates)
assert not any(word in serialised for word in query.lower().split() if len(word) > 3)

# %% [markdown]
# ## The report over all queries
#
# `compare_routes` runs both routes on every query; `ShadowReport` needs
# nothing but the rows, so it can be built wherever the rows were shipped.

# %%
from IPython.display import Image, Markdown, display

from capsa.demo.routes import compare_routes
from capsa.shadow import ShadowReport

run = compare_routes(queries, baseline, candidate, random_bytes=seeded)
report = ShadowReport.from_rows(run.rows, invalidated=run.invalidated)
display(Markdown(report.to_markdown()))

# %%
display(Image(report.to_png()))

# %% [markdown]
# Reading it: both routes score with the same BM25, so the score rank
# correlation is 1.0. Their gates differ: the lexical gate admits everything
# above 0.2 of the best score, while the budgeted route admits only what the
# packer kept in 160 tokens and refuses the rest as `over_budget`, which is
# why admission agreement is low. Selection overlap and recall of the
# baseline's selection say how often the baseline's top three survived
# packing. Visibility is 1.0 on both sides: every included passage was in the
# prompt the route would send.
#
# ## Per query
#
# The report's per-query figures carry only random ids. Inside the process, you
# may pair each query on its own and keep the query text beside its figures,
# which is how to find the queries worth reading:

# %%
per_query = []
for text in queries:
    rows = pair(capture_route("baseline", text, baseline),
                capture_route("candidate", text, candidate), random_bytes=seeded)
    figures = ShadowReport.from_rows(rows).per_query[0]
    per_query.append({"query": text, "passages": figures.rows,
                      "selection overlap": round(figures.selection_jaccard, 2),
                      "recall of baseline": figures.recall_of_baseline})
per_query = pd.DataFrame(per_query)
per_query.sort_values("selection overlap").head(8)

# %%
import matplotlib.pyplot as plt

ordered = per_query.sort_values("selection overlap")
fig, ax = plt.subplots(figsize=(8, 5))
ax.barh([q[:55] for q in ordered["query"]], ordered["selection overlap"], color="#4c72b0")
ax.set_xlabel("selection overlap (Jaccard), lexical vs budgeted")
ax.set_xlim(0, 1)
ax.tick_params(axis="y", labelsize=7)
plt.tight_layout()

# %% [markdown]
# ## On live traffic: a production set-up
#
# In an application the candidate must cost the user nothing.
# `capsa.langchain.ShadowRetriever` returns the baseline's documents as soon as
# the baseline answers; the candidate runs afterwards in a bounded thread pool
# (a task on `ainvoke`). `sample_rate` compares a share of the traffic,
# `max_in_flight` bounds the comparisons running at once (a query beyond it is
# served alone and counted), `flush()` waits for running comparisons (tests,
# batch jobs) and `close()` stops at shutdown. Rows go to a sink: a list here,
# a queue or an analytics client in production.
#
# The candidate below is capsa's own `BudgetedRetriever`, so the comparison is
# captured whole: the packer's report (observed through LangChain's callbacks)
# says which passages it admitted and why not, in which order it packed them,
# and what text it rendered.

# %%
import time

from capsa.budget import Budget
from capsa.demo.pipelines import CorpusRetriever
from capsa.demo.retrieval import Chunk
from capsa.demo.routes import sample_passages
from capsa.langchain import BudgetedRetriever, ShadowRetriever

paragraphs = [Chunk(id=p.source_id, text=p.text, source=p.source_id.split("#")[0], title="")
              for p in sample_passages()]
current = CorpusRetriever(chunks=paragraphs, k=3)
trial = BudgetedRetriever(retriever=CorpusRetriever(chunks=paragraphs, k=8),
                          budget=Budget(max_tokens=160))
sink: list = []
draws = random.Random(7)
shadow = ShadowRetriever(baseline=current, candidate=trial, sink=sink.extend,
                         sample_rate=0.5, max_in_flight=16, max_workers=2,
                         random_bytes=seeded, sampler=draws.random)
served_ms = []
for text in queries:
    start = time.perf_counter()
    served = shadow.invoke(text)                      # the baseline's documents, unchanged
    served_ms.append(1000 * (time.perf_counter() - start))
    assert [d.id for d in served] == [d.id for d in current.invoke(text)]
shadow.flush()                                        # the candidates ran in the background
print(shadow.counts)
live = ShadowReport.from_rows(sink, invalidated=shadow.counts.invalidated)
display(Markdown(live.to_markdown()))

# %% [markdown]
# About half the queries were compared (`paired`); the others were served alone and
# counted as `sampled_out`. The candidate's gate reasons are the packer's own:
# `admitted` for what fit in 160 tokens, `over_budget` for what did not. Each
# row also carries the passage's rank in each route's selection:

# %%
ranked = pd.DataFrame([r.model_dump() for r in sink])
ranked[ranked.candidate_selected][["baseline_rank", "candidate_rank", "candidate_gate_reason",
                                   "candidate_included"]].head(8)

# %% [markdown]
# ## Was the served block visible to the model?
#
# Only the place where the model's request is built can say. In an agent,
# `ShadowMiddleware` shows each model call's messages to the recorder under the
# conversation's `thread_id`; a retriever tool's comparison in that thread then
# records `baseline_visible`. (In LlamaIndex, `ShadowRetriever(...,
# observe_wire=True)` does the same at the query engine's LLM call.)

# %%
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import create_retriever_tool
from langgraph.checkpoint.memory import InMemorySaver

from capsa.langchain import ShadowMiddleware


class ScriptedModel(GenericFakeChatModel):
    """A fake chat model: calls the search tool once, then answers."""

    def bind_tools(self, tools, **kwargs):
        return self


agent_rows: list = []
agent_shadow = ShadowRetriever(baseline=current, candidate=trial, sink=agent_rows.extend,
                               random_bytes=seeded)
question = "How much is the monthly internet stipend for remote workers?"
model = ScriptedModel(messages=iter([
    AIMessage("", tool_calls=[{"name": "search", "args": {"query": question}, "id": "c1"}]),
    AIMessage("EUR 30 a month."),
]))
agent = create_agent(model, tools=[create_retriever_tool(agent_shadow, "search", "Search.")],
                     middleware=[ShadowMiddleware(agent_shadow)], checkpointer=InMemorySaver())
agent.invoke({"messages": [HumanMessage(question)]}, {"configurable": {"thread_id": "demo"}})
agent_shadow.flush()
print(ShadowReport.from_rows(agent_rows).baseline_visibility)

# %% [markdown]
# ## A candidate that fails costs one comparison, never a response
#
# A candidate that raises, or runs past `timeout_s`, loses only that query's
# comparison, counted by cause. The served request never waits for it: below,
# a candidate that takes a second does not slow the baseline down.

# %%
from langchain_core.retrievers import BaseRetriever


class Down(BaseRetriever):
    """A candidate whose index is unreachable."""

    def _get_relevant_documents(self, query, *, run_manager):
        raise ConnectionError("candidate index unreachable")


class Slow(BaseRetriever):
    """A candidate that answers after a second."""

    def _get_relevant_documents(self, query, *, run_manager):
        time.sleep(1.0)
        return []


results = []
for label, failing in (("raises", Down()), ("too slow", Slow())):
    shadow = ShadowRetriever(baseline=current, candidate=failing, sink=[].extend, timeout_s=0.2)
    start = time.perf_counter()
    for text in queries[:2]:
        served = shadow.invoke(text)
        assert [d.id for d in served] == [d.id for d in current.invoke(text)]
    served_s = time.perf_counter() - start
    shadow.close()                                    # waits for the slow candidate
    results.append({"candidate": label, "served in (s)": round(served_s, 3),
                    **shadow.counts.model_dump()})
pd.DataFrame(results)
