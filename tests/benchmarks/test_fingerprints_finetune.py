"""benchmarks/fingerprints/run.py: the MiniLM classifier with its top layers fine-tuned
(``minilm_finetune``): its settings, the classify part's rows and curves (a tiny random
encoder in place of MiniLM), and its place in the neural-classifier verdict."""

from __future__ import annotations

import json
import sys
import zlib

import numpy as np
import pytest
import torch

from .conftest import BENCH, load_benchmark, refused


@pytest.fixture(scope="module")
def bench():
    with load_benchmark("fingerprints/run.py", "fingerprints_run_finetune") as mod:
        yield mod


def test_the_plans_fine_tune_two_top_layers_and_the_quick_one_stays_small(bench):
    full, quick = bench.settings(False), bench.settings(True)
    for plan in (full, quick):
        assert plan["minilm_finetune"] and plan["minilm_finetune_layers"] == 2
        assert plan["minilm_finetune_cycles"] >= plan["min_cycles"]
    assert full["minilm_finetune_max_length"] == 256  # MiniLM's own limit, as minilm_linear
    assert quick["minilm_finetune_steps"] * quick["minilm_finetune_cycles"] <= 30
    assert quick["minilm_finetune_steps"] < full["minilm_finetune_steps"]


def test_resume_refuses_other_fine_tuning_settings(bench, monkeypatch, tmp_path, capsys):
    path = tmp_path / "fp.json"
    state = {"settings": bench.settings(True), "done": [], "rows": []}
    path.with_suffix(".state.json").write_text(json.dumps(state))
    argv = ["run.py", "--quick", "--json", str(path), "--resume"]
    monkeypatch.setattr(sys, "argv", [*argv, "--minilm-finetune-steps", "5"])
    with refused(capsys, r"other settings \(minilm_finetune_steps: 12 -> 5\)"):
        bench.main()
    monkeypatch.setattr(sys, "argv", [*argv, "--no-minilm-finetune"])
    with refused(capsys, r"other settings \(minilm_finetune: True -> False\)"):
        bench.main()
    # a state of a run before the case existed (fingerprints_v2's) is refused too
    for key in [k for k in state["settings"] if k.startswith("minilm_finetune")]:
        del state["settings"][key]
    path.with_suffix(".state.json").write_text(json.dumps(state))
    monkeypatch.setattr(sys, "argv", argv)
    with refused(capsys, r"other settings \(minilm_finetune.*: unset -> "):
        bench.main()


class HashTokenizer:
    """Words hashed into 61 ids, ``[CLS] ... [SEP]``, truncated and right-padded."""

    def __call__(self, texts, padding=True, truncation=True, max_length=64, return_tensors="pt"):
        ids = [
            [1, *[3 + zlib.crc32(w.encode()) % 61 for w in t.split()][: max_length - 2], 2]
            for t in texts
        ]
        t = max(map(len, ids))
        return {
            "input_ids": torch.tensor([x + [0] * (t - len(x)) for x in ids]),
            "attention_mask": torch.tensor([[1] * len(x) + [0] * (t - len(x)) for x in ids]),
        }


def _tiny_encoder():
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    cfg = BertConfig(
        vocab_size=64,
        hidden_size=16,
        num_hidden_layers=3,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=96,
    )
    return HashTokenizer(), BertModel(cfg).eval()


