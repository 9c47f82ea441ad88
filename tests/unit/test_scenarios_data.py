"""The scenario suite (``benchmarks/scenarios/``): its data validates, it is found from a checkout
and refused with a pointer to ``--suite`` without one, its protocol replays in time order, and
the current-state-first metric decides the hand-made cases as documented."""

from __future__ import annotations

import copy
import itertools
import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest

from mnemis_integrations.errors import MnemisError
from mnemis_integrations.evaluation import scenarios
from mnemis_integrations.evaluation.baselines import BaselineHit
from mnemis_integrations.evaluation.cli import main as bench_main
from mnemis_integrations.evaluation.datasets import Benchmark
from mnemis_integrations.evaluation.scenarios import (
    BUNDLED_DIR,
    EXTRA_METRICS,
    INDEPENDENT_DIR,
    QUESTION_CLASSES,
    ScenarioError,
    Supersession,
    bundled_suite_dir,
    current_state_first,
    current_state_first_rate,
    default_suite_paths,
    iter_ingest_plan,
    load_benchmark,
    load_demo_conversation,
    load_scenarios,
    messages_until,
    scenario_from_dict,
)

CHECKOUT = Path(__file__).resolve().parents[2]
SCENARIO_DIR = CHECKOUT / BUNDLED_DIR


@pytest.fixture(scope="module")
def suite():
    return load_scenarios()


@pytest.fixture
def raw() -> dict:
    """A small valid scenario as a JSON object, for the validation tests to break."""
    return {
        "id": "tiny",
        "language": "en",
        "title": "tiny",
        "messages": [
            {
                "id": "t-m1",
                "speaker": "A",
                "text": "We go with plan A.",
                "timestamp": "2025-01-01T09:00:00+00:00",
            },
            {"id": "t-m2", "speaker": "B", "text": "Lunch?", "timestamp": "2025-01-02T09:00:00+00:00"},
            {
                "id": "t-m3",
                "speaker": "A",
                "text": "Pause A, do B.",
                "timestamp": "2025-01-08T09:00:00+00:00",
            },
        ],
        "questions": [
            {
                "id": "t-q1",
                "question": "what replaced A?",
                "class": "evolution",
                "asked_at": "2025-01-09T09:00:00+00:00",
                "evidence": ["t-m1", "t-m3"],
                "current": ["t-m3"],
                "superseded": ["t-m1"],
                "answer": "B",
            }
        ],
    }


# ---------------------------------------------------------------- the bundled data


def test_bundled_suite_has_enough_conversations_in_both_languages(suite):
    langs = Counter(s.language for s in suite)
    assert len(suite) >= 6
    assert langs["zh"] >= 2
    assert langs["en"] >= 3


def test_every_conversation_has_40_to_90_messages_over_several_weeks(suite):
    for s in suite:
        assert 40 <= len(s.messages) <= 90, s.id
        assert (s.messages[-1].timestamp - s.messages[0].timestamp).days >= 21, s.id
        assert 2 <= len({m.speaker for m in s.messages}) <= 3, s.id


def test_every_conversation_has_ten_questions_of_all_three_classes(suite):
    for s in suite:
        assert len(s.questions) >= 10, s.id
        assert {q.category for q in s.questions} == set(QUESTION_CLASSES), s.id


def test_some_questions_are_asked_mid_conversation(suite):
    for s in suite:
        last = s.messages[-1].timestamp
        assert any(q.asked_at < last for q in s.questions), s.id


def test_evolution_questions_name_current_and_superseded_messages(suite):
    for s in suite:
        for q in s.questions:
            if q.category == "evolution":
                assert q.current and q.superseded, q.id
                assert set(q.current) | set(q.superseded) <= set(q.evidence), q.id


def test_evidence_exists_and_precedes_asked_at(suite):
    for s in suite:
        for q in s.questions:
            for mid in q.evidence + q.current + q.superseded:
                assert s.message(mid).timestamp <= q.asked_at, (q.id, mid)


def test_ids_are_unique_across_the_suite(suite):
    message_ids = [m.id for s in suite for m in s.messages]
    question_ids = [q.id for s in suite for q in s.questions]
    assert len(message_ids) == len(set(message_ids))
    assert len(question_ids) == len(set(question_ids))
    assert all(m.id.startswith(f"{s.id}-m") for s in suite for m in s.messages)


