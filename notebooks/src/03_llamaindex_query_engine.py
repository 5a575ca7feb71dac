# %% [markdown]
# # 03 · A LlamaIndex query engine with guarded reading and budgeted context
#
# The same sample corpus, this time the LlamaIndex way: `SimpleDirectoryReader`
# reads the folder with `CapsaReader` as its file extractor, a
# `VectorStoreIndex` answers queries, and `CapsaNodePostprocessor` packs the
# retrieved nodes into a token budget before the LLM sees them. A chat engine
# then keeps the evidence earlier answers cited with `CitationCapsuleBlock`.
#
# Offline and deterministic: the embedding is a hashed bag of words (it ranks
# texts that share words, nothing more), and the LLM is LlamaIndex's `MockLLM`,
# which answers with the prompt it was given, so we can read exactly what a
# real model would have seen.

# %% [markdown]
# ## Reading: nothing is skipped silently
#
# Left to itself, `SimpleDirectoryReader` catches a failing reader's exception,
# prints "Failed to load file", and moves on. With `CapsaReader` every file goes
# through the guard (sniffed, archive-checked, parsed in an isolated worker),
# and every refusal is kept with its reason.

# %%
from pathlib import Path

import pandas as pd
from llama_index.core import SimpleDirectoryReader

from capsa.demo.corpus_source import CORPUS_DIR, DOCUMENTS, HOSTILE_FILES, QUESTIONS
from capsa.llama_index import CapsaReader

files = [CORPUS_DIR / d.name for d in DOCUMENTS] + [CORPUS_DIR / h.name for h in HOSTILE_FILES]
reader = CapsaReader()
documents = SimpleDirectoryReader(
    input_files=files,
    file_extractor={path.suffix: reader for path in files},
    file_metadata=lambda path: {"file_name": Path(path).name},
).load_data()
pd.DataFrame([{"file": d.metadata["file_name"], "kind": d.metadata["capsa_kind"],
               "characters": len(d.text)} for d in documents])

# %%
pd.DataFrame([o.model_dump() for o in reader.omitted])

# %% [markdown]
# The `capsa_*` provenance keys are on every document, and excluded from what
# the LLM and the embedder see:

# %%
print(documents[0].metadata)
print("hidden from the LLM:", documents[0].excluded_llm_metadata_keys)

# %% [markdown]
# ## An index and two query engines
#
# Nodes get readable, stable ids (`<file>-<n>`), so the tables below are the
# same on every run. One engine sends the six retrieved nodes as they are; the
# other sends them through `CapsaNodePostprocessor` with a 250-token budget.

# %%
import hashlib
import re

from llama_index.core import VectorStoreIndex
from llama_index.core.embeddings import BaseEmbedding
from llama_index.core.llms.mock import MockLLM
from llama_index.core.node_parser import SentenceSplitter

from capsa.budget import Budget, estimate_tokens
from capsa.llama_index import CapsaNodePostprocessor


