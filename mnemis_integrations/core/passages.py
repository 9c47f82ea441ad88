"""A long message's passages: the pieces it is read and shown by.

An embedder reads a bounded window (e5: its first 512 tokens) and one vector stands for the whole
of what it read, so the later part of a pasted document or a tool's output is found by its words
alone. A message over twice ``BuildConfig.passage_tokens`` also gets one vector per window of at
most that many tokens (:func:`windows`); search reads a message's match as its best window's.
Budget fitting shows a long message by its passages matching the query (``retrieval.excerpt``).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable

from .text import has_cjk, jieba_words

__all__ = [
    "PASSAGE_KEY",
    "characters",
    "passage_key",
    "passage_owner",
    "passages",
    "pieces",
    "sentences",
    "text_lines",
    "windows",
]

# A sentence ends at . ! ? (or their CJK forms) before a space, or at a line break.
_ENDS = re.compile(r"(?<=[.!?])\s+|(?<=[。！？；])|\n+")
PASSAGE_KEY = "\x1f"  # between a message id and its window's number, in the passage vector index
_ZWJ = "\u200d"
# What belongs to the character before it besides a combining mark: a joiner, a variation selector, a
# skin tone, an emoji tag.
_EXTENDS = re.compile("[\u200c\u200d\ufe00-\ufe0f\U0001f3fb-\U0001f3ff\U000e0020-\U000e007f]")
_FLAG_LETTER = re.compile("[\U0001f1e6-\U0001f1ff]")


def passage_key(message_id: str, n: int) -> str:
    return f"{message_id}{PASSAGE_KEY}{n}"


def passage_owner(key: str) -> str:
    """The message id of a passage key (a message id may itself hold the separator).

    >>> passage_owner(passage_key("m\\x1fx", 3))
    'm\\x1fx'
    """
    return key.rsplit(PASSAGE_KEY, 1)[0]


def sentences(text: str) -> list[str]:
    """``text`` cut into its sentences (and lines), blanks dropped.

    >>> sentences("Berlin grew. Madrid fell!\\nNext line 好的。再见")
    ['Berlin grew.', 'Madrid fell!', 'Next line 好的。', '再见']
    """
    return [s.strip() for s in _ENDS.split(text) if s and s.strip()]


def text_lines(text: str) -> list[str]:
    """``text``'s non-empty lines, stripped: the lines :func:`passages` numbers.

    >>> text_lines("a\\n\\n  b ")
    ['a', 'b']
    """
    return [ln.strip() for ln in text.splitlines() if ln.strip()]


def passages(text: str, max_tokens: int, count: Callable[[str], int]) -> list[tuple[str, int]]:
    """``text``'s lines, each with its line number; a line over half ``max_tokens`` is cut into its
    sentences. A transcript's turn stays whole; a long paragraph gives its sentences.

    >>> passages("ann: hi there. ok\\nbob: A long line. It goes on.", 8, lambda s: len(s.split()))
    [('ann: hi there. ok', 0), ('bob: A long line.', 1), ('It goes on.', 1)]
    """
    out: list[tuple[str, int]] = []
    for n, line in enumerate(text_lines(text)):
        if count(line) <= max_tokens // 2:
            out.append((line, n))
        else:
            out += [(s, n) for s in sentences(line)]
    return out


def windows(text: str, max_tokens: int, count: Callable[[str], int]) -> list[str]:
    """``text`` in consecutive windows of at most about ``max_tokens`` (its :func:`passages`
    joined while they fit; a longer passage, such as a JSON payload or a run of clauses with no
    full stop, cut into even pieces), or ``[]`` when the text is within twice ``max_tokens``: its
    own vector reads it whole.

    >>> windows("a b c. d e f. g h i. j k l. m n o.", 6, lambda s: len(s.split()))
    ['a b c. d e f.', 'g h i. j k l.', 'm n o.']
    >>> windows("a b c. d e f.", 6, lambda s: len(s.split()))
    []
    >>> windows("a b c d e f g h i j k l m n", 6, lambda s: len(s.split()))
    ['a b c d e', 'f g h i j', 'k l m n']
    """
    # A token is at least one byte: most messages are ruled out without the tokenizer.
    if max_tokens <= 0 or len(text.encode("utf-8")) <= 2 * max_tokens or count(text) <= 2 * max_tokens:
        return []
    out: list[str] = []
    cur: list[str] = []
    size = 0
    for whole, _line in passages(text, 2 * max_tokens, count):
        for part in pieces(whole, max_tokens, count):
            n = count(part)
            if cur and size + n > max_tokens:
                out.append(" ".join(cur))
                cur, size = [], 0
            cur.append(part)
            size += n
    if cur:
        out.append(" ".join(cur))
    return out


def characters(text: str) -> list[str]:
    """``text`` in the smallest parts it may be cut into: what a reader reads as one character (an
    emoji with its joiners and skin tone, a letter with its accents, a flag's two letters) and, in
    Chinese, one word (jieba's): a cut through them shows a broken emoji or half a word.

    >>> [len(c) for c in characters("a\u0301b\U0001f468\u200d\U0001f469\U0001f1e9\U0001f1ea")]
    [2, 1, 3, 2]
    >>> characters("柏林的收入")
    ['柏林', '的', '收入']
    """
    parts = jieba_words(text) if has_cjk(text) else list(text)
    out: list[str] = []
    for part in parts:
        first = part[0]
        if out and (
            unicodedata.category(first).startswith("M")
            or _EXTENDS.match(first)
            or out[-1].endswith(_ZWJ)
            or (len(out[-1]) == 1 and _FLAG_LETTER.match(out[-1]) and _FLAG_LETTER.match(first))
        ):
            out[-1] += part
        else:
            out.append(part)
    return out


def pieces(text: str, max_tokens: int, count: Callable[[str], int]) -> list[str]:
    """``text`` as is when within ``max_tokens``, else cut into as many even pieces as it needs:
    by words, or by :func:`characters` when it has too few (Chinese without a full stop, a long token).

    >>> pieces("abcdef", 2, len)
    ['ab', 'cd', 'ef']
    """
    n = count(text)
    if n <= max_tokens:
        return [text]
    k = -(-n // max_tokens)
    words = text.split(" ")
    units, joiner = (words, " ") if len(words) >= k else (characters(text), "")
    step = -(-len(units) // k)
    return [joiner.join(units[i : i + step]) for i in range(0, len(units), step)]