def test_chinese_scenarios_ask_in_chinese(suite):
    for s in suite:
        if s.language == "zh":
            assert all(any("\u4e00" <= ch <= "\u9fff" for ch in q.text) for q in s.questions), s.id


def test_loading_a_folder_or_one_file_matches_the_bundled_copy(suite):
    from_folder = load_scenarios(SCENARIO_DIR)
    assert [s.id for s in from_folder] == [s.id for s in suite]
    one = load_scenarios(SCENARIO_DIR / f"{suite[0].id}.json")
    assert one == [suite[0]]


def test_the_default_suite_loads_the_independent_files_with_the_bundled_ones():
    paths = default_suite_paths()
    assert [p.resolve() for p in paths] == [CHECKOUT / BUNDLED_DIR, CHECKOUT / INDEPENDENT_DIR]
    everything = load_scenarios(paths)  # ids stay unique across both folders
    assert len(everything) > len(load_scenarios())


def test_every_second_annotation_parses_against_its_conversation():
    # The blind second annotations (benchmarks/annotator_agreement.py) are read by the parser that reads
    # the first: ids that exist, old before new, each pair once. A sealed conversation has one too.
    from mnemis_integrations.evaluation.scenario_data import parse_supersessions

    folders = [*default_suite_paths(), CHECKOUT / "benchmarks" / "scenarios" / "sealed"]
    conversations = {s.id: s for s in load_scenarios(folders)}
    second = sorted((CHECKOUT / "benchmarks" / "annotations" / "supersessions_second").glob("*.json"))
    assert second
    for path in second:
        data = json.loads(path.read_text(encoding="utf-8"))
        assert data["id"] == path.stem and data["id"] in conversations, path.name
        order = {m.id: i for i, m in enumerate(conversations[data["id"]].messages)}
        assert parse_supersessions(data["supersessions"], order, source=path.name), path.name


def test_the_suites_are_found_from_another_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert [p.resolve() for p in default_suite_paths()] == [
        CHECKOUT / BUNDLED_DIR,
        CHECKOUT / INDEPENDENT_DIR,
    ]
    assert bundled_suite_dir().resolve() == SCENARIO_DIR


def test_without_a_checkout_the_suite_is_refused_naming_suite(tmp_path, monkeypatch, capsys):
    # An installed wheel outside a checkout: nothing under the working directory or the package's root.
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(scenarios, "_CHECKOUT", tmp_path)
    with pytest.raises(ScenarioError, match="--suite") as default:
        default_suite_paths()
    assert str(BUNDLED_DIR) in str(default.value) and str(INDEPENDENT_DIR) in str(default.value)
    with pytest.raises(ScenarioError, match="--suite"):
        load_scenarios()
    assert bench_main(["bench", "scenarios", "--systems", "bm25", "--out", str(tmp_path / "out")]) == 2
    assert "--suite" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_annotations_in_the_data_are_consistent_where_present():
    for s in load_scenarios(default_suite_paths()):
        for sup in s.supersessions or ():
            assert all(s.message(o).timestamp <= s.message(sup.new).timestamp for o in sup.old), s.id


# ---------------------------------------------------------------- validation


def test_a_valid_scenario_loads(raw):
    s = scenario_from_dict(raw)
    assert [m.id for m in s.messages] == ["t-m1", "t-m2", "t-m3"]
    assert s.questions[0].category == "evolution"


@pytest.mark.parametrize(
    "breakage, needle",
    [
        (lambda d: d["questions"][0]["evidence"].append("t-m9"), "does not exist"),
        (lambda d: d["questions"][0].update(asked_at="2025-01-05T09:00:00+00:00"), "after asked_at"),
        (lambda d: d["messages"].append(dict(d["messages"][0])), "duplicate message id"),
        (lambda d: d["questions"].append(copy.deepcopy(d["questions"][0])), "duplicate question id"),
        (lambda d: d["questions"][0].update(current=[]), "evolution question needs"),
        (lambda d: d["questions"][0].update(current=["t-m1"], superseded=["t-m3"]), "older than"),
        (lambda d: d["questions"][0].update(current=["t-m2"]), "also be in 'evidence'"),
        (
            lambda d: d["questions"][0].update({"class": "trivia"}),
            "valid classes: vague, relational, evolution",
        ),
        (lambda d: d.update(language="fr"), "valid languages"),
        (lambda d: d["messages"][0].update(timestamp="2025-01-01T09:00:00"), "no timezone"),
        (lambda d: d["messages"][0].update(timestamp="yesterday"), "not an ISO-8601 time"),
        (lambda d: d["messages"][1].update(text=""), "'text' must be a non-empty string"),
        (lambda d: d.update(id="no spaces please"), "must be 1-100"),
    ],
)
def test_invalid_scenarios_raise_a_clear_error(raw, breakage, needle):
    breakage(raw)
    with pytest.raises(ScenarioError, match=needle) as info:
        scenario_from_dict(raw)
    assert isinstance(info.value, MnemisError)


