"""What states a change: change cues ("instead", "push back", "改成") and the values a message
states (amounts, counts, times, dates, weekdays, months).

The builder's update judge (``builder/updates.py``) reads both to decide which earlier message a
new one replaces; search reads them to put a newer hit before an older one of the same thing.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable

from .text import LATIN_WORD_CHAR, MONTHS, WEEKDAYS, has_cjk, jieba_words, text_cache

__all__ = [
    "asks",
    "change_values",
    "has_change_cue",
    "opens_change_gate",
    "states_decision",
    "stated_values",
    "states_change",
]

# Words that announce that a decision or fact replaces an earlier one. Kept strict: a loose
# cue ("now") would mark ordinary follow-ups as replacements and demote true facts. The second
# line (finalising, rescheduling, refusing) was added for the scenario suite's reversals, e.g.
# "Renewal update: ...", "My manager approved it: a two-year renewal", "v1.3 推迟到 9 月 25 号",
# "张萌拒了我们的offer", "定价再调一次…降到每席位59元"; "Plan A looks good" and "see you Friday"
# still carry no cue. The third group is how people correct a figure or move a value in chat
# ("correction: ... 88 not 96", "went up to £160", "bump your travel to $2,200", "pushed to Sat 21st",
# "New date: Oct 14", "改方案"), and people who drop out ("去不了"): read off the tune split's missed
# updates only, so that the held-out conversations still test them. Every verb takes its inflections
# ("Cancelling the U-Haul" was missed), and a word joined by a hyphen is a compound, not a cue
# ("Mei's drop-waist dress is done" linked a costume note as an update).
# To ``\b`` a Chinese character is a word character, yet Chinese puts no space around an English
# word: "会议cancel了" holds the cue "cancel". Chinese cues take their traditional forms too
# ("推遲", "換成").
_START, _END = rf"(?<!{LATIN_WORD_CHAR})", rf"(?!{LATIN_WORD_CHAR})"
_CHANGE_CUES = re.compile(
    _START
    + r"(instead|no longer|not anymore|switch(?:e[ds]|ing)? (?:to|over)|chang(?:e[ds]|ing) (?:it |that )?to|"
    r"replac(?:e[ds]?|ing)|cancel(?:l?ed|l?ing|s)?|scrap(?:ped|ping|s)?|drop(?:ped|ping|s)?|"
    r"paus(?:e[ds]?|ing)|postpon(?:e[ds]?|ing)|revers(?:e[ds]?|ing)|"
    r"overturn(?:ed|ing|s)?|call(?:ed|ing|s)? off|mov(?:e[ds]?|ing) to|go(?:ing)? with|"
    r"decid(?:ed|ing|es) against|rather than|won'?t use|"
    r"update[ds]?(?=:)|updated?|final|approved?|turn(?:ed|ing|s)? (?:it )?down|"
    r"declin(?:ed|ing|es)|reject(?:ed|ing|s)|fell through|push(?:ed|ing|es)? back|"
    r"delay(?:ed|ing|s)? to|reschedul(?:e[ds]?|ing)|"
    r"can'?t approve|lower(?:ed|ing|s)? (?:it |the price )?to|rais(?:e[ds]?|ing) (?:it |the price )?to|"
    r"adjust(?:ed|ing)?|correct(?:ion|ed)|wrong (?:number|figure|date|day|time|price|amount)|my mistake|"
    r"(?:went|gone|goes|is|are) (?:up|down) to|bump(?:ed|ing|s)? (?:\w+ ){0,2}to|"
    r"push(?:ed|ing|es)? (?:it |out )?to|"
    r"changed (?:my|our) mind|new (?:plan|date|time|venue|total|price|budget|deadline)|shel(?:ved?|ving)|"
    r"can'?t make it|pull(?:ed|ing|s)? out|back(?:ed|ing|s)? out)" + _END + r"(?!-)|"
    r"改成|改[为為]|改用|[换換]成|不再|取消|[暂暫]停|放[弃棄]|推翻|替[换換]|改回|[决決]定用|推[迟遲]|延期|"
    r"改到|提前到|最[终終]|最[后後]定|定下[来來]|拒了|拒[绝絕]|[黄黃]了|[没沒][谈談]成|不做了|不要了|"
    r"再[调調]|[调調]整|[调調]到|降到|[涨漲]到|改方案|改一下|[变變]成|不去了|去不了|[来來]不了",
    re.IGNORECASE,
)


@text_cache(maxsize=4096)
def has_change_cue(text: str) -> bool:
    """True when the text announces a change of plan or fact.

    >>> (
    ...     has_change_cue("Let's pause plan A and do B instead."),
    ...     has_change_cue("定价改成按席位收费"),
    ...     has_change_cue("Plan A looks good"),
    ... )
    (True, True, False)
    >>> (
    ...     has_change_cue("Renewal update: 15% needs two years"),
    ...     has_change_cue("v1.3 推迟到 9 月 25 号"),
    ...     has_change_cue("see you Friday"),
    ... )
    (True, True, False)
    >>> has_change_cue("Cancelling the U-Haul"), has_change_cue("the drop-waist dress is done")
    (True, False)
    >>> has_change_cue("周会cancel了"), has_change_cue("發布會推遲了"), has_change_cue("Dropbox的会员")
    (True, True, False)
    >>> has_change_cue("最终用户都说好用"), has_change_cue("方案最终定了B")
    (False, True)
    >>> (
    ...     has_change_cue("correction: 8 samples failed, so 88 not 96"),
    ...     has_change_cue("Flights went up to £160"),
    ...     has_change_cue("小陈要值班，去不了"),
    ...     has_change_cue("the price went up"),
    ... )
    (True, True, True, False)
    """
    return _names_cue(_CHANGE_CUES, text)


def _names_cue(cues: re.Pattern[str], text: str, skip: Callable[[re.Match[str]], bool] | None = None) -> bool:
    """Does ``text`` hold one of ``cues`` (a match ``skip`` does not refuse)? A Chinese cue counts as a
    word of its own, not inside a longer one: "最终" (in the end) is no cue in "最终用户" (end users), nor
    "调到" in "空调到了" (the air conditioner came)."""
    bounds: set[int] | None = None
    for m in cues.finditer(text):
        if skip is not None and skip(m):
            continue
        if not has_cjk(m.group(0)):
            return True
        # taken once per text: a text repeating a cue inside longer words would otherwise pay a
        # walk over all its words for each repetition
        bounds = _word_bounds(text) if bounds is None else bounds
        if m.start() in bounds and m.end() in bounds:
            return True
    return False


# Words that may settle or drop what was planned, too loosely to weigh as a change cue: a decision
# ("Kendal it is.", "Tuesdays then.", "那就绿野吧", "就定青禾"), a return ("Back to Bubbles then",
# "还是种吧"), someone or something out ("Tom's out.", "Manchester is off", "打不了了", "不来了", "先不装"),
# a correction ("I got Ruby's allergy wrong", "看错了", "记岔了"), a change of heart ("changed her mind").
# Read off the change gate's misses on the tune split's annotated updates (sixty-third round); as cues
# of the judge's score they added as many wrong links as right ones and cost recall at 256 tokens, so
# they only open the gate: a message naming one is judged against its neighbours, and its pairs must
# score on what they share (words, values, vectors), not on the word.
_GATE_CUES = re.compile(
    _START + r"(?:after all|withdr[ae]wn|withdraw(?:s|ing|al)?|change of (?:plans?|heart)|"
    r"changes (?:it|things|everything)|chang(?:ed|es|ing) (?:my|our|his|her|their) minds?|decision(?=:)|"
    r"bow(?:ed|ing|s)? out|no need for|won'?t need|misread|got (?:\S+ ){0,3}wrong|(?:was|were) wrong|"
    r"(?:labell?ed|written|listed) wrong)" + _END + r"|(?:'s|’s|'m|’m|'re|’re| is| are| am) (?:out|off)"
    r"(?!\s+(?:of|to|now|on|in|at|for|and|with|the|a|until|till|from)\b)(?![A-Za-z0-9_-])"
    r"|(?:^|(?<=[.!?] ))back to"
    + _END
    + r"|(?<=\w) (?P<it_is>it is)(?: then)?(?=\s*[.!,;:]|\s*$|\s+then\b|\s+[^\w\s])"
    r"|(?<=\S) (?P<then>then)(?=\s*[.!?,;]|\s*$|\s+[^\w\s'’])"
    r"|那就(?!好|行|这样|對了|对了|是)|那[还還]是|[还還]是(?=[^，。！？,.!?\s]{1,8}吧)"
    r"|(?<!重新)(?<!我)(?<!重)(?<!新)(?<!再)算了(?!一下|下|算|个|個|半天|一晚|一宿|账|賬|钱|錢|一遍|遍)"
    r"|不(?:来|來|种|種|打|买|買|订|訂|办|辦|弄|搞|印|干|幹|聚|装|裝|定|收|用|上|请|請|开|開|铺|鋪|搬|顺延|順延|"
    r"考虑|考慮|租|卖|賣|修|拍|走|回|参加|參加|报|報|比|演|唱|摆|擺|住|换|換|改|瞒|瞞|去|做|要|发|發|送)了"
    r"|先不|[当當做办辦打干幹回赶趕演踢来來参參]不了|回不去|去不成|[做办辦]不成|退出|退了|退掉"
    r"|[换換]回|那[换換]|又[换換]|改[订訂]|挪到|挪了|往[后後]挪|移到"
    r"|[看说說记記写寫搞弄听聽算][错錯]了|[记記]岔|不[对對](?!劲|勁)|就定|就[这這]么定|就這麼定"
    r"|免了|不用(?=[^，。！？,.!?]{0,6}了)",
    re.IGNORECASE | re.MULTILINE,
)
# "it is" after "what / how / as ...": a clause, not a choice ("I know what day it is"); "then" after
# these: time or leave-taking ("see you then", "ok then", "and then"), not a choice.
_NOT_A_CHOICE_BEFORE_IT_IS = re.compile(
    r"\b(?:what|how|as|where|when|who|which|whatever|whoever|if|whether|so|that|because|is|was|know)\b[^.!?]{0,25}$",
    re.IGNORECASE,
)
_NOT_A_CHOICE_BEFORE_THEN = re.compile(
    r"(?:\b(?:see you|you|ok|okay|and|until|till|by|since|right|well|fine|bye|good|what|so|even|just|only|"
    r"back|now|but|or|yes|yeah|great|cool|thanks|sorted|done|deal|alright|all right|why|how|who)"
    r"|[.!?,]|^)\s*$",
    re.IGNORECASE,
)


@text_cache(maxsize=4096)
def opens_change_gate(text: str) -> bool:
    """True when the text may settle, drop or correct what was planned, or states a change outright
    (:func:`has_change_cue`): the update judge's gate then lets it be judged against its neighbours.

    >>> opens_change_gate("Kendal it is."), opens_change_gate("Tom's out, sadly.")
    (True, True)
    >>> opens_change_gate("那就绿野吧"), opens_change_gate("晚上算了一下")
    (True, False)
    >>> opens_change_gate("I know what day it is."), opens_change_gate("see you then")
    (False, False)
    """
    return has_change_cue(text) or _names_cue(_GATE_CUES, text, skip=_not_a_choice)


def _not_a_choice(m: re.Match[str]) -> bool:
    before = m.string[: m.start()]
    return bool(
        (m.group("it_is") and _NOT_A_CHOICE_BEFORE_IT_IS.search(before))
        or (m.group("then") and _NOT_A_CHOICE_BEFORE_THEN.search(before))
    )


def _word_bounds(text: str) -> set[int]:
    """Where ``text``'s jieba words begin and end (its dictionary's only: its guesses for unknown
    words join a cue to the word before)."""
    bounds, at = {0}, 0
    for word in jieba_words(text, hmm=False):
        at += len(word)
        bounds.add(at)
    return bounds


_SENTENCES = re.compile(r"[^.!?。！？\n]+[.!?。！？]*")
# A decision settles what was open: the newest one on a matter is its current state, though it
# names no change ("Nordwind confirmed quote v2", "合同签了"). Search reads it, the update judge does not:
# a decision may confirm the earlier fact rather than replace it.
_DECISION = re.compile(
    _START + r"(?:confirm(?:ed|s)?|signed|agreed|decided|settled|finali[sz]ed|locked in|booked|went with|"
    r"chose|picked)"
    + _END
    + r"|[确確][认認]|[签簽]了|[签簽][约約]|[签簽]好|定了|定下|[决決]定|[选選]了|敲定",
    re.IGNORECASE,
)


def states_decision(text: str) -> bool:
    """True when the text states a decision.

    >>> states_decision("Nordwind confirmed quote v2. Contract signed today!"), states_decision("合同签了")
    (True, True)
    >>> states_decision("Can they confirm by Friday?"), states_decision("Sent the quote")
    (False, False)
    """
    return any(not asks(s) and _DECISION.search(s) for s in _SENTENCES.findall(text))


def names_decision(text: str) -> bool:
    """True when the text names a decision, a question too ("Which plan did they confirm in the end?").

    >>> names_decision("Which plan did Nordwind confirm in the end?"), names_decision("最后是哪天？")
    (True, False)
    """
    return bool(_DECISION.search(text))


def asks(text: str) -> bool:
    """A question states no new value ("can we do Oct 6?"), though it may propose one."""
    return text.rstrip().endswith(("?", "？", "吗", "呢"))


# A value is what an update changes: an amount, a count, a time, a date, a weekday or month.
_NUMBER = re.compile(r"[$£€¥￥]?\d+(?:[.,:]\d+)?[%％kK万元号月]?")
# "march" and "may" are also ordinary words: only their capitalised forms count (``_DAY_SHORT``).
_DAY_NAMES = WEEKDAYS + tuple(m for m in MONTHS if m not in ("march", "may"))
# Whole names in any case; "may", "march" and the short forms only capitalised ("Tue 16th", "in May"),
# since "may", "sat", "wed" or "fri(end)" are also ordinary words.
_DAY = re.compile(r"\b(?:" + "|".join(_DAY_NAMES) + r")\b", re.IGNORECASE)
_DAY_SHORT = re.compile(
    r"\b(?:Mon|Tue|Tues|Wed|Thu|Thur|Thurs|Fri|Sat|Sun|Jan|Feb|Mar|March|Apr|May|Jun|Jul|Aug|Sep|Sept|"
    r"Oct|Nov|Dec)\b\.?"
)


@text_cache(maxsize=4096)  # a candidate is met again by the messages that follow it
def stated_values(text: str) -> frozenset[str]:
    """The values a message states, lower-cased (see :func:`change_values`)."""
    days = (d.lower().rstrip(".")[:3] for d in _DAY.findall(text) + _DAY_SHORT.findall(text))
    # A Chinese keyboard types full-width digits and signs: "５万" and "１５％" are 5万 and 15%. Only the
    # values are folded, not the text: "230，320" is two numbers, "2,200" one.
    values = (unicodedata.normalize("NFKC", v).lower() for v in _NUMBER.findall(text))
    return frozenset([*values, *days])


def states_number(text: str) -> bool:
    """Does the text state a number (an amount, a count, a time or a date with digits; not a weekday)?

    >>> states_number("that makes 21"), states_number("现在一共５个"), states_number("Tuesday then")
    (True, True, False)
    """
    return _NUMBER.search(text) is not None


def change_values(text: str) -> set[str]:
    """The values a message states, lower-cased.

    >>> sorted(change_values("Moved to Thursday, 3pm: $350 for 45 people; my friend may come"))
    ['$350', '3', '45', 'thu']
    >>> change_values("Tue 16th") == change_values("tuesday 16th")
    True
    >>> sorted(change_values("开工改成22号"))
    ['22号']
    >>> change_values("预算５万，１５％") == change_values("预算5万，15%") == {"5万", "15%"}
    True
    """
    return set(stated_values(text))


def states_change(new_text: str, old_text: str) -> bool:
    """The newer text announces a change, or states other values than the older one where both
    state some.

    >>> states_change("with the plus-ones we're at 52", "I count 40 incl. us")
    True
    >>> states_change("see you at 7", "see you at 7 then"), states_change("sounds good", "we pay $40")
    (False, False)
    """
    mine, theirs = stated_values(new_text), stated_values(old_text)
    return has_change_cue(new_text) or bool(mine and theirs and mine - theirs)
