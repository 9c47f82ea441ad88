"""LangGraph namespaces as Mnemis namespaces, and namespace templates filled per run.

Pure, like ``_convert``: no framework import. A LangGraph store namespace is a tuple of labels
that may hold almost any character; a Mnemis namespace is at most 128 characters of letters,
digits and ``_-.:@``. :func:`namespace_to_str` maps the first to the second for every tuple
LangGraph accepts, and never maps two tuples to one name. Tools and middleware take templates
such as ``"{user_id}"``, filled from the run with :func:`fill_namespace`.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..errors import ConfigError, InvalidNamespaceError

__all__ = [
    "NAMESPACE_SEPARATOR",
    "check_namespace_template",
    "decode_label",
    "encode_label",
    "fill_namespace",
    "is_namespace_template",
    "namespace_to_str",
    "run_value",
    "str_to_namespace",
]

NAMESPACE_SEPARATOR = ":"
# A LangGraph namespace label becomes one ':'-separated part of a Mnemis namespace. Characters a
# Mnemis namespace cannot hold, ':' (("a:b",) and ("a", "b") must not collide) and '.' itself are
# escaped as '.' + hex bytes, so every '.' of an encoded label starts an escape.
_UNSAFE_CHARS = re.compile(r"[^A-Za-z0-9_@-]+")
_ESCAPES = re.compile(r"(?:\.[0-9a-f]{2})+")
_MAX_NAMESPACE_LEN = 128
_NAMESPACE_RE = re.compile(r"[A-Za-z0-9_.:@-]+")  # what core.messages.validate_namespace takes
_HASHED_MARK = ".."
_DIGEST_CHARS = 32  # 128 bits of sha256: no two shortened namespaces meet in practice


def encode_label(label: str) -> str:
    """One LangGraph namespace label as a part of a Mnemis namespace, reversibly.

    Letters, digits, ``_``, ``-`` and ``@`` stay as they are, so a plain label keeps its name;
    every other character (``.`` too) becomes ``.`` and the hex of its UTF-8 bytes, so a ``.`` in an
    encoded label always starts such an escape (:func:`decode_label`).

    Examples:
        >>> encode_label("user-1"), encode_label("user:42"), encode_label("Zoë"), encode_label("org/team")
        ('user-1', 'user.3a42', 'Zo.c3.ab', 'org.2fteam')
        >>> decode_label(encode_label("john smith|auth0"))
        'john smith|auth0'
    """
    return _UNSAFE_CHARS.sub(
        lambda m: "".join(f".{b:02x}" for b in m.group().encode("utf-8", "surrogatepass")), label
    )


def decode_label(encoded: str) -> str:
    """The label :func:`encode_label` was given."""
    return _ESCAPES.sub(
        lambda m: bytes.fromhex(m.group().replace(".", "")).decode("utf-8", "surrogatepass"), encoded
    )


def namespace_to_str(namespace: Sequence[str]) -> str:
    """Map a LangGraph namespace tuple to the Mnemis namespace that holds its memory.

    Labels are encoded with :func:`encode_label` and joined with ``':'``, so every namespace
    LangGraph accepts has one, and two namespaces never share one: ``("memories", "u1")`` ->
    ``"memories:u1"``, ``("users", "user:42")`` -> ``"users:user.3a42"``. Mnemis names hold at most
    128 characters; a longer one keeps its first characters and ends with ``".."`` and a
    sha256 digest of the whole (escapes never put two dots together, so it cannot meet the name
    of a shorter namespace). :func:`str_to_namespace` reverses every name but those.

    Raises:
        InvalidNamespaceError: the tuple is empty or a label is not a non-empty string.

    Examples:
        >>> namespace_to_str(("memories", "user-1"))
        'memories:user-1'
        >>> len(namespace_to_str(("x" * 200,))), str_to_namespace(namespace_to_str(("x" * 200,)))
        (128, None)
    """
    parts = tuple(namespace)
    if not parts or not all(isinstance(p, str) and p for p in parts):
        raise _store_namespace_error(parts, "give one or more non-empty string labels")
    joined = NAMESPACE_SEPARATOR.join(encode_label(p) for p in parts)
    if len(joined) <= _MAX_NAMESPACE_LEN:
        return joined
    digest = hashlib.sha256(joined.encode("ascii")).hexdigest()[:_DIGEST_CHARS]
    return joined[: _MAX_NAMESPACE_LEN - len(_HASHED_MARK) - _DIGEST_CHARS] + _HASHED_MARK + digest


def str_to_namespace(name: str) -> tuple[str, ...] | None:
    """The LangGraph namespace a Mnemis namespace was made from; ``None`` for a shortened one.

    Examples:
        >>> str_to_namespace("users:user.3a42")
        ('users', 'user:42')
    """
    if _HASHED_MARK in name:
        return None
    return tuple(decode_label(part) for part in name.split(NAMESPACE_SEPARATOR))


def _store_namespace_error(parts: tuple, reason: str) -> InvalidNamespaceError:
    err = InvalidNamespaceError(parts)
    err.args = (f"invalid store namespace {parts!r} for Mnemis: {reason}",)
    return err


# ---------------------------------------------------------------------------------------------
# Namespace templates: "{user_id}", "team-{team_id}" filled per run
# ---------------------------------------------------------------------------------------------

_TEMPLATE_FIELD = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def is_namespace_template(namespace: str) -> bool:
    """Whether a namespace names run values in braces (``"{user_id}"``); a Mnemis namespace holds no brace.

    Examples:
        >>> is_namespace_template("team-{team_id}"), is_namespace_template("u1")
        (True, False)
    """
    return "{" in namespace or "}" in namespace


def check_namespace_template(template: str) -> str:
    """The template, if every brace is a ``{field}`` and the rest can be part of a namespace.

    Raises:
        ConfigError: a stray brace, an odd field name, or characters no namespace may hold.

    Examples:
        >>> check_namespace_template("team-{team_id}")
        'team-{team_id}'
    """
    rest = _TEMPLATE_FIELD.sub("x", template)
    if not _TEMPLATE_FIELD.search(template) or not _NAMESPACE_RE.fullmatch(rest):
        raise ConfigError(
            f"namespace template {template!r}: write run values as {{name}} (letters, digits, '_') among "
            "letters, digits, '_', '-', '.', ':' or '@'"
        )
    return template


def run_value(name: str, context: Any, configurable: Mapping[str, Any] | None) -> Any:
    """A value of the current run: the runtime context's field or key ``name``, else ``configurable[name]``.

    Examples:
        >>> from types import SimpleNamespace
        >>> run_value("user_id", SimpleNamespace(user_id="u1"), {"user_id": "u2"})
        'u1'
        >>> run_value("user_id", None, {"user_id": "u2"}), run_value("team", {"team": "t"}, None)
        ('u2', 't')
    """
    found = context.get(name) if isinstance(context, Mapping) else getattr(context, name, None)
    if found is None and configurable:
        found = configurable.get(name)
    return found


def fill_namespace(template: str, lookup: Callable[[str], Any]) -> str:
    """The template with each ``{field}`` replaced by ``lookup(field)``, encoded as a label.

    Values are encoded with :func:`encode_label`, so any user id makes a valid namespace and a
    plain one (``"u1"``) reads as itself.

    Raises:
        ConfigError: ``lookup`` gave nothing for a field.

    Examples:
        >>> fill_namespace("team-{team_id}", {"team_id": "acme"}.get)
        'team-acme'
        >>> fill_namespace("{user_id}", {"user_id": "auth0|42"}.get)
        'auth0.7c42'
    """

    def value(match: re.Match) -> str:
        found = lookup(match.group(1))
        if found is None or found == "":
            raise ConfigError(
                f"namespace template {template!r} needs {match.group(1)!r}: give it in the agent's runtime "
                f"context (invoke(..., context=...)) or in config['configurable']"
            )
        return encode_label(str(found))

    return _TEMPLATE_FIELD.sub(value, template)