def _annotated(raw: dict) -> dict:
    raw["split"] = "holdout"
    for m, topic in zip(raw["messages"], ["plan", "lunch", "plan"], strict=True):
        m["topic"] = topic
    raw["supersessions"] = [{"new": "t-m3", "old": ["t-m1"], "kind": "reversal"}]
    return raw


def test_annotations_are_optional_and_read_when_present(raw):
    plain = scenario_from_dict(copy.deepcopy(raw))
    assert (plain.split, plain.supersessions, plain.topics) == ("tune", None, {})
    s = scenario_from_dict(_annotated(raw))
    assert s.split == "holdout"
    assert s.topics == {"t-m1": "plan", "t-m2": "lunch", "t-m3": "plan"}
    assert s.supersessions == (Supersession(new="t-m3", old=("t-m1",), kind="reversal"),)
    raw["supersessions"] = []
    assert scenario_from_dict(raw).supersessions == ()


@pytest.mark.parametrize(
    "breakage, needle",
    [
        (lambda d: d.update(split="train"), "valid splits: tune, holdout"),
        (lambda d: d["messages"][0].update(topic=""), "'topic' must be a non-empty string"),
        (lambda d: d["messages"][0].update(topic=3), "'topic' must be a non-empty string"),
        (lambda d: d.update(supersessions={"new": "t-m3"}), "'supersessions' must be a list"),
        (lambda d: d["supersessions"].append("t-m3"), "is not an object"),
        (lambda d: d["supersessions"][0].update(new="t-m9"), "'t-m9', which does not exist"),
        (lambda d: d["supersessions"][0].update(old=["t-m1", "t-m8"]), "'t-m8', which does not exist"),
        (lambda d: d["supersessions"][0].update(old=[]), "'old' is empty"),
        (lambda d: d["supersessions"][0].update(old="t-m1"), "must be a list of message ids"),
        (lambda d: d["supersessions"][0].update(old=["t-m1", "t-m1"]), "repeats an id"),
        (lambda d: d["supersessions"][0].update(new="t-m1", old=["t-m3"]), "does not come before"),
        (lambda d: d["supersessions"][0].update(old=["t-m3"]), "does not come before"),
        (lambda d: d["supersessions"][0].update(kind="reversed"), "valid kinds: reversal, correction"),
        (lambda d: d["supersessions"][0].pop("kind"), "kind None is unknown"),
        (lambda d: d["supersessions"].append(dict(d["supersessions"][0])), "duplicate supersession"),
    ],
)
def test_invalid_annotations_raise_a_clear_error(raw, breakage, needle):
    raw = _annotated(raw)
    breakage(raw)
    with pytest.raises(ScenarioError, match=needle):
        scenario_from_dict(raw)


def test_an_old_message_at_the_same_time_but_earlier_in_the_file_comes_before(raw):
    raw = _annotated(raw)
    raw["messages"][2]["timestamp"] = raw["messages"][1]["timestamp"]
    raw["questions"] = []
    raw["supersessions"] = [{"new": "t-m3", "old": ["t-m2"], "kind": "correction"}]
    assert scenario_from_dict(raw).supersessions[0].old == ("t-m2",)
    raw["supersessions"] = [{"new": "t-m2", "old": ["t-m3"], "kind": "correction"}]
    with pytest.raises(ScenarioError, match="does not come before"):
        scenario_from_dict(raw)


