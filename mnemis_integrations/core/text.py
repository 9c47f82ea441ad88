"""Language-aware text helpers shared by the builder and the indexes: tokens, stopwords, dates."""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from datetime import datetime
from functools import lru_cache, update_wrapper
from typing import Any, Generic, NamedTuple, TypeVar

__all__ = [
    "LATIN_WORD_CHAR",
    "MONTHS",
    "WEEKDAYS",
    "STOPWORDS",
    "TEXT_CACHE_CHARS",
    "TextCache",
    "TextCacheInfo",
    "clear_text_caches",
    "content_words",
    "format_date",
    "has_cjk",
    "jieba_tagger",
    "jieba_words",
    "keyword_terms",
    "lexical_terms",
    "names",
    "normalise_name",
    "query_terms",
    "says_name",
    "text_cache",
    "tokenize",
]

T = TypeVar("T")

# The characters of text one cache may hold (its keys; what it computed from them is about their
# size, a few times it for an excerpt's analysis). Thousands of chat messages (a few hundred
# characters each) or hundreds of document chunks (LlamaIndex's default chunk, 1,024 tokens, is about
# 4,000 characters) fit, and so does one message of the longest a memory takes (``limits``'
# max_message_chars), which search excerpts again each time it finds it. Counted in entries alone,
# 4,096 such messages kept gigabytes in the process.
TEXT_CACHE_CHARS = 1_000_000

_MISSING = object()
# where a call's keyword arguments begin in its key: f(x, hmm=False) is not f(x, False), as in lru_cache
_KEYWORDS = object()


class TextCacheInfo(NamedTuple):
    maxsize: int
    currsize: int
    chars: int  # of the text it holds now
    max_chars: int


class TextCache(Generic[T]):
    """A least-recently-used cache of a function of text, as ``functools.lru_cache`` with
    ``maxsize`` entries, that also holds at most ``max_chars`` characters of string arguments: the
    least recently used go first, and a call whose strings alone exceed it is computed, not kept."""

    def __init__(self, fn: Callable[..., T], maxsize: int, max_chars: int):
        self._fn = fn
        self._maxsize = maxsize
        self._max_chars = max_chars
        self._held: OrderedDict[Hashable, tuple[T, int]] = OrderedDict()
        self._chars = 0
        # moved by every clear: a value computed across one (from a text a forget erased meanwhile)
        # is returned to its caller but not kept
        self._clears = 0
        # several namespaces are read and written at once, from threads
        self._lock = threading.Lock()
        update_wrapper(self, fn)

    def __call__(self, *args: Any, **kwargs: Any) -> T:
        key = (*args, _KEYWORDS, *kwargs.items()) if kwargs else args
        # A hit is read without the lock (a word is looked up per token): each step on the dict is
        # atomic, and an entry another thread dropped meanwhile stays dropped.
        found = self._held.get(key, _MISSING)
        if found is not _MISSING:
            try:
                self._held.move_to_end(key)
            except KeyError:
                pass
            return found[0]  # type: ignore[index]
        clears = self._clears
        value = self._fn(*args, **kwargs)
        chars = sum(len(a) for a in (*args, *kwargs.values()) if isinstance(a, str))
        if chars > self._max_chars:
            return value
        with self._lock:
            # another thread may have kept it meanwhile, or cleared the cache since it was asked
            if key not in self._held and clears == self._clears:
                self._held[key] = (value, chars)
                self._chars += chars
                while len(self._held) > self._maxsize or self._chars > self._max_chars:
                    self._chars -= self._held.popitem(last=False)[1][1]
        return value

    def cache_info(self) -> TextCacheInfo:
        with self._lock:
            return TextCacheInfo(self._maxsize, len(self._held), self._chars, self._max_chars)

    def cache_clear(self) -> None:
        with self._lock:
            self._held.clear()
            self._chars = 0
            self._clears += 1


