"""``benchmarks/energy_diffusion/_energy_diffusion.py``: MD with learned forces on the
package's Simulation gives the integrator's own trajectory (same generator order)."""

from __future__ import annotations

import pytest
import torch

from sci_moe.sampling.diffusion import EnergyAtTime, mueller_brown_model
from sci_moe.sampling.md import LangevinBAOAB, ModelForces
from tests.benchmarks.conftest import load_benchmark


@pytest.fixture(scope="module")
def ed():
    with load_benchmark("energy_diffusion/_energy_diffusion.py", "bench_energy_diffusion") as mod:
        yield mod


def _integrator_loop(energy, starts, mass, kT, dt, n_frames, stride, seed):
    """The loop the benchmark ran before it used Simulation: init, then stride-step chunks."""
    gen = torch.Generator().manual_seed(seed)
    provider = ModelForces(energy, mass, dim=starts.shape[-1], check_inputs=False)
    integ = LangevinBAOAB(dt, friction_per_ps=1.0, kT=kT)
    state = integ.init_state(provider, starts, gen)
    frames = []
    for _ in range(n_frames):
        state = integ.step(state, provider, gen, n_steps=stride)
        frames.append(state.positions.detach().clone())
    return torch.stack(frames).flatten(0, 1)


@pytest.mark.parametrize("variant", ["plain", "both"])
def test_frames_equal_the_integrator_loop(ed, variant):
    torch.manual_seed(0)
    energy = EnergyAtTime(mueller_brown_model(variant).eval(), kT=ed.MB_KT, t_eval=1e-5)
    starts = torch.randn(6, 1, 2, generator=torch.Generator().manual_seed(1)) * 0.4
    mass = torch.tensor([ed.MB_MASS])
    got = ed.langevin_with_model(energy, starts, mass, ed.MB_KT, ed.MB_DT, 1.0, 3, 7, 11)
    want = _integrator_loop(energy, starts, mass, ed.MB_KT, ed.MB_DT, 3, 7, 11)
    assert got.shape == (3 * 6, 1, 2)
    assert torch.equal(got, want)


class _Quartic(torch.nn.Module):
    def forward(self, x):
        return 1e3 * (x**4).flatten(1).sum(1)


def test_a_diverging_run_stops_after_the_frame_that_diverged(ed):
    starts = torch.randn(4, 1, 2, generator=torch.Generator().manual_seed(1))
    mass = torch.tensor([0.5])
    got = ed.langevin_with_model(_Quartic(), starts, mass, 23.0, 0.05, 1.0, 6, 2, 3)
    want = _integrator_loop(_Quartic(), starts, mass, 23.0, 0.05, 6, 2, 3)
    rows = torch.isfinite(want.view(6, 4, -1)).all(-1).all(-1)
    first_bad = int((~rows).nonzero()[0])  # the frame in which a walker went non-finite
    assert got.shape[0] == 4 * (first_bad + 1) < want.shape[0]
    assert torch.equal(got[: 4 * first_bad], want[: 4 * first_bad])
    assert not torch.isfinite(got[4 * first_bad :]).all()
