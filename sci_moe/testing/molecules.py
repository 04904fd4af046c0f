"""Random conformer ensembles, seeded, for tests and benchmarks of ensemble models."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from ..molecules import EnsembleGraph

__all__ = ["random_ensemble_graph"]


def random_ensemble_graph(
    n_atoms: int,
    n_confs: int,
    seed: int,
    n_targets: int = 2,
    atom_dim: int = 5,
    bond_dim: int = 3,
) -> EnsembleGraph:
    """A random chain molecule with ``n_confs`` conformers, reproducible from ``seed``.

    Bonds join atoms ``i`` and ``i + 1`` (both directions); positions are random walks
    with 0.1 nm steps; conformer energies are uniform in [0, 5) kJ/mol with Boltzmann-like
    weights ``softmax(-E)``.

    Parameters
    ----------
    n_atoms, n_confs : int
        Atoms N and conformers C.
    seed : int
        Seed of the private generator (the global RNG is untouched).
    n_targets : int
        Length T of the random target ``y``.
    atom_dim, bond_dim : int
        Widths of the random atom and bond features.

    Returns
    -------
    EnsembleGraph
        ``pos`` shape (C, N, 3) in nm, ``atom_attr`` (N, atom_dim), ``bond_index``
        (2, 2(N - 1)), ``bond_attr`` (2(N - 1), bond_dim), ``y`` (T,), name ``mol<seed>``.
    """
    from ..molecules import EnsembleGraph  # lazy: importing sci_moe.testing stays light

    g = torch.Generator().manual_seed(seed)
    pos = torch.cumsum(torch.randn(n_confs, n_atoms, 3, generator=g) * 0.1, dim=1)
    bi = torch.stack([torch.arange(n_atoms - 1), torch.arange(1, n_atoms)])
    bi = torch.cat([bi, bi.flip(0)], dim=1)
    e = torch.rand(n_confs, generator=g) * 5
    return EnsembleGraph(
        z=torch.randint(1, 10, (n_atoms,), generator=g),
        atom_attr=torch.randn(n_atoms, atom_dim, generator=g),
        bond_index=bi,
        bond_attr=torch.randn(bi.shape[1], bond_dim, generator=g),
        pos=pos,
        conf_energy=e - e.min(),
        conf_weight=torch.softmax(-e, 0),
        y=torch.randn(n_targets, generator=g),
        name=f"mol{seed}",
    )
