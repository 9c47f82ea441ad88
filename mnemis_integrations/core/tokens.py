"""Token counting with tiktoken's cl100k_base, offline.

tiktoken downloads its BPE file on first use; llama-index-core ships that file,
so we point ``TIKTOKEN_CACHE_DIR`` at it when the caller has not set one. This is
done on first use, never at import. Without either, a regex estimate is used.
"""

from __future__ import annotations

import importlib.util
import os
import re
from functools import lru_cache
from pathlib import Path

__all__ = ["RegexTokenizer", "TiktokenTokenizer", "count_tokens", "get_tokenizer"]

_WORDISH = re.compile(r"\w+|[^\w\s]", re.UNICODE)


class RegexTokenizer:
    """Rough fallback: words and punctuation marks, CJK characters one each."""

    name = "regex"

    def count(self, text: str) -> int:
        return len(_WORDISH.findall(text))


class TiktokenTokenizer:
    name = "cl100k_base"

    def __init__(self, encoding):
        self._enc = encoding

    def count(self, text: str) -> int:
        return len(self._enc.encode(text, disallowed_special=()))


def _bundled_cache_dir() -> str | None:
    spec = importlib.util.find_spec("llama_index")
    if spec is None or not spec.submodule_search_locations:
        return None
    for root in spec.submodule_search_locations:
        candidate = Path(root) / "core" / "_static" / "tiktoken_cache"
        if candidate.is_dir():
            return str(candidate)
    return None


@lru_cache(maxsize=1)
def get_tokenizer():
    if not os.environ.get("TIKTOKEN_CACHE_DIR"):
        bundled = _bundled_cache_dir()
        if bundled:
            os.environ["TIKTOKEN_CACHE_DIR"] = bundled
    try:
        import tiktoken

        return TiktokenTokenizer(tiktoken.get_encoding("cl100k_base"))
    except Exception:  # noqa: BLE001 - no cached file and no network: counting must still work
        return RegexTokenizer()


def count_tokens(text: str) -> int:
    return get_tokenizer().count(text)
