"""Who may import whom: the core imports no framework and nothing that sits above it."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "mnemis_integrations"
ABOVE_CORE = (
    "mnemis_integrations.langchain",
    "mnemis_integrations.llama_index",
    "mnemis_integrations.evaluation",
    "mnemis_integrations.cli",
)
FRAMEWORKS = ("langchain", "langchain_core", "langgraph", "llama_index", "matplotlib")
# The one exception: the wrapper for a LlamaIndex LLM the caller passed in builds LlamaIndex's own
# ChatMessage, imported inside the call (so only where the caller's LLM brought LlamaIndex along).
ALLOWED = {"core/llm.py": ["llama_index.core.llms", "llama_index.core.llms.ChatMessage"]}


def _imports(path: Path) -> list[str]:
    """Absolute names of the modules a file imports (relative imports resolved)."""
    module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")
            if node.level:
                base = base[: len(base) - node.level + 1]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            out.append(name)
            out += [f"{name}.{a.name}" for a in node.names]
    return out


def test_the_core_imports_no_framework_and_nothing_above_it():
    offenders = {
        str(path.relative_to(PACKAGE)): bad
        for path in sorted((PACKAGE / "core").rglob("*.py"))
        if (
            bad := sorted(
                {n for n in _imports(path) if n.split(".")[0] in FRAMEWORKS or n.startswith(ABOVE_CORE)}
            )
        )
    }
    assert offenders == ALLOWED


def test_evaluation_lives_outside_the_core():
    assert not (PACKAGE / "core" / "evaluation").exists()
    assert (PACKAGE / "evaluation" / "runner.py").exists()
