"""fit_until_flat: the byte classifier trained in cycles until its validation accuracy is flat
(the benchmark's rule), seeded, capped, and the same as cycles run by hand."""

from dataclasses import replace

import numpy as np
import pytest
import torch

import sci_moe.language.provenance.byte_classifier as bc
from sci_moe.language.provenance import (
    ByteClassifierConfig,
    ByteTransformerClassifier,
    fit_until_flat,
)

WORDS = "river city king war music law ship star bird tree stone road light book".split()
LM = dict(d_model=16, n_layers=1, n_heads=2, seq_len=32, d_hidden=16, num_experts=2, top_k=1)


def _data(n, seed):
    rng = np.random.default_rng(seed)
    prose = [" ".join(rng.choice(WORDS, size=6)) + "." for _ in range(n)]
    lists = ["- " + " ".join(rng.choice(WORDS, size=6)) for _ in range(n)]
    return prose + lists, np.repeat([0, 1], n)


def _clf(seed=3):
    cfg = ByteClassifierConfig(lm=LM, steps=4, batch_size=8, seed=seed)
    return ByteTransformerClassifier(cfg, progress=False)


def _fit(max_cycles=2, clf=None, **kw):
    x, y = _data(8, 0)
    val = _data(4, 1)
    return fit_until_flat(
        clf or _clf(), x, y, ["p", "l"], val=val, eval_every=2, max_cycles=max_cycles, **kw
    )


@pytest.mark.parametrize("flat", [False, True])
def test_cycles_stop_flat_or_at_the_cap(monkeypatch, flat):
    monkeypatch.setattr(bc, "is_flat", lambda *a, **k: flat)
    clf, curve, cycles, converged = _fit(max_cycles=2)
    assert (cycles, converged) == ((1, True) if flat else (2, False))
    assert [s for s, _ in curve] == [2, 4, 6, 8][: 2 * cycles]  # cycle c shifted by 4 c
    assert clf.config.seed == 3 and clf.classes == ("p", "l")


def test_min_cycles_trains_on_past_a_flat_first_cycle(monkeypatch):
    # every curve flat (as the end of one annealed cycle looks): min_cycles=2 still trains
    # a second cycle, judged once, after it
    seen = []
    monkeypatch.setattr(bc, "is_flat", lambda steps, *a, **k: seen.append(list(steps)) or True)
    clf, curve, cycles, converged = _fit(max_cycles=3, min_cycles=2)
    assert (cycles, converged) == (2, True) and [s for s, _ in curve] == [2, 4, 6, 8]
    assert seen[0] == [2, 4, 6, 8] and clf.config.seed == 3
    # the same two cycles as a fit forced to its cap of two
    monkeypatch.setattr(bc, "is_flat", lambda *a, **k: False)
    capped = _fit(max_cycles=2)
    assert capped[1] == curve
    for k, v in clf.model.state_dict().items():
        assert torch.equal(v, capped[0].model.state_dict()[k])


def test_min_cycles_equal_to_the_cap_runs_the_cap(monkeypatch):
    monkeypatch.setattr(bc, "is_flat", lambda *a, **k: True)
    assert _fit(max_cycles=2, min_cycles=2)[2:] == (2, True)
    assert _fit(max_cycles=2, min_cycles=1)[2:] == (1, True)  # the default judges cycle 1


@pytest.mark.parametrize("min_cycles", [0, 3, -1])
def test_min_cycles_outside_one_to_the_cap_raises(min_cycles):
    x, y = _data(2, 0)
    with pytest.raises(ValueError, match=f"min_cycles={min_cycles} with max_cycles=2"):
        fit_until_flat(
            _clf(), x, y, val=_data(1, 1), eval_every=2, max_cycles=2, min_cycles=min_cycles
        )


def test_same_seed_same_curve_and_the_hand_run_cycles(monkeypatch):
    monkeypatch.setattr(bc, "is_flat", lambda *a, **k: False)  # two full cycles
    a = _fit()
    b = _fit()
    assert a[1] == b[1] and a[2:] == b[2:] == (2, False)
    # the same as cycles run by hand: seed 3, then seed 3 + 100 from the fitted weights
    x, y = _data(8, 0)
    val = _data(4, 1)
    hand = _clf()
    hand.fit(x, y, ["p", "l"], val=val, eval_every=2)
    first = [[s, acc] for s, acc in hand.curve]
    hand.config = replace(hand.config, seed=103)
    hand.fit(x, y, ["p", "l"], val=val, eval_every=2, warm_start=True)
    assert a[1] == first + [[4 + s, acc] for s, acc in hand.curve]
    for k, v in a[0].model.state_dict().items():
        assert torch.equal(v, hand.model.state_dict()[k])


def test_the_real_judge_reads_the_accuracy_curve():
    assert bc._accuracy_flat([[10 * i, v] for i, v in enumerate([0.5, 0.7, 0.8, 0.8, 0.801])])
    assert not bc._accuracy_flat([[10 * i, v] for i, v in enumerate([0.5, 0.6, 0.7, 0.8, 0.9])])
    assert not bc._accuracy_flat([[10, 0.9], [20, 0.9]])  # fewer than five evaluations


@pytest.mark.parametrize(("kw", "message"), [({"eval_every": 0}, "eval_every"), ({}, "max_cycles")])
def test_bad_settings_raise(kw, message):
    x, y = _data(2, 0)
    args = {"val": _data(1, 1), "eval_every": 2, "max_cycles": 0, **kw}
    if kw:
        args["max_cycles"] = 1
    with pytest.raises(ValueError, match=message):
        fit_until_flat(_clf(), x, y, **args)
