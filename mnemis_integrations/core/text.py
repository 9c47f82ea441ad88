"""Language-aware text helpers shared by the builder and the indexes: tokens, stopwords, dates."""

from __future__ import annotations

import re
from datetime import datetime
from functools import lru_cache

__all__ = ["STOPWORDS", "content_words", "format_date", "has_cjk", "lexical_terms", "normalise_name", "tokenize"]

_WORD = re.compile(r"[a-z0-9][a-z0-9'’\-]*[a-z0-9]|[a-z0-9]", re.IGNORECASE)
_CJK_RUN = re.compile(r"[\u4e00-\u9fff]+")
_CJK = re.compile(r"[\u4e00-\u9fff]")

# Function words and chat fillers: they match everywhere and steer nothing.
STOPWORDS = frozenset(
    ["a", "about", "above", "after", "again", "against", "all", "also", "am", "an", "and", "any", "are", "aren't", "as", "at", "be", "because", "been", "before", "being", "below", "between", "both", "but", "by", "can", "can't", "cannot", "could", "couldn't", "did", "didn't", "do", "does", "doesn't", "doing", "don't", "down", "during", "each", "few", "for", "from", "further", "had", "hadn't", "has", "hasn't", "have", "haven't", "having", "he", "he'd", "he'll", "he's", "her", "here", "here's", "hers", "herself", "him", "himself", "his", "how", "how's", "i", "i'd", "i'll", "i'm", "i've", "if", "in", "into", "is", "isn't", "it", "it's", "its", "itself", "let's", "me", "more", "most", "mustn't", "my", "myself", "no", "nor", "not", "of", "off", "on", "once", "only", "or", "other", "ought", "our", "ours", "ourselves", "out", "over", "own", "same", "shan't", "she", "she'd", "she'll", "she's", "should", "shouldn't", "so", "some", "such", "than", "that", "that's", "the", "their", "theirs", "them", "themselves", "then", "there", "there's", "these", "they", "they'd", "they'll", "they're", "they've", "this", "those", "through", "to", "too", "under", "until", "up", "very", "was", "wasn't", "we", "we'd", "we'll", "we're", "we've", "were", "weren't", "what", "what's", "when", "when's", "where", "where's", "which", "while", "who", "who's", "whom", "why", "why's", "with", "won't", "would", "wouldn't", "you", "you'd", "you'll", "you're", "you've", "your", "yours", "yourself", "yourselves", "yeah", "yes", "hey", "hi", "hello", "oh", "ok", "okay", "wow", "thanks", "thank", "really", "so", "just", "like", "got", "get", "gonna", "lot", "lots", "much", "many", "great", "good", "awesome", "amazing", "cool", "nice", "sure", "totally", "definitely", "glad", "know", "think", "thing", "things", "something", "anything", "everything", "one", "ones", "will", "going", "been", "did", "do", "done", "make", "made", "way", "well", "still", "even", "back", "now", "new", "time", "times", "always", "never", "ever", "bit", "kind", "sounds", "sound", "love", "loved", "feel", "felt", "keep", "though", "since", "let", "us", "what's", "it'd", "that'd", "im", "ive", "dont", "didnt", "thats", "的", "了", "是", "在", "我", "你", "他", "她", "们", "这", "那", "也", "就", "都", "和", "吗", "吧", "呢", "啊", "一", "个", "有", "不", "要", "会", "说", "把", "被", "给", "还", "很", "到", "去", "来", "上", "下"]
)


def has_cjk(text: str) -> bool:
    return bool(_CJK.search(text))


def tokenize(text: str) -> list[str]:
    """Lower-cased word tokens for English, character bigrams for Chinese runs.

    Examples:
        >>> tokenize("Refund timed out")
        ['refund', 'timed', 'out']
        >>> tokenize("定价方案")
        ['定价', '价方', '方案']
    """
    out = [w.lower().replace("’", "'") for w in _WORD.findall(text)]
    for run in _CJK_RUN.findall(text):
        if len(run) == 1:
            out.append(run)
        else:
            out.extend(run[i : i + 2] for i in range(len(run) - 1))
    return out


def content_words(text: str) -> list[str]:
    """Tokens minus stopwords and one-letter words: what lexical matching and keywords use."""
    return [t for t in tokenize(text) if t not in STOPWORDS and (len(t) > 1 or _CJK.match(t))]


def format_date(t: datetime | None) -> str:
    if t is None:
        return ""
    return f"{t.day} {t.strftime('%B %Y')}"


def normalise_name(name: str) -> str:
    """Key under which an entity name is matched: case, spacing and possessives folded.

    >>> normalise_name("  Plan  B's ")
    'plan b'
    """
    s = re.sub(r"['’]s\b", "", name.strip().lower())
    return re.sub(r"\s+", " ", s).strip(" .,:;!?\"'")


@lru_cache(maxsize=1)
def _english_stemmer():
    import snowballstemmer

    return snowballstemmer.stemmer("english")


@lru_cache(maxsize=65536)
def _stem(token: str) -> str:
    if not token.isascii() or not token.isalpha():
        return token
    return _english_stemmer().stemWord(token)


def lexical_terms(text: str) -> list[str]:
    """Content words, English ones stemmed, for BM25: "researching" matches "research".

    >>> lexical_terms("Researching adoption agencies")
    ['research', 'adopt', 'agenc']
    """
    return [_stem(t) for t in content_words(text)]
