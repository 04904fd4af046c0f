"""
Energy diffusion: learn a force field from your own trajectory
==============================================================

A diffusion model whose score is the gradient of an energy, :math:`s_\\theta(x, t) =
-\\nabla_x E_\\theta(x, t)`, gives two samplers for the price of one (Plainer et al.,
NeurIPS 2025, "ScoreMD"): i.i.d. samples by running the diffusion backwards, and molecular
dynamics with the forces :math:`F = k_BT\\,s_\\theta(x, t \\to 0)`. The Fokker-Planck (FP)
regulariser keeps the small-:math:`t` energy consistent with the rest of the diffusion so
that both samplers agree.

This tutorial runs in a few seconds on a CPU:

1. simulate a trajectory of a 2-D double well (stand-in for *your* MD data);
2. train an energy diffusion model on it, with the FP term;
3. draw i.i.d. samples, save the model file and run Langevin dynamics with the learned
   forces (exactly what ``sci-moe md run --model FILE`` does);
4. compare both against the exact Boltzmann density.
"""

# %%
# A trajectory to learn from
# --------------------------
# Any array of configurations ``(n_frames, n_particles, dim)`` works. Here: one particle in
# a tilted 2-D double well at kT = 1, simulated with the package's BAOAB integrator.

import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import torch

from sci_moe.sampling.diffusion import (
    VPSDE,
    MLPEnergy,
    MLPScore,
    Stage,
    TimeMixture,
    TrainConfig,
    js_divergence,
    load_energy_model,
    reverse_sde_sample,
    save_energy_model,
    train,
)
from sci_moe.sampling.md import DoubleWell, LangevinBAOAB, ModelForces, PotentialForces

torch.manual_seed(0)
kT, mass = 1.0, 1.0
potential = DoubleWell(dim=2, barrier=2.5, scale=1.0, tilt=0.5)
gen = torch.Generator().manual_seed(0)
integrator = LangevinBAOAB(0.02, friction_per_ps=1.0, kT=kT)
provider = PotentialForces(potential, torch.tensor([mass]))
state = integrator.init_state(provider, torch.zeros(200, 1, 2), gen)
state = integrator.step(state, provider, gen, n_steps=500)  # burn-in
frames = []
for _ in range(60):
    state = integrator.step(state, provider, gen, n_steps=10)
    frames.append(state.positions.clone())
trajectory = torch.cat(frames)  # (12000, 1, 2)
print("training frames:", tuple(trajectory.shape))

# %%
# Train
# -----
# ScoreMD's mixture over diffusion time: a cheap score MLP for the nearly Gaussian high-noise
# range t in [0.1, 1] and an energy MLP for t in [1e-5, 0.1], which becomes the force field.
# The experts are trained one after the other, high t first, with denoising score matching
# (time weights with midpoint ``mid``) and, for the energy expert, the two-probe
# Fokker-Planck residual (weight 5e-4). Focusing an expert on small t is what makes a short
# CPU run learn the wells: a single network over [0, 1] spends most of its capacity and
# gradient noise on large t. ``out_dir=`` would add resumable checkpoints.

sde = VPSDE()
ranges = [(0.1, 1.0), (1e-5, 0.1)]
model = TimeMixture(
    [MLPScore((1, 2), (32, 32), t_range=ranges[0]), MLPEnergy((1, 2), (64, 64), t_range=ranges[1])],
    ranges,
)
config = TrainConfig(
    stages=[
        Stage(epochs=4, t_range=ranges[0], mid=0.5, expert=0, lr=3e-3),
        Stage(epochs=16, t_range=ranges[1], mid=0.03, fp_weight=5e-4, expert=1, lr=3e-3),
    ],
    batch_size=256,
    max_batches_per_epoch=40,
    ema_reset=False,
    progress=False,
)
history = train(model, trajectory, sde, config)["history"]
print("DSM loss per epoch:", [round(h["dsm"], 3) for h in history])

# %%
# i.i.d. samples and MD with the learned forces
# ---------------------------------------------
# The model file holds the weights and what is needed to turn the model into a force field:
# kT, the length scale and the diffusion time of the force field. ``load_energy_model``
# returns an ``nn.Module`` mapping positions to energies in kJ/mol (here reduced units),
# which :class:`~sci_moe.sampling.md.forces.ModelForces` differentiates.

model.eval()
iid = reverse_sde_sample(model.score, sde, (4000, 1, 2), n_steps=300, generator=gen)[:, 0]

path = Path(tempfile.mkdtemp()) / "double_well.safetensors"
save_energy_model(model, path, sde=sde, kT=kT, t_eval=1e-5, masses=[mass])
energy, masses, _, _ = load_energy_model(path)
learned = ModelForces(energy, masses, dim=2)
state = integrator.init_state(learned, trajectory[:100].clone(), gen)
md_frames = []
for _ in range(40):
    state = integrator.step(state, learned, gen, n_steps=10)
    md_frames.append(state.positions[:, 0].detach().clone())
md = torch.cat(md_frames)

# %%
# Compare with the exact density
# ------------------------------
# The double well's Boltzmann density is known, so we can plot the marginal along the
# reaction coordinate and compute JS divergences against exact samples (a long reference run
# would do for real data).

ref_state = integrator.init_state(provider, torch.zeros(4000, 1, 2), gen)
ref_state = integrator.step(ref_state, provider, gen, n_steps=1000)
ref = ref_state.positions[:, 0]
grid = torch.linspace(-2.2, 2.2, 400)
pts = torch.stack([grid, torch.zeros_like(grid)], -1).view(-1, 1, 2)
p1 = torch.exp(-(potential(pts) - potential(pts).min()) / kT)
p1 = p1 / torch.trapezoid(p1, grid)
box = ((-2.2, 2.2), (-3.0, 3.0))
print(f"JS(reference, iid) = {js_divergence(ref.numpy(), iid.numpy(), 40, box):.4f}")
print(f"JS(reference, MD)  = {js_divergence(ref.numpy(), md.numpy(), 40, box):.4f}")

fig, ax = plt.subplots(1, 2, figsize=(9, 3.5))
bins = np.linspace(-2.2, 2.2, 45)
ax[0].plot(grid, p1, "k-", label="exact")
ax[0].hist(iid[:, 0].numpy(), bins, density=True, histtype="step", label="i.i.d. (reverse SDE)")
ax[0].hist(md[:, 0].numpy(), bins, density=True, histtype="step", label="MD, learned forces")
ax[0].set_xlabel("$x_1$")
ax[0].set_ylabel("density")
ax[0].legend(fontsize=8)
with torch.no_grad():
    e_true = potential(pts) / kT
    e_model = energy(pts) / kT
ax[1].plot(grid, e_true - e_true.min(), "k-", label="true E/kT")
ax[1].plot(grid, e_model - e_model.min(), "--", label="learned E/kT (t = 1e-5)")
ax[1].set_ylim(-0.5, 8)
ax[1].set_xlabel("$x_1$ ($x_2 = 0$)")
ax[1].legend(fontsize=8)
fig.tight_layout()
plt.show()

# %%
# For a molecule, use :class:`~sci_moe.sampling.diffusion.InvariantMLPEnergy` (or the
# message-passing :class:`~sci_moe.sampling.diffusion.InvariantEnergyNet`) on positions
# scaled by ``1/std``, pass ``scale=`` and the atomic ``masses`` to ``save_energy_model``,
# and run the file with ``sci-moe md run --model FILE``. The shipped alanine-dipeptide model
# is trained by ``scripts/train_alanine_energy_model.py``.
