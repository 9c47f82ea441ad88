"""Single-file persistent store (SQLite): many namespaces, one transaction per write.

Layout: ``messages`` (raw text; ``metadata`` the caller's flat dict as JSON, NULL when empty),
``vectors`` (float32 bytes per message, so a reopened store never re-embeds: its own vector, then
a long message's window vectors, ``core.passages``), ``nodes`` and
``edges`` (one row per graph element with its JSON, so a write touches only what changed),
``versions`` (each namespace's version, taken from the store-wide sequence ``meta.write_seq`` so
it never goes back) and ``meta`` (format version, embedder id, dimension). Plain data only, never
pickle. WAL mode lets readers in other processes read while one process writes. Files of format 1
(one graph blob per namespace) are converted on open.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import threading
import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from ...errors import StoreError
from ..graph import edge_key
from ..model import Edge
from .base import (
    Delta,
    StoredNamespace,
    message_from_row,
    native_errors_as_store_errors,
    refuse_another_embedder,
    refuse_stale_copy,
    split_rows,
    vector_rows,
)

__all__ = ["FORMAT_VERSION", "SQLiteStore"]

logger = logging.getLogger(__name__)


FORMAT_VERSION = "3"
_OPEN_ATTEMPTS = 100  # x 50 ms

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS messages (
    namespace TEXT NOT NULL, id TEXT NOT NULL, seq INTEGER NOT NULL,
    speaker TEXT NOT NULL, text TEXT NOT NULL, timestamp TEXT, metadata TEXT,
    PRIMARY KEY (namespace, id)
);
CREATE TABLE IF NOT EXISTS vectors (
    namespace TEXT NOT NULL, id TEXT NOT NULL, vec BLOB NOT NULL, PRIMARY KEY (namespace, id)
);
CREATE TABLE IF NOT EXISTS nodes (
    namespace TEXT NOT NULL, id TEXT NOT NULL, data TEXT NOT NULL, PRIMARY KEY (namespace, id)
);
CREATE TABLE IF NOT EXISTS edges (
    namespace TEXT NOT NULL, src TEXT NOT NULL, dst TEXT NOT NULL, key TEXT NOT NULL, data TEXT NOT NULL,
    PRIMARY KEY (namespace, src, dst, key)
);
CREATE TABLE IF NOT EXISTS versions (namespace TEXT PRIMARY KEY, version INTEGER NOT NULL);
"""


# SQLite's own errors (a database locked past the timeout, a damaged file) name the file.
_typed = native_errors_as_store_errors(
    lambda: sqlite3.Error, lambda store, e: f"memory store {store.path!r}: {e}"
)


