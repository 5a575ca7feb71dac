"""`capsa demo`: the offline end-to-end story on the bundled sample corpus.

1. guarded extraction of the corpus, hostile files included;
2. a LangChain RAG chain with `BudgetedRetriever` packing to a small window;
3. a three-question agent conversation with `CitationCapsuleMiddleware`;
4. a LlamaIndex query engine with `CapsaNodePostprocessor`, and a chat with
   `CitationCapsuleBlock`;
5. a shadow comparison of two retrieval routes.

The chat model is `ExtractiveChatModel`, a deterministic offline stand-in;
``--model provider:name`` uses any LangChain chat model instead (its key comes
from the environment).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from capsa.demo.corpus_source import CORPUS_DIR, DOCUMENTS, HOSTILE_FILES
from capsa.guard import (
    Attachment,
    ExtractionResult,
    extract_all,
    media_type_for_name,
    read_bounded,
)

__all__ = ["corpus_attachments", "extract_corpus", "main", "run_demo"]


def corpus_attachments(directory: Path = CORPUS_DIR) -> list[Attachment]:
    """The sample corpus as attachments: the documents, then the hostile files."""
    names = [d.name for d in DOCUMENTS] + [h.name for h in HOSTILE_FILES]
    return [Attachment(label=name, media_type=media_type_for_name(name),
                       payload=read_bounded(directory / name)) for name in names]


def extract_corpus() -> ExtractionResult:
    """Extract the whole sample corpus through the default isolated pool."""
    return extract_all(corpus_attachments())


def run_demo(model_name: str | None = None) -> dict[str, Any]:
    """Run every step and return what each produced, as plain data."""
    from capsa.demo import pipelines
    from capsa.demo.chat import ExtractiveChatModel
    from capsa.demo.retrieval import chunk_corpus

    timings: dict[str, float] = {}
    started = time.perf_counter()
    extraction = extract_corpus()
    timings["extraction"] = time.perf_counter() - started
    chunks = chunk_corpus(extraction.extracted)
    if model_name:
        from langchain.chat_models import init_chat_model

        model = init_chat_model(model_name)
    else:
        model = ExtractiveChatModel()
    steps: dict[str, Any] = {"extraction": {
        "extracted": [{"label": e.label, "kind": e.kind, "chars": len(e.text),
                       "sha256": e.sha256} for e in extraction.extracted],
        "omitted": [o.model_dump(mode="json") for o in extraction.omitted],
        "chunks": len(chunks)}}
    for name, step in (("rag_chain", lambda: pipelines.rag_chain(chunks, model)),
                       ("agent", lambda: pipelines.agent_conversation(chunks, model)),
                       ("llama_index", lambda: pipelines.llama_index_pipelines(chunks)),
                       ("shadow", pipelines.shadow_comparison)):
        began = time.perf_counter()
        steps[name] = step()
        timings[name] = time.perf_counter() - began
    steps["seconds"] = {k: round(v, 2) for k, v in timings.items()}
    steps["model"] = model_name or "capsa-extractive (offline)"
    return steps


def main(*, json_output: bool = False, model_name: str | None = None) -> int:
    """Run the demo; print a rich story, or JSON with ``json_output``."""
    from rich.console import Console

    console = Console(stderr=json_output)
    with console.status("capsa demo: starting isolated parser workers and running five steps"):
        report = run_demo(model_name)
    if json_output:
        print(json.dumps(report, indent=2))
        return 0
    _story(console, report)
    return 0


def _story(console: Any, report: dict[str, Any]) -> None:
    from rich.markdown import Markdown
    from rich.panel import Panel
    from rich.table import Table

    from capsa.demo.pipelines import describe_tokens, first_words

    seconds = report["seconds"]
    extraction = report["extraction"]
    console.print(Panel.fit(f"[bold]capsa demo[/bold] — model: {report['model']}"))

    console.rule("1 · guarded extraction")
    table = Table("file", "kind", "characters", title="extracted through the isolated pool")
    for item in extraction["extracted"]:
        table.add_row(item["label"], item["kind"], str(item["chars"]))
    console.print(table)
    refused = Table("file", "stage", "reason", "detail", title="refused, with reasons")
    for o in extraction["omitted"]:
        refused.add_row(o["label"], o["stage"], o["reason"], o["detail"])
    console.print(refused)
    console.print(f"{extraction['chunks']} chunks indexed; {seconds['extraction']:.1f} s "
                  "including worker start-up and self-tests")

    console.rule("2 · LangChain RAG chain with BudgetedRetriever")
    rag = Table("question", "context tokens (top-6 → packed)", "answer", "gold answer found")
    for row in report["rag_chain"]:
        rag.add_row(row["question"], f"{row['context_tokens_raw']} → "
                    f"{row['context_tokens_packed']} (budget {row['budget']})",
                    first_words(row["answer"], 20), "yes" if row["found"] else "no")
    console.print(rag)

    console.rule("3 · agent conversation with CitationCapsuleMiddleware")
    agent = report["agent"]
    tokens = Table("run", "tokens sent per question", "stored messages")
    for label in ("without capsule", "with capsule"):
        run = agent[label]
        tokens.add_row(label, describe_tokens(run["tokens_per_question"]),
                       str(run["stored_messages"]))
    console.print(tokens)
    console.print("The checkpointed history is identical in size either way; only what is "
                  "sent to the model changes.")

    console.rule("4 · LlamaIndex query engine and chat")
    llama = report["llama_index"]
    engine = Table("question", "prompt tokens", "answer in context", "nodes kept")
    for row in llama["query_engine"]:
        engine.add_row(row["question"], str(row["prompt_tokens"]),
                       "yes" if row["answer_in_context"] else "no", str(row["nodes"]))
    console.print(engine)
    console.print(f"CitationCapsuleBlock: capsule tokens after each turn "
                  f"{describe_tokens(llama['chat']['capsule_tokens_after_each_turn'])}")

    console.rule("5 · shadow evaluation of two retrieval routes")
    console.print(Markdown(report["shadow"]["markdown"]))
    total = sum(seconds.values())
    console.print(Panel.fit(f"done in {total:.1f} s: " + ", ".join(
        f"{k} {v:.1f} s" for k, v in seconds.items())))
