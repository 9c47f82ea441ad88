"""Input a user may plausibly give, at the command line and through the API: refused with a typed
error before anything is written, or read as meant. Each test names the failure it guards against."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from types import MappingProxyType
from zoneinfo import ZoneInfo

import pytest

from mnemis_integrations import MnemisMemory
from mnemis_integrations.cli import main
from mnemis_integrations.core.embedders import HashingEmbedder
from mnemis_integrations.errors import ConfigError

TOY = ["--embedder", "hashing"]
SIX = [
    {
        "id": f"m{i}",
        "speaker": "ana",
        "text": f"Acme refund {i} for order {i}",
        "timestamp": f"2025-03-{i + 1:02d}T10:00:00Z",
    }
    for i in range(6)
]


def exit_code(argv: list[str]) -> int:
    """What the shell would see: ``main``'s status, or argparse's when it refuses the arguments."""
    try:
        return main(argv)
    except SystemExit as e:
        return int(e.code)


def jsonl(path: Path, messages: list[dict]) -> Path:
    path.write_text("".join(json.dumps(m) + "\n" for m in messages), encoding="utf-8")
    return path


@pytest.fixture
def six_db(tmp_path, capsys) -> str:
    db = str(tmp_path / "m.db")
    assert main(["ingest", "--db", db, *TOY, "--quiet", str(jsonl(tmp_path / "six.jsonl", SIX))]) == 0
    capsys.readouterr()
    return db


def stored(db: str, namespace: str = "default") -> dict[str, str]:
    with MnemisMemory(path=db, embedder=HashingEmbedder()) as mem:
        return {m.id: m.text for m in mem.messages(namespace)} if namespace in mem.namespaces() else {}


# ------------------------------------------------------------------------------------ ingest


@pytest.mark.parametrize("batch", ["0", "-1"])
def test_ingest_refuses_a_batch_size_below_one(tmp_path, capsys, batch):
    """Guards against: --batch -1 printed "added 0 messages", exited 0 and left an empty memory file;
    --batch 0 ended in a ValueError traceback from range()."""
    db = tmp_path / "m.db"
    src = jsonl(tmp_path / "six.jsonl", SIX)
    assert exit_code(["ingest", "--db", str(db), *TOY, "--quiet", "--batch", batch, str(src)]) == 2
    assert "Traceback" not in capsys.readouterr().err
    assert not db.exists()


def test_an_id_repeated_with_other_text_in_a_later_batch_writes_nothing(tmp_path, capsys):
    """Guards against: each batch was checked alone, so with --batch 1 the first "a" was stored before the
    second was refused: a failed ingest left half the file in the memory."""
    src = tmp_path / "dup.jsonl"
    src.write_text('{"id": "a", "text": "one"}\n{"id": "a", "text": "two"}\n', encoding="utf-8")
    db = tmp_path / "m.db"
    assert main(["ingest", "--db", str(db), *TOY, "--quiet", "--batch", "1", str(src)]) == 2
    assert not db.exists()
    assert capsys.readouterr().err.startswith(f"mnemis: error: {src}:2: message 2 (id 'a')")


def test_a_file_conflicting_with_a_stored_message_in_a_later_batch_writes_nothing(six_db, tmp_path, capsys):
    """Guards against: the new message of the first batch was stored, then the second batch failed on m0."""
    src = jsonl(tmp_path / "more.jsonl", [{"id": "new", "text": "brand new"}, dict(SIX[0], text="changed")])
    assert main(["ingest", "--db", six_db, *TOY, "--quiet", "--batch", "1", str(src)]) == 2
    assert "new" not in stored(six_db)
    assert capsys.readouterr().err.startswith(f"mnemis: error: {src}:2: message 2 (id 'm0')")


# ------------------------------------------------------------------------------------ review


def test_review_apply_of_a_missing_or_malformed_file_is_an_error_not_a_traceback(six_db, tmp_path, capsys):
    """Guards against: FileNotFoundError and JSONDecodeError tracebacks."""
    bad = tmp_path / "bad.json"
    bad.write_text("{nope", encoding="utf-8")
    for path in (tmp_path / "missing.json", bad):
        assert exit_code(["review", "--db", six_db, *TOY, "apply", str(path)]) == 2
        assert capsys.readouterr().err.startswith(f"mnemis: error: {path}")


def test_review_export_to_a_missing_folder_is_an_error_not_a_traceback(six_db, tmp_path, capsys):
    out = tmp_path / "no-such-folder" / "h.json"
    assert exit_code(["review", "--db", six_db, *TOY, "export", "-o", str(out)]) == 2
    assert capsys.readouterr().err.startswith("mnemis: error: ")


# ------------------------------------------------------------------------------------ compact, forget


@pytest.mark.parametrize("days", ["nan", "inf", "-1", "1e7"])
def test_compact_refuses_an_older_than_days_out_of_range(six_db, capsys, days):
    """Guards against: nan a ValueError traceback, inf and 1e7 an OverflowError one, and -1 put the cutoff
    after the newest message, so every fragment was archived."""
    assert exit_code(["compact", "--db", six_db, *TOY, f"--older-than-days={days}"]) == 2
    assert "Traceback" not in capsys.readouterr().err
    with MnemisMemory(path=six_db, embedder=HashingEmbedder()) as mem:
        assert all(n.status.value == "active" for n in mem.graph("default").nodes())


def test_forget_with_both_message_ids_and_all_forgets_nothing(six_db, capsys):
    """Guards against: --all silently won, and ``forget -m m1 --all`` erased all six messages."""
    assert exit_code(["forget", "--db", six_db, *TOY, "-m", "m1", "--all"]) == 2
    assert len(stored(six_db)) == 6


# ------------------------------------------------------------------------------------ the Python API


@pytest.fixture
def mem() -> MnemisMemory:
    m = MnemisMemory(embedder=HashingEmbedder())
    m.add_messages([{"id": "m1", "text": "The refund for order 42 timed out at the bank."}], namespace="u")
    return m


def test_a_filter_may_be_any_mapping(mem):
    """``filter`` is typed ``Mapping``; a MappingProxyType (at the top or as a key's operators)
    raised AttributeError: 'mappingproxy' object has no attribute 'isoformat'."""
    want = [h.node_id for h in mem.search("refund", namespace="u", filter={"a": {"$ne": 1}})]
    got = mem.search("refund", namespace="u", filter=MappingProxyType({"a": MappingProxyType({"$ne": 1})}))
    assert [h.node_id for h in got] == want


def test_exclude_messages_reads_a_string_as_one_id(mem):
    """Guards against: ``exclude_messages="m1"`` read as the ids "m" and "1", so m1's hits came back."""
    assert mem.search("refund", namespace="u", exclude_messages=["m1"]) == []
    assert mem.search("refund", namespace="u", exclude_messages="m1") == []


def test_a_config_that_is_not_a_memory_config_is_a_config_error(mem):
    """Guards against: AttributeError: 'dict' object has no attribute 'limits' (search) / 'build'
    (constructor)."""
    with pytest.raises(ConfigError):
        mem.search("refund", namespace="u", config={"fusion": {"newer_first": 0.0}})
    with pytest.raises(ConfigError):
        MnemisMemory(embedder=HashingEmbedder(), config={"fusion": {"newer_first": 0.0}})


def test_as_of_across_a_dst_fall_back_answers_the_same_before_and_after_reopening(tmp_path):
    """Two times in one ZoneInfo compare by wall clock, ignoring ``fold``: a message said at 01:30 EST
    (06:30 UTC) looked older than an as_of of 01:45 EDT (05:45 UTC) until the store was reopened,
    when its time came back with a fixed offset and compared correctly."""
    ny = ZoneInfo("America/New_York")
    said = datetime(2025, 11, 2, 1, 30, tzinfo=ny, fold=1)
    as_of = datetime(2025, 11, 2, 1, 45, tzinfo=ny)
    db = str(tmp_path / "m.db")
    text = "The refund for order 42 timed out at the bank."
    with MnemisMemory(path=db, embedder=HashingEmbedder()) as mem:
        mem.add_messages([{"id": "m1", "text": text, "timestamp": said}], namespace="u")
        fresh = mem.search("refund", namespace="u", as_of=as_of)
    with MnemisMemory(path=db, embedder=HashingEmbedder()) as mem:
        reopened = mem.search("refund", namespace="u", as_of=as_of)
    assert fresh == reopened == []


@pytest.mark.parametrize("call", ["uncompact", "fit_to_budget", "health", "rebalance"])
def test_maintenance_and_fitting_arguments_of_the_wrong_type_are_invalid_query_errors(mem, call):
    from mnemis_integrations import InvalidQueryError

    with pytest.raises(InvalidQueryError):
        if call == "uncompact":
            mem.uncompact(namespace="u", overview_ids=5)
        elif call == "fit_to_budget":
            mem.fit_to_budget(5, 10)
        else:
            getattr(mem, call)(namespace="u", max_span_days=float("nan"))
    hits = mem.search("refund", namespace="u")
    assert mem.fit_to_budget(iter(hits), 500) == mem.fit_to_budget(hits, 500)  # any iterable of hits