_TEXT_CACHES: list[TextCache[Any]] = []


def text_cache(maxsize: int, max_chars: int = TEXT_CACHE_CHARS) -> Callable[[Callable[..., T]], TextCache[T]]:
    """A :class:`TextCache` for a function of what a message holds (its text, a word of it, a
    metadata value), emptied with every other such cache by :func:`clear_text_caches`."""

    def cached(fn: Callable[..., T]) -> TextCache[T]:
        wrapper = TextCache(fn, maxsize, max_chars)
        _TEXT_CACHES.append(wrapper)
        return wrapper

    return cached


def clear_text_caches() -> None:
    """Empty every :func:`text_cache`. ``MnemisMemory.forget`` does, so the text it erases does not
    stay in the process's memory as the key of a cache (until other texts push it out)."""
    for cache in _TEXT_CACHES:
        cache.cache_clear()


_WORD = re.compile(r"[a-z0-9][a-z0-9'’\-]*[a-z0-9]|[a-z0-9]", re.IGNORECASE)
_QUERY_WORD = re.compile(r"[\w'’\-]+", re.UNICODE)
_CJK_RUN = re.compile(r"[\u4e00-\u9fff]+")
_CJK = re.compile(r"[\u4e00-\u9fff]")
# A word character that is no Chinese one: to ``\w`` (and ``\b``) a Chinese character is a word
# character, yet Chinese puts no space around an English word ("周会cancel了", "Acme的报价").
LATIN_WORD_CHAR = r"[^\W\u4e00-\u9fff]"

# Function words and chat fillers: they match everywhere and steer nothing.
# Calendar words in calendar order, for the readers of dates, stated values and names.
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
MONTHS = (
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
)

STOPWORDS = frozenset(
    [
        "a",
        "about",
        "above",
        "after",
        "again",
        "against",
        "all",
        "also",
        "am",
        "an",
        "and",
        "any",
        "are",
        "aren't",
        "as",
        "at",
        "be",
        "because",
        "been",
        "before",
        "being",
        "below",
        "between",
        "both",
        "but",
        "by",
        "can",
        "can't",
        "cannot",
        "could",
        "couldn't",
        "did",
        "didn't",
        "do",
        "does",
        "doesn't",
        "doing",
        "don't",
        "down",
        "during",
        "each",
        "few",
        "for",
        "from",
        "further",
        "had",
        "hadn't",
        "has",
        "hasn't",
        "have",
        "haven't",
        "having",
        "he",
        "he'd",
        "he'll",
        "he's",
        "her",
        "here",
        "here's",
        "hers",
        "herself",
        "him",
        "himself",
        "his",
        "how",
        "how's",
        "i",
        "i'd",
        "i'll",
        "i'm",
        "i've",
        "if",
        "in",
        "into",
        "is",
        "isn't",
        "it",
        "it's",
        "its",
        "itself",
        "let's",
        "me",
        "more",
        "most",
        "mustn't",
        "my",
        "myself",
        "no",
        "nor",
        "not",
        "of",
        "off",
        "on",
        "once",
        "only",
        "or",
        "other",
        "ought",
        "our",
        "ours",
        "ourselves",
        "out",
        "over",
        "own",
        "same",
        "shan't",
        "she",
        "she'd",
        "she'll",
        "she's",
        "should",
        "shouldn't",
        "so",
        "some",
        "such",
        "than",
        "that",
        "that's",
        "the",
        "their",
        "theirs",
        "them",
        "themselves",
        "then",
        "there",
        "there's",
        "these",
        "they",
        "they'd",
        "they'll",
        "they're",
        "they've",
        "this",
        "those",
        "through",
        "to",
        "too",
        "under",
        "until",
        "up",
        "very",
        "was",
        "wasn't",
        "we",
        "we'd",
        "we'll",
        "we're",
        "we've",
        "were",
        "weren't",
        "what",
        "what's",
        "when",
        "when's",
        "where",
        "where's",
        "which",
        "while",
        "who",
        "who's",
        "whom",
        "why",
        "why's",
        "with",
        "won't",
        "would",
        "wouldn't",
        "you",
        "you'd",
        "you'll",
        "you're",
        "you've",
        "your",
        "yours",
        "yourself",
        "yourselves",
        "yeah",
        "yes",
        "hey",
        "hi",
        "hello",
        "oh",
        "ok",
        "okay",
        "wow",
        "thanks",
        "thank",
        "really",
        "so",
        "just",
        "like",
        "got",
        "get",
        "gonna",
        "lot",
        "lots",
        "much",
        "many",
        "great",
        "good",
        "awesome",
        "amazing",
        "cool",
        "nice",
        "sure",
        "totally",
        "definitely",
        "glad",
        "know",
        "think",
        "thing",
        "things",
        "something",
        "anything",
        "everything",
        "one",
        "ones",
        "will",
        "going",
        "been",
        "did",
        "do",
        "done",
        "make",
        "made",
        "way",
        "well",
        "still",
        "even",
        "back",
        "now",
        "new",
        "time",
        "times",
        "always",
        "never",
        "ever",
        "bit",
        "kind",
        "sounds",
        "sound",
        "love",
        "loved",
        "feel",
        "felt",
        "keep",
        "though",
        "since",
        "let",
        "us",
        "what's",
        "it'd",
        "that'd",
        "im",
        "ive",
        "dont",
        "didnt",
        "thats",
        "的",
        "了",
        "是",
        "在",
        "我",
        "你",
        "他",
        "她",
        "们",
        "这",
        "那",
        "也",
        "就",
        "都",
        "和",
        "吗",
        "吧",
        "呢",
        "啊",
        "一",
        "个",
        "有",
        "不",
        "要",
        "会",
        "说",
        "把",
        "被",
        "给",
        "还",
        "很",
        "到",
        "去",
        "来",
        "上",
        "下",
    ]
)


