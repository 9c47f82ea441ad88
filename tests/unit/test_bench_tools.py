"""The benchmark helpers that pick settings: leave-one-conversation-out and the update judge's fit."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from bench_modules import bench_module

from mnemis_integrations.evaluation.baselines import EmbeddingCache

ROOT = Path(__file__).resolve().parents[2]


def _module(name: str):
    return bench_module(name)


def _run(folder: Path, recall: dict[str, float]) -> str:
    """A bench-shaped per_question.jsonl: one question per conversation at the given R@512, plus
    an adversarial one that must be left out."""
    folder.mkdir(parents=True)
    rows = []
    for conv, r in recall.items():
        for cat, value in ((1, r), (5, 1.0 - r)):
            rows.append(
                {
                    "system": "mnemis",
                    "question_id": f"{conv}:q{cat}",
                    "conversation": conv,
                    "category": cat,
                    "scores": {f"budget_recall@{b}": value for b in (256, 512, 1024, 2048)},
                }
            )
    (folder / "per_question.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(folder)


def test_leave_one_out_picks_on_the_other_conversations_and_reports_the_held_out_one(tmp_path):
    loo = _module("locomo_loo")
    # "a" is better on c1 and c2, "b" far better on c3: with c3 in the tuning pair "b" is picked
    # (folds c1, c2); holding c3 out, "a" is picked and measured where it is worst.
    a = _run(tmp_path / "a", {"c1": 0.9, "c2": 0.8, "c3": 0.1})
    b = _run(tmp_path / "b", {"c1": 0.5, "c2": 0.4, "c3": 1.0})
    runs = {"a": loo.load(a, "mnemis"), "b": loo.load(b, "mnemis")}
    assert all(q["category"] != 5 for rows in runs["a"].values() for q in rows)
    figures, picks = loo.leave_one_out(runs, "budget_recall@512")
    assert picks == [("c1", "b"), ("c2", "b"), ("c3", "a")]
    assert figures["R@512"] == np.mean([0.5, 0.4, 0.1])  # each fold measured with its pick
    assert figures["MH@512"] == figures["R@512"]  # every kept question is multi-hop here


def test_the_update_judge_fit_separates_and_the_best_candidate_decides(tmp_path):
    fit = _module("fit_update_judge")
    rng = np.random.default_rng(0)
    x = rng.normal(size=(400, 3))
    y = (x[:, 0] + 0.5 * x[:, 1] > 0.8).astype(float)
    w, b = fit.fit(x, y, l2=0.1)
    assert w[0] > w[1] > abs(w[2]) and b < 0  # raw-feature weights, the separating direction first
    rows = [
        {"scenario": "s", "i": 1, "y": 1, "gate": True},
        {"scenario": "s", "i": 1, "y": 0, "gate": True},
        {"scenario": "s", "i": 2, "y": 0, "gate": True},
        {"scenario": "s", "i": 3, "y": 1, "gate": False},
    ]
    # message 1: its best candidate is the true one; message 2: a false link above the threshold;
    # message 3: its only true candidate fails the gate, so it counts as wanted and missed.
    assert fit.precision_recall(rows, np.array([2.0, 1.0, 0.5, 9.0]), 0.0) == (1, 2, 2)
    assert fit.precision_recall(rows, np.array([2.0, 1.0, 0.5, 9.0]), 1.5) == (1, 1, 2)


def test_the_judge_misses_name_wrong_links_and_missed_updates(monkeypatch, capsys):
    from types import SimpleNamespace

    fit = _module("fit_update_judge")
    # the shipped judge reduced to its first feature, so each row's score is its first value
    monkeypatch.setattr(fit, "WEIGHTS", {k: float(k == fit.FEATURES[0]) for k in fit.FEATURES})
    monkeypatch.setattr(fit, "BIAS", 0.0)
    msgs = [SimpleNamespace(id=f"m{i}", text=f"text {i}") for i in range(4)]
    scen = SimpleNamespace(
        messages=msgs,
        supersessions=[SimpleNamespace(new="m2", old=("m0",)), SimpleNamespace(new="m3", old=("m1",))],
    )
    pad = [0.0] * (len(fit.FEATURES) - 1)

    def row(i, key, score, gate=True):
        return {"i": i, "key": key, "x": [score, *pad], "gate": gate}

    rows = [
        row(1, "m0", 1.0),  # linked, replaces nothing
        row(2, "m0", -5.0),  # the replaced one, under the threshold ...
        row(2, "m1", 0.5),  # ... while another is linked
        row(3, "m1", 2.0),  # right
        row(3, "m0", 9.0, gate=False),  # never scored: fails the gate
    ]
    fit.print_misses(scen, rows, -1.0)
    out = capsys.readouterr().out
    assert out.count("WRONG") == 2 and "WRONG m1 (+1.00)" in out and "WRONG m2 (+0.50)" in out
    assert out.count("MISSED") == 1 and "MISSED m2 (best +0.50; replaced one's place: [1])" in out
    assert "replaces m0: text 0" in out and "m3" not in out


def test_cross_validation_judges_each_conversation_with_weights_fitted_on_the_others(monkeypatch, capsys):
    fit = _module("fit_update_judge")
    rng = np.random.default_rng(1)
    rows = []
    for s in ("a", "b", "c"):
        for i in range(40):
            x = rng.normal(size=2)
            for key, shift in (("right", 1.5), ("other", -1.5)):
                rows.append({"scenario": s, "i": i, "key": key, "y": int(key == "right"), "gate": True,
                             "x": [x[0] + shift, x[1]]})  # fmt: skip
    fitted_on: list[int] = []
    real_fit = fit.fit

    def spy(x, y, l2):
        fitted_on.append(len(x))
        return real_fit(x, y, l2)

    monkeypatch.setattr(fit, "fit", spy)
    fit.print_cross_validation(rows, 1.0)
    lines = capsys.readouterr().out.splitlines()
    assert fitted_on == [160, 160, 160]  # three folds, each on the other two conversations' 80 messages
    assert len(lines) == len(fit.THRESHOLDS) and all(line.startswith("cv ") for line in lines)
    # each message's right candidate outscores its other one: every link made is right, and a higher
    # threshold only makes fewer of them
    assert all("precision 1.000" in line for line in lines)
    links = [int(line.split("(")[1].split("/")[0]) for line in lines]
    assert links == sorted(links, reverse=True) and links[0] > links[-1]


def test_the_sweep_reports_update_links_per_split_from_the_structure_figures():
    from mnemis_integrations.evaluation.structure import combine

    sweep = _module("search_sweep")
    block = {"concepts": 1, "subtopics": 2, "fragments": 5, "purity": None}
    updates = {
        "edges": 4,
        "correct": 3,
        "annotated": 6,
        "covered": 2,
        "superseded_fragments": 4,
        "within_fragment": 0,
    }
    tune = [
        {**block, "updates": {**updates, "false_demotions": 1, "other_update_edges": 0}},
        {**block, "updates": {**updates, "false_demotions": 0, "other_update_edges": 1}},
    ]
    text = sweep.links_report({"tune": combine(tune), "holdout": combine([{**block, "updates": None}])})
    assert text == "update links, tune: precision 0.750 (6/8), recall 0.333 (4/12), false demotions 1/8"


def test_the_sweep_reports_mrr_and_r_at_5_beside_recall_and_current_state_first():
    sweep = _module("search_sweep")
    table = sweep._tables()
    cell = table["default"][("tune", "overall")]
    for b in sweep.BUDGETS:
        cell[f"R@{b}"] += [1.0, 0.5]
    cell["CSF"] += [1.0, 0.0]
    cell["CSF@256"] += [0.0, 0.0]
    cell["CSF@512"] += [1.0]
    cell["MRR"] += [1.0, 0.25]
    cell["R@5"] += [0.5, 0.0]
    row = sweep.report(table).splitlines()[-1]
    assert row.endswith("| 0.750 | 0.750 | 0.750 | 0.750 | 0.500 (2) | 0.000 / 1.000 | 0.625 | 0.250 |")


def test_the_sweep_can_feed_locomo_a_message_at_a_time(monkeypatch):
    """``--stream`` adds each message on its own; the questions and their rows are the same."""
    from mnemis_integrations.core.embedders import HashingEmbedder

    sweep = _module("search_sweep")
    calls: list[int] = []
    real = sweep.MnemisMemory.add_messages

    def counted(self, messages, namespace=None, **kw):
        calls.append(len(messages))
        return real(self, messages, namespace, **kw)

    monkeypatch.setattr(sweep.MnemisMemory, "add_messages", counted)
    fixture = str(ROOT / "tests" / "eval" / "fixtures" / "tiny_locomo.json")
    emb = EmbeddingCache(HashingEmbedder())
    settings = {"default": sweep.MemoryConfig()}
    whole = sweep.run_locomo(settings, settings["default"], fixture, emb, 10)
    batches = len(calls)
    streamed = sweep.run_locomo(settings, settings["default"], fixture, emb, 10, stream=True)
    assert set(calls[:batches]) != {1} and set(calls[batches:]) == {1}
    assert len(calls) - batches == sum(calls[:batches])
    assert whole.keys() == streamed.keys()
    assert len(whole["default"][("all", "overall")]["R@512"]) == len(
        streamed["default"][("all", "overall")]["R@512"]
    )


def test_the_sweeps_locomo_rows_carry_the_mrr_its_table_reports(tmp_path):
    """Each LoCoMo row holds its question's MRR under the bench's key, so that ``mnemis bench compare``
    can read a setting's MRR against the default's, as it reads the budgets."""
    import json

    from mnemis_integrations.core.embedders import HashingEmbedder

    sweep = _module("search_sweep")
    fixture = str(ROOT / "tests" / "eval" / "fixtures" / "tiny_locomo.json")
    settings = {"default": sweep.MemoryConfig()}
    table = sweep.run_locomo(
        settings, settings["default"], fixture, EmbeddingCache(HashingEmbedder()), 10, out=str(tmp_path)
    )
    rows = [
        json.loads(line) for line in (tmp_path / "default" / "per_question.jsonl").read_text().splitlines()
    ]
    ours = [r["scores"]["mrr"] for r in rows if r["category"] != sweep.LOCOMO_ADVERSARIAL]
    assert ours and ours == table["default"][("all", "overall")]["MRR"]


def test_the_sealed_conversations_load_as_held_out_ones_kept_out_of_the_default_suite():
    """Sealed conversations wait, unrun, for the next fresh test: each must load as the held-out
    ones do (with its second annotation) the day it is unsealed, and no default run may read it."""
    agree = _module("annotator_agreement")
    from mnemis_integrations.evaluation.scenarios import default_suite_paths, load_scenarios

    sealed = load_scenarios(ROOT / "benchmarks" / "scenarios" / "sealed")
    assert sealed and all(sc.split == "holdout" for sc in sealed)
    for sc in sealed:
        order = {m.id: i for i, m in enumerate(sc.messages)}
        assert agree.load_second(agree.SECOND, sc.id, order), sc.id
    loaded = {sc.id for sc in load_scenarios(default_suite_paths())}
    assert not loaded & {sc.id for sc in sealed}


def test_the_second_annotation_covers_every_scenario_and_scores_agreement_by_pair():
    agree = _module("annotator_agreement")
    from mnemis_integrations.evaluation.scenario_data import Supersession
    from mnemis_integrations.evaluation.scenarios import default_suite_paths, load_scenarios

    scenarios = load_scenarios(default_suite_paths())
    for sc in scenarios:  # every file parses: ids exist, old messages come before the new one
        order = {m.id: i for i, m in enumerate(sc.messages)}
        assert agree.load_second(agree.SECOND, sc.id, order), sc.id
    first = [Supersession("m5", ("m1",), "gradual"), Supersession("m9", ("m7", "m8"), "reversal")]
    second = [
        Supersession("m5", ("m2",), "gradual"),  # same new message, another old one: no match
        Supersession("m9", ("m8",), "correction"),  # matches, another kind
        Supersession("m12", ("m10",), "cancellation"),
    ]
    assert agree.agreement(first, second) == {
        "first": 2,
        "second": 3,
        "first_found": 1,
        "second_confirmed": 1,
        "same_kind": 0,
    }


def test_a_second_annotation_that_names_a_later_old_message_is_refused(tmp_path):
    agree = _module("annotator_agreement")
    (tmp_path / "s.json").write_text(
        json.dumps({"supersessions": [{"new": "a", "old": ["b"], "kind": "gradual"}]})
    )
    with pytest.raises(ValueError, match="does not come before"):
        agree.load_second(tmp_path, "s", {"a": 0, "b": 1})


def test_current_state_misses_tell_linked_states_from_unlinked_ones():
    from mnemis_integrations.core.graph import MemoryGraph
    from mnemis_integrations.core.model import Edge, EdgeKind, Node, NodeKind

    misses = _module("current_state_misses")
    g = MemoryGraph("u")
    for fid, said in (("f1", ["m1", "m2"]), ("f2", ["m3"]), ("f3", ["m4"])):
        g.add_node(Node(fid, NodeKind.FRAGMENT, fid, "u", source_ids=said))
    g.add_edge(Edge("f2", "f1", EdgeKind.UPDATES))
    g.add_edge(Edge("f3", "f1", EdgeKind.REFERENCES))
    assert misses.linked(g, ["m3"], ["m1"]) and misses.linked(g, ["m1"], ["m3"])  # either way
    assert not misses.linked(g, ["m4"], ["m2"])  # joined, but by another kind of edge
    records = [
        {"first": True, "linked": False, "asks_end": True, "current_rank": 0},
        {"first": False, "linked": False, "asks_end": True, "current_rank": 7},
        {"first": False, "linked": True, "asks_end": False, "current_rank": 2},
        {"first": False, "linked": False, "asks_end": True, "current_rank": None},
    ]
    assert misses.kinds(records, 4, 6) == {
        ("no link", "asks for the end", "below the first 6"): 1,
        ("linked", "asks otherwise", "in the first 4"): 1,
        ("no link", "asks for the end", "no hit"): 1,
    }


def test_current_state_misses_read_the_tune_split_only_and_agree_with_the_metric():
    from mnemis_integrations.core.config import MemoryConfig
    from mnemis_integrations.core.embedders import HashingEmbedder

    misses = _module("current_state_misses")
    bundled = ROOT / "benchmarks" / "scenarios" / "bundled" / "denver_move.json"
    sealed = ROOT / "benchmarks" / "scenarios" / "sealed"
    emb = EmbeddingCache(HashingEmbedder())
    records = misses.tune_records([bundled, sealed], emb, MemoryConfig(), k=20)
    assert records and all(r["question_id"].startswith("denver_move-") for r in records)  # sealed: held-out
    for r in records:
        cur, old = r["current_rank"], r["superseded_rank"]
        assert r["first"] == (cur is not None and (old is None or cur <= old))
    text = misses.report(records, MemoryConfig(), show=True)
    assert text.startswith(f"current state first {sum(r['first'] for r in records)} of {len(records)}")
    assert text.count("MISS ") == sum(not r["first"] for r in records)
    # each miss says whether its question asks for the end state: the kind the present-state rules read
    miss_lines = [line for line in text.splitlines() if line.startswith("MISS ")]
    assert miss_lines  # the hashing embedder misses some of denver_move's states
    assert all(("asks for the end)" in line) != ("asks otherwise)" in line) for line in miss_lines)


def _scenario_file(path, sid: str, title: str, texts, supersessions, question):
    """A tune scenario file of ``texts`` (speaker, text), one a day from 1 March 2025, ids ``<sid>-m001``."""
    messages = [
        {"id": f"{sid}-m{i:03d}", "speaker": who, "text": text, "timestamp": f"2025-03-{i:02d}T19:00+00:00"}
        for i, (who, text) in enumerate(texts, start=1)
    ]
    scenario = {"id": sid, "language": "en", "title": title, "split": "tune", "messages": messages,
                "supersessions": supersessions, "questions": [question]}  # fmt: skip
    path.write_text(json.dumps(scenario))
    return path


def _two_venue_scenario(path):
    """A scenario whose one change (the venue) the offline judge misses: no change cue, no value changed."""
    texts = [
        ("Ann", "The quiz night will be at the Red Lion on Friday."),
        ("Bob", "Great, I'll bring the answer sheets."),
        ("Ann", "Tickets are five pounds each."),
        ("Cat", "My nephew wants to come along too."),
        ("Ann", "The landlord says the back room seats sixty."),
        ("Bob", "Quiz night is at the Crown and Anchor now, the Red Lion flooded."),
    ]
    question = {"id": "qn-q01", "question": "Where is the quiz night?", "class": "evolution",
                "asked_at": "2025-03-10T19:00:00+00:00", "evidence": ["qn-m001", "qn-m006"],
                "current": ["qn-m006"], "superseded": ["qn-m001"],
                "answer": "The Crown and Anchor."}  # fmt: skip
    sups = [{"new": "qn-m006", "old": ["qn-m001"], "kind": "reversal"}]
    return _scenario_file(path, "qn", "a quiz night", texts, sups, question)


def test_the_sweep_can_take_the_annotation_as_the_update_judge(tmp_path, capsys):
    """``--links annotated``: each replacing message is linked to what the annotation says it replaces, and
    nothing else is (a ceiling for the judge); the default sweep on the same file links as the judge does."""
    from mnemis_integrations.core.embedders import HashingEmbedder

    sweep = _module("search_sweep")
    path = _two_venue_scenario(tmp_path / "qn.json")
    settings = {"default": sweep.MemoryConfig()}
    emb = EmbeddingCache(HashingEmbedder())
    sweep.run(settings, settings["default"], [path], emb, 10, annotated_links=True)
    annotated = capsys.readouterr().out
    assert "update links, tune: precision 1.000 (1/1), recall 1.000 (1/1)" in annotated
    sweep.run(settings, settings["default"], [path], emb, 10)
    judged = capsys.readouterr().out
    assert "update links, tune:" in judged and "recall 1.000 (1/1)" not in judged


def test_the_simulated_model_judge_finds_what_its_recall_says_and_draws_the_same_every_run(tmp_path, capsys):
    """``--links simulated``: at recall 1 and no false links it links as the annotation does; at recall 0
    it links no annotated change; each message's draw is seeded by its id, so two judges agree."""
    from mnemis_integrations.core.embedders import HashingEmbedder
    from mnemis_integrations.evaluation.scenarios import load_scenarios

    sweep = _module("search_sweep")
    path = _two_venue_scenario(tmp_path / "qn.json")
    settings = {"default": sweep.MemoryConfig()}
    emb = EmbeddingCache(HashingEmbedder())
    sweep.run(settings, settings["default"], [path], emb, 10, simulated=(1.0, 0.0))
    assert "update links, tune: precision 1.000 (1/1), recall 1.000 (1/1)" in capsys.readouterr().out
    sweep.run(settings, settings["default"], [path], emb, 10, simulated=(0.0, 0.0))
    assert "recall 0.000 (0/1)" in capsys.readouterr().out

    scenario = load_scenarios([path])[0]
    store = _Store({m.id: m for m in scenario.messages})
    changed = scenario.messages[-1]
    build = sweep.MemoryConfig().build
    found = {}
    for seed in range(20):
        judges = [sweep.SimulatedModelJudge(build, scenario, 0.5, 0.0, seed=seed) for _ in range(2)]
        twice = [j.scored_candidates(store, changed, ()) for j in judges]
        assert twice[0] == twice[1]
        found[seed] = bool(twice[0])
    assert 0 < sum(found.values()) < 20  # about half the seeds find it


