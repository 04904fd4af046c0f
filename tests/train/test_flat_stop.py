"""The engine's flat stop (``stop_when_flat``): where it stops, its minimum, resume."""

from __future__ import annotations

import pytest
import torch

from sci_moe._util import load_verified, save_verified
from sci_moe.train import CHECKPOINT_NAME, TrainConfig, is_flat

from ._toy import make, weights

RULE = {"stop_when_flat": 0.01, "eval_every": 2, "restore_best": False}


def _equal(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def _first_flat(evals: list[dict], min_steps: int = 0) -> int | None:
    """The first evaluation step where the curve so far is flat (the rule, by hand)."""
    for i, e in enumerate(evals):
        steps = [x["step"] for x in evals[: i + 1]]
        values = [x["val_loss"] for x in evals[: i + 1]]
        if e["step"] >= min_steps and is_flat(steps, values, tol=0.01):
            return e["step"]
    return None


@pytest.mark.parametrize(
    "bad, match",
    [
        ({"stop_when_flat": -0.1}, "stop_when_flat must be None"),
        ({"stop_when_flat": float("nan")}, "stop_when_flat must be None"),
        ({"stop_when_flat": "1%"}, "stop_when_flat must be None"),
        ({"flat_tail": 0.0}, r"flat_tail must be a number in \(0.0, 1.0\)"),
        ({"flat_tail": 1.0}, "flat_tail must be"),
        ({"flat_min_steps": -1}, "flat_min_steps must be an integer >= 0"),
    ],
)
def test_config_refuses_bad_flat_settings(bad, match):
    with pytest.raises(ValueError, match=match):
        TrainConfig(**bad)


def test_stops_at_the_first_flat_evaluation_and_not_before():
    full = make(300, None, eval_every=2, restore_best=False).fit()
    expected = _first_flat(full.evals)
    assert expected is not None and 10 <= expected < 300  # the toy flattens inside the cap
    res = make(300, None, **RULE).fit()
    assert res.reason == "flat" and res.finished and res.step == expected
    assert res.evals == full.evals[: len(res.evals)]  # the same run, cut where it is flat
    assert is_flat([e["step"] for e in res.evals], [e["val_loss"] for e in res.evals], tol=0.01)


def test_never_stops_before_the_minimum_step():
    # lr ~ 0: flat as soon as there are five evaluations (step 10), held off to step 40
    res = make(300, None, **{**RULE, "lr": 1e-9, "flat_min_steps": 40}).fit()
    assert res.reason == "flat" and res.step == 40
    assert make(300, None, **{**RULE, "lr": 1e-9}).fit().step == 10


def test_mode_max_mirrors_the_rule():
    ref = make(300, None, **RULE).fit()
    t = make(300, None, **RULE, mode="max")
    inner = t.evaluate_fn
    t.evaluate_fn = lambda m: {"val_loss": -inner(m)["val_loss"]}
    res = t.fit()
    assert res.reason == "flat" and res.step == ref.step


def test_the_cap_still_ends_a_curve_that_is_not_flat():
    res = make(12, None, **{**RULE, "lr": 0.05}).fit()  # still improving at the cap
    assert res.step == 12 and res.reason == "completed"
    assert not is_flat([e["step"] for e in res.evals], [e["val_loss"] for e in res.evals])
    off = make(40, None, eval_every=2, lr=1e-9).fit()  # the rule is off by default
    assert off.reason == "completed" and off.step == 40


def test_resume_mid_run_stops_where_an_uninterrupted_run_does(tmp_path):
    ref = make(300, None, **RULE)
    res = ref.fit()
    assert res.reason == "flat"
    t = make(300, tmp_path, **RULE)
    assert t.fit(stop_after=res.step // 2 + 1).reason == "interrupted"  # between evaluations
    t = make(300, tmp_path, **RULE)
    back = t.fit(resume=True)
    assert (back.reason, back.step, back.evals) == ("flat", res.step, res.evals)
    assert _equal(weights(ref), weights(t))
    again = make(300, tmp_path, **RULE).fit(resume=True)  # a stopped run stays stopped
    assert (again.reason, again.step) == ("flat", res.step)


def test_resume_refuses_another_flat_rule_and_accepts_old_checkpoints(tmp_path):
    make(300, tmp_path, eval_every=2).fit(stop_after=6)
    with pytest.raises(ValueError, match=r"stop_when_flat: None -> 0.01"):
        make(300, tmp_path, **{**RULE, "restore_best": True}).fit(resume=True)
    # a checkpoint written before the flat fields existed resumes with their defaults
    path = tmp_path / CHECKPOINT_NAME
    state = load_verified(path)
    for key in ("stop_when_flat", "flat_tail", "flat_min_steps"):
        del state["config"][key]
    save_verified(path, state)
    assert make(300, tmp_path, eval_every=2).fit(resume=True).step == 300
