"""Single-file persistent store (SQLite): many namespaces, one transaction per write.

Layout: ``messages`` (raw text, append-only), ``vectors`` (float32 bytes per message,
so a reopened store never re-embeds), ``graphs`` (node-link JSON per namespace) and
``meta`` (format version, embedder id) and ``versions`` (a write counter per namespace, so
other objects and processes reload a stale copy, and a write from a stale copy is refused).
Plain data only, never pickle. WAL mode lets readers in other processes read while one
process writes.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from pathlib import Path

import numpy as np

from ...errors import StoreError
from ..model import Message
from .base import ConcurrentWriteError, StoredNamespace

__all__ = ["FORMAT_VERSION", "SQLiteStore"]

FORMAT_VERSION = "1"
_OPEN_ATTEMPTS = 100  # x 50 ms

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS messages (
    namespace TEXT NOT NULL, id TEXT NOT NULL, seq INTEGER NOT NULL,
    speaker TEXT NOT NULL, text TEXT NOT NULL, timestamp TEXT,
    PRIMARY KEY (namespace, id)
);
CREATE TABLE IF NOT EXISTS vectors (
    namespace TEXT NOT NULL, id TEXT NOT NULL, vec BLOB NOT NULL, PRIMARY KEY (namespace, id)
);
CREATE TABLE IF NOT EXISTS graphs (namespace TEXT PRIMARY KEY, data TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS versions (namespace TEXT PRIMARY KEY, version INTEGER NOT NULL);
"""


