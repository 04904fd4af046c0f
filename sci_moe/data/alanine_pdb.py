"""Build the shipped alanine dipeptide PDB from scratch (RDKit embedding + OpenMM minimisation).

The result is ``sci_moe/sampling/files/alanine-dipeptide.pdb``, which
:func:`sci_moe.sampling.md.alanine_dipeptide_pdb` returns.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .._util import atomic_open
from ..sampling.md import ALANINE_ATOMS, ALANINE_BONDS, PHI_ATOMS, PSI_ATOMS

__all__ = ["build_pdb"]


def build_pdb(path: str | Path, seed: int = 0, phi_psi_deg: tuple[float, float] = (-80, 150)):
    """Build the alanine dipeptide PDB from scratch (RDKit + OpenMM) and write it to ``path``.

    The 22 atoms are embedded with RDKit's ETKDG in the order of :data:`ATOM_NAMES`, the
    alpha carbon set to L (S) chirality, phi/psi set to ``phi_psi_deg`` and the structure
    minimised with amber99sbildn in vacuum.

    Returns
    -------
    positions : numpy.ndarray, shape (22, 3)
        Minimised positions, nm.
    """
    import openmm
    import openmm.app as app
    import openmm.unit as u
    from rdkit import Chem
    from rdkit.Chem import AllChem, rdMolTransforms

    mol = Chem.RWMol()
    for _, _, el in ALANINE_ATOMS:
        mol.AddAtom(Chem.Atom(el))
    for i, j in ALANINE_BONDS:
        mol.AddBond(i, j, Chem.BondType.SINGLE)
    for i, j in ((4, 5), (14, 15)):
        mol.GetBondBetweenAtoms(i, j).SetBondType(Chem.BondType.DOUBLE)
    m = mol.GetMol()
    Chem.SanitizeMol(m)
    if AllChem.EmbedMolecule(m, randomSeed=seed) != 0:
        raise RuntimeError("RDKit could not embed alanine dipeptide")
    conf = m.GetConformer()
    Chem.AssignStereochemistryFrom3D(m)
    if m.GetAtomWithIdx(8).GetProp("_CIPCode") != "S":  # L-alanine: mirror the molecule
        for i in range(m.GetNumAtoms()):
            p = conf.GetAtomPosition(i)
            conf.SetAtomPosition(i, (-p.x, p.y, p.z))
    rdMolTransforms.SetDihedralDeg(conf, *PHI_ATOMS, float(phi_psi_deg[0]))
    rdMolTransforms.SetDihedralDeg(conf, *PSI_ATOMS, float(phi_psi_deg[1]))
    pos = np.array(conf.GetPositions()) / 10.0  # Angstrom -> nm

    top = app.Topology()
    chain = top.addChain()
    residues, atoms = {}, []
    for res, name, el in ALANINE_ATOMS:
        if res not in residues:
            residues[res] = top.addResidue(res, chain)
        atoms.append(top.addAtom(name, app.Element.getBySymbol(el), residues[res]))
    for i, j in ALANINE_BONDS:
        top.addBond(atoms[i], atoms[j])
    ff = app.ForceField("amber99sbildn.xml")
    system = ff.createSystem(top, nonbondedMethod=app.NoCutoff, constraints=None)
    ctx = openmm.Context(
        system, openmm.VerletIntegrator(0.001), openmm.Platform.getPlatformByName("Reference")
    )
    ctx.setPositions(pos)
    openmm.LocalEnergyMinimizer.minimize(ctx, 1e-3, 0)
    pos = ctx.getState(getPositions=True).getPositions(asNumpy=True).value_in_unit(u.nanometer)
    with atomic_open(path, "w", encoding="utf-8") as fh:
        app.PDBFile.writeFile(top, pos * u.nanometer, fh)
    return np.asarray(pos)
