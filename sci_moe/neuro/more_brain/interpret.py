"""Voxel -> expert assignments of a trained encoder, scored against planted regions."""

from __future__ import annotations

import numpy as np
import torch

from .model import MoREBrainEncoder

__all__ = ["assignment_scores", "voxel_assignments"]


@torch.no_grad()
def voxel_assignments(
    model: MoREBrainEncoder, voxels: torch.Tensor, subject: str, batch_size: int = 256
) -> list[np.ndarray]:
    """Which expert of each level picks each voxel most often.

    Every row of a level descends from one voxel (:attr:`TreeLevel.token
    <sci_moe.neuro.more_brain.TreeLevel.token>`); over the given samples, voxel ``v`` is
    assigned to the level-``l`` expert that chose it most often, or to ``E_l``
    ("unassigned") when no expert ever chose it.

    Parameters
    ----------
    model : MoREBrainEncoder
    voxels : Tensor, shape (M, V)
        Anywhere: each batch is moved to the model's device.
    subject : str

    Returns
    -------
    list of ndarray of int, shape (V,)
        One array per level, values in ``[0, E_l]``.
    """
    model.eval()
    V = voxels.shape[1]
    counts = None
    p = next(model.parameters())
    for i in range(0, voxels.shape[0], batch_size):
        out = model(voxels[i : i + batch_size].to(p.device, p.dtype), subject)
        if counts is None:
            counts = [
                torch.zeros(V, lvl.num_experts, dtype=torch.float64, device=p.device)
                for lvl in out.levels
            ]
        for c, lvl in zip(counts, out.levels, strict=True):
            flat = lvl.token * lvl.num_experts + lvl.expert
            c += torch.bincount(flat, minlength=V * lvl.num_experts).view(V, -1).double()
    result = []
    for c in counts:
        a = c.argmax(1)
        a[c.sum(1) == 0] = c.shape[1]
        result.append(a.cpu().numpy())
    return result


def assignment_scores(
    assigned: np.ndarray, truth: np.ndarray, shuffles: int = 20, seed: int = 0
) -> dict[str, float]:
    """ARI and NMI (scikit-learn) of an assignment vs the ground truth, and their chance.

    Parameters
    ----------
    assigned, truth : ndarray of int, shape (V,)
    shuffles : int
        Random permutations of ``assigned`` for the chance level.
    seed : int

    Returns
    -------
    dict
        ``ari``, ``nmi``, ``ari_chance``, ``nmi_chance`` (mean over shuffles).
    """
    from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score

    assigned, truth = np.asarray(assigned), np.asarray(truth)
    if assigned.shape != truth.shape or assigned.ndim != 1:
        raise ValueError(f"assigned {assigned.shape} and truth {truth.shape} must be equal 1-D")
    rng = np.random.default_rng(seed)
    perms = [rng.permutation(assigned) for _ in range(shuffles)]
    return {
        "ari": float(adjusted_rand_score(truth, assigned)),
        "nmi": float(normalized_mutual_info_score(truth, assigned)),
        "ari_chance": float(np.mean([adjusted_rand_score(truth, p) for p in perms])),
        "nmi_chance": float(np.mean([normalized_mutual_info_score(truth, p) for p in perms])),
    }