def has_cjk(text: str) -> bool:
    return bool(_CJK.search(text))


def names(text: str, name: str) -> bool:
    """Does ``text`` hold ``name`` as a whole word (case aside)?

    >>> names("Rex goes to Elm Street", "elm street"), names("Rexford", "Rex")
    (True, False)
    """
    return re.search(rf"(?<!\w){re.escape(name)}(?!\w)", text, re.IGNORECASE) is not None


def says_name(text: str, name: str) -> bool:
    """Does ``text`` say ``name``, case aside: as a whole word, or anywhere for a Chinese name
    (Chinese has no word boundaries, so "张伟说" says 张伟)?

    >>> says_name("Ana met Rexford", "Rex"), says_name("张伟说好的", "张伟")
    (False, True)
    >>> says_name("ACME公司到了", "acme公司")
    True
    """
    if has_cjk(name):
        return re.search(re.escape(name), text, re.IGNORECASE) is not None
    return names(text, name)


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


# Words that name no topic, kept out of keywords (labels, headlines): common chat verbs and fillers.
_NOT_TOPICS = frozenset(
    "anyone everyone everywhere someone nothing sorry perfect cheaper better worse bigger smaller happy sad "
    "agree agreed approve approves ask asked attach attached book booked bring bringing call called "
    "celebrate change check checked come coming confirm confirms drop email emailed finish give go goes "
    "help hope leave "
    "leaving look looking mean need needs plan put said say says see send sent start started take tell told "
    "try tried want wants wait work works worth "
    "already annoying asking actually probably maybe definitely honestly basically literally totally "
    "exactly hopefully anyway somehow soon later lately instead ahead officially reckon reckons feel feels "
    "felt went gone got get gets fine nearer previous considering lol around available possible broken right "
    "covering helpful "
    # what a message does, not what it is about: "Renewal update: ...", "bad news", "my decision"
    "update updates decision correction comment comments news idea ideas welcome nobody somebody second "
    "stuff "
    # laughter and exclamations: "hahaha the barn lol"
    "haha hahaha hehe lmao omg wow yay ugh hmm "
    "one two three four five six seven eight nine ten eleven twelve twenty hundred thousand".split()
)
# Chinese words of one syllable's worth of meaning, or pronouns and particles jieba keeps as words.
_NOT_TOPICS_ZH = frozenset(
    "我们 你们 他们 她们 咱们 大家 自己 这个 那个 这些 那些 什么 怎么 为什么 "
    "这样 那样 一下 一个 一些 一共 已经 "
    "现在 然后 因为 所以 但是 如果 还是 就是 可以 可能 应该 需要 没有 不是 "
    "觉得 知道 时候 今天 明天 昨天 一起 还有 "
    "这边 那边 问题 事情 东西 感觉 比较 非常 真的 其实 而且 或者 不过 只是 "
    "一直 开始 准备 决定 确认 好的 消息 坏消息 好消息 商量".split()
)
# A sentence-final particle: jieba's guesses ending in one are exclamations ("太棒了", tagged a name).
_FINAL_PARTICLES = tuple("了吧啊呢吗呀啦嘛哦")
# The characters of laughter and exclamation: "啊啊啊", "哈哈" are sounds, "豆豆" may be a name.
_SOUNDS = frozenset("啊哈嗯哦呵嘿呜哇嘻唉哎呀嘛啦吧呢嗷噢")
# jieba parts of speech that name things: nouns, place and person names, other proper nouns, verbal
# nouns ("装修"), English words inside Chinese text.
_NOUN_TAGS = ("n", "vn", "eng")