class SQLiteStore:
    def __init__(self, path: str | Path):
        self.path = str(path)
        self._lock = threading.RLock()
        self._db: sqlite3.Connection | None
        db = self._db = self._connect()
        try:
            self._open()
        except BaseException:
            db.close()  # a store that cannot be opened holds no file
            raise
        _open_stores.add(self)

    def _connect(self) -> sqlite3.Connection:
        try:
            return sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=30.0)
        except sqlite3.DatabaseError as e:
            raise StoreError(f"cannot open memory store {self.path!r}: {e}") from e

    @property
    def _conn(self) -> sqlite3.Connection:
        if self._db is None:  # in a forked child, on first use (see _forked)
            db = self._db = self._connect()
            try:
                self._set_up()  # its pragmas hold per connection: secure_delete among them
            except BaseException:
                self._db = None
                db.close()
                raise
        return self._db

    def _forked(self) -> None:
        """In a forked child: let go of the parent's connection; the child opens its own when it
        first uses the store.

        SQLite's file locks belong to a process, and a child inherits none of them. While the
        parent's connection is open in the child, no connection of the child (that one, or one it
        opens itself) holds the lock that tells the parent it is not the file's last user, so
        the parent, on closing, deletes the WAL the child goes on committing to, and the child's
        acknowledged writes are lost (https://sqlite.org/howtocorrupt.html#fork).
        """
        self._lock = threading.RLock()  # another thread of the parent may have held it at the fork
        if self._db is not None:
            self._db.close()
            self._db = None

    def _open(self) -> None:
        try:
            self._set_up()
            version = self.get_meta("format_version")
            if version is None:
                logger.debug("created memory store %r", self.path)
                self.set_meta("format_version", FORMAT_VERSION)
                # written with secure_delete from its first row (read by versions that vacuumed a file
                # without it once; purge now vacuums every time)
                self.set_meta("zeroed", "1")
            elif version == "1":
                logger.info("upgrading memory store %r from format 1 to %s", self.path, FORMAT_VERSION)
                self._upgrade_from_1()
            elif version == "2":
                self._upgrade_from_2()
            elif version != FORMAT_VERSION:
                raise StoreError(
                    f"store {self.path!r} has format {version}; this version reads format {FORMAT_VERSION}"
                )
        except sqlite3.DatabaseError as e:
            raise StoreError(f"cannot open memory store {self.path!r}: {e}") from e

    def _set_up(self) -> None:
        # Switching a new file to WAL needs it to itself and fails at once, without waiting, when
        # another process is setting up the same new file: retry for a while before giving up.
        for attempt in range(_OPEN_ATTEMPTS):
            try:
                self._conn.execute("PRAGMA journal_mode=WAL")
                self._conn.execute("PRAGMA synchronous=FULL")
                # Deleted rows are overwritten with zeros, so forgotten text does not linger in free pages.
                self._conn.execute("PRAGMA secure_delete=ON")
                self._conn.executescript(_SCHEMA)
                self._add_metadata_column()
                return
            except sqlite3.OperationalError as e:
                if "locked" not in str(e) or attempt + 1 == _OPEN_ATTEMPTS:
                    raise
                time.sleep(0.05)

    def _add_metadata_column(self) -> None:
        """Files written before message metadata existed get the column (NULL: no metadata). The
        format stays 2: an older reader names its columns, so it still reads and writes the file."""
        columns = {row[1] for row in self._conn.execute("PRAGMA table_info(messages)")}
        if "metadata" in columns:
            return
        try:
            self._conn.execute("ALTER TABLE messages ADD COLUMN metadata TEXT")
        except sqlite3.OperationalError as e:
            if "duplicate column" not in str(e):  # another process added it first
                raise

    def _upgrade_from_1(self) -> None:
        """Format 1 kept one graph blob per namespace: split it into node and edge rows."""
        with self._transaction():
            if self._conn.execute("SELECT value FROM meta WHERE key = 'format_version'").fetchone()[0] != "1":
                return  # another process upgraded it meanwhile
            for namespace, data in self._conn.execute("SELECT namespace, data FROM graphs").fetchall():
                graph = json.loads(data)
                self._put_nodes(namespace, graph["nodes"])
                self._put_edges(namespace, [Edge.from_dict(e) for e in graph["edges"]])
            seq = self._conn.execute("SELECT coalesce(max(version), 0) FROM versions").fetchone()[0]
            self._conn.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES ('write_seq', ?)", (str(seq),)
            )
            self._conn.execute("DROP TABLE graphs")
            self._conn.execute("UPDATE meta SET value = ? WHERE key = 'format_version'", (FORMAT_VERSION,))

    def _upgrade_from_2(self) -> None:
        """Format 3 lets a ``vectors`` row hold a long message's window vectors after its own
        (``core.passages``); a format 2 row is a format 3 row, so only the mark changes. An older
        reader would misread such a row: the new mark makes it refuse the file instead."""
        with self._transaction():
            if self._conn.execute("SELECT value FROM meta WHERE key = 'format_version'").fetchone()[0] == "2":
                self._conn.execute(
                    "UPDATE meta SET value = ? WHERE key = 'format_version'", (FORMAT_VERSION,)
                )

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield
            except BaseException:
                # some errors (a full disk) roll the transaction back themselves: a second
                # rollback would fail and hide them
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    @_typed
    def get_meta(self, key: str) -> str | None:
        with self._lock:
            row = self._conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    @_typed
    def set_meta(self, key: str, value: str) -> None:
        with self._lock:
            self._conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))

    @_typed
    def stored_dim(self) -> int | None:
        """Vector dimension from the stored rows (for stores written before the meta row existed)."""
        with self._lock:
            # a long message's row also holds its passage vectors: the shortest row is one vector
            row = self._conn.execute("SELECT min(length(vec)) FROM vectors").fetchone()
        return int(row[0]) // 4 if row and row[0] else None

    @_typed
    def namespaces(self) -> list[str]:
        with self._lock:
            rows = self._conn.execute("SELECT namespace FROM versions ORDER BY namespace").fetchall()
        return [r[0] for r in rows]

    @_typed
    def version(self, namespace: str) -> int:
        """The namespace's version (0 when it does not exist)."""
        with self._lock:
            row = self._conn.execute(
                "SELECT version FROM versions WHERE namespace = ?", (namespace,)
            ).fetchone()
        return int(row[0]) if row else 0

    def _next_version(self, namespace: str, expected: int) -> int:
        """Inside a write transaction: check ``expected``, then give the namespace the next sequence value."""
        current = self.version(namespace)  # the lock is re-entered: read inside this transaction
        refuse_stale_copy(namespace, current, expected)
        row = self._conn.execute("SELECT value FROM meta WHERE key = 'write_seq'").fetchone()
        new = max(int(row[0]) if row else 0, current) + 1
        self._conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('write_seq', ?)", (str(new),))
        self._conn.execute(
            "INSERT OR REPLACE INTO versions (namespace, version) VALUES (?, ?)", (namespace, new)
        )
        return new

    @_typed
    def load(self, namespace: str, dim: int) -> StoredNamespace | None:
        with self._lock:
            self._conn.execute("BEGIN")
            try:
                row = self._conn.execute(
                    "SELECT version FROM versions WHERE namespace = ?", (namespace,)
                ).fetchone()
                if row is None:
                    return None
                nodes = self._conn.execute(
                    "SELECT data FROM nodes WHERE namespace = ? ORDER BY rowid", (namespace,)
                ).fetchall()
                edges = self._conn.execute(
                    "SELECT data FROM edges WHERE namespace = ? ORDER BY rowid", (namespace,)
                ).fetchall()
                msgs = self._conn.execute(
                    "SELECT id, speaker, text, timestamp, seq, metadata FROM messages "
                    "WHERE namespace = ? ORDER BY seq",
                    (namespace,),
                ).fetchall()
                vecs = self._conn.execute(
                    "SELECT id, vec FROM vectors WHERE namespace = ?", (namespace,)
                ).fetchall()
            finally:
                self._conn.execute("COMMIT")
        try:
            messages = [message_from_row(i, s, t, ts, q, md) for i, s, t, ts, q, md in msgs]
            keys, arr, passages = split_rows([(k, np.frombuffer(b, dtype=np.float32)) for k, b in vecs], dim)
            graph = {
                "namespace": namespace,
                "nodes": [json.loads(r[0]) for r in nodes],
                "edges": [json.loads(r[0]) for r in edges],
            }
        except (ValueError, KeyError, TypeError) as e:
            # SQLite checks its pages, not what a row holds: a changed byte inside a row's JSON
            # or vector reads back as it is, and is a damaged file all the same
            raise StoreError(
                f"memory store {self.path!r} is damaged: a row of namespace {namespace!r} is unreadable ({e})"
            ) from e
        return StoredNamespace(graph, messages, keys, arr, int(row[0]), passages)

    # Upserts keep a row's rowid, so rows read back in the order their elements were first made; an
    # element removed and put back is deleted first (the delta lists it as removed), so its new row
    # comes last, where the graph put it.
    def _put_nodes(self, namespace: str, nodes: list[dict]) -> None:
        self._conn.executemany(
            "INSERT INTO nodes (namespace, id, data) VALUES (?, ?, ?) "
            "ON CONFLICT (namespace, id) DO UPDATE SET data = excluded.data",
            [(namespace, n["id"], json.dumps(n)) for n in nodes],
        )

    def _put_edges(self, namespace: str, edges: list[Edge]) -> None:
        self._conn.executemany(
            "INSERT INTO edges (namespace, src, dst, key, data) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT (namespace, src, dst, key) DO UPDATE SET data = excluded.data",
            [(namespace, *edge_key(e), json.dumps(e.to_dict())) for e in edges],
        )

    @_typed
    def write(
        self, namespace: str, delta: Delta, expected_version: int, meta: dict[str, str] | None = None
    ) -> int:
        """Apply ``delta`` in one transaction if the namespace is still at ``expected_version``.

        Returns the namespace's new version. Raises :class:`ConcurrentWriteError` (writing
        nothing) when another writer has moved the namespace past ``expected_version``.
        """
        g = delta.graph
        with self._transaction():
            version = self._next_version(namespace, expected_version)
            row = self._conn.execute("SELECT value FROM meta WHERE key = 'embedder_id'").fetchone()
            refuse_another_embedder(row[0] if row else None, meta)
            for key, value in (meta or {}).items():
                self._conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))
            self._conn.executemany(
                "DELETE FROM nodes WHERE namespace = ? AND id = ?", [(namespace, n) for n in g.removed_nodes]
            )
            self._conn.executemany(
                "DELETE FROM edges WHERE namespace = ? AND src = ? AND dst = ? AND key = ?",
                [(namespace, *k) for k in g.removed_edges],
            )
            self._put_nodes(namespace, [n.to_dict() for n in g.nodes])
            self._put_edges(namespace, g.edges)
            for table in ("messages", "vectors"):
                self._conn.executemany(
                    f"DELETE FROM {table} WHERE namespace = ? AND id = ?",
                    [(namespace, m) for m in delta.removed_messages],
                )
            self._conn.executemany(
                "INSERT INTO messages (namespace, id, seq, speaker, text, timestamp, metadata) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        namespace,
                        m.id,
                        m.seq,
                        m.speaker,
                        m.text,
                        m.timestamp.isoformat() if m.timestamp else None,
                        json.dumps(m.metadata, ensure_ascii=False) if m.metadata else None,
                    )
                    for m in delta.new_messages
                ],
            )
            self._conn.executemany(
                "INSERT INTO vectors (namespace, id, vec) VALUES (?, ?, ?)",
                [(namespace, m.id, rows.tobytes()) for m, rows in vector_rows(delta)],
            )
        return version

    @_typed
    def delete(self, namespace: str, expected_version: int | None = None) -> None:
        """Remove the namespace whole; its version row goes too (the sequence keeps counting).
        With ``expected_version``, only if the namespace is still at it (else ``ConcurrentWriteError``)."""
        with self._transaction():
            if expected_version is not None:
                refuse_stale_copy(namespace, self.version(namespace), expected_version)
            for table in ("messages", "vectors", "nodes", "edges", "versions"):
                self._conn.execute(f"DELETE FROM {table} WHERE namespace = ?", (namespace,))

    @_typed
    def purge(self) -> None:
        """Make deleted rows unrecoverable from the file; safe to repeat (a retried erasure).

        Rows are deleted with ``secure_delete`` on, which overwrites their bytes with zeros. That
        zeroes a row where it is, not the copies SQLite left behind when it moved the row: a page
        rebuilt as its b-tree rebalances keeps the old bytes of the cells it moved in its free space,
        so an earlier version of a node (a label, a summary quoting a forgotten message) could still
        be read in the file after its row was deleted (a randomised audit found one). ``VACUUM``
        rewrites every page, and a ``TRUNCATE`` checkpoint then folds the WAL (which holds the old
        pages too) back into the file and cuts it to zero bytes. The cost follows the file: about 6-8
        ms a megabyte here (BENCHMARKS.md, twenty-fifth round).

        Raises:
            StoreError: another connection holds a read snapshot, so the WAL could not be emptied.
        """
        with self._lock:
            self._conn.execute("VACUUM")
            busy, _, _ = self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        if busy:
            raise StoreError(f"store {self.path!r} is in use by another reader; the WAL could not be emptied")

    def close(self) -> None:
        with self._lock:
            _open_stores.discard(self)
            self._conn.close()


# The stores open in this process, so that a forked child lets go of the connections it inherited.
_open_stores: weakref.WeakSet[SQLiteStore] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for store in list(_open_stores):
        store._forked()


if hasattr(os, "register_at_fork"):  # POSIX only; elsewhere no process is forked
    os.register_at_fork(after_in_child=_after_fork_in_child)