class _Store:
    """Just the messages of a namespace: what the annotated judge reads."""

    def __init__(self, messages: dict):
        self.messages = messages


def test_the_vector_cache_keeps_what_another_sweep_saved_and_replaces_its_file_whole(tmp_path):
    """Two sweeps side by side load one cache, each embeds other texts, and both save: the file holds both
    sets afterwards, and no part file is left beside it. The scripts share the bench's cache."""
    from mnemis_integrations.core.embedders import HashingEmbedder

    growth = _module("growth")
    path = str(tmp_path / "vectors.npz")
    first, second = EmbeddingCache(HashingEmbedder()), EmbeddingCache(HashingEmbedder())
    first.load(path)
    second.load(path)
    venue = first.embed_passages(["the venue moved to the Crown"])
    second.embed_queries(["where is the quiz night?"])
    first.save(path)
    second.save(path)
    reread = growth.prepare_embedder(
        HashingEmbedder(), ["the venue moved to the Crown"], ["where is the quiz night?"], path
    )
    assert reread.misses == 0  # both sets were on file: nothing to embed
    assert np.array_equal(reread.embed_passages(["the venue moved to the Crown"]), venue)
    assert [p.name for p in tmp_path.iterdir()] == ["vectors.npz"]


def test_the_vector_cache_computes_ahead_and_replaces_a_file_saved_without_costs(tmp_path):
    """``fill`` embeds only what is new; a file the scripts wrote before costs were kept is not read (its
    vectors would be charged nothing) and the next save replaces it; no path reads and writes nothing."""
    from mnemis_integrations.core.embedders import HashingEmbedder

    cache = EmbeddingCache(HashingEmbedder())
    assert cache.fill("p", ["a", "b", "a"]) == 2
    assert cache.fill("p", ["b", "c"]) == 1
    assert cache.fill("q", ["a"]) == 1  # queries are kept apart from passages
    old = tmp_path / "old.npz"
    np.savez(
        old,
        embedder_id=np.array(HashingEmbedder().id),
        kinds=np.array(["p"]),
        texts=np.array(["z"]),
        vectors=np.zeros((1, 256), dtype=np.float32),
    )
    assert EmbeddingCache(HashingEmbedder()).load(old) == 0
    cache.save(old)
    assert EmbeddingCache(HashingEmbedder()).load(old) == 4
    assert cache.load(None) == 0 and cache.load("") == 0
    cache.save("")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.npz"]


