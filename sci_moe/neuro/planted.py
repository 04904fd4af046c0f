"""Synthetic voxels in planted hierarchical ROIs encoding subspaces of given target embeddings.

The ground truth is known: which voxel belongs to which region at every level of a
``2 -> 4 -> 8 -> 16`` hierarchy, which target subspace each region encodes, and each
subject's voxel permutation and gain. Targets are passed in as an array (real sentence
embeddings in the benchmark: :func:`sci_moe.data.planted_fmri.planted_fmri`).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = [
    "RESPONSE_FAMILIES",
    "PlantedFMRI",
    "plant_nonlinear_voxels",
    "plant_voxels",
    "roi_labels",
]


def _checked_targets(targets, snr: float, num_subjects: int) -> np.ndarray:
    """``targets`` as a float64 array, after the checks both generators share."""
    y = np.asarray(targets, dtype=np.float64)
    if y.ndim != 2 or y.shape[0] < 2 or not np.isfinite(y).all():
        raise ValueError(f"targets must be a finite (M >= 2, D) array, got shape {y.shape}")
    if not snr > 0:
        raise ValueError(f"snr must be > 0, got {snr}")
    if num_subjects < 1:
        raise ValueError(f"num_subjects must be >= 1, got {num_subjects}")
    return y


def roi_labels(num_voxels: int, branching: Sequence[int] = (2, 4, 8, 16)) -> np.ndarray:
    """Planted region of every voxel (reference order) at each level.

    Voxels are split into ``branching[-1]`` contiguous leaf regions of (almost) equal
    size; a level-``l`` region is the union of its descendant leaves.

    Parameters
    ----------
    num_voxels : int
    branching : sequence of int
        Regions per level, each a multiple of the previous.

    Returns
    -------
    ndarray of int, shape (L, num_voxels)
    """
    branching = [int(b) for b in branching]
    for a, b in itertools.pairwise(branching):
        if b % a:
            raise ValueError(f"regions per level must be multiples of each other, got {branching}")
    leaves = branching[-1]
    if num_voxels < leaves:
        raise ValueError(f"need >= {leaves} voxels for {leaves} leaf regions, got {num_voxels}")
    leaf = (np.arange(num_voxels) * leaves) // num_voxels
    return np.stack([leaf // (leaves // b) for b in branching])


@dataclass
class PlantedFMRI:
    """Planted multi-subject voxel data with its ground truth.

    Attributes
    ----------
    voxels : dict of str to ndarray, shape (M, V), float32
        Responses of each subject to the ``M`` stimuli (voxels in the subject's order).
    targets : ndarray, shape (M, D), float32
        The target embeddings (as given).
    roi : dict of str to ndarray of int, shape (L, V)
        Planted region of each of the subject's voxels at every level.
    permutation : dict of str to ndarray of int, shape (V,)
        Subject voxel ``j`` is reference voxel ``permutation[j]``.
    gain : dict of str to ndarray, shape (V,)
        Per-voxel gain of each subject.
    basis : ndarray, shape (D, n_nodes * dims_per_region)
        Orthonormal columns; region node ``n`` encodes columns ``n*m:(n+1)*m``.
    snr : float
        Signal-to-noise variance ratio of every voxel.
    branching : tuple of int
    """

    voxels: dict
    targets: np.ndarray
    roi: dict
    permutation: dict
    gain: dict
    basis: np.ndarray
    snr: float
    branching: tuple

    @property
    def subjects(self) -> list[str]:
        """Subject names."""
        return list(self.voxels)


def plant_voxels(
    targets: np.ndarray,
    num_voxels: int = 512,
    num_subjects: int = 3,
    snr: float = 1.0,
    branching: Sequence[int] = (2, 4, 8, 16),
    dims_per_region: int | None = None,
    gain_spread: float = 0.3,
    seed: int = 0,
) -> PlantedFMRI:
    """Voxels in planted hierarchical regions, each region encoding its own target subspace.

    Every node ``n`` of the region tree (2 + 4 + 8 + 16 = 30 nodes) owns an orthonormal
    ``m``-dimensional subspace ``B_n`` of the (centred, whitened-scale) target. Reference
    voxel ``v`` with ancestors ``n_0(v), ..., n_{L-1}(v)`` responds

    .. math:: s_v = \\sum_{l} \\alpha_{v,l}^\\top B_{n_l(v)}^\\top \\tilde y, \\qquad
              x^{(s)}_{j} = g^{(s)}_j\\big(\\sqrt{\\mathrm{snr}}\\; s_{\\pi_s(j)} / \\sigma_s
              + \\varepsilon\\big), \\quad \\varepsilon \\sim N(0, 1)

    so voxels of one region share signal (the region's subspace) at every level, the
    signal-to-noise variance ratio is ``snr`` (before gain), and subject ``s`` sees the
    voxels permuted by ``pi_s`` (subject 0 too) with log-normal gains ``g``.

    Parameters
    ----------
    targets : ndarray, shape (M, D)
        Target embeddings (e.g. MiniLM sentence embeddings); any finite array.
    num_voxels : int
        Voxels per subject (>= the number of leaf regions).
    num_subjects : int
    snr : float
        Signal-to-noise variance ratio (> 0).
    branching : sequence of int
        Regions per level.
    dims_per_region : int, optional
        ``m``; default ``D // n_nodes`` (12 for D = 384 and 30 nodes).
    gain_spread : float
        Standard deviation of ``log g``.
    seed : int

    Returns
    -------
    PlantedFMRI
    """
    y = _checked_targets(targets, snr, num_subjects)
    labels = roi_labels(num_voxels, branching)
    M, D = y.shape
    offsets = np.cumsum([0, *branching])  # node id = offsets[l] + region
    n_nodes = int(offsets[-1])
    m = D // n_nodes if dims_per_region is None else int(dims_per_region)
    if m < 1 or m * n_nodes > D:
        raise ValueError(
            f"{n_nodes} regions x {m} dims do not fit a {D}-dim target; lower "
            "dims_per_region or use fewer levels"
        )
    rng = np.random.default_rng(seed)
    basis, _ = np.linalg.qr(rng.standard_normal((D, n_nodes * m)))
    yc = y - y.mean(0)
    proj = yc @ basis  # (M, n_nodes * m)
    proj /= proj.std(0, keepdims=True) + 1e-12
    signal = np.zeros((M, num_voxels))
    for level in range(len(branching)):
        nodes = offsets[level] + labels[level]
        alpha = rng.standard_normal((num_voxels, m)) / np.sqrt(m * len(branching))
        cols = nodes[:, None] * m + np.arange(m)  # (V, m)
        signal += np.einsum("mvk,vk->mv", proj[:, cols], alpha)
    signal /= signal.std(0, keepdims=True) + 1e-12
    out = PlantedFMRI(
        {},
        np.asarray(targets, np.float32),
        {},
        {},
        {},
        basis,
        float(snr),
        tuple(int(b) for b in branching),
    )
    for s in range(num_subjects):
        name = f"subj{s + 1:02d}"
        perm = rng.permutation(num_voxels)
        gain = np.exp(gain_spread * rng.standard_normal(num_voxels))
        noise = rng.standard_normal((M, num_voxels))
        x = gain * (np.sqrt(snr) * signal[:, perm] + noise)
        out.voxels[name] = x.astype(np.float32)
        out.roi[name] = labels[:, perm]
        out.permutation[name] = perm
        out.gain[name] = gain
    return out


#: Response families of :func:`plant_nonlinear_voxels`, one per network (cycled).
RESPONSE_FAMILIES = ("rate", "cubic", "saturating", "tuning")


def _respond(family: str, z: np.ndarray, param: float) -> np.ndarray:
    """A region's nonlinear response to its voxels' drives ``z`` (about unit variance).

    ``rate``: ``exp(param * z)`` (a firing-rate-like exponential); ``cubic``:
    ``z**3 + param * z``; ``saturating``: ``tanh(param * z)``; ``tuning``: a Gaussian
    bump ``exp(-(z - param)**2 / 0.5)`` around the preferred drive ``param`` (not
    monotone).
    """
    if family == "rate":
        return np.exp(param * z)
    if family == "cubic":
        return z**3 + param * z
    if family == "saturating":
        return np.tanh(param * z)
    if family == "tuning":
        return np.exp(-((z - param) ** 2) / 0.5)
    raise ValueError(f"unknown response family {family!r}; known: {RESPONSE_FAMILIES}")


#: Per-region parameters of each family (region ``r`` of a network takes entry ``r % 4``).
_FAMILY_PARAMS = {
    "rate": (1.5, 2.0, 2.5, 3.0),
    "cubic": (0.0, 0.1, 0.2, 0.3),
    "saturating": (3.0, 5.0, 8.0, 12.0),
    "tuning": (-1.0, -0.5, 0.5, 1.0),
}


def plant_nonlinear_voxels(
    targets: np.ndarray,
    num_voxels: int = 256,
    num_subjects: int = 3,
    snr: float = 2.0,
    networks: int = 4,
    regions_per_network: int = 4,
    network_dims: int = 16,
    region_dims: int = 8,
    network_share: float = 0.5,
    mixing: float = 0.3,
    gain_spread: float = 0.3,
    seed: int = 0,
) -> PlantedFMRI:
    """Voxels with nonlinear, region-specific responses in a two-level network structure.

    Ground truth (reference voxel order; voxels split into contiguous regions, regions
    into contiguous networks). Network ``n`` owns an orthonormal ``network_dims``-d
    subspace ``G_n`` of the standardised target and a *response family*
    (:data:`RESPONSE_FAMILIES`, cycled over the networks); region ``r`` of it owns its
    own ``region_dims``-d subspace ``F_r`` and a parameter of the family. Voxel ``v`` of
    region ``r`` in network ``n`` has the drive and response

    .. math:: z_v = \\sqrt{1-\\rho}\\, a_v^\\top F_r^\\top \\tilde y
                    + \\sqrt{\\rho}\\, b_v^\\top G_n^\\top \\tilde y, \\qquad
              u_v = \\mathrm{std}\\big(\\phi_{n}(z_v; \\theta_r)\\big)

    (``a_v, b_v`` random unit vectors, ``rho = network_share``, ``std`` standardises over
    the stimuli), so a linear read-out of ``u`` recovers only part of the target: the
    best decoder is nonlinear, and which nonlinearity depends on the voxel's network and
    region. Subject ``s`` sees voxel ``j`` as a mixture of two reference voxels of one
    region (a partial-volume / registration mix, weight ``mixing`` on a random other
    voxel of the same region), then the subject's permutation ``pi_s`` and log-normal
    gain, with unit noise at signal-to-noise variance ratio ``snr``:

    .. math:: x^{(s)}_j = g^{(s)}_j \\big(\\sqrt{\\mathrm{snr}}\\;
              \\mathrm{std}\\big((1-\\mu)\\, u_{\\pi_s(j)} + \\mu\\, u_{\\pi'_s(j)}\\big)
              + \\varepsilon\\big)

    Parameters
    ----------
    targets : ndarray, shape (M, D)
        Target embeddings; ``D >= networks * network_dims + regions * region_dims``.
    num_voxels : int
        Voxels per subject (>= the number of regions).
    num_subjects : int
    snr : float
        Signal-to-noise variance ratio (> 0).
    networks, regions_per_network : int
        The two levels: ``networks`` networks of ``regions_per_network`` regions.
    network_dims, region_dims : int
        Sizes of the network and region subspaces.
    network_share : float
        ``rho`` in [0, 1]: share of a voxel's drive from its network's subspace.
    mixing : float
        ``mu`` in [0, 1).
    gain_spread : float
        Standard deviation of ``log g``.
    seed : int

    Returns
    -------
    PlantedFMRI
        ``roi[s]`` has two rows (network, region) per voxel; ``branching`` is
        ``(networks, networks * regions_per_network)``; ``basis`` holds the network
        subspaces then the region subspaces.
    """
    y = _checked_targets(targets, snr, num_subjects)
    if not 0 <= network_share <= 1:
        raise ValueError(f"network_share must be in [0, 1], got {network_share}")
    if not 0 <= mixing < 1:
        raise ValueError(f"mixing must be in [0, 1), got {mixing}")
    regions = networks * regions_per_network
    labels = roi_labels(num_voxels, (networks, regions))
    M, D = y.shape
    need = networks * network_dims + regions * region_dims
    if need > D:
        raise ValueError(f"the subspaces need {need} target dims, the targets have {D}")
    rng = np.random.default_rng(seed)
    basis, _ = np.linalg.qr(rng.standard_normal((D, need)))
    proj = (y - y.mean(0)) @ basis
    proj /= proj.std(0, keepdims=True) + 1e-12
    g = proj[:, : networks * network_dims].reshape(M, networks, network_dims)
    f = proj[:, networks * network_dims :].reshape(M, regions, region_dims)

    def unit(n, k):
        v = rng.standard_normal((n, k))
        return v / np.linalg.norm(v, axis=1, keepdims=True)

    a, b = unit(num_voxels, region_dims), unit(num_voxels, network_dims)
    net, reg = labels
    z = np.sqrt(1 - network_share) * np.einsum("mvk,vk->mv", f[:, reg], a)
    z += np.sqrt(network_share) * np.einsum("mvk,vk->mv", g[:, net], b)
    z /= z.std(0, keepdims=True) + 1e-12
    u = np.empty_like(z)
    for v in range(num_voxels):
        fam = RESPONSE_FAMILIES[net[v] % len(RESPONSE_FAMILIES)]
        u[:, v] = _respond(fam, z[:, v], _FAMILY_PARAMS[fam][reg[v] % regions_per_network])
    u = (u - u.mean(0)) / (u.std(0) + 1e-12)
    out = PlantedFMRI(
        {},
        np.asarray(targets, np.float32),
        {},
        {},
        {},
        basis,
        float(snr),
        (int(networks), int(regions)),
    )
    members = [np.flatnonzero(reg == r) for r in range(regions)]
    for s in range(num_subjects):
        name = f"subj{s + 1:02d}"
        perm = rng.permutation(num_voxels)
        partner = np.array([rng.choice(members[reg[p]]) for p in perm])
        mixed = (1 - mixing) * u[:, perm] + mixing * u[:, partner]
        mixed = (mixed - mixed.mean(0)) / (mixed.std(0) + 1e-12)
        gain = np.exp(gain_spread * rng.standard_normal(num_voxels))
        noise = rng.standard_normal((M, num_voxels))
        out.voxels[name] = (gain * (np.sqrt(snr) * mixed + noise)).astype(np.float32)
        out.roi[name] = labels[:, perm]
        out.permutation[name] = perm
        out.gain[name] = gain
    return out
