"""MoRE-Brain on the training engine: exact resume, validation, ``sci-moe train more-brain``."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from sci_moe._util import atomic_save_npz
from sci_moe.cli.main import main
from sci_moe.data.minilm import text_hash
from sci_moe.data.newsgroups import newsgroup_sentences
from sci_moe.neuro import plant_voxels
from sci_moe.neuro.more_brain import MoREBrainEncoder, TrainConfig, train_encoder


def _data():
    rng = np.random.default_rng(0)
    y = rng.standard_normal((40, 12)).astype(np.float32)
    d = plant_voxels(y, num_voxels=32, num_subjects=2, snr=2.0, branching=(2, 4), seed=1)
    t = torch.tensor(y)
    return {s: (torch.tensor(d.voxels[s]), t) for s in d.subjects}


def _model():
    torch.manual_seed(0)
    return MoREBrainEncoder(
        voxels_per_subject={"subj01": 32, "subj02": 32},
        target_dim=12,
        d_model=4,
        d_hidden=8,
        experts=(2, 4),
        noise_std=0.1,
    )


def test_exact_resume_and_best_validation(tmp_path):
    data = _data()
    train = {s: (x[:30], y[:30]) for s, (x, y) in data.items()}
    val = {s: (x[30:], y[30:]) for s, (x, y) in data.items()}
    cfg = TrainConfig(steps=9, batch_size=8, eval_every=3, restore_best=False, schedule="cosine")
    full = _model()
    a = train_encoder(full, train, cfg, validation=val, out_dir=tmp_path / "a")
    part = _model()
    p = train_encoder(part, train, cfg, validation=val, out_dir=tmp_path / "b", stop_after=5)
    assert p.result.reason == "interrupted" and len(p.history) == 5
    rest = _model()
    r = train_encoder(rest, train, cfg, validation=val, out_dir=tmp_path / "b", resume=True)
    sa, sb = full.state_dict(), rest.state_dict()
    assert sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)
    assert r.history == a.history and r.result.evals == a.result.evals
    assert [e["step"] for e in a.result.evals] == [3, 6, 9]
    assert a.result.best_metric == max(e["val_top5"] for e in a.result.evals)
    with pytest.raises(ValueError, match="batch_size must be >= 2"):
        TrainConfig(batch_size=1)


def test_sci_moe_train_more_brain(tmp_path, capsys):
    texts, _, _ = newsgroup_sentences()
    keep = np.sort(np.random.default_rng(0).choice(len(texts), 60, False))
    emb = np.random.default_rng(1).standard_normal((60, 384)).astype(np.float32)
    cache = tmp_path / "emb.npz"  # stands in for MiniLM's embeddings of the 60 sentences
    key = text_hash([texts[i] for i in keep], "all-MiniLM-L6-v2")
    atomic_save_npz(cache, {"features": emb, "key": np.array(key)})
    out = tmp_path / "run"
    argv = ["train", "more-brain", "--out", str(out), "--cache", str(cache)]
    argv += ["--max-sentences", "60", "--num-voxels", "32", "--n-val", "10", "--n-test", "10"]
    argv += ["--d-model", "4", "--d-hidden", "8", "--experts", "2,4", "--batch-size", "8"]
    assert main([*argv, "--steps", "3", "--eval-every", "2", "--no-progress"]) == 0
    res = json.loads((out / "results.json").read_text())
    assert res["train"]["finished"] and [e["step"] for e in res["train"]["evals"]] == [2, 3]
    assert set(res["test"]) == {"subj01", "subj02"}
    assert 0 <= res["test"]["subj01"]["top5"] <= 1 and res["test"]["subj01"]["chance_top1"] == 0.1
    assert set(res["regions"]) == {"subject", "level0_2_experts", "level1_4_experts"}
    state = torch.load(out / "model.pt", weights_only=True)
    assert MoREBrainEncoder(**state["config"]).load_state_dict(state["model"])
    capsys.readouterr()
    bad = ["train", "more-brain", "--out", str(tmp_path / "x"), "--cache", str(cache)]
    assert main([*bad, "--experts", "2,0"]) == 2
    assert "--experts" in capsys.readouterr().err
    assert main([*bad, "--batch-size", "1"]) == 2
    assert main([*bad, "--max-sentences", "60", "--n-test", "55"]) == 2
    assert "--n-val/--n-test" in capsys.readouterr().err


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_train_transfer_and_score_on_cuda():
    from sci_moe._util import module_device
    from sci_moe.neuro.more_brain import (
        finetune_routers,
        predict,
        retrieval_accuracy,
        voxel_assignments,
    )

    data = _data()
    x1, y1 = data["subj01"]
    train = {"subj01": (x1[:30], y1[:30])}
    val = {"subj01": (x1[30:], y1[30:])}
    cfg = TrainConfig(steps=4, batch_size=8, eval_every=2, device="cuda")
    model = _model()
    run = train_encoder(model, train, cfg, validation=val)
    assert module_device(model).type == "cuda"
    assert all(0 <= e["val_top5"] <= 1 for e in run.result.evals)
    pred = predict(model, x1[30:], "subj01")  # CPU voxels in, the model's device out
    assert pred.device.type == "cuda" and bool(torch.isfinite(pred).all())
    assert 0 <= retrieval_accuracy(pred, y1[30:])[5] <= 1  # CPU targets moved to pred
    assert [a.shape for a in voxel_assignments(model, x1[30:], "subj01")] == [(32,), (32,)]
    # a new subject's front end is drawn on the CPU (a CPU model's draws), put on cuda
    cpu_model = _model()
    torch.manual_seed(5)
    cpu_model.add_subject("new", 32)
    torch.manual_seed(5)
    model.add_subject("new", 32)
    for name in ("value", "identity"):
        on_gpu = getattr(model.frontend, name)["new"]
        assert on_gpu.device.type == "cuda"
        assert torch.equal(on_gpu.cpu(), getattr(cpu_model.frontend, name)["new"])
    x2, y2 = data["subj02"]
    ft = finetune_routers(model, "new", x2[:30], y2[:30], cfg, validation=(x2[30:], y2[30:]))
    assert module_device(model).type == "cuda" and all(map(np.isfinite, ft.history))