def _bench_rows(folder: Path, rows: list[tuple[str, str, str, str, float, float | None]]) -> Path:
    """A bench run's per_question.jsonl: (system, question id, conversation, class, R at every budget,
    current state first)."""
    folder.mkdir(parents=True)
    out = []
    for system, qid, conv, cls, recall, csf in rows:
        scores = {f"budget_recall@{b}": recall for b in (256, 512, 1024, 2048)}
        scores |= {"current_state_first": csf, "current_state_first@256": csf, "current_state_first@512": csf}
        scores["mrr"] = recall
        out.append(
            {"system": system, "question_id": qid, "conversation": conv, "category": cls, "scores": scores}
        )
    (folder / "per_question.jsonl").write_text("".join(json.dumps(r) + "\n" for r in out))
    return folder


def test_the_bench_table_reads_two_runs_of_one_protocol_as_one_and_flags_where_mnemis_is_under(
    tmp_path, capsys
):
    table = _module("bench_table")
    a = _bench_rows(
        tmp_path / "a",
        [("mnemis", "c1-q1", "c1", "evolution", 1.0, 1.0), ("dense", "c1-q1", "c1", "evolution", 0.5, 0.0)],
    )
    b = _bench_rows(
        tmp_path / "b",
        [("mnemis", "c2-q1", "c2", "vague", 0.25, None), ("dense", "c2-q1", "c2", "vague", 0.75, None)],
    )
    assert table.main(["--incremental", str(a), "--incremental", str(b), "--by-conversation"]) == 0
    out = capsys.readouterr().out
    assert "2 conversations, 2 questions" in out
    # the mean over both runs; current state first over the one question that decides it
    assert (
        "| Mnemis | .625 | .625 | .625 | .625 | 1.000 (1; evolution 1.000, 1) | 1.000 / 1.000 | .625 |" in out
    )
    assert "| dense | .625 | .625 | .625 | .625 | .000 (1) | .000 / .000 | .625 |" in out
    assert "conversation c1 (1 questions): Mnemis 1.000 / 1.000 / 1.000 / 1.000; above or level" in out
    assert (
        "conversation c2 (1 questions): Mnemis .250 / .250 / .250 / .250; under dense at 256 (.250 / .750)"
        in out
    )


