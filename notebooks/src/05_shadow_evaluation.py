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
    inside += [{"route": name, "passage": c.source_id, "score": round(c.score, 3),
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
from capsa.shadow import pair
from capsa.demo.routes import capture_route

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

from capsa.shadow import ShadowReport
from capsa.demo.routes import compare_routes

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
# ## On live traffic: `ShadowRetriever`
#
# In an application, the candidate rides along with the retriever being
# served. `capsa.langchain.ShadowRetriever` returns the baseline's documents
# unchanged and hands each query's rows to a sink (a list here; an analytics
# client in production). Both retrievers below search the same paragraphs; the
# candidate packs eight of them into 160 tokens with `BudgetedRetriever`.

# %%
from capsa.budget import Budget
from capsa.demo.pipelines import CorpusRetriever
from capsa.demo.retrieval import Chunk
from capsa.langchain import BudgetedRetriever, ShadowRetriever
from capsa.demo.routes import sample_passages

paragraphs = [Chunk(id=p.source_id, text=p.text, source=p.source_id.split("#")[0], title="")
              for p in sample_passages()]
current = CorpusRetriever(chunks=paragraphs, k=3)
trial = BudgetedRetriever(retriever=CorpusRetriever(chunks=paragraphs, k=8),
                          budget=Budget(max_tokens=160))
sink: list = []
shadow = ShadowRetriever(baseline=current, candidate=trial, sink=sink.extend,
                         random_bytes=seeded)
for text in queries:
    served = shadow.invoke(text)
    assert [d.id for d in served] == [d.id for d in current.invoke(text)]
live = ShadowReport.from_rows(sink, invalidated=shadow.counts.invalidated)
print(shadow.counts)
display(Markdown(live.to_markdown()))

# %% [markdown]
# A plain retriever exposes no gate and no rendered block, so the adapter
# records every returned document as admitted, selected and included, scores
# them by rank, and leaves visibility unknown (`n/a`). For gate and wire
# figures, drive `RouteCapture` from inside the route, as the bundled routes do.
#
# ## A candidate that fails costs one comparison, never a response
#
# A candidate that raises, or runs past `timeout_s`, loses only that query's
# comparison; the loss is counted by cause and reported as a `capsa.shadow`
# custom callback event.

# %%
import time

from langchain_core.callbacks import BaseCallbackHandler
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


class Outcomes(BaseCallbackHandler):
    def __init__(self) -> None:
        self.seen: list[str] = []

    def on_custom_event(self, name, data, **kwargs) -> None:
        if name == "capsa.shadow":
            self.seen.append(data["outcome"])


outcomes = Outcomes()
results = []
for label, trial in (("raises", Down()), ("too slow", Slow())):
    shadow = ShadowRetriever(baseline=current, candidate=trial, sink=[].extend, timeout_s=0.2)
    for text in queries[:2]:
        served = shadow.invoke(text, config={"callbacks": [outcomes]})
        assert [d.id for d in served] == [d.id for d in current.invoke(text)]
    results.append({"candidate": label, **shadow.counts.model_dump()})
print("events:", outcomes.seen)
pd.DataFrame(results)
