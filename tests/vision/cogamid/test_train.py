import pytest
import torch

from sci_moe.vision.cogamid import IncrementalConfig, SceneConfig, run_incremental


def _cfg(method):
    return IncrementalConfig(
        method=method,
        n_components=2,
        scene=SceneConfig(image_size=16, max_objects=2),
        n_train=6,
        n_test=4,
        steps=3,
        increment_steps=2,
        batch_size=2,
        width=4,
        feature_dim=4,
        replay_per_class=8,
        max_pixels_per_class=200,
    )


@pytest.mark.parametrize("method", ["finetune", "prototype", "gmm"])
def test_runs_all_steps(method):
    out = run_incremental(_cfg(method))
    assert len(out["steps"]) == 3
    for s in out["steps"]:
        assert 0 <= s["miou_all"] <= 1
    if method != "finetune":
        assert out["memory"].classes == [1, 2, 3, 4, 5, 6]


def _same_run(a, b):
    def nan_free(steps):
        return [{k: (None if v != v else v) for k, v in s.items()} for s in steps]

    assert nan_free(a["steps"]) == nan_free(b["steps"])
    for x, y in zip(
        a["model"].state_dict().values(), b["model"].state_dict().values(), strict=True
    ):
        assert torch.equal(x, y)
    sa, sb = a["memory"].state_dict(), b["memory"].state_dict()
    assert sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def test_resume_is_bit_identical(tmp_path):
    full = run_incremental(_cfg("gmm"))
    first = run_incremental(_cfg("gmm"), out_dir=tmp_path, stop_after=1)
    assert len(first["steps"]) == 2 and first["train"]["finished"]
    assert sorted(p.name for p in tmp_path.glob("task_*")) == ["task_0", "task_1"]
    resumed = run_incremental(_cfg("gmm"), out_dir=tmp_path, resume=True)
    _same_run(full, resumed)


def test_resume_inside_a_step_is_bit_identical(tmp_path):
    """Interrupted after 4 optimiser steps (inside step 1, whose loss samples the memory
    from the global generator), then once more inside step 2: the resumed run equals the
    uninterrupted one bitwise (weights, memory, scores)."""
    full = run_incremental(_cfg("gmm"))
    part = run_incremental(_cfg("gmm"), out_dir=tmp_path, interrupt_after=4)
    assert part["train"]["reason"] == "interrupted" and len(part["steps"]) == 1
    part = run_incremental(_cfg("gmm"), out_dir=tmp_path, resume=True, interrupt_after=2)
    assert part["train"]["reason"] == "interrupted" and len(part["steps"]) == 2
    resumed = run_incremental(_cfg("gmm"), out_dir=tmp_path, resume=True)
    assert resumed["train"]["phases"]["task_2"]["resumed_from"] == 1
    _same_run(full, resumed)
    with pytest.raises(ValueError, match="already holds a training checkpoint"):
        run_incremental(_cfg("gmm"), out_dir=tmp_path)


def test_scene_from_a_table_or_a_string():
    cfg = IncrementalConfig(scene="image_size=16, max_objects=2, modes_per_class=2:3")
    assert cfg.scene == SceneConfig(image_size=16, max_objects=2, modes_per_class=(2, 3))
    assert IncrementalConfig(scene={"noise": 0.1}).scene.noise == 0.1
    with pytest.raises(ValueError, match="scene: unknown field 'colour'"):
        IncrementalConfig(scene="colour=3")
    with pytest.raises(ValueError, match="scene: image_size must be a number"):
        IncrementalConfig(scene="image_size=big")
    with pytest.raises(ValueError, match="base must be <= the scene's n_classes = 3"):
        IncrementalConfig(scene={"n_classes": 3})
    with pytest.raises(ValueError, match="increment_steps must be an integer >= 0"):
        IncrementalConfig(increment_steps=-1)


def test_bad_method():
    with pytest.raises(ValueError, match="method"):
        IncrementalConfig(method="replay")


def test_dynamic_adjustment_and_grc_run():
    cfg = _cfg("gmm")
    cfg.dynamic_adjustment, cfg.da_threshold, cfg.grc_weight = True, 0.2, 0.5
    out = run_incremental(cfg)
    assert len(out["steps"]) == 3 and out["memory"].classes == [1, 2, 3, 4, 5, 6]
    with pytest.raises(ValueError, match="method='gmm'"):
        IncrementalConfig(method="prototype", grc_weight=1.0)


def test_grc_loss_value_and_gradient(float_dtype):
    from sci_moe.vision.cogamid import grc_loss

    f = torch.randn(6, 3, requires_grad=True)
    y = torch.tensor([5, 5, 5, 0, 6, 6])
    old = torch.randn(4, 3)
    got = grc_loss(f, y, [5, 6], old, temperature=2.0)
    terms = []
    for c in (5, 6):
        fc = f[y == c]
        centre = fc.mean(0).detach()
        for row in fc:
            pos = torch.exp(-((row - centre) ** 2).sum() / 2.0)
            neg = sum(torch.exp(-((row - m) ** 2).sum() / 2.0) for m in old)
            terms.append(-torch.log(pos / (pos + neg)))
    ref = torch.stack(terms).mean()
    tol = 1e-5 if float_dtype == torch.float32 else 1e-10
    torch.testing.assert_close(got, ref, atol=tol, rtol=tol)
    g1 = torch.autograd.grad(got, f)[0]
    g2 = torch.autograd.grad(ref, f)[0]
    torch.testing.assert_close(g1, g2, atol=tol * 10, rtol=tol * 10)
    assert float(grc_loss(f, y, [3], old).detach()) == 0.0


