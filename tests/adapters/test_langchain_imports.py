"""The LangChain adapters' public surface, and their guarded, lazy framework imports."""

from __future__ import annotations

import subprocess
import sys

import pytest

import mnemis_integrations.langchain as lc
from mnemis_integrations.errors import MissingDependencyError

PUBLIC = {
    "MnemisRetriever",
    "create_recall_tool",
    "create_remember_tool",
    "MnemisChatMessageHistory",
    "MnemisStore",
    "MnemisSearchItem",
    "MnemisMemoryMiddleware",
}


def run_python(code: str, *, block: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    """Run code in a fresh interpreter where the ``block`` packages cannot be imported."""
    prelude = "import sys\n" + "".join(f"sys.modules[{name!r}] = None\n" for name in block)
    return subprocess.run([sys.executable, "-c", prelude + code], capture_output=True, text=True, check=False)


def test_all_lists_every_public_name_and_each_resolves():
    assert set(lc.__all__) == PUBLIC
    for name in lc.__all__:
        assert getattr(lc, name) is not None
    assert set(lc.__all__) <= set(dir(lc))


def test_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError):
        lc.NoSuchThing  # noqa: B018


def test_importing_the_adapter_package_loads_no_framework():
    out = run_python(
        "import mnemis_integrations, mnemis_integrations.langchain\n"
        "print(sorted(m for m in sys.modules"
        " if m.split('.')[0] in ('langchain_core', 'langchain', 'langgraph')))"
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_core_imports_without_langchain_and_the_adapter_names_the_extra():
    out = run_python(
        "import mnemis_integrations\n"
        "from mnemis_integrations.errors import MissingDependencyError\n"
        "try:\n    import mnemis_integrations.langchain\nexcept MissingDependencyError as e:\n    print(e)\n",
        block=("langchain_core", "langchain", "langgraph", "langchain_classic"),
    )
    assert out.returncode == 0, out.stderr
    assert "pip install 'mnemis-integrations[langchain]'" in out.stdout


def test_store_and_middleware_name_the_langgraph_extra_when_langgraph_is_missing():
    out = run_python(
        "from mnemis_integrations.errors import MissingDependencyError\n"
        "from mnemis_integrations.langchain import MnemisRetriever\n"
        "for name in ('MnemisStore', 'MnemisMemoryMiddleware'):\n"
        "    try:\n        exec(f'from mnemis_integrations.langchain import {name}')\n"
        "    except MissingDependencyError as e:\n        print(name, e.extra, e)\n",
        block=("langgraph",),
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert [line.split()[:2] for line in lines] == [
        ["MnemisStore", "langgraph"],
        ["MnemisMemoryMiddleware", "langgraph"],
    ]
    assert all("pip install 'mnemis-integrations[langgraph]'" in line for line in lines)


def test_classic_module_names_the_classic_extra():
    out = run_python(
        "from mnemis_integrations.errors import MissingDependencyError\n"
        "try:\n    import mnemis_integrations.langchain.classic\n"
        "except MissingDependencyError as e:\n    print(e)\n",
        block=("langchain_classic",),
    )
    assert out.returncode == 0, out.stderr
    assert "pip install 'mnemis-integrations[classic]'" in out.stdout


def test_missing_dependency_error_is_an_import_error():
    assert issubclass(MissingDependencyError, ImportError)
