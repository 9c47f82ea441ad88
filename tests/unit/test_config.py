"""``MemoryConfig.with_`` validates what it is given, as building a config does."""

from __future__ import annotations

import pytest

from mnemis_integrations.core.config import MemoryConfig
from mnemis_integrations.core.recipes import DEFAULT


@pytest.mark.parametrize(
    "sections, complaint",
    [
        ({"fusoin": {"alpha_rule": "fixed"}}, "unknown config section"),
        ({"fusion": {"alpha_rul": "fixed"}}, "alpha_rul"),
        ({"fusion": {"newer_first": 1.5}}, "newer_first"),
        ({"fusion": {"alpha_rule": "loudest"}}, "alpha_rule"),
        ({"relation": {"max_hops": 4}}, "max_hops"),  # SPEC: the traversal is bounded to 2-3 hops
    ],
)
def test_a_misspelt_or_out_of_range_setting_is_refused_not_ignored(sections, complaint):
    with pytest.raises(ValueError, match=complaint):
        DEFAULT.with_(**sections)


def test_a_valid_update_changes_that_setting_only():
    cfg = DEFAULT.with_(fusion={"newer_first": 0.0}, relation={"max_hops": 3})
    assert cfg.fusion.newer_first == 0.0 and cfg.relation.max_hops == 3
    assert cfg.fusion.model_copy(update={"newer_first": DEFAULT.fusion.newer_first}) == DEFAULT.fusion
    assert cfg.semantic == DEFAULT.semantic and isinstance(cfg, MemoryConfig)