_POSSESSIVE = re.compile(r"'s$")
# A date says when, not what about; so does a time of day or a day named from today.
_DATE_WORDS = frozenset(
    WEEKDAYS
    + MONTHS
    + ("morning", "afternoon", "evening", "tonight", "noon", "midnight", "today", "tomorrow", "yesterday")
)


def keyword_terms(text: str) -> list[str]:
    """The words a keyword, label or headline may use: English content words that are neither
    numbers nor past forms nor chat verbs, and Chinese whole words (jieba) that are nouns, so a
    label reads "kitchen & tiles" or "地板 & 地暖", never "approves" or a broken piece like "了浅".

    >>> keyword_terms("Dana approved the 12-min talk: booked flights to Porto")
    ['dana', 'talk', 'flights', 'porto']
    >>> keyword_terms("Already asking about her daughter's flat on Monday, hilarious, and is it available?")
    ['daughter', 'flat']
    >>> keyword_terms("那不铺实木了，改成SPC石塑地板")
    ['spc', '实木', '石塑', '地板']
    >>> keyword_terms("Landlord update: bad news, his decision on the tenant")
    ['landlord', 'tenant']
    >>> keyword_terms("坏消息，鱼头定价再商量")
    ['鱼头', '定价']
    >>> keyword_terms("Nordwind went live this morning; the mid-June kick-off is in Frankfurt")
    ['nordwind', 'kick-off', 'frankfurt']
    >>> keyword_terms("啊啊啊啊我外甥女也太棒了吧")
    ['外甥女']
    """
    out = [
        t
        for t in (_POSSESSIVE.sub("", w.lower().replace("’", "'")) for w in _WORD.findall(text))
        if t not in STOPWORDS
        and t not in _NOT_TOPICS
        and not _DATE_WORDS.intersection(t.split("-"))  # "mid-june" too
        and len(t) > 1
        and not any(c.isdigit() for c in t)
        and not (t.endswith("ed") and len(t) > 4)
        and not (t.endswith("lly") and len(t) > 6)  # adverbs: "automatically", "locally"
        and not (t.endswith("ous") and len(t) > 5)  # adjectives: "hilarious", "various"
        and not _never_a_noun(t)
    ]
    if has_cjk(text):
        out = [t for t in out if t.isascii()]
        out += [
            w.word.lower()
            for w in jieba_tagger().cut(text)
            if _CJK.match(w.word)
            and len(w.word) > 1
            and w.flag.startswith(_NOUN_TAGS)
            and w.word not in _NOT_TOPICS_ZH
            and not _SOUNDS.issuperset(w.word)  # jieba may tag a sound a name
            and not w.word.endswith(_FINAL_PARTICLES)
        ]
    return out


