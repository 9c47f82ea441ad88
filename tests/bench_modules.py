"""The benchmark scripts (``benchmarks/*.py``, not a package) loaded as modules for tests."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def bench_module(name: str) -> ModuleType:
    """``benchmarks/<name>.py`` as the module ``bench_<name>``, loaded once per process."""
    key = f"bench_{name}"
    if key in sys.modules:
        return sys.modules[key]
    if str(BENCHMARKS) not in sys.path:
        sys.path.insert(0, str(BENCHMARKS))  # scripts import their siblings (bench_table) by name
    spec = importlib.util.spec_from_file_location(key, BENCHMARKS / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[key] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod
