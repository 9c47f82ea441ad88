"""The compact, health and forget subcommands, end to end on a file store with the toy embedder."""

import json

from _over_time import WEEKS

from mnemis_integrations.cli import main


def _db(tmp_path):
    src = tmp_path / "w.json"
    src.write_text(
        json.dumps([dict(m, timestamp=m["timestamp"].isoformat()) for m in WEEKS]), encoding="utf-8"
    )
    db = str(tmp_path / "m.db")
    assert main(["ingest", "--db", db, "--embedder", "hashing", "-n", "u1", "--quiet", str(src)]) == 0
    return db


def test_compact_then_undo(tmp_path, capsys):
    db = _db(tmp_path)
    assert main(["compact", "--db", db, "--embedder", "hashing", "-n", "u1"]) == 0
    assert "fragments archived into" in capsys.readouterr().out
    assert main(["compact", "--db", db, "--embedder", "hashing", "-n", "u1", "--undo"]) == 0
    assert "restored" in capsys.readouterr().out


def test_health_reports_and_fixes(tmp_path, capsys):
    db = _db(tmp_path)
    capsys.readouterr()
    rc = main(["health", "--db", db, "--embedder", "hashing", "-n", "u1", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert not report["ok"] and rc == (1 if report["broken"] else 0)  # advice alone does not fail
    assert main(["health", "--db", db, "--embedder", "hashing", "-n", "u1", "--fix"]) == 0


def test_forget_erases_from_the_file(tmp_path, capsys):
    db = _db(tmp_path)
    assert main(["forget", "--db", db, "--embedder", "hashing", "-n", "u1", "-m", "m12"]) == 0
    assert "forgot 1 messages" in capsys.readouterr().out
    with open(db, "rb") as f:
        assert b"zebra" not in f.read()
    assert main(["forget", "--db", db, "--embedder", "hashing", "-n", "u1"]) == 2  # needs -m or --all
    assert main(["forget", "--db", db, "--embedder", "hashing", "-n", "u1", "--all"]) == 0