def test_the_bench_table_refuses_a_question_two_runs_of_one_protocol_answer(tmp_path):
    table = _module("bench_table")
    row = [("mnemis", "c1-q1", "c1", "evolution", 1.0, 1.0)]
    a, b = _bench_rows(tmp_path / "a", row), _bench_rows(tmp_path / "b", row)
    with pytest.raises(SystemExit, match="c1-q1 .* two runs"):
        table.main(["--incremental", str(a), "--incremental", str(b)])


def test_the_bench_table_keeps_one_part_of_the_suite(tmp_path, capsys):
    table = _module("bench_table")
    suite = tmp_path / "suite"
    suite.mkdir()
    for conv, split in (("c1", "tune"), ("c2", "holdout")):
        message = {
            "id": f"{conv}-m001",
            "speaker": "Ann",
            "text": "The fair is on Saturday.",
            "timestamp": "2025-03-01T10:00:00+00:00",
        }
        question = {
            "id": f"{conv}-q1",
            "question": "When is the fair?",
            "class": "vague",
            "asked_at": "2025-03-02T10:00:00+00:00",
            "evidence": [f"{conv}-m001"],
            "current": [],
            "superseded": [],
            "answer": "Saturday.",
        }
        scenario = {"id": conv, "language": "en", "title": "a fair", "split": split,
                    "messages": [message], "questions": [question], "supersessions": []}  # fmt: skip
        (suite / f"{conv}.json").write_text(json.dumps(scenario))
    run = _bench_rows(
        tmp_path / "run",
        [("mnemis", "c1-q1", "c1", "vague", 1.0, None), ("mnemis", "c2-q1", "c2", "vague", 0.5, None)],
    )
    table.main(["--incremental", str(run), "--split", "holdout", "--suite", str(suite)])
    out = capsys.readouterr().out
    assert "1 conversations, 1 questions (holdout)" in out
    assert "| Mnemis | .500 | .500 | .500 | .500 |" in out


