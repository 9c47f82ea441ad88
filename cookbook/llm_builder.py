"""Build the memory graph with a chat model, then print the hierarchy and the model's usage.

    python cookbook/llm_builder.py

The chat model is LangChain's ``ChatOpenAI`` pointed at an OpenAI-compatible endpoint. Offline
(and in CI) the HTTP exchanges are replayed from a vcrpy cassette recorded against a local
llama.cpp server running Gemma 3 270M (``scripts/record_cassettes.py``): a tiny model, so
expect repaired answers, retries and offline fallbacks in the report; each one is a step the
builder handled without losing a message. Any LangChain chat model or LlamaIndex LLM works in
its place: ``LLMBuilder(ChatAnthropic(...))``, ``LLMBuilder(llama_index_llm)``.

Needs ``pip install 'mnemis-integrations[llm]' vcrpy``.
"""

from __future__ import annotations

import os
from pathlib import Path

from mnemis_integrations import MnemisMemory
from mnemis_integrations.core.builder.llm_builder import LLMBuildConfig, LLMBuilder
from mnemis_integrations.core.embedders import HashingEmbedder

ROOT = Path(__file__).resolve().parents[1]
CASSETTE = ROOT / "tests" / "integration" / "cassettes" / "cookbook_llm_builder.yaml"
BASE_URL = os.environ.get("MNEMIS_LLM_BASE_URL", "http://127.0.0.1:8765/v1")
MODEL = "gemma-3-270m"

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
        "text": "By the way, my dog Biscuit has a vet check on Friday at 4pm.",
        "timestamp": "2025-03-03T09:10:00",
    },
    {
        "id": "4",
        "speaker": "Lee",
        "text": "Finance approved the discount, and Acme confirmed the Pro plan today.",
        "timestamp": "2025-03-05T15:00:00",
    },
    {
        "id": "5",
        "speaker": "Dana",
        "text": "Acme changed its mind: they want the Enterprise plan instead of Pro.",
        "timestamp": "2025-03-12T10:00:00",
    },
    {
        "id": "6",
        "speaker": "Lee",
        "text": "Then Enterprise it is; the contract for Acme goes out on March 14.",
        "timestamp": "2025-03-12T10:04:00",
    },
]

# One call per step for this little chat; retries bounded at one so a tiny model's failures stay cheap.
CONFIG = LLMBuildConfig(max_retries=1, max_concurrency=1, batch_messages=12, batch_fragments=6)


def make_chat_model(max_tokens: int = 320):
    """The recorded client: same settings every run, so requests match the cassette byte for byte.

    ``max_tokens`` travels in ``extra_body`` because ChatOpenAI sends it as
    ``max_completion_tokens``, which llama.cpp's server ignores (an uncapped small model then
    runs on for thousands of tokens).
    """
    from langchain_openai import ChatOpenAI

    extra = {}
    if "http_socket_options" in ChatOpenAI.model_fields:
        extra["http_socket_options"] = ()  # no socket probe at construction (replay runs without sockets)
    return ChatOpenAI(
        base_url=BASE_URL,
        api_key="sk-local-no-key",
        model=MODEL,
        temperature=0.0,
        seed=7,
        extra_body={"max_tokens": max_tokens},
        max_retries=0,
        timeout=300,
        **extra,
    )


def schema_request(max_tokens: int = 320):
    """Ask llama.cpp to constrain each reply to the step's JSON schema (a grammar while decoding).

    Sent in ``extra_body`` rather than as ``response_format=``: ChatOpenAI raises on a reply cut
    at the token cap when it sees ``response_format``, and the builder should see the cut-off text
    (it repairs what it can). The builder still validates every answer.
    """
    return lambda schema: {
        "extra_body": {"max_tokens": max_tokens, "response_format": {"type": "json_object", "schema": schema}}
    }


def cassette(path: Path = CASSETTE):
    """Replay (never record) unless ``MNEMIS_RECORD=1`` is set and ``CI`` is not."""
    import vcr

    record = os.environ.get("MNEMIS_RECORD") == "1" and not os.environ.get("CI")
    return vcr.VCR(
        record_mode="once" if record else "none",
        match_on=["method", "path", "body"],
        filter_headers=["authorization", "api-key", "openai-organization", "openai-project"],
        decode_compressed_response=True,
    ).use_cassette(str(path))


def build(messages=CHAT, config: LLMBuildConfig = CONFIG, max_tokens: int = 320):
    """Ingest ``messages`` with the chat model; returns (memory, builder)."""
    emb = HashingEmbedder()
    builder = LLMBuilder(
        make_chat_model(max_tokens), config=config, embedder=emb, schema_request=schema_request(max_tokens)
    )
    mem = MnemisMemory(embedder=emb, builder=builder)
    mem.add_messages(messages, namespace="acme")
    return mem, builder


def print_hierarchy(mem: MnemisMemory, namespace: str = "acme") -> None:
    g = mem.graph(namespace)
    for depth, node in g.iter_tree():
        flag = "" if node.status.value == "active" else f" [{node.status.value}]"
        text = f" -- {node.summary}" if node.kind.value == "fragment" else ""
        print(f"{'  ' * depth}- {node.kind.value}: {node.label}{flag}{text}")
    ents = sorted(n.label for n in g.nodes() if n.kind.value == "entity")
    print(f"entities: {', '.join(ents)}")


def require_dependencies() -> None:
    """Stop with exit status 1 when langchain-openai or vcrpy is missing: a script that skipped
    itself with status 0 would let CI pass without having run it."""
    try:
        import langchain_openai  # noqa: F401
        import vcr  # noqa: F401
    except ImportError as e:
        raise SystemExit(
            f"this example needs langchain-openai and vcrpy ({e}); "
            "pip install 'mnemis-integrations[llm]' vcrpy"
        ) from None


def main() -> dict:
    require_dependencies()
    with cassette():
        mem, builder = build()
    print_hierarchy(mem)
    usage = builder.last_usage.to_dict()
    print(
        f"\nmodel usage: {usage['prompt_tokens']} prompt + {usage['completion_tokens']} completion tokens "
        "(cl100k)"
    )
    for step, s in usage["steps"].items():
        print(
            f"  {step:9s} calls={s['calls']} retries={s['retries']} repaired={s['repaired']} "
            f"used={s['llm_batches']} fell_back={s['fallbacks']}"
        )
    hit = mem.search("which plan did Acme finally choose?", k=3, namespace="acme")[0]
    print(f"\nQ: which plan did Acme finally choose?\nA: {hit.path_str}\n   {hit.text.splitlines()[0]}")
    return {"usage": usage, "memory": mem}


if __name__ == "__main__":
    main()
