"""The training engine: schedule, exact resume (also after SIGKILL), faults, budget."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from sci_moe.train import (
    CHECKPOINT_NAME,
    METRICS_NAME,
    TrainConfig,
    TrainingDiverged,
    lr_factor,
    read_metrics,
    warmup_steps,
)

from ._toy import make, weights

ROOT = Path(__file__).resolve().parents[2]


def _equal(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("steps", list(range(1, 21)))
@pytest.mark.parametrize("schedule", ["cosine", "linear", "constant"])
def test_schedule_is_proper_for_any_number_of_steps(steps, schedule):
    f = [lr_factor(s, steps, schedule, warmup=0.3, min_lr_ratio=0.1) for s in range(steps)]
    assert all(0 < v <= 1 for v in f)
    w = warmup_steps(steps, 0.3)
    assert w <= steps - 1
    assert f[w] == pytest.approx(1.0)  # the peak is reached right after the warm-up
    assert f[:w] == sorted(f[:w])
    if schedule != "constant" and steps - w > 1:
        assert f[-1] == pytest.approx(0.1)


@pytest.mark.parametrize(
    "bad, match",
    [
        ({"steps": 0}, "steps must be an integer >= 1"),
        ({"steps": 2.5}, "steps must be an integer"),
        ({"lr": -1}, "lr must be a number > 0"),
        ({"warmup": 1.0}, "warmup must be"),
        ({"schedule": "step"}, "schedule must be one of"),
        ({"threads": -1}, "threads must be an integer >= 0"),
        ({"max_hours": 0}, "max_hours must be"),
        ({"progress": "yes"}, "progress must be true or false"),
    ],
)
def test_config_refuses_bad_values(bad, match):
    with pytest.raises(ValueError, match=match):
        TrainConfig(**bad)


def test_trains_and_restores_best(tmp_path):
    t = make(60, tmp_path)
    res = t.fit()
    assert res.reason == "completed" and res.step == 60 and res.finished
    vals = [e["val_loss"] for e in res.evals]
    assert res.best_metric == min(vals) < vals[0]
    recs = read_metrics(tmp_path / METRICS_NAME)
    assert [r["step"] for r in recs if "train_loss" in r][-1] == 60
    assert any("val_loss" in r for r in recs)


def test_exact_resume_after_interruptions(tmp_path):
    ref = make(40, tmp_path / "a", restore_best=False)
    ref.fit()
    for stop in (7, 13, 20):  # three pieces, the last one runs to the end
        t = make(40, tmp_path / "b", restore_best=False)
        res = t.fit(resume=True, stop_after=stop)
    assert res.step == 40 and res.reason == "completed"
    assert _equal(weights(ref), weights(t))
    assert ref.evals == t.evals
    # metrics.jsonl has every step's line once
    steps = [r["step"] for r in read_metrics(tmp_path / "b" / METRICS_NAME) if "lr" in r]
    assert steps == sorted(set(steps))


def test_exact_resume_after_sigkill(tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "tests.train._toy"]
    subprocess.run([*cmd, str(tmp_path / "a"), "300"], check=True, env=env, cwd=ROOT)
    out = tmp_path / "b"
    proc = subprocess.Popen([*cmd, str(out), "300"], env=env, cwd=ROOT)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # kill once a few checkpoints exist
        ck = out / METRICS_NAME
        if ck.exists() and len(ck.read_text().splitlines()) >= 4:
            break
        if proc.poll() is not None:
            break
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    subprocess.run([*cmd, str(out), "300", "--resume"], check=True, env=env, cwd=ROOT)
    a = torch.load(tmp_path / "a" / "final.pt")
    b = torch.load(out / "final.pt")
    assert _equal(a, b)
    assert not list(out.glob(".checkpoint*.tmp"))


def _damage(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def test_damaged_checkpoint_falls_back_to_previous(tmp_path, capsys):
    make(20, tmp_path, checkpoint_every=5).fit(stop_after=10)  # checkpoints at 5 and 10
    _damage(tmp_path / CHECKPOINT_NAME)
    t = make(20, tmp_path, checkpoint_every=5)
    res = t.fit(resume=True)
    assert res.resumed_from == 5 and res.step == 20
    assert "damaged" in capsys.readouterr().err


def test_both_checkpoints_damaged_is_refused(tmp_path):
    make(20, tmp_path, checkpoint_every=5).fit(stop_after=10)
    _damage(tmp_path / CHECKPOINT_NAME)
    _damage(tmp_path / "checkpoint_prev.pt")
    with pytest.raises(ValueError, match="no usable training checkpoint"):
        make(20, tmp_path).fit(resume=True)


def test_resume_refuses_other_settings_and_fewer_steps(tmp_path):
    make(20, tmp_path).fit(stop_after=10)
    with pytest.raises(ValueError, match=r"lr: 0.02 -> 0.05"):
        make(20, tmp_path, lr=0.05).fit(resume=True)
    with pytest.raises(ValueError, match="past steps=5"):
        make(5, tmp_path).fit(resume=True)
    with pytest.raises(ValueError, match="already holds a training checkpoint"):
        make(20, tmp_path).fit()
    # the budget and the thread count may change
    res = make(20, tmp_path, threads=1, max_hours=5.0).fit(resume=True)
    assert res.step == 20


def test_nan_loss_stops_with_the_step_and_keeps_the_checkpoint(tmp_path):
    t = make(30, tmp_path, checkpoint_every=5)
    inner = t.loss_fn

    def loss(m, b):
        value = inner(m, b)
        return value * float("nan") if t.step == 12 else value

    t.loss_fn = loss
    with pytest.raises(TrainingDiverged, match="step 13 of 30"):
        t.fit()
    from sci_moe._util import load_verified

    assert load_verified(tmp_path / CHECKPOINT_NAME)["step"] == 10


def test_budget_checkpoints_and_resume_finishes_identically(tmp_path, capsys):
    ref = make(15, tmp_path / "a", restore_best=False)
    ref.fit()
    t = make(15, tmp_path / "b", restore_best=False, max_hours=1e-9)
    res = t.fit()
    assert res.reason == "budget" and res.step == 1 and not res.finished
    assert "--resume" in capsys.readouterr().err
    t = make(15, tmp_path / "b", restore_best=False)
    assert t.fit(resume=True).reason == "completed"
    assert _equal(weights(ref), weights(t))


def test_early_stopping(tmp_path):
    t = make(400, None, eval_every=1, patience=3, lr=1e-6, min_delta=1.0)
    res = t.fit()
    assert res.reason == "early_stop" and res.step == 4 and res.best_step == 1


def test_monitor_must_be_an_evaluated_metric():
    with pytest.raises(ValueError, match="monitor='val_acc'"):
        make(10, None, monitor="val_acc").fit()


def test_patience_after_keeps_early_evaluations_out_of_the_count():
    t = make(400, None, eval_every=1, patience=3, lr=1e-6, min_delta=1.0)
    t.patience_after = 10
    res = t.fit()
    assert res.reason == "early_stop" and res.step == 13 and res.best_step == 1