def _suite(folder: Path) -> Path:
    """Two one-question conversations: c1 in the tune part, c2 held out; each one's last message comes
    after its question."""
    folder.mkdir()
    for conv, split in (("c1", "tune"), ("c2", "holdout")):
        messages = [
            {"id": f"{conv}-m001", "speaker": "Ann", "text": "The fair is on Saturday.",
             "timestamp": "2025-03-01T10:00:00+00:00"},
            {"id": f"{conv}-m002", "speaker": "Bob", "text": "Moved to Sunday.",
             "timestamp": "2025-03-01T12:00:00+00:00"},
            {"id": f"{conv}-m003", "speaker": "Ann", "text": "Bring cakes.",
             "timestamp": "2025-03-05T10:00:00+00:00"},
        ]  # fmt: skip
        old, new = f"{conv}-m001", f"{conv}-m002"
        question = {"id": f"{conv}-q1", "question": "When is the fair?", "class": "evolution",
                    "asked_at": "2025-03-02T10:00:00+00:00", "evidence": [old, new],
                    "current": [new], "superseded": [old], "answer": "Sunday."}  # fmt: skip
        scenario = {"id": conv, "language": "en", "title": "a fair", "split": split, "messages": messages,
                    "questions": [question],
                    "supersessions": [{"new": new, "old": [old], "kind": "reversal"}]}  # fmt: skip
        (folder / f"{conv}.json").write_text(json.dumps(scenario))
    return folder


