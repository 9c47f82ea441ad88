"""Code run in a fresh interpreter, for checks on what a process decides once (its imports, the
environment an OpenMP runtime read, a memory reading not shared with earlier tests)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_python(code: str, **env: str) -> tuple[str, str]:
    """(stdout, stderr) of ``code`` in a fresh interpreter, without the caller's OpenMP settings."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("OMP_", "GOMP_"))}
    environ.update(env, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=environ, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip(), done.stderr
