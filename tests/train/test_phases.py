"""Runs of several phases: resume per phase, interruption across phases, shared budget."""

from __future__ import annotations

import time

import pytest
import torch

from sci_moe.train import Phases, ShuffledBatches, TrainConfig, Trainer, seed_everything


def _run(out, stop_after=None, resume=False, max_hours=None, phases=("a", "b", "c")):
    cfg = TrainConfig(steps=4, batch_size=4, lr=0.05, eval_every=0, progress=False)
    seed_everything(0)
    x = torch.randn(12, 3, generator=torch.Generator().manual_seed(1))
    model = torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.Dropout(0.3), torch.nn.Linear(8, 1))
    run = Phases(out, resume=resume, max_hours=max_hours, stop_after=stop_after)
    for k, phase in enumerate(phases):
        if not run.can_start(phase):
            break
        target = float(k + 1)
        data = ShuffledBatches(12, 4, lambda idx: x[idx], seed=k)

        def loss(m, b, target=target):
            return (m(b) - target).square().mean()

        run.fit(
            phase, Trainer(model, loss, data, run.config(cfg, seed=k), out_dir=run.folder(phase))
        )
        if run.paused:
            break
    return model, run


def _same(a, b):
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def test_interrupted_anywhere_and_resumed_equals_uninterrupted(tmp_path):
    ref, run = _run(tmp_path / "ref")
    assert run.summary()["finished"] and run.summary()["step"] == 12
    for cut in (1, 4, 7):  # inside a phase, at a phase's end, inside a later one
        out = tmp_path / f"cut{cut}"
        _, first = _run(out, stop_after=cut)
        assert first.summary()["reason"] == "interrupted" and first.summary()["step"] == cut
        got, second = _run(out, resume=True)
        assert second.summary()["finished"] and _same(got, ref)


def test_budget_is_shared_by_the_phases(tmp_path, capsys):
    run = Phases(tmp_path, max_hours=1e-7)
    time.sleep(0.01)  # the budget is spent before the first phase
    assert not run.can_start("a") and run.summary()["reason"] == "budget"
    assert "--resume" in capsys.readouterr().err
    cfg = TrainConfig(steps=4, progress=False)
    assert Phases(tmp_path, max_hours=2.0).config(cfg).max_hours <= 2.0
    with pytest.raises(ValueError, match="stop_after must be >= 1"):
        Phases(tmp_path, stop_after=0)
    # a phase with a checkpoint is resumed even when the budget is spent (it only restores)
    _run(tmp_path / "r", phases=("a",))
    late = Phases(tmp_path / "r", resume=True, max_hours=1e-9)
    time.sleep(0.01)
    assert late.can_start("a") and not late.can_start("b")
