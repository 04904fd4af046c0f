"""``sci-moe md run --model`` cuts the topology to the model's atoms without mdtraj (issue 40,
start-up): the cut is the topology mdtraj's ``from_openmm(...).subset(...).to_openmm()`` gives."""

from __future__ import annotations

import pytest
from openmm import app

from sci_moe.sampling.md import BACKBONE_ATOMS, HEAVY_ATOMS, alanine_dipeptide_pdb, systems


def _describe(top) -> dict:
    return {
        "chains": [(c.id, [r.index for r in c.residues()]) for c in top.chains()],
        "residues": [(r.name, r.id, r.insertionCode) for r in top.residues()],
        "atoms": [
            (a.name, a.element, a.id, a.residue.index, getattr(a, "formalCharge", None))
            for a in top.atoms()
        ],
        "bonds": [
            (a.index, b.index, bond.type, bond.order) for bond in top.bonds() for a, b in [bond]
        ],
        "box": top.getPeriodicBoxVectors(),
    }


def _two_chain_topology():
    top = app.Topology()
    carbon, oxygen = app.Element.getBySymbol("C"), app.Element.getBySymbol("O")
    for chain_id, res_ids in (("A", ["7", "X1"]), ("B", ["3"])):
        chain = top.addChain(id=chain_id)
        for rid in res_ids:
            res = top.addResidue("GLY", chain, id=rid)
            a = top.addAtom("CA", carbon, res)
            b = top.addAtom("O", oxygen, res, formalCharge=-1)
            top.addBond(a, b, type=app.Double, order=2)
    atoms = list(top.atoms())
    top.addBond(atoms[1], atoms[2])
    top.addBond(atoms[3], atoms[4], type=app.Single, order=1)
    return top


@pytest.mark.parametrize(
    "indices",
    [
        list(BACKBONE_ATOMS),
        list(HEAVY_ATOMS),
        list(range(22)),
        [0, 1],  # one residue: the others and their bonds are dropped
        [4, 6, 8, 14, 16],
    ],
)
def test_alanine_cut_equals_mdtraj(indices):
    mdtraj = pytest.importorskip("mdtraj")
    top = app.PDBFile(str(alanine_dipeptide_pdb())).topology
    expected = mdtraj.Topology.from_openmm(top).subset(indices).to_openmm()
    assert _describe(systems._subset_topology(top, indices)) == _describe(expected)


@pytest.mark.parametrize("indices", [[0, 1, 2], [2, 3, 4, 5], [5, 1], [4]])
def test_chains_non_numeric_ids_charges_and_bond_types_as_mdtraj(indices):
    mdtraj = pytest.importorskip("mdtraj")
    top = _two_chain_topology()
    with pytest.warns(UserWarning) if indices == [5, 1] else _no_warning():
        expected = mdtraj.Topology.from_openmm(top).subset(indices).to_openmm()
    assert _describe(systems._subset_topology(top, indices)) == _describe(expected)


class _no_warning:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False