def _figures_run(folder: Path, rows: list[tuple[str, str, float, float | None, list[list[str]]]]) -> Path:
    """A bench run: (system, conversation, recall at every budget, current state first, first hits)."""
    folder.mkdir(parents=True)
    out = []
    for system, conv, recall, csf, hits in rows:
        scores = {f"budget_recall@{b}": recall for b in (256, 512, 1024, 2048)}
        scores |= {"current_state_first": csf, "current_state_first@256": csf, "current_state_first@512": csf}
        scores |= {
            "mrr": recall,
            "recall@5": recall,
            "recall@10": recall,
            "tied_top5": 0.0,
            "equal_top5": 0.0,
        }
        out.append({"system": system, "question_id": f"{conv}-q1", "conversation": conv,
                    "category": "evolution", "scores": scores, "top_source_ids": hits})  # fmt: skip
    (folder / "per_question.jsonl").write_text("".join(json.dumps(r) + "\n" for r in out))
    return folder


def test_the_where_figures_are_read_off_the_runs_per_part(tmp_path, capsys):
    figures = _module("where_figures")
    suite = _suite(tmp_path / "suite")
    inc = _figures_run(
        tmp_path / "inc",
        [
            ("mnemis", "c1", 1.0, 1.0, [["c1-m001"]]),
            ("mnemis", "c2", 0.5, 0.0, [["c2-m001"]]),
            ("dense", "c1", 0.5, 0.0, [["c1-m001"]]),
            ("dense", "c2", 1.0, 1.0, [["c2-m001"]]),
        ],
    )
    structure = {
        "structure": {
            "mnemis": {
                "per_scenario": [
                    {
                        "scenario": conv,
                        "updates": {
                            "edges": 2,
                            "correct": c,
                            "annotated": 4,
                            "covered": c,
                            "false_demotions": 1,
                        },
                        "purity": {"subtopic": {"majority": 3, "messages": 4}},
                    }
                    for conv, c in (("c1", 1), ("c2", 2))
                ]
            }
        }
    }
    (inc / "scenarios.json").write_text(json.dumps(structure))
    # in bulk, c2's first hit holds only the message written after its question was asked
    full = _figures_run(
        tmp_path / "full",
        [("mnemis", "c2", 0.0, None, [[], ["c2-m003"]]), ("dense", "c2", 1.0, None, [["c2-m002"]])],
    )
    args = ["--incremental", str(inc), "--full", str(full), "--suite", str(suite), "--not-fresh", "c9"]
    assert figures.main(args) == 0
    out = capsys.readouterr().out
    assert "tune, incremental: current state first 1.000 (1; evolution 1.000, 1)" in out
    assert "holdout, incremental: current state first .000 (1; evolution .000, 1)" in out
    assert "best flat system within 256 tokens dense 1.000" in out
    # c2 is under dense at both budgets, c1 at neither
    assert "2 of 4 conversation-budget pairs under a flat system (1 at 256, 1 at 512)" in out
    assert "fresh held-out conversations: 1\nmnemis .500 / .500 / .500 / .500" in out
    assert (
        "holdout: update links 1.000 (2/2) / .500 (2/4), false demotions 1; "
        "purity subtopic / concept .750 / –" in out
    )
    assert "holdout, en: update links 1.000 (2/2)" in out
    assert "dense: 0 of 1 (.000)\nmnemis: 1 of 1 (1.000)" in out