@lru_cache(maxsize=1)
def _word_classes():
    """lemminflect's table of English word classes (from the SPECIALIST lexicon), loaded on first
    use: ``word -> {"NOUN": ..., "VERB": ...}``, empty for a word it does not know."""
    from lemminflect import getAllLemmas

    return getAllLemmas


@text_cache(maxsize=65536)
def _never_a_noun(word: str) -> bool:
    """A word the lexicon knows only as a verb, adjective or adverb ("believe", "beautiful",
    "across"): it names no topic. A gerund counts as a noun when its verb is also a thing ("camping",
    "fishing" name activities; "getting", "believing" do not). Words it does not know stay: names,
    brands and jargon ("Hetzner", "zellige") are what topics are made of.

    >>> [_never_a_noun(w) for w in ("believe", "rehearsal", "camping", "getting", "hetzner")]
    [True, False, False, True, False]
    """
    if not word.isascii() or not word.isalpha():
        return False
    classes = _word_classes()(word)
    if not classes or "NOUN" in classes or "PROPN" in classes:
        return False
    if word.endswith("ing"):
        return not any("NOUN" in _word_classes()(verb) for verb in classes.get("VERB", ()))
    return True


@text_cache(maxsize=256)
def jieba_words(text: str, hmm: bool = True) -> tuple[str, ...]:
    """jieba's words of ``text``, every character kept; ``hmm=False``: its dictionary's words only
    (its guesses for unknown words may join a word to the one before)."""
    jieba_tagger()  # jieba, its dictionary loaded quietly
    import jieba

    return tuple(jieba.lcut(text, HMM=hmm))


@lru_cache(maxsize=1)
def jieba_tagger():
    """jieba's part-of-speech tagger (``jieba.posseg``), loaded on first use: its dictionary takes a
    second."""
    import logging

    import jieba
    import jieba.posseg as pseg

    jieba.setLogLevel(logging.WARNING)
    return pseg


def format_date(t: datetime | None) -> str:
    if t is None:
        return ""
    return f"{t.day} {t.strftime('%B %Y')}"


def date_span(start: datetime | None, end: datetime | None) -> str:
    """The days from ``start`` to ``end``, one date when they are the same day.

    >>> date_span(datetime(2025, 6, 4), datetime(2025, 6, 9, 15)), date_span(datetime(2025, 6, 4), None)
    ('4 June 2025 – 9 June 2025', '4 June 2025')
    """
    return " – ".join(dict.fromkeys(format_date(t) for t in (start, end) if t))


def normalise_name(name: str) -> str:
    """Key under which an entity name is matched: case, spacing and possessives folded.

    >>> normalise_name("  Plan  B's ")
    'plan b'
    """
    s = re.sub(r"['’]s\b", "", name.strip().lower())
    return re.sub(r"\s+", " ", s).strip(" .,:;!?\"'")


def query_terms(query: str) -> list[str]:
    """A query's words as entity keys (:func:`normalise_name`), in order, for entity lookup.

    >>> query_terms("Did Acme's team confirm plan-b?")
    ['did', 'acme', 'team', 'confirm', 'plan-b']
    """
    return [w for w in (normalise_name(w) for w in _QUERY_WORD.findall(query)) if w]


@lru_cache(maxsize=1)
def _english_stemmer():
    import snowballstemmer

    return snowballstemmer.stemmer("english")


@text_cache(maxsize=65536)
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