class HashedWords(BaseEmbedding):
    """A deterministic bag-of-words vector: texts that share words come out similar."""

    def _vector(self, text: str) -> list[float]:
        vector = [0.0] * 256
        for word in re.findall(r"[a-z0-9]+", text.lower()):
            vector[int(hashlib.sha256(word.encode()).hexdigest(), 16) % 256] += 1.0
        return vector

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._vector(query)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._vector(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._vector(text)


splitter = SentenceSplitter(
    chunk_size=128, chunk_overlap=0,
    id_func=lambda n, doc: f"{doc.metadata['file_name'].rsplit('.', 1)[0]}-{n}")
nodes = splitter.get_nodes_from_documents(documents)
index = VectorStoreIndex(nodes, embed_model=HashedWords())

plain = index.as_query_engine(llm=MockLLM(), similarity_top_k=6)
packed = index.as_query_engine(
    llm=MockLLM(), similarity_top_k=6,
    node_postprocessors=[CapsaNodePostprocessor(budget=Budget(max_tokens=250))])
print(f"{len(nodes)} nodes")

# %% [markdown]
# `CapsaNodePostprocessor` reports what it kept and dropped through
# LlamaIndex's instrumentation, as a `CapsaCompressionEvent`. Any event
# handler on the root dispatcher receives it:

# %%
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.event_handlers import BaseEventHandler

from capsa.llama_index.postprocessors import CapsaCompressionEvent


class CompressionEvents(BaseEventHandler):
    """Keeps every capsa compression report."""

    seen: list = []

    def handle(self, event, **kwargs) -> None:
        if isinstance(event, CapsaCompressionEvent):
            self.seen.append(event)


compression_events = CompressionEvents(seen=[])
get_dispatcher().add_event_handler(compression_events)

# %% [markdown]
# ## Fifteen questions, two prompts each
#
# `MockLLM` echoes its prompt, so `str(response)` is what the model was sent.
# The question is whether the expected answer is in it, and at what size.

# %%
def contains(text: str, answer: str) -> bool:
    """Whitespace-insensitive containment (PDF and OCR text reflows lines)."""
    return " ".join(answer.split()).lower() in " ".join(text.split()).lower()


rows = []
for sample in QUESTIONS:
    before = str(plain.query(sample.question))
    after = str(packed.query(sample.question))
    event = compression_events.seen[-1]
    rows.append({"question": sample.question,
                 "prompt tokens": estimate_tokens(before),
                 "with capsa": estimate_tokens(after),
                 "answer in prompt": contains(before, sample.answer),
                 "answer in capsa prompt": contains(after, sample.answer),
                 "nodes kept": len(event.kept), "nodes dropped": len(event.dropped)})
queries = pd.DataFrame(rows)
queries

# %%
print(f"prompt tokens {queries['prompt tokens'].sum()} -> {queries['with capsa'].sum()}; "
      f"answer in prompt for {queries['answer in prompt'].sum()} -> "
      f"{queries['answer in capsa prompt'].sum()} of {len(queries)} questions")

# %%
import matplotlib.pyplot as plt

ax = queries[["prompt tokens", "with capsa"]].plot.bar(figsize=(9, 4), width=0.8)
ax.set_xticklabels([f"Q{n + 1}" for n in range(len(queries))], rotation=0)
ax.set_ylabel("estimated prompt tokens")
ax.set_title("Prompt size per question: six retrieved nodes, as they are and packed to 250")
plt.tight_layout()

# %% [markdown]
# ## What one query kept
#
# Kept nodes are *new* nodes (the index's own are untouched); their text is
# what was kept, and their metadata carries the receipt, hidden from the LLM:

# %%
from llama_index.core.schema import MetadataMode

response = packed.query(QUESTIONS[9].question)
pd.DataFrame([{"node": n.node.node_id, "score": round(n.score, 3),
               **{k: n.node.metadata["capsa_receipt"][k]
                  for k in ("tokens_full", "tokens_kept", "whole", "detail")}}
              for n in response.source_nodes])

# %%
assert all("capsa_receipt" not in n.node.get_content(metadata_mode=MetadataMode.LLM)
           for n in response.source_nodes)
last = compression_events.seen[-1]
print(f"used {last.used_tokens} of {last.max_tokens} tokens")
pd.DataFrame(last.dropped)

# %% [markdown]
# ## A chat engine that remembers what it cited
#
# Chat engines put the retrieved nodes into one turn's system prompt and store
# only the user's and the assistant's text. By the next turn, the evidence
# the previous answer rested on is gone. `CitationCapsuleBlock` is a `Memory`
# block that puts it back: after each turn, `record(response)` notes the
# turn's source nodes and what the answer cited (read from `[node_id]`
# markers in a real model's answer; here we pass the top node ourselves,
# because `MockLLM` cites nothing).
#
# `MockLLMWithChatMemoryOfLastCall` keeps the messages of its last call; with
# `max_tokens` set it answers with filler, which keeps the stored history
# small and readable.

# %%
from llama_index.core.chat_engine import ContextChatEngine
from llama_index.core.llms.mock import MockLLMWithChatMemoryOfLastCall
from llama_index.core.memory import Memory

from capsa.llama_index import CitationCapsuleBlock

block = CitationCapsuleBlock()
memory = Memory.from_defaults(session_id="notebook-03", memory_blocks=[block])
llm = MockLLMWithChatMemoryOfLastCall(max_tokens=8, is_chat_model=True)
chat = ContextChatEngine.from_defaults(retriever=index.as_retriever(similarity_top_k=2),
                                       memory=memory, llm=llm)

turns = [QUESTIONS[0].question, QUESTIONS[3].question,
         "Remind me: which cities count as high-cost for hotels?"]
log = []
for turn in turns:
    response = chat.chat(turn)
    cited = response.source_nodes[0].node.node_id
    block.record(response, cited=[cited])
    sent = "\n".join(str(m.content) for m in llm.last_chat_messages)
    log.append({"turn": turn, "retrieved": [n.node.node_id for n in response.source_nodes],
                "cited": cited, "prompt tokens": estimate_tokens(sent),
                "capsule chunks after the turn": list(block.ledger.citable_ids())})
pd.DataFrame(log)

# %% [markdown]
# The third question's retrieval does not find the hotel paragraph again (the
# word overlap is with other chunks), but the capsule carries it: `Memory`
# inserts the block as a system message. What the model received on the third
# turn, besides that turn's own retrieved context:

# %%
hotel = log[0]["cited"]
assert hotel not in log[2]["retrieved"] and hotel in log[2]["capsule chunks after the turn"]
print(next(str(m.content) for m in llm.last_chat_messages
           if "<cited_evidence>" in str(m.content)))

# %% [markdown]
# The ledger is plain JSON: persist `block.ledger.to_json()` beside the chat
# store and pass it back (`CitationCapsuleBlock(ledger=EvidenceLedger.from_json(...))`)
# when the session resumes.

# %%
from capsa.capsule import EvidenceLedger

restored = EvidenceLedger.from_json(block.ledger.to_json())
assert restored == block.ledger
[(entry.evidence.chunk_id, entry.cited_in) for entry in restored.entries]

# %%
get_dispatcher().event_handlers.remove(compression_events)
