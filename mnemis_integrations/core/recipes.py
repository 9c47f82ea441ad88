"""Named, frozen configurations. Copy one to change it; never mutate."""

from __future__ import annotations

from .config import MemoryConfig

__all__ = ["DEFAULT", "LARGE_GRAPH", "RELATION_FIRST", "SEMANTIC_ONLY"]

# The validated default: both paths, design alpha rule, expansion and top-up on.
DEFAULT = MemoryConfig()

# Path 1 only: the relation path is never consulted (a pure vector+lexical baseline of our own graph).
SEMANTIC_ONLY = DEFAULT.with_(fusion={"alpha_rule": "fixed", "fixed_alpha": 1.0})

# Entity-heavy workloads: the design alpha applied to the relation side, one more hop.
RELATION_FIRST = DEFAULT.with_(fusion={"alpha_rule": "relation_favoured"}, relation={"max_hops": 3})

# Big graphs: shorter traversals over the high-value edges only.
LARGE_GRAPH = DEFAULT.with_(relation={"max_hops": 2, "edge_kinds": ("mentions", "updates", "belongs_to")})
