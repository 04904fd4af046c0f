"""Issue 27: tempering inputs and the ``log_prob`` callback are checked at the boundary.

NaN starts, NaN weights, a NaN ``log_prob`` or one of the wrong shape ran and returned
garbage; now each raises a ``ValueError`` naming the chain / system / level.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from sci_moe.sampling.tempering import (
    RWMH,
    OpenMMTemperingConfig,
    ParallelTempering,
    SimulatedTempering,
    TemperingConfig,
    geometric_ladder,
)

BETAS = geometric_ladder(0.1, 4, dtype=torch.float64)


def gauss(x):
    return -0.5 * (x**2).sum(1)


def samplers(**kw):
    cfg = TemperingConfig(BETAS, RWMH(0.5), **kw)
    return [SimulatedTempering(gauss, cfg), ParallelTempering(gauss, cfg)]


@pytest.mark.parametrize("kind", [0, 1])
def test_nan_x0_names_the_chain(kind):
    x0 = torch.zeros(5, 2, dtype=torch.float64)
    x0[3, 1] = float("nan")
    what = "chains" if kind == 0 else "systems"
    with pytest.raises(ValueError, match=rf"x0 has NaN/Inf entries in {what} \[3\]"):
        samplers()[kind].run(x0, 5, progress=False)


def test_nan_log_weights_name_the_level():
    g = torch.zeros(4, dtype=torch.float64)
    g[1] = float("nan")
    with pytest.raises(ValueError, match=r"log_weights has NaN/Inf entries at levels \[1\]"):
        TemperingConfig(BETAS, RWMH(0.5), log_weights=g)


def test_openmm_config_rejects_nan_log_weights():
    with pytest.raises(ValueError, match="finite"):
        OpenMMTemperingConfig(temperatures_k=[600.0, 300.0], log_weights=[0.0, float("nan")])


@pytest.mark.parametrize("kind", [0, 1])
def test_log_prob_nan_at_start_names_the_chain(kind):
    def lp(x):
        out = gauss(x)
        return torch.where(x[:, 0] > 0.5, torch.full_like(out, float("nan")), out)

    x0 = torch.zeros(4, 1, dtype=torch.float64)
    x0[2] = 1.0
    cfg = TemperingConfig(BETAS, RWMH(0.5))
    cls = [SimulatedTempering, ParallelTempering][kind]
    what = "chains" if kind == 0 else "systems"
    with pytest.raises(ValueError, match=rf"not finite at the starting state of {what} \[2\]"):
        cls(lp, cfg).run(x0, 5, progress=False)


@pytest.mark.parametrize("kind", [0, 1])
@pytest.mark.parametrize("bad", ["column", "scalar", "numpy"])
def test_log_prob_wrong_shape_raises(kind, bad):
    def lp(x):
        out = gauss(x)
        return {"column": out[:, None], "scalar": out.sum(), "numpy": out.numpy()}[bad]

    cfg = TemperingConfig(BETAS, RWMH(0.5))
    cls = [SimulatedTempering, ParallelTempering][kind]
    with pytest.raises(ValueError, match="log_prob"):
        cls(lp, cfg).run(torch.zeros(3, 2, dtype=torch.float64), 5, progress=False)


def test_log_prob_nan_mid_run_warns_and_posinf_raises():
    def lp_nan(x):  # NaN beyond |x| > 1: rejected proposals, reported
        out = gauss(x)
        return torch.where(x.abs().max(1).values > 1, torch.full_like(out, float("nan")), out)

    cfg = TemperingConfig(BETAS, RWMH(1.0))
    with pytest.warns(RuntimeWarning, match="NaN at .* proposed states"):
        res = SimulatedTempering(lp_nan, cfg).run(torch.zeros(4, 1, dtype=torch.float64), 20)
    assert bool(torch.isfinite(res.log_prob).all())
    assert float(res.x.abs().max()) <= 1

    def lp_inf(x):
        out = gauss(x)
        return torch.where(x[:, 0] > 1, torch.full_like(out, float("inf")), out)

    with pytest.raises(ValueError, match=r"\+inf"):
        ParallelTempering(lp_inf, cfg).run(torch.zeros(2, 1, dtype=torch.float64), 50)


def test_levels0_must_be_integer():
    st = samplers()[0]
    with pytest.raises(ValueError, match="integer tensor"):
        st.run(torch.zeros(2, 1), 3, levels0=torch.tensor([0.5, 1.0]), progress=False)


def test_openmm_rejects_nan_positions():
    pytest.importorskip("openmm")
    from sci_moe.sampling.tempering import OpenMMSimulatedTempering
    from tests.sampling.test_tempering_openmm import TEMPS, harmonic_system

    top, system, pos = harmonic_system()
    pos = np.array(pos)
    pos[0, 2] = np.nan
    cfg = OpenMMTemperingConfig(temperatures_k=TEMPS, record_positions=0)
    with pytest.raises(ValueError, match=r"NaN/Inf coordinates at atoms \[0\]"):
        OpenMMSimulatedTempering.from_system(top, system, pos, cfg, platform="Reference")