def test_several_paths_load_together_and_bundled_is_none(tmp_path, raw):
    (tmp_path / "tiny.json").write_text(json.dumps(_annotated(raw)), encoding="utf-8")
    both = load_scenarios([None, tmp_path / "tiny.json"])
    assert [s.id for s in both] == sorted([s.id for s in load_scenarios()] + ["tiny"])
    assert next(s for s in both if s.id == "tiny").source == "tiny.json"
    with pytest.raises(ScenarioError, match="scenario id is used by two files"):
        load_scenarios([tmp_path, tmp_path / "tiny.json"])
    with pytest.raises(ScenarioError, match="no scenario paths"):
        load_scenarios([])


def test_an_id_reused_by_two_files_is_refused(tmp_path, raw):
    (tmp_path / "a.json").write_text(json.dumps(raw), encoding="utf-8")
    other = copy.deepcopy(raw)
    other["id"] = "tiny2"
    other["questions"][0]["id"] = "t2-q1"
    (tmp_path / "b.json").write_text(json.dumps(other), encoding="utf-8")
    with pytest.raises(ScenarioError, match="message id is used by two scenarios"):
        load_scenarios(tmp_path)


def test_an_empty_folder_or_missing_path_is_refused(tmp_path):
    with pytest.raises(ScenarioError, match="no scenario files"):
        load_scenarios(tmp_path)
    with pytest.raises(ScenarioError, match="no such file"):
        load_scenarios(tmp_path / "nope")


# ---------------------------------------------------------------- the ask-at-time protocol


def test_ingest_plan_yields_every_message_once_in_time_order(suite):
    for s in suite:
        fed = [m for step in iter_ingest_plan(s) for m in step.messages]
        assert [m.id for m in fed] == [m.id for m in s.messages]
        assert all(a.timestamp <= b.timestamp for a, b in itertools.pairwise(fed))


def test_ingest_plan_asks_each_question_once_after_its_evidence(suite):
    for s in suite:
        held: list = []
        asked: list[str] = []
        last_asked = None
        for step in iter_ingest_plan(s):
            held.extend(step.messages)
            ids = {m.id for m in held}
            for q in step.questions:
                assert set(q.evidence) <= ids, q.id
                # The memory holds exactly the messages up to asked_at, no later one.
                assert [m.id for m in held] == [m.id for m in messages_until(s, q.asked_at)], q.id
                assert last_asked is None or q.asked_at >= last_asked
                last_asked = q.asked_at
                asked.append(q.id)
        assert sorted(asked) == sorted(q.id for q in s.questions)


def test_messages_until_takes_iso_strings_and_refuses_naive_times(suite):
    s = suite[0]
    t = s.messages[4].timestamp
    assert messages_until(s, t.isoformat()) == messages_until(s, t) == s.messages[:5]
    with pytest.raises(ScenarioError, match="no timezone"):
        messages_until(s, t.replace(tzinfo=None))


# ---------------------------------------------------------------- current_state_first


@dataclass(frozen=True)
class _Hit:
    source_ids: tuple[str, ...]


def _hits(*groups: str) -> list[_Hit]:
    return [_Hit(tuple(g.split())) for g in groups]


def test_current_ranked_above_superseded_is_true():
    assert current_state_first(_hits("x", "new", "old"), ["new"], ["old"]) is True


def test_current_alone_is_true():
    assert current_state_first(_hits("x", "new"), ["new"], ["old"]) is True


def test_superseded_ranked_above_current_is_false():
    assert current_state_first(_hits("old", "x", "new"), ["new"], ["old"]) is False


def test_superseded_without_current_is_false():
    assert current_state_first(_hits("x", "old"), ["new"], ["old"]) is False


def test_neither_state_retrieved_is_none():
    assert current_state_first(_hits("x", "y"), ["new"], ["old"]) is None
    assert current_state_first([], ["new"], ["old"]) is None


def test_both_states_in_the_same_hit_count_as_current_first():
    assert current_state_first(_hits("x", "old new"), ["new"], ["old"]) is True


def test_any_of_several_ids_counts_and_k_truncates():
    hits = _hits("old2", "new1", "old1")
    assert current_state_first(hits, ["new1", "new2"], ["old1", "old2"]) is False
    assert current_state_first(_hits("x", "new2", "old1"), ["new1", "new2"], ["old1", "old2"]) is True
    assert current_state_first(_hits("x", "y", "new"), ["new"], ["old"], k=2) is None


def test_mappings_are_accepted_as_hits():
    assert current_state_first([{"source_ids": ["new"]}, {"source_ids": ["old"]}], ["new"], ["old"]) is True


