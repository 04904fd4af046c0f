"""
From SMILES to a trained SPiCE model
====================================

SPiCE (Zhu et al., NeurIPS 2025) predicts molecular properties from a whole **ensemble of
conformers**: every conformer is encoded by an equivariant network, a geometric
Mixture-of-Experts routes invariant and vector features to different experts, and the
conformers exchange only invariant information. This tutorial runs the whole pipeline on
a CPU in well under a minute:

1. conformer ensembles from SMILES (ETKDGv3 + MMFF94, Boltzmann weights);
2. a conformer-sensitive label: the Boltzmann-averaged radius of gyration;
3. batches of ensembles and the model's symmetry: rotating one conformer changes nothing;
4. training SPiCE with early stopping and the test MAE at the best validation epoch;
5. predictions for a new molecule and which experts were used.
"""

# %%
# Conformer ensembles from SMILES
# -------------------------------
# :func:`~sci_moe.molecules.embed_ensemble` embeds conformers with seeded ETKDGv3,
# optimises them with MMFF94, prunes near-duplicates (symmetry-aware RMSD) and keeps the
# lowest ``max_confs``. Energies are in kJ/mol and positions in nm. Bad input raises a
# ``ValueError`` that names the molecule and the reason.

import dataclasses
import time

import matplotlib.pyplot as plt
import numpy as np
import torch

from sci_moe.molecules import (
    ATOM_FEATURE_DIM,
    BOND_FEATURE_DIM,
    ConformerConfig,
    collate_ensembles,
    embed_ensemble,
)
from sci_moe.molecules.spice import SPiCE, SPiCEConfig, TrainConfig, evaluate, fit
from sci_moe.testing import assert_equivariant, cartesian_action

t_start = time.perf_counter()
torch.manual_seed(0)
smiles = [
    "CCCCO", "CCCCCO", "CCOCCO", "CCCCN", "CCCOC", "OCCCCO", "CCCCCC", "CCOCCOC",
    "NCCCCN", "CC(C)CCO", "CCCC(=O)O", "CCNCCO", "COCCCN", "CCCCCCO", "CC(C)OCC",
    "OCCOCCO", "CCSCCO", "CCCCOC", "NCCOCC", "CC(O)CCC", "CCCOCCN", "OCC(C)CO",
    "CCCCC(C)O", "CCOC(C)C",
]  # fmt: skip
cfg = ConformerConfig(num_attempts=8, max_confs=4, seed=7)
ensembles = [embed_ensemble(s, cfg, name=s) for s in smiles]
print(f"{len(ensembles)} molecules, conformers per molecule:", [e.num_confs for e in ensembles])

try:
    embed_ensemble("C1CC", cfg)
except ValueError as err:
    print("bad input ->", err)

# %%
# A conformer-sensitive label
# ---------------------------
# The radius of gyration :math:`R_g = \sqrt{\sum_i m_i |r_i - r_{com}|^2 / \sum_i m_i}`
# changes from conformer to conformer (an extended chain is larger than a folded one).
# The molecular label is its Boltzmann average :math:`\langle R_g\rangle = \sum_c w_c
# R_{g,c}` with the MMFF weights at 298 K. (The benchmark set of
# :mod:`sci_moe.data.molecule_set` uses GFN2-xTB labels; they take minutes, not seconds.)

masses = {1: 1.008, 6: 12.011, 7: 14.007, 8: 15.999, 16: 32.06}


def radius_of_gyration(z, pos):
    m = np.array([masses[int(a)] for a in z])
    com = (m[None, :, None] * pos).sum(1) / m.sum()
    return np.sqrt((m[None] * ((pos - com[:, None]) ** 2).sum(-1)).sum(1) / m.sum())


graphs = []
for ens in ensembles:
    rg = radius_of_gyration(ens.atomic_numbers, ens.positions_nm)  # (C,) nm
    graphs.append(ens.to_graph(y=[float(ens.weights @ rg)], conf_y=rg[:, None]))
y_all = np.array([g.y.item() for g in graphs])
spread = [float(g.conf_y.max() - g.conf_y.min()) for g in graphs]
print(f"<Rg> from {y_all.min():.3f} to {y_all.max():.3f} nm; mean spread between the")
print(f"conformers of a molecule {np.mean(spread):.3f} nm")

# %%
# Batches of ensembles and the symmetry of the model
# --------------------------------------------------
# :func:`~sci_moe.molecules.collate_ensembles` stores each molecule's 2D graph once and
# the positions of all its conformers, with index vectors point -> atom -> molecule and
# point -> conformer -> molecule. SPiCE's prediction does not change when one conformer
# alone is rotated, reflected or moved, nor when conformers are reordered.

