"""benchmarks/fingerprints/run.py: the flatness rule, the stratified pool, the word rate and
the verdict rule re-derived from the stored JSON."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

from .conftest import BENCH, load_benchmark, refused


@pytest.fixture(scope="module")
def bench():
    with load_benchmark("fingerprints/run.py", "fingerprints_run") as mod:
        yield mod


@pytest.fixture
def common(bench):
    """``benchmarks/_common`` as the script imported it (its cycles: ``until_flat``)."""
    return bench._common


def _curve(values):
    return [[50 * (i + 1), v] for i, v in enumerate(values)]


def test_flat_rule(bench):
    assert bench.flat(_curve([0.5, 0.7, 0.8, 0.80, 0.801]))  # 0.1 % better over the last 20 %
    assert not bench.flat(_curve([0.5, 0.6, 0.7, 0.8, 0.9]))
    assert bench.flat(_curve([9.0, 5.0, 4.0, 3.0, 3.01]), higher_is_better=False)
    assert not bench.flat(_curve([9.0, 5.0, 4.0, 3.5, 3.0]), higher_is_better=False)
    assert not bench.flat(_curve([1.0, 1.0, 1.0, 1.0]))  # fewer than five evaluations


@pytest.mark.parametrize(
    "name", ["fingerprints.json", "fingerprints_v2.json", "fingerprints_quick.json"]
)
def test_stored_convergence_rows_follow_the_rule(bench, name):
    doc = json.loads((BENCH / "fingerprints" / "results" / name).read_text())
    assert bench.rejudge(json.loads(json.dumps(doc))) == doc


def test_stratified_pool_takes_the_shares(bench):
    from sci_moe.language.provenance import SequenceSet

    groups = [f"news:{i}" for i in range(20)] + [f"T{i}" for i in range(20)]
    groups += [f"newsgroups:{i}" for i in range(20)]
    groups = groups * 2
    labels = np.repeat([0, 1], 60)
    data = SequenceSet(tuple("x" for _ in groups), labels, tuple(groups), ("a", "b"))
    idx = bench.stratified_pool(data, 20, [0.5, 0.25, 0.25], seed=0)
    assert idx.size == 40 and np.unique(idx).size == 40
    src = [bench.document_source(data.groups[i]) for i in idx if labels[i] == 0]
    assert src.count("wiki") == 10 and src.count("news") == 5 and src.count("newsgroups") == 5


def test_word_rate(bench):
    vocab = {"the", "river", "city"}
    assert bench.word_rate(["The river, the city."], vocab) == 1.0
    assert bench.word_rate(["the xqzt"], vocab) == 0.5
    assert bench.word_rate(["1 2 ."], vocab) == 0.0


def test_stored_verdicts_follow_the_rule(bench):
    path = BENCH / "fingerprints" / "results" / "fingerprints_quick.json"
    doc = json.loads(path.read_text())
    again = bench.verdicts(doc)
    assert [v["verdict"] for v in again] == [v["verdict"] for v in doc["verdicts"]]
    assert len(again) == 9 and not any(v["decisive"] for v in again)  # quick: not converged


def _cross_rows(matrix_by_seed, names=("c4", "gopher", "norm")):
    return [
        {"case": f"cross ppl {a} on {b}", "metric": f"ppl seed {s}", "value": float(m[i][j])}
        for s, m in enumerate(matrix_by_seed)
        for i, a in enumerate(names)
        for j, b in enumerate(names)
    ]


def test_match_effect_removes_lm_quality_and_text_difficulty(bench):
    # log ppl = LM quality + text difficulty: no match effect, whatever the raw means say
    lm, text = np.array([0.3, 0.0, 0.1]), np.array([0.0, 0.4, -0.2])
    additive = np.exp(4.0 + lm[:, None] + text[None, :])
    cross, own = bench.match_effect({"rows": _cross_rows([additive])})
    assert cross == pytest.approx([0.0], abs=1e-12) and own == pytest.approx([0.0], abs=1e-12)
    # an own-text advantage of 0.06 nats on the diagonal: double centring of a 3 x 3 matrix
    # leaves 2/3 of it on the diagonal and -1/3 spread over the off-diagonal
    matched = additive * np.exp(-0.06 * np.eye(3))
    cross, own = bench.match_effect({"rows": _cross_rows([matched, additive])})
    assert own == pytest.approx([-0.04, 0.0], abs=1e-12)
    assert cross == pytest.approx([0.02, 0.0], abs=1e-12)
    # a seed without its full matrix is left out
    rows = _cross_rows([matched])[:-1]
    assert bench.match_effect({"rows": rows}) == ([], [])


def _cross_doc(split):
    rng = np.random.default_rng(0)
    mats = [np.exp(4.0 - 0.05 * np.eye(3) + 0.01 * rng.standard_normal((3, 3))) for _ in range(5)]
    settings = {"seeds": 5, "quick": False}
    if split is not None:
        settings["prop_split"] = split
    return {"machine": {"settings": settings}, "rows": _cross_rows(mats)}


def test_cross_dataset_verdict_needs_a_document_aligned_split(bench):
    cross_dataset_verdict = bench.cross_dataset_verdict
    # an own-text advantage on every seed: reproduced with the document split ...
    v = cross_dataset_verdict(_cross_doc("document"), converged=True)
    assert v["verdict"] == "reproduced" and v["decisive"] and v["seeds"] == 5
    assert v["ours"] > 0 > v["baseline_value"]
    assert not cross_dataset_verdict(_cross_doc("document"), converged=False)["decisive"]
    # ... and not decided, saying why, with the tails cut inside the token streams
    v = cross_dataset_verdict(_cross_doc(None), converged=True)
    assert v["verdict"] == "not decided" and not v["decisive"] and "leak" in v["why"]


def test_document_split_holds_out_the_same_sources_in_every_pipeline(bench):
    document_split = bench.document_split
    titles = [f"T{i}" for i in range(20)]
    order = {t: (7 * i) % 20 for i, t in enumerate(titles)}  # a shuffled shared order
    corpora = {  # pipelines keep different documents of the same sources
        "a": [(t, f"a:{t}") for t in titles],
        "b": [(t, f"b:{t}") for t in titles[::2]],
        "c": [(t, f"c:{t}") for t in reversed(titles[3:])],
    }
    train, val = document_split(corpora, order, 0.1)
    held = {t for t in titles if order[t] >= 18}
    for n, docs in corpora.items():
        got_val = {x.split(":")[1] for x in val[n]}
        got_train = {x.split(":")[1] for x in train[n]}
        assert got_val == held & {t for t, _ in docs} and not got_train & held
        assert got_train | got_val == {t for t, _ in docs}
        # in the shared order
        assert [order[x.split(":")[1]] for x in train[n]] == sorted(
            order[x.split(":")[1]] for x in train[n]
        )
    with pytest.raises(ValueError, match="fraction"):
        document_split(corpora, order, 1.0)


def test_full_plan_validates_on_shared_documents(bench):
    assert bench.settings(False)["prop_split"] == "document"
    assert bench.settings(True)["prop_split"] == "document"


def test_full_plan_has_five_paired_seeds_and_cycle_caps(bench):
    full, quick = bench.settings(False), bench.settings(True)
    assert full["seeds"] == 5 and full["byte_cycles"] >= 3 and full["lm_cycles"] >= 3
    assert quick["byte_steps"] < full["byte_steps"] and quick["lm_steps"] < full["lm_steps"]


def test_lm_curves_are_judged_on_the_loss(bench):
    # perplexity 3 % better over the last fifth (not flat on it), the loss 0.6 % (flat)
    ppl = _curve([400.0, 200.0, 150.0, 140.0, 135.8])
    assert not bench.flat(ppl, higher_is_better=False) and bench.lm_flat(ppl)


def _fake(curves):
    """A fake training: cycle ``c`` returns ``curves[c]`` (steps of its own, 0-based)."""
    ran = []

    def cycle(c, seed):
        assert seed == 3 + 100 * c
        ran.append(c)
        return curves[c]

    return cycle, ran


def test_a_run_that_is_not_flat_gets_another_cycle(bench, common):
    rising = [[0, 0.1], [10, 0.2], [20, 0.3], [30, 0.4], [40, 0.5]]
    level = [[10, 0.5], [20, 0.5], [30, 0.501], [40, 0.501]]
    cycle, ran = _fake([rising, level, level])
    curve, n, conv = common.until_flat(cycle, bench.flat, max_cycles=3, seed=3, cycle_steps=40)
    assert ran == [0, 1] and n == 2 and conv  # flat after the second cycle: no third
    assert [s for s, _ in curve] == [0, 10, 20, 30, 40, 50, 60, 70, 80]


def test_a_run_at_its_cap_records_not_converged(bench, common):
    falling = [[[0, 9.0], [10, 8.0], [20, 7.0]], [[0, 7.0], [10, 6.0], [20, 5.0]]]
    cycle, ran = _fake(falling)
    curve, n, conv = common.until_flat(cycle, bench.lm_flat, max_cycles=2, seed=3, cycle_steps=20)
    assert ran == [0, 1] and n == 2 and not conv
    want = [[0, 9.0], [10, 8.0], [20, 7.0], [30, 6.0], [40, 5.0]]
    assert curve == common.concat(falling, 20) == want
    with pytest.raises(ValueError, match="max_cycles"):
        common.until_flat(cycle, bench.flat, max_cycles=0, seed=3, cycle_steps=20)


def test_tiny_trainings_record_cycles_steps_and_converged(bench):
    from sci_moe.language import MoELMConfig, TrainConfig
    from sci_moe.language.provenance import (
        ByteClassifierConfig,
        ByteTransformerClassifier,
        PieceTokenizer,
    )

    rng = np.random.default_rng(0)
    texts = [("a b c " if k else "x; y; z\n") * int(rng.integers(2, 5)) for k in (0, 1) * 8]
    labels = np.array([0, 1] * 8)
    lm = dict(d_model=16, n_layers=1, n_heads=2, seq_len=32, d_hidden=16, num_experts=2, top_k=1)
    clf = ByteTransformerClassifier(ByteClassifierConfig(lm=lm, steps=6, seed=3), progress=False)
    clf, curve, n, conv = bench.fit_byte_classifier(
        clf, texts, labels, ["p", "q"], (texts[:6], labels[:6]), 2, max_cycles=2
    )
    assert 1 <= n <= 2 and conv == bench.flat(curve) and curve[-1][0] == 6 * n
    assert clf.config.seed == 3 and (n == 2 or conv)  # a second cycle only when not flat
    docs = ["- alpha beta\n- gamma delta\n"] * 20
    tok = PieceTokenizer.fit(docs, 64)
    cfg = MoELMConfig(**{**lm, "seq_len": 16}, vocab_size=len(tok))
    tcfg = TrainConfig(steps=4, batch_size=4, eval_every=1, eval_batches=1, progress=False)
    model, curve, n, conv = bench.train_lm(docs, cfg, tcfg, tok, max_cycles=2)
    assert 1 <= n <= 2 and conv == bench.lm_flat(curve) and (n == 2 or conv)
    assert [s for s, _ in curve] == list(range(4 * n + 1)) and not model.training


def test_lms_converged_counts_only_the_lms(bench):
    rows = [
        {"case": "4-way byte_lm", "metric": "converged seed 0", "value": 0.0},
        {"case": "propagation LM c4", "metric": "converged seed 0", "value": 1.0},
    ]
    assert bench.lms_converged({"rows": rows})
    assert not bench.lms_converged({"rows": rows[:1]})


def test_resume_refuses_a_state_of_other_settings(bench, monkeypatch, tmp_path, capsys):
    path = tmp_path / "fp.json"
    state = {"settings": bench.settings(True), "done": [], "rows": []}
    path.with_suffix(".state.json").write_text(json.dumps(state))
    argv = ["run.py", "--quick", "--seeds", "2", "--json", str(path), "--resume"]
    monkeypatch.setattr(sys, "argv", argv)
    with refused(capsys, r"other settings \(seeds: 3 -> 2\); resume with"):
        bench.main()


def test_every_until_flat_fit_trains_two_cycles_at_least(bench):
    full, quick = bench.settings(False), bench.settings(True)
    assert full["min_cycles"] == 2 <= min(full["byte_cycles"], full["lm_cycles"])
    assert quick["min_cycles"] == min(2, quick["byte_cycles"], quick["lm_cycles"])


def _tiny_byte_fit(bench, **kw):
    from sci_moe.language.provenance import ByteClassifierConfig, ByteTransformerClassifier

    texts = ["a b c " * 3, "x; y; z\n" * 3] * 8
    labels = np.array([0, 1] * 8)
    lm = dict(d_model=16, n_layers=1, n_heads=2, seq_len=32, d_hidden=16, num_experts=2, top_k=1)
    clf = ByteTransformerClassifier(ByteClassifierConfig(lm=lm, steps=4, seed=3), progress=False)
    return bench.fit_byte_classifier(
        clf, texts, labels, ["p", "q"], (texts[:6], labels[:6]), 2, max_cycles=3, **kw
    )


def test_min_cycles_trains_on_past_a_flat_first_cycle(bench, monkeypatch):
    # every curve judged flat, as the end of one annealed cycle looks: min_cycles=2 still
    # trains a second cycle of the byte classifier and of an LM
    from sci_moe.language import MoELMConfig, TrainConfig
    from sci_moe.language.provenance import PieceTokenizer

    monkeypatch.setattr("sci_moe.language.provenance.byte_classifier.is_flat", lambda *a, **k: True)
    assert _tiny_byte_fit(bench)[2:] == (1, True)
    clf, curve, n, conv = _tiny_byte_fit(bench, min_cycles=2)
    assert (n, conv) == (2, True) and curve[-1][0] == 8 and clf.config.seed == 3
    monkeypatch.setitem(bench.train_lm.__globals__, "lm_flat", lambda curve: True)
    docs = ["- alpha beta\n- gamma delta\n"] * 20
    tok = PieceTokenizer.fit(docs, 64)
    lm = dict(d_model=16, n_layers=1, n_heads=2, d_hidden=16, num_experts=2, top_k=1)
    cfg = MoELMConfig(**lm, seq_len=16, vocab_size=len(tok))
    tcfg = TrainConfig(steps=2, batch_size=4, eval_every=1, eval_batches=1, progress=False)
    assert bench.train_lm(docs, cfg, tcfg, tok, max_cycles=3)[2:] == (1, True)
    _, curve, n, conv = bench.train_lm(docs, cfg, tcfg, tok, max_cycles=3, min_cycles=2)
    assert (n, conv) == (2, True) and [s for s, _ in curve] == [0, 1, 2, 3, 4]


def _stub_parts(bench, monkeypatch):
    """The parts replaced by stubs recording the ``min_cycles`` they are given."""
    seen = []

    def part(cfg, *args, **kwargs):
        seen.append(cfg["min_cycles"])
        return []

    for name in ("part_classify", "part_null", "part_propagation"):
        monkeypatch.setattr(bench, name, part)
    monkeypatch.setattr(bench, "verdicts", lambda doc: [])
    return seen


@pytest.mark.parametrize(
    ("extra", "want"),
    [([], 2), (["--min-cycles", "1"], 1), (["--byte-cycles", "1"], 1), (["--lm-cycles", "3"], 2)],
)
def test_the_quick_run_records_min_cycles(bench, monkeypatch, tmp_path, extra, want):
    seen = _stub_parts(bench, monkeypatch)
    path = tmp_path / "fp.json"
    argv = ["run.py", "--quick", "--seeds", "1", "--json", str(path), *extra]
    monkeypatch.setattr(sys, "argv", argv)
    assert bench.main() == 0
    assert seen == [want] * 3  # classify, null, propagation seed 0
    assert json.loads(path.read_text())["machine"]["settings"]["min_cycles"] == want
    state = json.loads(path.with_suffix(".state.json").read_text())
    assert state["settings"]["min_cycles"] == want


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--min-cycles", "3"], "--min-cycles 3 exceeds a cap of cycles"),
        (["--lm-cycles", "4", "--min-cycles", "3"], r"--byte-cycles 2, --lm-cycles 4\)"),
        (["--min-cycles", "0"], "--min-cycles must be >= 1, got 0"),
    ],
)
def test_min_cycles_above_a_cap_is_refused(bench, monkeypatch, tmp_path, extra, message):
    seen = _stub_parts(bench, monkeypatch)
    monkeypatch.setattr(sys, "argv", ["run.py", "--quick", "--json", str(tmp_path / "f.json")])
    sys.argv += extra
    with pytest.raises(SystemExit, match=message):
        bench.main()
    assert not seen and not list(tmp_path.iterdir())


def test_resume_refuses_a_state_of_another_min_cycles(bench, monkeypatch, tmp_path, capsys):
    path = tmp_path / "fp.json"
    state = {"settings": bench.settings(True), "done": [], "rows": []}
    path.with_suffix(".state.json").write_text(json.dumps(state))
    argv = ["run.py", "--quick", "--min-cycles", "1", "--json", str(path), "--resume"]
    monkeypatch.setattr(sys, "argv", argv)
    with refused(capsys, r"other settings \(min_cycles: 2 -> 1\); resume with"):
        bench.main()
    # a state written before the setting (fingerprints_v2's): judged from cycle 1, refused
    del state["settings"]["min_cycles"]
    path.with_suffix(".state.json").write_text(json.dumps(state))
    monkeypatch.setattr(sys, "argv", [a for a in argv if a not in ("--min-cycles", "1")])
    with refused(capsys, r"other settings \(min_cycles: unset -> 2\); resume with"):
        bench.main()


def test_the_v2_run_without_min_cycles_stays_readable(bench, monkeypatch, tmp_path):
    # the stored v2 JSON and state predate min_cycles: their verdicts rederive (on a copy)
    stored = BENCH / "fingerprints" / "results"
    assert (
        "min_cycles"
        not in json.loads((stored / "fingerprints_v2.state.json").read_text())["settings"]
    )
    doc = json.loads((stored / "fingerprints_v2.json").read_text())
    assert "min_cycles" not in doc["machine"]["settings"]
    copy = tmp_path / "v2.json"
    copy.write_text(json.dumps(doc))
    monkeypatch.setattr(sys, "argv", ["run.py", "--verdicts-only", str(copy)])
    assert bench.main() == 0
    again = json.loads(copy.read_text())["verdicts"]
    assert [v["verdict"] for v in again] == [v["verdict"] for v in doc["verdicts"]]


def test_the_parts_pass_min_cycles_to_every_until_flat_fit(bench, monkeypatch):
    # the quick plan's parts up to their first fit (stopped there): each gets min_cycles
    pytest.importorskip("datasketch")

    class Seen(Exception):
        pass

    def fit(*args, min_cycles=None):
        raise Seen(args[7] if min_cycles is None else min_cycles)

    cfg = dict(bench.settings(True), minilm=False, seeds=1)
    monkeypatch.setitem(bench.part_classify.__globals__, "fit_byte_classifier", fit)
    monkeypatch.setitem(bench.part_propagation.__globals__, "train_lm", fit)
    for part in (
        lambda: bench.part_classify(cfg, 0, {}),
        lambda: bench.part_propagation(cfg, 0, 0, {}),
    ):
        with pytest.raises(Seen) as seen:
            part()
        assert seen.value.args == (2,)
