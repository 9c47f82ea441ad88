"""Crash soak: SIGKILL an ingesting worker N times and check the store after each kill.

    python benchmarks/crash_soak.py --cycles 500 --seed 1 --batch-size 20 --max-delay 0.5

Not run by CI (tests/reliability/test_crash_safety.py runs 15 cycles). Exits 1 on any breach.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "reliability"))
import _crash_worker as worker


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cycles", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--batch-size", type=int, default=20)
    ap.add_argument("--max-delay", type=float, default=0.5, help="kill after uniform(0, this) seconds")
    ap.add_argument("--db", help="store path (default: a temporary file)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = args.db or str(Path(tmp) / "soak.db")
        t0 = time.perf_counter()
        try:
            figures = worker.run_crash_cycles(
                db, args.cycles, seed=args.seed, size=args.batch_size, max_delay_s=args.max_delay
            )
        except AssertionError as e:
            print(f"FAILED: {e}", file=sys.stderr)
            return 1
        figures["seconds"] = round(time.perf_counter() - t0, 1)
    print(figures)
    return 0 if figures["lost"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
