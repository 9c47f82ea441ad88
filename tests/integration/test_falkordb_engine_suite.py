"""The engine tests that take the ``memory`` fixture, run again with a FalkorDB-backed memory.

Every ``test_*`` of ``tests/unit/test_engine.py`` that asks for ``memory`` is collected here
under the same name; the ``memory`` fixture below overrides the embedded one of conftest.py.
"""

from __future__ import annotations

import importlib.util
import inspect
import sys
from pathlib import Path

import pytest
from test_falkordb_store import falkordb, store, url  # noqa: F401  (fixtures, and the import skip)

pytestmark = [pytest.mark.falkordb, pytest.mark.enable_socket]

_spec = importlib.util.spec_from_file_location(
    "engine_suite_src", Path(__file__).resolve().parents[1] / "unit" / "test_engine.py"
)
_src = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("engine_suite_src", _src)
_spec.loader.exec_module(_src)

for _name, _fn in vars(_src).items():
    if _name.startswith("test_") and callable(_fn) and "memory" in inspect.signature(_fn).parameters:
        globals()[_name] = _fn


@pytest.fixture
def memory(url, store, toy_embedder):  # noqa: F811
    from mnemis_integrations import MnemisMemory

    return MnemisMemory(embedder=toy_embedder, backend=url)


def test_a_second_process_sees_the_first_ones_writes(url, store, toy_embedder):  # noqa: F811
    """Two memories on one FalkorDB stand in for two processes: each keeps its own in-process copy,
    and a write by one makes the other reload before its next read."""
    from mnemis_integrations import MnemisMemory

    writer = MnemisMemory(embedder=toy_embedder, backend=url)
    reader = MnemisMemory(embedder=toy_embedder, backend=url)
    writer.add_messages(_src.CONVERSATION[:4], namespace="shared")
    assert [m.id for m in reader.messages("shared")] == ["m1", "m2", "m3", "m4"]
    writer.add_messages(_src.CONVERSATION[4:], namespace="shared")
    hits = reader.search("hosting migration plan B", k=5, namespace="shared")
    assert any("m9" in h.source_ids or "m10" in h.source_ids for h in hits)
    assert len(reader.messages("shared")) == len(_src.CONVERSATION)
