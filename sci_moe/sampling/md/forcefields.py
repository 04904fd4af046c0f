"""The force fields and implicit solvents ``sci-moe md`` offers: OpenMM's XML files.

One table for every system built from a topology (the built-in alanine dipeptide and user
PDB files alike), so that ``--forcefield amber99sbildn --implicit-solvent obc`` means the
same physics whatever the structure.
"""

from __future__ import annotations

__all__ = [
    "CONSTRAINTS",
    "FORCEFIELDS",
    "IMPLICIT_SOLVENTS",
    "create_system",
    "forcefield_files",
]

#: Protein force fields shipped with OpenMM: name -> XML files.
FORCEFIELDS = {
    "amber99sbildn": ["amber99sbildn.xml"],
    "amber99sb": ["amber99sb.xml"],
    "amber14": ["amber14-all.xml"],
    "charmm36": ["charmm36.xml"],
}
#: Implicit solvents: name -> XML file. ``"obc"`` is ``amber99_obc.xml`` with the amber99
#: force fields (see :func:`forcefield_files`).
IMPLICIT_SOLVENTS = {
    "obc": "implicit/obc1.xml",
    "obc2": "implicit/obc2.xml",
    "gbn2": "implicit/gbn2.xml",
}
_AMBER99_OBC = "amber99_obc.xml"
#: Constraint names (``None``: no constraints; the torch integrators need ``None``).
CONSTRAINTS = (None, "hbonds", "allbonds", "hangles")


def forcefield_files(forcefield: str = "amber99sbildn", implicit_solvent: str | None = "obc"):
    """OpenMM XML files of a force field and an implicit solvent.

    Parameters
    ----------
    forcefield : str
        A key of :data:`FORCEFIELDS`.
    implicit_solvent : {"obc", "obc2", "gbn2", None}
        ``"obc"`` is OBC (``amber99_obc.xml`` with the amber99-family force fields,
        ``implicit/obc1.xml`` otherwise), ``"obc2"`` / ``"gbn2"`` from ``implicit/``;
        ``None`` for vacuum.

    Returns
    -------
    list of str
    """
    if forcefield not in FORCEFIELDS:
        raise ValueError(f"unknown forcefield {forcefield!r}; choose one of {list(FORCEFIELDS)}")
    files = list(FORCEFIELDS[forcefield])
    if implicit_solvent is not None:
        if implicit_solvent not in IMPLICIT_SOLVENTS:
            raise ValueError(
                f"unknown implicit_solvent {implicit_solvent!r}; choose one of "
                f"{list(IMPLICIT_SOLVENTS)} or None"
            )
        if implicit_solvent == "obc" and forcefield.startswith("amber99"):
            files.append(_AMBER99_OBC)
        else:
            files.append(IMPLICIT_SOLVENTS[implicit_solvent])
    return files


def create_system(
    topology,
    forcefield: str = "amber99sbildn",
    implicit_solvent: str | None = "obc",
    constraints: str | None = None,
    cutoff_nm: float | None = None,
):
    """``openmm.System`` of ``topology`` with a force field of :data:`FORCEFIELDS`.

    Parameters
    ----------
    topology : openmm.app.Topology
    forcefield, implicit_solvent
        See :func:`forcefield_files`.
    constraints : {None, "hbonds", "allbonds", "hangles"}
    cutoff_nm : float, optional
        Non-periodic cutoff (``CutoffNonPeriodic``), nm; default: no cutoff.

    Returns
    -------
    openmm.System

    Raises
    ------
    ValueError
        For unknown names, or when the force field cannot parameterise the topology.
    """
    from openmm import app, unit

    files = forcefield_files(forcefield, implicit_solvent)
    cons = {None: None, "hbonds": app.HBonds, "allbonds": app.AllBonds, "hangles": app.HAngles}
    if constraints not in cons:
        raise ValueError(f"unknown constraints {constraints!r}; choose one of {list(cons)}")
    kwargs = {"constraints": cons[constraints], "rigidWater": False}
    if cutoff_nm is None:
        kwargs["nonbondedMethod"] = app.NoCutoff
    else:
        if not cutoff_nm > 0:
            raise ValueError(f"cutoff_nm must be positive, got {cutoff_nm}")
        kwargs["nonbondedMethod"] = app.CutoffNonPeriodic
        kwargs["nonbondedCutoff"] = cutoff_nm * unit.nanometer
    ff = app.ForceField(*files)
    try:
        return ff.createSystem(topology, **kwargs)
    except Exception as err:  # ValueError (no template), Exception (ambiguous templates)
        raise ValueError(
            f"force field {forcefield} cannot parameterise this structure: "
            f"{str(err).rstrip('.')}. Check that the residues are standard, that hydrogens "
            "are present (e.g. add them with openmm.app.Modeller.addHydrogens or pdbfixer) "
            "and that the force field covers every residue"
        ) from None
