"""How long ``import mnemis_integrations`` takes, and which heavy modules it pulls in.

    python benchmarks/import_time.py [--runs 15] [--tree PATH] [--baseline-tree PATH]

Each run is a fresh interpreter (``python -X importtime -c "import mnemis_integrations"``), so
nothing is cached in the process; the OS file cache is warm after the first run, which the
median hides. Reported: wall time of the whole interpreter (median, min), the package's own
cumulative import time from ``-X importtime`` (median), and which of faiss, bm25s, networkx,
pydantic, tqdm were imported. ``--tree`` is the source tree to import from (default: this
checkout); with ``--baseline-tree`` (e.g. a ``git worktree`` of an older commit) both are
measured in alternation, in the same run, and the ratio is printed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HEAVY = ("faiss", "bm25s", "networkx", "pydantic", "tqdm")
CODE = "import sys, mnemis_integrations; print(','.join(m for m in %r if m in sys.modules))" % (HEAVY,)


def one_run(tree: Path) -> tuple[float, float, str]:
    """(interpreter wall seconds, package cumulative import seconds, heavy modules imported)."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    t0 = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", CODE],
        capture_output=True,
        text=True,
        env=env,
        cwd=tree,
        check=True,
    )
    wall = time.perf_counter() - t0
    own = next(
        int(line.split("|")[1])
        for line in done.stderr.splitlines()
        if line.rstrip().endswith("| mnemis_integrations")
    )
    return wall, own / 1e6, done.stdout.strip()


def summary(runs: list[tuple[float, float, str]]) -> dict:
    walls = [r[0] for r in runs]
    return {
        "wall_median_s": statistics.median(walls),
        "wall_min_s": min(walls),
        "package_median_s": statistics.median(r[1] for r in runs),
        "heavy": runs[-1][2],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--tree", type=Path, default=Path(__file__).resolve().parents[1])
    ap.add_argument("--baseline-tree", type=Path, default=None)
    args = ap.parse_args()
    trees = {"this": args.tree} | ({"baseline": args.baseline_tree} if args.baseline_tree else {})
    runs: dict[str, list] = {name: [] for name in trees}
    one_run(args.tree)  # warm the file cache
    for _ in range(args.runs):
        for name, tree in trees.items():
            runs[name].append(one_run(tree))
    results = {name: summary(r) for name, r in runs.items()}
    for name, s in results.items():
        print(
            f"{name:8s} wall median {s['wall_median_s']:.3f} s (min {s['wall_min_s']:.3f}), "
            f"package {s['package_median_s']:.3f} s, imported: {s['heavy'] or '-'}"
        )
    if "baseline" in results:
        this, base = results["this"], results["baseline"]
        print(
            f"ratio this/baseline: wall {this['wall_median_s'] / base['wall_median_s']:.2f}, "
            f"package {this['package_median_s'] / base['package_median_s']:.2f}"
        )


if __name__ == "__main__":
    main()