def test_grc_loss_is_exact_far_from_the_origin():
    """Squared distances from differences: cdist's matrix-product formula was off by 1.7e-2
    in the loss for float32 features near 300."""
    from sci_moe.vision.cogamid import grc_loss

    g = torch.Generator().manual_seed(0)
    f = torch.randn(40, 8, generator=g, dtype=torch.float32) + 300
    old = torch.randn(30, 8, generator=g, dtype=torch.float32) + 300
    y = torch.full((40,), 5)
    fd, od = f.double(), old.double()
    pos = -(fd - fd.mean(0)).pow(2).sum(-1, keepdim=True)
    neg = -(fd[:, None] - od).pow(2).sum(-1)
    ref = -(pos.squeeze(1) - torch.logsumexp(torch.cat([pos, neg], 1), 1)).mean()
    assert abs(float(grc_loss(f, y, [5], old)) - float(ref)) < 1e-4


def test_resume_from_base_step_is_bit_identical(tmp_path):
    # Interrupt right after step 0 (the base model): the replay steps are then re-run
    # from the checkpoint only, and must repeat the uninterrupted run exactly.
    full = run_incremental(_cfg("prototype"))
    run_incremental(_cfg("prototype"), out_dir=tmp_path, stop_after=0)
    assert [p.name for p in tmp_path.glob("task_*")] == ["task_0"]
    resumed = run_incremental(_cfg("prototype"), out_dir=tmp_path, resume=True)
    assert len(resumed["steps"]) == 3
    for a, b in zip(full["steps"], resumed["steps"], strict=True):
        assert {k: v for k, v in a.items() if v == v} == {k: v for k, v in b.items() if v == v}
    for a, b in zip(
        full["model"].state_dict().values(), resumed["model"].state_dict().values(), strict=True
    ):
        assert torch.equal(a, b)
    sa, sb = full["memory"].state_dict(), resumed["memory"].state_dict()
    assert sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def test_progress_bar_on_a_terminal(monkeypatch):
    import io
    import sys

    class Tty(io.StringIO):
        def isatty(self):
            return True

    err = Tty()
    monkeypatch.setattr(sys, "stderr", err)
    cfg = _cfg("finetune")
    run_incremental(cfg, stop_after=0)
    assert "CoGaMiD finetune" in err.getvalue()
    # the bar counts the base step's iterations (redraws are rate-limited, so only the
    # total is certain to be printed)
    assert f"0/{cfg.steps}" in err.getvalue()
    quiet = Tty()
    monkeypatch.setattr(sys, "stderr", quiet)
    run_incremental(cfg, stop_after=0, progress=False)
    assert quiet.getvalue() == ""
    log = io.StringIO()  # not a terminal: plain lines, no carriage-return redraws
    monkeypatch.setattr(sys, "stderr", log)
    run_incremental(cfg, stop_after=0)
    assert "\r" not in log.getvalue()
    assert f"{cfg.steps}/{cfg.steps}" in log.getvalue()


def test_validation_images_drive_early_stopping_and_test_is_scored_after():
    """With ``n_val`` the engine evaluates validation images (early stopping, best
    weights); the reported metrics are the test images' scores of the restored model."""
    cfg = IncrementalConfig(
        **{
            **_cfg("gmm").to_dict(),
            "n_val": 12,
            "steps": 6,
            "increment_steps": 6,
            "eval_every": 1,
            "patience": 2,
            "restore_best": True,
        }
    )
    out = run_incremental(cfg)
    assert len(out["curves"]) == len(out["steps"]) == 3
    for c in out["curves"]:
        assert c["reason"] in ("completed", "early_stop")
        assert [e[0] for e in c["evals"]] == list(range(1, c["step"] + 1))
        assert c["best_step"] in [e[0] for e in c["evals"]]
    # the test metrics are not the validation curve's values (other images)
    plain = run_incremental(_cfg("gmm"))
    assert plain["curves"][0]["evals"][-1][0] == 3


def test_patience_after_and_n_val_are_checked():
    with pytest.raises(ValueError, match="n_val"):
        IncrementalConfig(n_val=-1)
    with pytest.raises(ValueError, match="patience_after"):
        IncrementalConfig(patience_after=-1)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize(
    "method, extra",
    [
        ("gmm", {"dynamic_adjustment": True, "grc_weight": 0.1, "n_val": 2}),
        ("prototype", {}),
    ],
)
def test_incremental_steps_on_cuda_from_a_cpu_base(tmp_path, method, extra):
    """A CPU step-0 state in, the later steps on cuda (the frozen previous model moved
    beside the model); the memory stays on the CPU; the scores are finite and the first
    loss of step 1 is the CPU run's (the same replay draws)."""
    import json
    from dataclasses import replace

    base_cfg = replace(_cfg("finetune"), n_val=extra.get("n_val", 0))
    base = run_incremental(base_cfg, stop_after=0)
    start = {"model": base["model"].state_dict()}
    runs, first = {}, {}
    for device in ("cpu", "cuda"):
        cfg = replace(_cfg(method), device=device, log_every=1, **extra)
        runs[device] = run_incremental(cfg, tmp_path / device, start_state=start)
        lines = (tmp_path / device / "task_1" / "metrics.jsonl").read_text().splitlines()
        first[device] = next(r["train_loss"] for r in map(json.loads, lines) if "train_loss" in r)
    out = runs["cuda"]
    assert out["train"]["finished"]
    assert next(out["model"].parameters()).device.type == "cuda"
    assert all(0 <= s["miou_all"] <= 1 for s in out["steps"])
    mem = out["memory"].state_dict()
    assert mem and all(t.device.type == "cpu" for t in mem.values())
    assert first["cuda"] == pytest.approx(first["cpu"], rel=1e-2)
