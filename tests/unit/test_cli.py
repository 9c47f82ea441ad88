"""The ``mnemis`` command as a new user meets it: help, bad files, mistyped paths, pipes, time travel."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from _over_time import T0, WEEKS

from mnemis_integrations import MnemisMemory
from mnemis_integrations.cli import main
from mnemis_integrations.evaluation.scenarios import load_demo_conversation

ROOT = Path(__file__).resolve().parents[2]
TOY = ["--embedder", "hashing"]


def write_jsonl(path: Path, messages: list[dict]) -> Path:
    path.write_text(
        "".join(json.dumps(dict(m, timestamp=m["timestamp"].isoformat())) + "\n" for m in messages),
        encoding="utf-8",
    )
    return path


@pytest.fixture
def weeks_db(tmp_path, capsys) -> str:
    db = str(tmp_path / "m.db")
    assert (
        main(
            ["ingest", "--db", db, *TOY, "-n", "u1", "--quiet", str(write_jsonl(tmp_path / "w.jsonl", WEEKS))]
        )
        == 0
    )
    capsys.readouterr()
    return db


def search_json(capsys, db: str, query: str, *extra: str) -> list[dict]:
    assert main(["search", query, "--db", db, *TOY, "-n", "u1", "--json", "-k", "20", *extra]) == 0
    return json.loads(capsys.readouterr().out)


# ------------------------------------------------------------------------------------ ingest files


def test_ingest_help_documents_the_message_format(capsys):
    """Before: nothing said what a message file holds. After: ``ingest --help`` shows it."""
    with pytest.raises(SystemExit) as exit_:
        main(["ingest", "--help"])
    out = capsys.readouterr().out
    assert exit_.value.code == 0
    assert '{"id": "m1", "speaker": "ana", "text":' in out and "one message per line" in out
    assert '"timestamp" is ISO-8601' in out


def test_malformed_jsonl_names_the_file_and_line_and_writes_nothing(tmp_path, capsys):
    """Before: a JSONDecodeError traceback saying "line 1 column 30" for the file's second line.
    After: one line naming the file and its line; no memory file is created."""
    src = tmp_path / "msgs.jsonl"
    src.write_text('{"id": "m1", "text": "fine"}\n{"id": "m2", "text": "broken"\n', encoding="utf-8")
    db = tmp_path / "m.db"
    assert main(["ingest", "--db", str(db), *TOY, str(src)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"mnemis: error: {src}:2: not a JSON object") and "Traceback" not in err
    assert not db.exists()


def test_an_invalid_message_names_its_line_before_anything_is_ingested(tmp_path, capsys):
    src = tmp_path / "msgs.jsonl"
    src.write_text('{"id": "m1", "text": "fine"}\n\n{"id": "m2", "text": ""}\n', encoding="utf-8")
    db = tmp_path / "m.db"
    assert main(["ingest", "--db", str(db), *TOY, str(src)]) == 2
    assert capsys.readouterr().err == f"mnemis: error: {src}:3: message 2 (id 'm2'): 'text' is empty\n"
    assert not db.exists()


def test_malformed_json_names_the_line_of_the_syntax_error(tmp_path, capsys):
    src = tmp_path / "msgs.json"
    src.write_text(
        '[\n  {"id": "m1", "text": "fine"},\n  {"id": "m2" "text": "no comma"}\n]\n', encoding="utf-8"
    )
    assert main(["ingest", "--db", str(tmp_path / "m.db"), *TOY, str(src)]) == 2
    assert capsys.readouterr().err.startswith(f"mnemis: error: {src}:3: not valid JSON")


def test_a_missing_message_file_is_an_error_not_a_traceback(tmp_path, capsys):
    assert main(["ingest", "--db", str(tmp_path / "m.db"), *TOY, str(tmp_path / "nope.jsonl")]) == 2
    assert "nope.jsonl: cannot read it" in capsys.readouterr().err


# ------------------------------------------------------------------------------------ --db


def test_search_on_a_mistyped_db_path_creates_nothing(weeks_db, tmp_path, capsys):
    """Before: ``search --db m.bd`` created an empty m.bd and answered "namespace not found".
    After: it says there is no memory file there, and leaves the disk as it was."""
    typo = tmp_path / "m.bd"
    assert main(["search", "refund", "--db", str(typo), *TOY, "-n", "u1"]) == 2
    assert f"no memory file at {str(typo)!r}" in capsys.readouterr().err
    assert not typo.exists()


@pytest.mark.parametrize("command", ["search", "inspect", "health", "compact", "forget"])
def test_db_help_says_what_the_option_does(command, capsys):
    """Before: ``--db`` said "(default: in memory)" on commands that require it."""
    with pytest.raises(SystemExit):
        main([command, "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "default: in memory" not in out and "it must exist" in out


def test_demo_keeps_its_in_memory_default(capsys):
    with pytest.raises(SystemExit):
        main(["demo", "--help"])
    assert "default: in memory" in " ".join(capsys.readouterr().out.split())


# ------------------------------------------------------------------------------------ search


def test_search_as_of_answers_from_what_was_known_then(weeks_db, capsys):
    """Before: ``search`` had no ``--as-of``."""
    now = search_json(capsys, weeks_db, "hosting migration plan")
    then = search_json(
        capsys, weeks_db, "hosting migration plan", "--as-of", (T0 + timedelta(days=10)).isoformat()
    )
    assert any("m9" in h["source_ids"] for h in now)
    assert not any({"m9", "m10"} & set(h["source_ids"]) for h in then)
    assert any("m5" in h["source_ids"] and h["status"] == "active" for h in then)


def test_search_include_archived_returns_compacted_fragments(weeks_db, capsys):
    """Before: ``search`` had no ``--include-archived``."""
    assert (
        main(
            ["compact", "--db", weeks_db, *TOY, "-n", "u1", "--before", (T0 + timedelta(days=25)).isoformat()]
        )
        == 0
    )
    capsys.readouterr()
    default = search_json(capsys, weeks_db, "refund bank callback")
    archived = search_json(capsys, weeks_db, "refund bank callback", "--include-archived")
    assert all(h["status"] != "archived" for h in default)
    assert any(h["status"] == "archived" for h in archived)


def test_a_bad_as_of_is_a_clear_error(weeks_db, capsys):
    assert main(["search", "refund", "--db", weeks_db, *TOY, "-n", "u1", "--as-of", "last tuesday"]) == 2
    assert "as_of" in capsys.readouterr().err


# ------------------------------------------------------------------------------------ health


def test_health_of_a_fresh_store_is_advice_with_an_explanation(weeks_db, capsys):
    """Before: a fresh store of a few weeks exited 1 with "long_span" and no word on what it means.
    After: exit 0, the findings are called advice and each reason is explained; --strict fails."""
    assert main(["health", "--db", weeks_db, *TOY, "-n", "u1"]) == 0
    out = capsys.readouterr().out
    assert "long_span" in out and "advice, nothing broken" in out
    assert "long_span: the subtopic covers more than --max-span-days" in out and "--fix" in out
    assert main(["health", "--db", weeks_db, *TOY, "-n", "u1", "--strict"]) == 1


def test_health_exits_1_when_the_hierarchy_is_broken(weeks_db, capsys):
    from mnemis_integrations import MnemisMemory
    from mnemis_integrations.core.embedders import HashingEmbedder
    from mnemis_integrations.core.model import EdgeKind, NodeKind

    with MnemisMemory(weeks_db, embedder=HashingEmbedder()) as mem:
        with mem.edit("u1") as g:
            frag = next(iter(g.nodes(NodeKind.FRAGMENT)))
            for e in list(g.out_edges(frag.id, EdgeKind.BELONGS_TO)):
                g.remove_edge(e.src, e.dst, e.kind)
    assert main(["health", "--db", weeks_db, *TOY, "-n", "u1"]) == 1
    out = capsys.readouterr().out
    assert f"orphan fragment {frag.id}" in out and "(broken)" in out and "orphan: the fragment belongs" in out


# ------------------------------------------------------------------------------------ pipes, demo


def test_piping_into_head_ends_quietly(tmp_path):
    """Before: ``mnemis search ... | head -1`` ended with BrokenPipeError tracebacks on stderr.
    After: nothing on stderr. The output is made far larger than a pipe's buffer (64 KiB), so the
    reader is gone while the command still writes."""
    long_text = "refund for order {i} timed out at the bank callback again; " * 8
    msgs = [
        dict(
            m,
            id=f"m{i}",
            text=long_text.format(i=i) + m["text"],
            timestamp=m["timestamp"] + timedelta(hours=i),
        )
        for i, m in enumerate(WEEKS * 30)
    ]
    db = tmp_path / "big.db"
    assert (
        main(["ingest", "--db", str(db), *TOY, "--quiet", str(write_jsonl(tmp_path / "big.jsonl", msgs))])
        == 0
    )
    cmd = [
        sys.executable,
        "-m",
        "mnemis_integrations.cli",
        "search",
        "refund timed out",
        "--db",
        str(db),
        *TOY,
        "--json",
        "-k",
        "400",
    ]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    full = subprocess.run(cmd, capture_output=True, env=env, cwd=ROOT, check=True)
    assert len(full.stdout) > 4 * 65536
    err_file = tmp_path / "err.txt"
    shell = f"{shlex.join(cmd)} 2>{shlex.quote(str(err_file))} | head -1"
    piped = subprocess.run(["sh", "-c", shell], capture_output=True, env=env, cwd=ROOT, check=True)
    assert piped.stdout == b"[\n"
    assert err_file.read_text() == ""


def test_demo_explains_the_conversation_and_the_hit_fields(capsys):
    assert main(["demo", *TOY, "-k", "1"]) == 0
    head = capsys.readouterr().out.splitlines()[:2]
    assert head[0].startswith("The conversation: 29 messages over ") and "Ana" in head[0]
    assert head[1].startswith("Each hit: [score] = fused relevance") and "via = how it was found" in head[1]
    assert "status = active, superseded" in head[1]


def test_the_demo_s_first_question_ranks_the_signed_contract_first():
    """On the default embedder, as a newcomer runs it: "Which plan did Nordwind Foods confirm in the
    end?" Before: the signed contract ranked 3rd, under the kick-off (Team plan) and its successor."""
    demo = load_demo_conversation()
    mem = MnemisMemory()
    mem.add_messages([m.to_dict() for m in demo.messages], namespace="demo")
    hits = mem.search(demo.queries[0], k=4, namespace="demo")
    assert "confirm in the end" in demo.queries[0]
    assert "Contract signed" in hits[0].text and "demo-m024" in hits[0].source_ids