def test_the_imported_history_bench_builds_both_orders_and_scores_them_against_the_annotation(tmp_path):
    """``imported_history.py``: an offsite moved, then its head count changed; told in order and with the
    history imported after the live chat, both builds make the two annotated links (the imported one
    keeps every in-order link), none points back in time, and the table names both orders."""
    from mnemis_integrations.core.embedders import HashingEmbedder
    from mnemis_integrations.evaluation.scenarios import load_scenarios

    texts = [
        ("ana", "The team offsite is booked at Lakeside Lodge for March 14, 40 people."),
        ("ben", "I ordered new standing desks for the Berlin office."),
        ("ana", "Update: the offsite moved from Lakeside Lodge to Hilltop Inn, March 21, 40 people."),
        ("ben", "The espresso machine in the kitchen is broken again."),
        ("ana", "Update: the offsite at Hilltop Inn is now 45 people, still March 21."),
    ]
    question = {"id": "o-q01", "question": "Where is the offsite?", "class": "evolution",
                "asked_at": "2025-03-09T09:00:00+00:00", "evidence": ["o-m003", "o-m005"],
                "current": ["o-m005"], "superseded": ["o-m003"],
                "answer": "Hilltop Inn, 45 people."}  # fmt: skip
    sups = [{"new": "o-m003", "old": ["o-m001"], "kind": "reversal"},
            {"new": "o-m005", "old": ["o-m003"], "kind": "gradual"}]  # fmt: skip
    path = _scenario_file(tmp_path / "o.json", "o", "an offsite", texts, sups, question)
    imp = _module("imported_history")
    totals = imp.measure(EmbeddingCache(HashingEmbedder()), load_scenarios([path]), 0.4)
    for order in imp.ORDERS:
        t = totals[("tune", order)]
        assert (t["edges"], t["correct"], t["covered"], t["backwards"]) == (2, 2, 2, 0)
    assert (totals[("tune", "imported")]["kept"], totals[("tune", "imported")]["in_order_links"]) == (2, 2)
    table = imp.table(totals)
    assert "| tune | in order | 2 | 1.000 (2/2) |" in table and "| tune | imported | 2 |" in table
    # --search: the one question asked of both memories, after the last message, the head count first
    asked = imp.measure(EmbeddingCache(HashingEmbedder()), load_scenarios([path]), 0.4, search=True)
    for order in imp.ORDERS:
        [reading] = asked[("tune", order)]["asked"]
        assert reading["CSF"] == 1.0 and reading["R@2048"] == 1.0
    assert "| tune | imported | 1 | 1.000 / 1.000 / 1.000 / 1.000 | 1.000 (1/1) |" in imp.table(asked)