class SQLiteStore:
    checks_version_on_save = True

    def __init__(self, path: str | Path):
        self.path = str(path)
        try:
            self._conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=30.0)
            self._set_up()
        except sqlite3.DatabaseError as e:
            raise StoreError(f"cannot open memory store {self.path!r}: {e}") from e
        self._lock = threading.RLock()
        version = self.get_meta("format_version")
        if version is None:
            self.set_meta("format_version", FORMAT_VERSION)
        elif version != FORMAT_VERSION:
            raise StoreError(f"store {self.path!r} has format {version}; this version reads format {FORMAT_VERSION}")

    def _set_up(self) -> None:
        # Switching a new file to WAL needs it to itself and fails at once, without waiting, when
        # another process is setting up the same new file: retry for a while before giving up.
        for attempt in range(_OPEN_ATTEMPTS):
            try:
                self._conn.execute("PRAGMA journal_mode=WAL")
                self._conn.execute("PRAGMA synchronous=FULL")
                self._conn.executescript(_SCHEMA)
                return
            except sqlite3.OperationalError as e:
                if "locked" not in str(e) or attempt + 1 == _OPEN_ATTEMPTS:
                    raise
                time.sleep(0.05)

    def get_meta(self, key: str) -> str | None:
        with self._lock:
            row = self._conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def set_meta(self, key: str, value: str) -> None:
        with self._lock:
            self._conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))

    def stored_dim(self) -> int | None:
        """Vector dimension from the stored rows (for stores written before the meta row existed)."""
        with self._lock:
            row = self._conn.execute("SELECT length(vec) FROM vectors LIMIT 1").fetchone()
        return int(row[0]) // 4 if row else None

    def namespaces(self) -> list[str]:
        with self._lock:
            rows = self._conn.execute("SELECT namespace FROM graphs ORDER BY namespace").fetchall()
        return [r[0] for r in rows]

    def version(self, namespace: str) -> int:
        """The namespace's write counter (0 before its first write)."""
        with self._lock:
            row = self._conn.execute("SELECT version FROM versions WHERE namespace = ?", (namespace,)).fetchone()
        return int(row[0]) if row else 0

    def _bump(self, namespace: str, expected: int | None = None) -> int:
        """Inside a write transaction: check ``expected`` against the counter, then add one."""
        row = self._conn.execute("SELECT version FROM versions WHERE namespace = ?", (namespace,)).fetchone()
        current = int(row[0]) if row else 0
        if expected is not None and current != expected:
            raise ConcurrentWriteError(
                f"namespace {namespace!r} was written by another writer (version {current}, this copy {expected})"
            )
        self._conn.execute("INSERT OR REPLACE INTO versions (namespace, version) VALUES (?, ?)", (namespace, current + 1))
        return current + 1

    def load(self, namespace: str, dim: int) -> StoredNamespace | None:
        with self._lock:
            self._conn.execute("BEGIN")
            try:
                g = self._conn.execute("SELECT data FROM graphs WHERE namespace = ?", (namespace,)).fetchone()
                if g is None:
                    return None
                msgs = self._conn.execute(
                    "SELECT id, speaker, text, timestamp, seq FROM messages WHERE namespace = ? ORDER BY seq",
                    (namespace,),
                ).fetchall()
                vecs = self._conn.execute("SELECT id, vec FROM vectors WHERE namespace = ?", (namespace,)).fetchall()
            finally:
                self._conn.execute("COMMIT")
        messages = [
            Message.from_dict({"id": i, "speaker": s, "text": t, "timestamp": ts, "seq": q}) for i, s, t, ts, q in msgs
        ]
        keys = [k for k, _ in vecs]
        arr = (
            np.stack([np.frombuffer(b, dtype=np.float32) for _, b in vecs]).reshape(len(vecs), dim)
            if vecs
            else np.zeros((0, dim), np.float32)
        )
        return StoredNamespace(json.loads(g[0]), messages, keys, arr)

    def _write_messages(self, namespace: str, messages: list[Message], vectors: np.ndarray) -> None:
        self._conn.executemany(
            "INSERT INTO messages (namespace, id, seq, speaker, text, timestamp) VALUES (?, ?, ?, ?, ?, ?)",
            [
                (namespace, m.id, m.seq, m.speaker, m.text, m.timestamp.isoformat() if m.timestamp else None)
                for m in messages
            ],
        )
        self._conn.executemany(
            "INSERT INTO vectors (namespace, id, vec) VALUES (?, ?, ?)",
            [(namespace, m.id, np.asarray(v, np.float32).tobytes()) for m, v in zip(messages, vectors)],
        )

    def save(
        self, namespace, new_messages, new_vectors, graph, meta: dict[str, str] | None = None,
        expected_version: int | None = None,
    ) -> int:
        """Append messages and replace the graph in one transaction; ``meta`` rows are written in it too.

        Returns the namespace's new version. Raises :class:`ConcurrentWriteError` (writing nothing)
        when ``expected_version`` is given and another writer has moved the namespace past it.
        """
        data = json.dumps(graph)
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                version = self._bump(namespace, expected_version)
                for key, value in (meta or {}).items():
                    self._conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))
                self._write_messages(namespace, new_messages, new_vectors)
                self._conn.execute("INSERT OR REPLACE INTO graphs (namespace, data) VALUES (?, ?)", (namespace, data))
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
        return version

    def replace(self, namespace, messages, vectors, graph) -> int:
        """Rewrite a namespace whole (used by forgetting and maintenance); returns its new version."""
        data = json.dumps(graph)
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                version = self._bump(namespace)
                for table in ("messages", "vectors", "graphs"):
                    self._conn.execute(f"DELETE FROM {table} WHERE namespace = ?", (namespace,))
                self._write_messages(namespace, messages, vectors)
                self._conn.execute("INSERT INTO graphs (namespace, data) VALUES (?, ?)", (namespace, data))
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
        return version

    def delete(self, namespace: str) -> None:
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            self._bump(namespace)  # other copies must notice the namespace is gone
            for table in ("messages", "vectors", "graphs"):
                self._conn.execute(f"DELETE FROM {table} WHERE namespace = ?", (namespace,))
            self._conn.execute("COMMIT")

    def purge(self) -> None:
        """Make deleted rows unrecoverable from the file: rebuild it and empty the WAL.

        ``VACUUM`` rewrites the database without free pages (where deleted text would linger),
        then a ``TRUNCATE`` checkpoint folds the WAL back and cuts it to zero bytes.

        Raises:
            StoreError: another connection holds a read snapshot, so the WAL could not be emptied.
        """
        with self._lock:
            self._conn.execute("PRAGMA secure_delete=ON")
            self._conn.execute("VACUUM")
            busy, _, _ = self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        if busy:
            raise StoreError(f"store {self.path!r} is in use by another reader; the WAL could not be emptied")

    def close(self) -> None:
        with self._lock:
            self._conn.close()
