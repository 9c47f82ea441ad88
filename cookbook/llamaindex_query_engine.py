"""A LlamaIndex query engine over Mnemis, offline.

    python cookbook/llamaindex_query_engine.py

Two ways in, both answering with Mnemis's dual-path (semantic + relation) recall:
1. ``MnemisRetriever`` inside a ``RetrieverQueryEngine``;
2. ``MnemisPropertyGraphStore`` behind a ``PropertyGraphIndex``, queried through ``MnemisPGRetriever``.

Offline by design: ``MockLLM`` echoes the prompt it gets (so you can see the context Mnemis
supplied) and the deterministic hashing embedder stands in for a real one. Swap in any
LlamaIndex LLM, and drop ``embedder=`` to use the bundled multilingual e5 model.
"""

from __future__ import annotations

from llama_index.core import PropertyGraphIndex, Settings
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.llms import MockLLM
from llama_index.core.query_engine import RetrieverQueryEngine

from mnemis_integrations import MnemisMemory
from mnemis_integrations.core.embedders import HashingEmbedder
from mnemis_integrations.llama_index import MnemisPGRetriever, MnemisPropertyGraphStore, MnemisRetriever

CHAT = [
    {
        "id": "1",
        "speaker": "Dana",
        "text": "Customer Acme asked to move from the Basic plan to the Pro plan.",
        "timestamp": "2025-03-03T09:00:00",
    },
    {
        "id": "2",
        "speaker": "Lee",
        "text": "The Pro plan for Acme needs a 10% discount approved by finance.",
        "timestamp": "2025-03-03T09:05:00",
    },
    {
        "id": "3",
        "speaker": "Dana",
        "text": "Team lunch moved to Thursday at the noodle bar.",
        "timestamp": "2025-03-05T12:00:00",
    },
    {
        "id": "4",
        "speaker": "Lee",
        "text": "Finance approved the discount; Acme confirmed the Pro plan today.",
        "timestamp": "2025-03-10T16:30:00",
    },
]
QUESTION = "Did Acme confirm the Pro plan?"


def main() -> dict:
    # LlamaIndex reaches for OpenAI unless told otherwise: set both explicitly.
    Settings.llm = MockLLM()
    Settings.embed_model = MockEmbedding(embed_dim=8)

    mem = MnemisMemory(embedder=HashingEmbedder())
    mem.add_messages(CHAT, namespace="sales")

    # 1. A plain retriever in a query engine.
    retriever = MnemisRetriever(memory=mem, namespace="sales", similarity_top_k=4)
    engine = RetrieverQueryEngine.from_args(retriever)
    response = engine.query(QUESTION)
    print(f"Q: {QUESTION}\n")
    print("Sources, with how Mnemis found each:")
    for n in response.source_nodes:
        md = n.node.metadata
        print(
            f"  {n.score:.2f}  {md['kind']:<8} [{md['path_str']}]  via={'+'.join(md['via'])}"
            f"  semantic={md['semantic_score']:.2f} relation={md['relation_score']:.2f}"
            f"  sources={md['source_ids']}"
        )

    # 2. The same memory as a property graph.
    store = MnemisPropertyGraphStore(memory=mem, namespace="sales")
    index = PropertyGraphIndex.from_existing(property_graph_store=store)
    pg_engine = index.as_query_engine(sub_retrievers=[MnemisPGRetriever(store, similarity_top_k=4)])
    pg_response = pg_engine.query(QUESTION)
    relations = ", ".join(store.get_schema()["relation_labels"])
    print(f"\nThe graph has {len(store.get())} nodes; relations: {relations}")
    print(f"Property-graph query engine used {len(pg_response.source_nodes)} memories; the first:")
    print("  " + pg_response.source_nodes[0].node.get_content().replace("\n", "\n  "))

    return {
        "sources": [n.node.metadata for n in response.source_nodes],
        "answer": str(response),
        "pg_sources": [n.node.metadata for n in pg_response.source_nodes],
    }


if __name__ == "__main__":
    main()