def test_the_classify_part_fine_tunes_on_the_byte_classifiers_split(bench, monkeypatch):
    # the quick plan's classify part, MiniLM replaced by a tiny random encoder and the byte
    # classifier's fit by a stub; the fine-tuned classifier really trains (tiny)
    pytest.importorskip("datasketch")
    pytest.importorskip("transformers")
    import sci_moe.data.minilm

    monkeypatch.setattr(sci_moe.data.minilm, "load_encoder", _tiny_encoder)
    g = bench.part_classify.__globals__
    real_fit = g["fit_byte_classifier"]
    seen = []

    class Constant:
        def predict(self, texts):
            return np.zeros(len(texts), dtype=np.int64)

    def fit(clf, texts, labels, names, val, eval_every, max_cycles, min_cycles):
        seen.append((type(clf).__name__, len(texts), len(val[0]), max_cycles, min_cycles))
        if type(clf).__name__ == "ByteTransformerClassifier":
            return Constant(), [[1, 0.25]], 1, False
        return real_fit(clf, texts, labels, names, val, eval_every, max_cycles, min_cycles)

    monkeypatch.setitem(g, "fit_byte_classifier", fit)
    cfg = dict(
        bench.settings(True), minilm=False, seeds=2, minilm_finetune_steps=4, minilm_finetune_eval=2
    )
    state = {}
    rows = {(r.case, r.metric): r.value for r in bench.part_classify(cfg, 0, state)}
    byte = [s for s in seen if s[0] == "ByteTransformerClassifier"]
    ft = [s for s in seen if s[0] == "EncoderFinetuneClassifier"]
    assert len(byte) == len(ft) == 2
    assert [s[1:3] for s in ft] == [s[1:3] for s in byte]  # the same fit / validation sizes
    assert all(s[3:] == (2, 2) for s in ft)
    case = "4-way minilm_finetune"
    assert 0 <= rows[(case, "accuracy")] <= 1 and rows[(case, "chance")] == 0.25
    assert rows[(case, "converged_seeds")] in (0.0, 1.0, 2.0)
    for s in range(2):
        assert rows[(case, f"cycles seed {s}")] == 2  # min_cycles 2 = the cap
        assert rows[(case, f"steps seed {s}")] == 8
        assert rows[(case, f"train_seconds_per_sequence seed {s}")] > 0
        curve = state["curves"]["minilm_finetune"][str(s)]
        assert [x for x, _ in curve] == [2, 4, 6, 8]
    assert rows[("minilm_finetune", "lower_seconds_per_sequence")] > 0
    # without it: no rows, no curves
    seen.clear()
    state = {}
    rows = bench.part_classify(dict(cfg, minilm_finetune=False, seeds=1), 0, state)
    assert not any("minilm_finetune" in r.case for r in rows)
    assert "minilm_finetune" not in state["curves"] and len(seen) == 1


def _with_finetune(doc, accuracy, converged):
    """``doc`` (v2's) with ``minilm_finetune`` rows of a per-seed accuracy above the rest."""
    seeds = doc["machine"]["settings"]["seeds"]
    case = "4-way minilm_finetune"
    rows = [
        {"case": case, "metric": "accuracy", "value": accuracy, "unit": "fraction"},
        {"case": case, "metric": "chance", "value": 0.25, "unit": "fraction"},
        {"case": case, "metric": "converged_seeds", "value": converged, "unit": "seeds"},
    ]
    rows += [
        {"case": case, "metric": f"accuracy seed {s}", "value": accuracy + 0.01 * (s % 2)}
        for s in range(seeds)
    ]
    return dict(doc, rows=doc["rows"] + rows)


@pytest.mark.parametrize("converged", [5.0, 4.0])
def test_the_neural_verdict_takes_the_fine_tuned_minilm_when_it_is_best(bench, converged):
    doc = json.loads((BENCH / "fingerprints" / "results" / "fingerprints_v2.json").read_text())
    v = bench.verdicts(_with_finetune(doc, 0.9, converged))[0]
    assert v["metric"] == "4-way minilm_finetune accuracy"
    assert v["verdict"] == "reproduced" and v["converged"] == (converged == 5.0)
    assert v["decisive"] == (converged == 5.0)
    # less accurate than the byte classifier: the verdict stays the byte classifier's
    before = bench.verdicts(doc)[0]
    assert bench.verdicts(_with_finetune(doc, 0.26, 5.0))[0]["metric"] == before["metric"]


def test_rejudge_judges_the_fine_tuned_curves(bench):
    doc = json.loads((BENCH / "fingerprints" / "results" / "fingerprints_quick.json").read_text())
    case = "4-way minilm_finetune"
    doc["curves"]["minilm_finetune"] = {
        "0": [[2 * (i + 1), v] for i, v in enumerate([0.3, 0.5, 0.6, 0.7, 0.9])],  # rising
        "1": [[2 * (i + 1), v] for i, v in enumerate([0.3, 0.5, 0.6, 0.6, 0.6])],  # flat
    }
    doc["rows"] += [
        {"case": case, "metric": "converged seed 0", "value": 1.0},
        {"case": case, "metric": "converged seed 1", "value": 0.0},
        {"case": case, "metric": "converged_seeds", "value": 1.0},
    ]
    del doc["verdicts"]  # the rows here are too few for verdicts: only the judging
    got = {(r["case"], r["metric"]): r["value"] for r in bench.rejudge(doc)["rows"]}
    assert got[(case, "converged seed 0")] == 0.0 and got[(case, "converged seed 1")] == 1.0
    assert got[(case, "converged_seeds")] == 1.0
