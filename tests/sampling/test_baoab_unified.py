"""One BAOAB: the tempering kernel runs the md integrator's BAOAB step.

``data/baoab_reference.npz`` holds fixed-seed trajectories written by the code *before*
the two BAOAB implementations (``sampling.tempering.langevin.BAOAB`` and
``sampling.md.integrators.LangevinBAOAB``) were merged (git 9eeacfe). The md integrator
keeps its arithmetic, so its trajectories agree to the last bits: bitwise on the CPU that
wrote the reference (AVX2), within a few ulps elsewhere, because torch's vectorised
``exp``/``log`` kernels differ between instruction sets (AVX-512 gives 1-2 ulp). The
tempering kernel now runs the same in-place update, whose floating-point rounding (fused
multiply-adds) differs from the old out-of-place expressions at the last bit, so its
trajectories agree to ~1e-12. Regenerate (only when a change of numbers is intended) with
``python tests/sampling/test_baoab_unified.py``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from sci_moe.sampling.md import GaussianMixturePotential, LangevinBAOAB, PotentialForces
from sci_moe.sampling.tempering import (
    BAOAB,
    SimulatedTempering,
    TemperingConfig,
    geometric_ladder,
)

REFERENCE = Path(__file__).parent / "data" / "baoab_reference.npz"
W = torch.tensor([0.3, 0.7], dtype=torch.float64)
MU = torch.tensor([-2.0, 2.0], dtype=torch.float64)


def mixture_lp(x):
    w, mu = W.to(x.dtype), MU.to(x.dtype)
    return torch.logsumexp(
        w.log() - 0.5 * ((x[:, :1] - mu) ** 2) - 0.5 * (x[:, 1:] ** 2).sum(1, keepdim=True), dim=1
    )


def kernel_trajectory(mass, n_steps=40):
    """Tempering kernel: per-chain betas and step sizes, fixed seed; x and v per step."""
    k = BAOAB(step_size=0.1, friction=2.0, mass=mass)
    gen = torch.Generator().manual_seed(7)
    x = torch.linspace(-3, 3, 16 * 3, dtype=torch.float64).reshape(16, 3)
    beta = torch.linspace(0.2, 1.0, 16, dtype=torch.float64)
    h = torch.linspace(0.05, 0.15, 16, dtype=torch.float64)
    v = k.init_velocities(x, beta, gen)
    s = k.step(x, mixture_lp, beta, generator=gen, step_size=h, velocities=v)
    xs, vs = [s.x], [s.velocities]
    for _ in range(n_steps - 1):
        s = k.step(
            s.x,
            mixture_lp,
            beta,
            generator=gen,
            step_size=h,
            lp=s.log_prob,
            velocities=s.velocities,
            grad=s.grad,
        )
        xs.append(s.x)
        vs.append(s.velocities)
    return torch.stack(xs).numpy(), torch.stack(vs).numpy()


def tempering_run():
    """Simulated tempering with the BAOAB kernel (level moves, velocity rescaling)."""
    betas = geometric_ladder(0.1, 4, dtype=torch.float64)
    cfg = TemperingConfig(
        betas,
        BAOAB(step_size=0.2, friction=1.0),
        n_local_steps=2,
        log_weights=torch.zeros(4, dtype=torch.float64),
    )
    x0 = torch.full((8, 3), -2.0, dtype=torch.float64)
    res = SimulatedTempering(mixture_lp, cfg).run(x0, 30, seed=3)
    return res.x.numpy(), res.levels.numpy()


def md_trajectory():
    """md LangevinBAOAB on a 2-D Gaussian mixture, 3 walkers x 2 particles."""
    pot = GaussianMixturePotential(
        [[-1.0, 0.0], [1.0, 0.5]], covariances=[0.3, 0.5], weights=[0.4, 0.6], n_particles=2
    )
    prov = PotentialForces(pot, masses=torch.tensor([1.0, 2.5], dtype=torch.float64))
    integ = LangevinBAOAB(0.02, friction_per_ps=3.0, kT=torch.tensor([0.5, 1.0, 2.0]))
    gen = torch.Generator().manual_seed(11)
    x0 = torch.linspace(-1, 1, 12, dtype=torch.float64).reshape(3, 2, 2)
    st = integ.init_state(prov, x0, gen)
    xs = []
    for _ in range(10):
        st = integ.step(st, prov, gen, n_steps=5)
        xs.append(st.positions.clone())
    return torch.stack(xs).numpy(), st.velocities.numpy(), st.energy.numpy()


def compute() -> dict[str, np.ndarray]:
    out = {}
    out["kernel_unit_x"], out["kernel_unit_v"] = kernel_trajectory(1.0)
    m = torch.tensor([1.0, 2.0, 0.5], dtype=torch.float64)
    out["kernel_mass_x"], out["kernel_mass_v"] = kernel_trajectory(m)
    out["st_x"], out["st_levels"] = tempering_run()
    out["md_x"], out["md_v"], out["md_e"] = md_trajectory()
    return out


def test_md_langevin_baoab_is_unchanged_to_the_last_bits():
    ref, new = np.load(REFERENCE), compute()
    for key in ("md_x", "md_v", "md_e"):
        # a few ulps of the O(1) values: an instruction-set difference, not a change of method
        np.testing.assert_allclose(new[key], ref[key], rtol=4e-15, atol=4e-15, err_msg=key)


def test_tempering_baoab_matches_the_old_kernel():
    ref, new = np.load(REFERENCE), compute()
    for key in ("kernel_unit_x", "kernel_unit_v", "kernel_mass_x", "kernel_mass_v", "st_x"):
        np.testing.assert_allclose(new[key], ref[key], rtol=1e-11, atol=1e-11, err_msg=key)
    assert np.array_equal(ref["st_levels"], new["st_levels"])


def test_tempering_kernel_uses_the_md_step(monkeypatch):
    import sci_moe.sampling.md as md

    calls = []
    real = md.baoab_steps

    def spy(*args, **kw):
        calls.append(1)
        return real(*args, **kw)

    monkeypatch.setattr(md, "baoab_steps", spy)
    kernel_trajectory(1.0, n_steps=3)
    assert len(calls) == 3


if __name__ == "__main__":  # regenerate the reference
    REFERENCE.parent.mkdir(exist_ok=True)
    np.savez(REFERENCE, **compute())
    print(f"wrote {REFERENCE}")