model = SPiCE(
    SPiCEConfig(
        n_targets=1, atom_dim=ATOM_FEATURE_DIM, bond_dim=BOND_FEATURE_DIM, hidden=16,
        num_layers=2, num_rbf=8, cutoff_nm=0.45, num_experts=4, top_k=2, heads=2,
    )
)  # fmt: skip
batch = collate_ensembles(graphs[:2])
print(
    f"batch: {batch.num_mols} molecules, {batch.num_atoms} atoms, {batch.num_confs} "
    f"conformers, {batch.num_points} conformer-atoms"
)
model.eval()
first = batch.point_to_conf == 0
rotate = cartesian_action()


def move_conformer_0(pos, rotation, translation):
    """Rotate (or reflect) and shift conformer 0 alone."""
    out = pos.clone()
    out[first] = rotate(pos[first], rotation, None) + 0.7
    return out


# random rotations and reflections of conformer 0; the prediction must not change (the
# graphs keep float64 positions; this float32 model computes in float32, so the check runs
# on float32 positions and with float32 tolerances)
err = assert_equivariant(
    lambda pos: model(dataclasses.replace(batch, pos=pos)).pred,
    batch.pos.float(), move_conformer_0, None, reflection=True,
)  # fmt: skip
print(f"max change after moving one conformer: {err:.2e}")

# %%
# Train with early stopping
# -------------------------
# :func:`~sci_moe.molecules.spice.fit` fits the target normalisation on the training molecules,
# trains with AdamW and a warm-up + cosine schedule, keeps the weights with the best
# validation MAE and reports the test MAE of those weights. With ``out_dir`` it also
# writes an atomic checkpoint every epoch (``resume=True`` continues exactly) and a
# ``results.json``; ``sci-moe train spice`` does the same from the command line.

train, val, test = graphs[:16], graphs[16:19], graphs[19:]
result = fit(
    model, train, val, test,
    TrainConfig(epochs=30, batch_size=4, lr=3e-3, warmup_epochs=1, patience=10, progress=False),
    target_names=["rg_nm"],
)  # fmt: skip
mean_mae = np.abs(y_all[19:] - y_all[:16].mean()).mean()
print(f"best epoch {result['best_epoch']} of {result['epochs_run']}")
print(f"test MAE {result['test_mae']['rg_nm']:.4f} nm (training mean: {mean_mae:.4f} nm)")

fig, ax = plt.subplots(1, 2, figsize=(8, 3.2))
ax[0].plot(result["history"]["epoch"], result["history"]["train_loss"], label="train loss")
val_scaled = [v[0] / model.target_std.item() for v in result["history"]["val_mae"]]
ax[0].plot(result["history"]["epoch"], val_scaled, label="val MAE / std")
ax[0].set_xlabel("epoch")
ax[0].legend()
ev = evaluate(model, test)
ax[1].scatter(ev["y"][:, 0], ev["pred"][:, 0])
lims = [ev["y"].min() - 0.01, ev["y"].max() + 0.01]
ax[1].plot(lims, lims, "k--", lw=0.8)
ax[1].set_xlabel(r"$\langle R_g\rangle$ (nm)")
ax[1].set_ylabel("SPiCE")
ax[1].set_title("held-out molecules")
fig.tight_layout()

# %%
# Predict a new molecule and look at the experts
# ----------------------------------------------
# A new SMILES goes through the same two calls. The routing of every geometric-MoE layer
# comes back with the output: here, the share of conformer-atoms each expert received in
# each path (scalar features routed on invariants, vector features routed on their Gram
# matrix).

new = embed_ensemble("CCOCCCO", cfg, name="3-ethoxypropanol")
rg_new = radius_of_gyration(new.atomic_numbers, new.positions_nm)
out = model(collate_ensembles([new.to_graph()]))
print(
    f"{new.name}: predicted <Rg> {out.pred.item():.3f} nm, reference {new.weights @ rg_new:.3f} nm"
)
for i, info in enumerate(out.moe):
    s = info.scalar_routing.load / info.scalar_routing.load.sum()
    v = info.vector_routing.load / info.vector_routing.load.sum()
    print(f"layer {i}: scalar {np.round(s.numpy(), 2)}, vector {np.round(v.numpy(), 2)}")
print(f"tutorial ran in {time.perf_counter() - t_start:.1f} s")
