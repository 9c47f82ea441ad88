"""Guards on the harness behind the published figures: evidence matching and the LoCoMo reader's
errors, on small hand-made inputs."""

from __future__ import annotations

import copy
import json

import pytest

from mnemis_integrations.errors import ConfigError
from mnemis_integrations.evaluation.cli import main
from mnemis_integrations.evaluation.datasets import load_locomo, parse_locomo_datetime
from mnemis_integrations.evaluation.metrics import budget_recall, budget_recalls

WORDS = len  # a token per character: the budget plays no part below


def _sample() -> dict:
    """One LoCoMo-shaped conversation: two sessions, the second opening with an image-only turn."""
    return {
        "sample_id": "hand-1",
        "conversation": {
            "speaker_a": "Ann",
            "speaker_b": "Bob",
            "session_1_date_time": "9:15 am on 3 March, 2024",
            "session_1": [
                {"speaker": "Ann", "dia_id": "D1:1", "text": "I booked the cabin by the lake."},
                {"speaker": "Bob", "dia_id": "D1:2", "text": "Which weekend?"},
            ],
            "session_2_date_time": "6:40 pm on 17 March, 2024",
            "session_2": [
                {"speaker": "Ann", "dia_id": "D2:1", "text": "", "blip_caption": "a photo of a wooden cabin"},
                {"speaker": "Bob", "dia_id": "D2:2", "text": "Looks cosy."},
            ],
        },
        "qa": [
            {
                "question": "What did Ann's cabin look like?",
                "answer": "wooden",
                "evidence": ["D2:1"],
                "category": 4,
            },
            {"question": "Where is the cabin?", "answer": "by the lake", "evidence": ["D1:1"], "category": 4},
        ],
    }


def _write(tmp_path, samples) -> str:
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps(samples), encoding="utf-8")
    return str(path)


# ---------------------------------------------------------------------------- evidence matching


def test_an_empty_evidence_text_is_not_found_in_an_empty_context():
    # "" is inside every string: an evidence turn with no text of its own would count as seen by a
    # reader given nothing at all.
    assert budget_recall([], [""], 256, WORDS) == 0.0
    assert budget_recalls([], ["  \n"], [256], WORDS) == {256: 0.0}
    assert budget_recall(["Bob: looks cosy."], ["", "looks cosy."], 256, WORDS) == 0.5


def test_an_image_only_locomo_turn_as_evidence_scores_nothing_for_a_system_that_retrieves_nothing(tmp_path):
    bench = load_locomo(_write(tmp_path, [_sample()]))
    conv = bench.conversations[0]
    question = conv.questions[0]
    evidence = [conv.turn_texts[e] for e in question.evidence_ids]
    assert question.evidence_ids == ("D2:1",)
    assert budget_recalls([], evidence, [256, 2048], WORDS) == {256: 0.0, 2048: 0.0}


# ---------------------------------------------------------------------------- LoCoMo reader errors


@pytest.mark.parametrize(
    "stamp",
    [
        "9:15 am on 31 June, 2024",
        "9:75 am on 3 March, 2024",
        "13:15 pm on 3 March, 2024",
        "0:15 am on 3 March, 2024",
    ],
)
def test_a_session_stamp_that_is_no_time_is_a_config_error(stamp):
    with pytest.raises(ConfigError, match="LoCoMo session date"):
        parse_locomo_datetime(stamp)


def _without(path: tuple, key: str) -> dict:
    sample = copy.deepcopy(_sample())
    node = sample
    for step in path:
        node = node[step]
    del node[key]
    return sample


@pytest.mark.parametrize(
    ("path", "key"),
    [
        ((), "sample_id"),
        ((), "conversation"),
        (("conversation",), "session_2_date_time"),
        (("conversation", "session_1", 1), "dia_id"),
        (("conversation", "session_1", 1), "speaker"),
        (("qa", 1), "question"),
        (("qa", 1), "category"),
    ],
)
def test_a_locomo_file_missing_a_field_is_a_config_error_naming_it(tmp_path, path, key):
    with pytest.raises(ConfigError, match=key):
        load_locomo(_write(tmp_path, [_without(path, key)]))


def test_a_locomo_file_that_is_not_a_list_of_samples_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError):
        load_locomo(_write(tmp_path, {"sample_id": "hand-1"}))
    broken = tmp_path / "broken.json"
    broken.write_text("[{", encoding="utf-8")
    with pytest.raises(ConfigError):
        load_locomo(broken)
    bad_category = _sample()
    bad_category["qa"][0]["category"] = "single-hop"
    with pytest.raises(ConfigError, match="category"):
        load_locomo(_write(tmp_path, [bad_category]))


def test_bench_locomo_reports_a_malformed_file_as_an_error_line_not_a_traceback(tmp_path, capsys):
    data = _write(tmp_path, [_without(("conversation",), "session_2_date_time")])
    code = main(
        ["bench", "locomo", "--data", data, "--systems", "bm25", "--out", str(tmp_path / "out"), "--no-plot"]
    )
    assert code == 2
    assert "session_2_date_time" in capsys.readouterr().err
