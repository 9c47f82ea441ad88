"""A small five-week conversation and its message helper, shared by the engine and maintenance tests,
and the names and things long synthetic chats are made of."""

from datetime import datetime, timedelta, timezone

T0 = datetime(2025, 3, 3, 9, 0, tzinfo=timezone.utc)


def msg(i, text, speaker="ann", days=0, minutes=0):
    return {
        "id": f"m{i}",
        "speaker": speaker,
        "text": text,
        "timestamp": T0 + timedelta(days=days, minutes=minutes),
    }


WEEKS = [
    msg(1, "The refund for order 42 timed out at the bank callback.", days=0),
    msg(2, "Refund timeouts again: the bank callback never arrived.", "bob", days=0, minutes=1),
    msg(3, "Refund retries for order 42 are queued at the bank.", days=1),
    msg(4, "The bank callback for refunds is fixed, retries pass.", "bob", days=1, minutes=1),
    msg(5, "We prioritise plan A for the hosting migration.", days=2),
    msg(6, "Hosting migration plan A needs two more servers.", "bob", days=2, minutes=1),
    msg(7, "Hosting migration plan A servers are ordered.", days=3),
    msg(8, "Plan A hosting servers arrive next week.", "bob", days=3, minutes=1),
    msg(9, "Pause plan A: we switched to plan B for the hosting migration instead.", days=20),
    msg(10, "Plan B hosting migration starts Monday instead.", "bob", days=20, minutes=1),
    msg(11, "Refund report for March: three bank callbacks still slow.", days=30),
    msg(12, "The vault code for the server room is zebra-7731.", "bob", days=31),
    msg(13, "Lunch at the noodle place on Friday works.", days=34),
]
LAST = WEEKS[-1]["timestamp"]

# Names and the things said of them, for long synthetic chats whose topics come back.
TOPICS = [
    ("Acme", ["pricing plan", "seat licence", "renewal quote", "discount tier"]),
    ("Nadia", ["hosting migration", "server rack", "backup window", "failover test"]),
    ("Orbit", ["release train", "beta build", "crash report", "store review"]),
    ("Lena", ["garden shed", "roof tiles", "paint colour", "fence posts"]),
    ("Bruno", ["marathon training", "tempo run", "knee physio", "race bib"]),
]
