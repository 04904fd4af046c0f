"""Graph data for conformer ensembles: one 2-D graph, many 3-D conformers.

A molecule is stored once as a 2-D graph (atoms, bonds and their features) plus the
positions of each of its ``C`` conformers; a batch concatenates molecules with different
numbers of atoms **and** conformers and keeps index vectors between the levels
(point -> atom, point -> conformer, conformer -> molecule, atom -> molecule). A *point*
is one atom in one conformer, so a molecule with ``N`` atoms and ``C`` conformers has
``N * C`` points, ordered conformer-major (all atoms of conformer 0, then conformer 1, ...).

Units: positions in **nm**, conformer energies in **kJ/mol** (relative to the lowest
conformer of the molecule), temperatures in K.

The radius graph is pure torch (PyG 2.8's ``radius_graph`` needs ``pyg-lib``): points of
each conformer are scattered into a padded ``(C, n_max, 3)`` block and compared with
``torch.cdist``; edges never cross conformers. Edge convention as in PyG:
``edge_index[0]`` is the source ``j``, ``edge_index[1]`` the target ``i``.

The pieces live in one module each (this module re-exports them):
:mod:`~sci_moe.molecules.ensemble_graph` (one molecule),
:mod:`~sci_moe.molecules.ensemble_batch` (batches, data set),
:mod:`~sci_moe.molecules.boltzmann` (weights) and
:mod:`~sci_moe.molecules.radius_graph` (neighbour lists).
"""

from __future__ import annotations

from .boltzmann import KB_KJ_PER_MOL_K, boltzmann_weights
from .ensemble_batch import EnsembleBatch, EnsembleDataset, collate_ensembles
from .ensemble_graph import ANGSTROM_TO_NM, EnsembleGraph
from .radius_graph import radius_graph_per_conformer

__all__ = [
    "ANGSTROM_TO_NM",
    "KB_KJ_PER_MOL_K",
    "EnsembleBatch",
    "EnsembleDataset",
    "EnsembleGraph",
    "boltzmann_weights",
    "collate_ensembles",
    "radius_graph_per_conformer",
]