def test_rate_ignores_undecided_outcomes():
    assert current_state_first_rate([True, None, False, True]) == pytest.approx(2 / 3)
    assert current_state_first_rate([None, None]) is None


# ---------------------------------------------------------------- the benchmark view


def test_ask_at_time_benchmark_holds_only_messages_up_to_each_question(suite):
    bench = load_benchmark()
    assert isinstance(bench, Benchmark)
    assert bench.n_questions == sum(len(s.questions) for s in suite)
    by_id = {s.id: s for s in suite}
    for conv in bench.conversations:
        scenario = by_id[conv.id.split("@")[0]]
        held = {m["id"] for m in conv.messages}
        for q in conv.questions:
            assert q.category in QUESTION_CLASSES
            assert held == {m.id for m in messages_until(scenario, q.extra["asked_at"])}
            assert set(q.evidence_ids) <= held
        assert set(conv.turn_texts) == held


def test_full_benchmark_leaves_out_the_state_metric_for_early_questions(suite):
    bench = load_benchmark(protocol="full")
    assert [c.id for c in bench.conversations] == [s.id for s in suite]
    early = [q for c in bench.conversations for q in c.questions if not q.extra["state_applies"]]
    assert early
    metric = EXTRA_METRICS["current_state_first"]
    q = next(q for q in early if q.extra["current"])
    hits = [_Hit(q.extra["current"])]
    assert metric(q, hits, bench.conversations[0]) is None


def test_state_metric_scores_evolution_questions(suite):
    bench = load_benchmark()
    metric = EXTRA_METRICS["current_state_first"]
    conv = bench.conversations[0]
    q = next(q for c in bench.conversations for q in c.questions if q.category == "evolution")
    assert metric(q, [_Hit(q.extra["current"]), _Hit(q.extra["superseded"])], conv) == 1.0
    assert metric(q, [_Hit(q.extra["superseded"]), _Hit(q.extra["current"])], conv) == 0.0
    assert metric(q, [_Hit(("unrelated",))], conv) is None


def test_tie_metric_reads_the_first_five_scores(suite):
    bench = load_benchmark()
    metric = EXTRA_METRICS["tied_top5"]
    conv = bench.conversations[0]
    q = conv.questions[0]

    def hits(*scores):
        return [BaselineHit(f"t{i}", (f"m{i}",), s) for i, s in enumerate(scores)]

    assert metric(q, hits(0.9, 0.7, 0.7, 0.5), conv) == 1.0  # two hits read alike
    assert metric(q, hits(0.9, 0.7, 0.69, 0.5), conv) == 0.0
    assert metric(q, hits(0.9, 0.8, 0.7, 0.6, 0.5, 0.5), conv) == 0.0  # past the first five
    equal = EXTRA_METRICS["equal_top5"]
    assert equal(q, hits(0.9, 0.7, 0.7, 0.5), conv) == 1.0
    assert metric(q, hits(0.9, 0.7, 0.6999, 0.5), conv) == 1.0  # near enough to read alike
    assert equal(q, hits(0.9, 0.7, 0.6999, 0.5), conv) == 0.0  # but ordered by score


def test_incremental_benchmark_is_one_streamed_conversation_per_scenario(suite):
    bench = load_benchmark(protocol="incremental")
    assert bench.stream
    assert [c.id for c in bench.conversations] == [s.id for s in suite]
    assert all(
        q.extra["state_applies"] and q.extra["split"] == "tune"
        for c in bench.conversations
        for q in c.questions
    )
    assert not load_benchmark(protocol="full").stream


def test_unknown_protocol_lists_the_valid_ones():
    with pytest.raises(ScenarioError, match="incremental, ask_at_time, full"):
        load_benchmark(protocol="batch")


# ---------------------------------------------------------------- the demo conversation


def test_demo_conversation_is_short_bilingual_and_has_queries():
    demo = load_demo_conversation()
    assert 25 <= len(demo.messages) <= 40
    assert 3 <= len(demo.queries) <= 4
    texts = [m.text for m in demo.messages]
    assert any(any("\u4e00" <= ch <= "\u9fff" for ch in t) for t in texts)
    assert any(t.isascii() for t in texts)
    assert (demo.messages[-1].timestamp - demo.messages[0].timestamp).days >= 10
