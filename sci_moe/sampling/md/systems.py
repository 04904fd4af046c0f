"""What ``sci-moe md run`` simulates: built-in systems, PDB files + force fields, learned models.

:func:`build_md_system` turns an :class:`~sci_moe.sampling.md.config.MDConfig` into an
:class:`MDSystem` (topology, initial positions, masses, and either an ``openmm.System`` for
OpenMM's integrator or a :class:`~sci_moe.sampling.md.forces.ForceProvider` for the torch
integrators). Every bad input raises ``ValueError`` with a message that says what to do.

Learned models are safetensors files whose metadata (a JSON string under the key
``"sci_moe"``) says ``{"kind": "energy-diffusion", ...}``; only weights are read, nothing is
ever unpickled. Loading goes through the loader registered for the file's kind
(:func:`register_model_loader`): :mod:`sci_moe.sampling.diffusion`, which writes these files
and sits above this engine, registers ``load_energy_model`` when it is imported (importing
:mod:`sci_moe.sampling` imports it).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .alanine import alanine_dipeptide_pdb, build_system
from .config import TOY_SYSTEMS, MDConfig
from .forcefields import FORCEFIELDS, create_system
from .shipped import shipped_files

__all__ = [
    "BUILTIN_SYSTEMS",
    "FORCEFIELDS",
    "MODEL_KIND",
    "MDSystem",
    "build_md_system",
    "check_model_file",
    "default_model_path",
    "load_pdb",
    "register_model_loader",
    "resolve_engine",
]

#: Built-in system names.
BUILTIN_SYSTEMS = ("alanine-dipeptide", *TOY_SYSTEMS)
#: The ``kind`` a learned model file must declare.
MODEL_KIND = "energy-diffusion"
#: Loaders of learned model files by ``kind`` (:func:`register_model_loader`).
_MODEL_LOADERS: dict[str, Callable] = {}


def register_model_loader(kind: str, loader: Callable) -> None:
    """Load learned model files of ``kind`` with ``loader`` (``sci-moe md run --model``).

    The engine does not import the package that writes model files (it sits above the
    engine); that package registers its loader instead. :mod:`sci_moe.sampling.diffusion`
    registers ``load_energy_model`` for :data:`MODEL_KIND` when it is imported.

    Parameters
    ----------
    kind : str
        The ``kind`` in the file's ``"sci_moe"`` metadata.
    loader : callable
        ``loader(path) -> (energy, masses, atom_names, pdb)``: an ``nn.Module`` mapping
        positions ``(W, N, D)`` in nm to ``(W,)`` kJ/mol, the masses ``(N,)`` in amu or
        ``None``, the atom names or ``None``, and the topology file or ``None``.
    """
    _MODEL_LOADERS[kind] = loader


@dataclass
class MDSystem:
    """A system ready to simulate.

    Attributes
    ----------
    name : str
        Human-readable description (printed and stored in the resolved config).
    positions : ndarray, shape (N, D)
        Initial positions, nm (reduced units for toys).
    masses : ndarray, shape (N,)
        amu.
    topology : openmm.app.Topology
        For trajectory headers (a dummy one for toys).
    system : openmm.System or None
        For the OpenMM engine and :class:`~sci_moe.sampling.md.forces.OpenMMForces`.
    provider : ForceProvider or None
        For the torch engine (set by :func:`build_md_system` when the engine is torch).
    kT : float or None
        Thermal energy in the potential's units for toy systems (``None``: use the
        temperature).
    pdb_path : Path or None
        The structure the run starts from (copied next to the outputs as ``topology.pdb``).
    model_info : dict or None
        Metadata of a learned model.
    """

    name: str
    positions: np.ndarray
    masses: np.ndarray
    topology: Any
    system: Any = None
    provider: Any = None
    kT: float | None = None
    pdb_path: Path | None = None
    model_info: dict | None = None


def default_model_path() -> Path | None:
    """The learned alanine-dipeptide model shipped in ``sci_moe/sampling/files`` (or ``None``)."""
    for path in shipped_files("alanine*.safetensors"):
        try:
            check_model_file(path)
        except ValueError:
            continue
        return path
    return None


def check_model_file(path: str | Path) -> dict[str, Any]:
    """Validate a learned model file without loading its weights.

    Returns
    -------
    dict
        The ``"sci_moe"`` metadata (``kind``, ``config``, ...).

    Raises
    ------
    ValueError
        Missing file, not safetensors (pickles are refused), or the wrong kind.
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"model file {path} does not exist")
    if path.suffix.lower() != ".safetensors":
        raise ValueError(
            f"{path.name}: learned models must be .safetensors weight files; pickled "
            "checkpoints (.pt, .pth, .pkl) are never loaded because unpickling can run code"
        )
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="pt") as fh:
            meta = fh.metadata() or {}
    except Exception as err:
        raise ValueError(f"{path.name} is not a valid safetensors file: {err}") from None
    if "sci_moe" not in meta:
        raise ValueError(
            f"{path.name} has no 'sci_moe' metadata: it was not written by "
            "sci_moe.sampling.diffusion.save_energy_model"
        )
    try:
        info = json.loads(meta["sci_moe"])
    except json.JSONDecodeError as err:
        raise ValueError(f"{path.name}: the 'sci_moe' metadata is not JSON ({err})") from None
    kind = info.get("kind") if isinstance(info, dict) else None
    if kind != MODEL_KIND:
        raise ValueError(
            f"{path.name} is a model of kind {kind!r}; `sci-moe md run --model` needs an "
            f"{MODEL_KIND!r} model (an energy model of positions)"
        )
    return info


def load_pdb(path: str | Path):
    """Read a PDB file with OpenMM; malformed files raise ``ValueError``.

    Returns
    -------
    topology : openmm.app.Topology
    positions : ndarray, shape (N, 3)
        nm.
    """
    from openmm import app, unit

    path = Path(path)
    if not path.is_file():
        raise ValueError(f"PDB file {path} does not exist")
    with open(path, "rb") as fh:
        has_atoms = any(line.startswith((b"ATOM", b"HETATM")) for line in fh)
    if not has_atoms:
        raise ValueError(
            f"PDB file {path} holds no ATOM/HETATM records (empty or not a PDB file); "
            "give a PDB file with coordinates"
        )
    try:
        pdb = app.PDBFile(str(path))
        pos = np.asarray(pdb.getPositions(asNumpy=True).value_in_unit(unit.nanometer))
    except Exception as err:
        raise ValueError(f"cannot read PDB file {path}: {type(err).__name__}: {err}") from None
    n = pdb.topology.getNumAtoms()
    if n == 0 or pos.shape != (n, 3) or not np.isfinite(pos).all():
        raise ValueError(f"PDB file {path} holds no usable atoms/coordinates")
    return pdb.topology, pos


def _pdb_system(cfg: MDConfig):
    topology, pos = load_pdb(cfg.system)
    try:
        system = create_system(topology, cfg.forcefield, cfg.implicit_solvent, cfg.constraints)
    except ValueError as err:
        msg = str(err).replace("this structure", str(cfg.system), 1)
        raise ValueError(msg) from None
    return topology, system, pos


def _masses(system) -> np.ndarray:
    from openmm import unit

    return np.array(
        [
            system.getParticleMass(i).value_in_unit(unit.dalton)
            for i in range(system.getNumParticles())
        ]
    )


def _toy(cfg: MDConfig) -> MDSystem:
    import torch

    from .forces import PotentialForces
    from .potentials import DoubleWell, MuellerBrown
    from .reporters import dummy_topology

    spec = TOY_SYSTEMS[cfg.system]
    if cfg.system == "muller-brown":
        potential, start = MuellerBrown(), [[-0.558, 1.442]]
    else:
        potential, start = DoubleWell(dim=1), [[-1.0]]
    masses = np.full(1, spec["mass"])
    return MDSystem(
        name=f"{cfg.system} (analytic, reduced units, kT={cfg.kt or spec['kt']:g})",
        positions=np.asarray(start, dtype=np.float64),
        masses=masses,
        topology=dummy_topology(1),
        provider=PotentialForces(potential, torch.as_tensor(masses)),
        kT=float(cfg.kt or spec["kt"]),
    )


def resolve_engine(cfg: MDConfig) -> str:
    """``"openmm"`` or ``"torch"`` for ``cfg`` (``auto``: OpenMM for force fields)."""
    if cfg.engine != "auto":
        engine = cfg.engine
    elif cfg.is_toy or cfg.model is not None or cfg.walkers > 1 or cfg.integrator == "overdamped":
        engine = "torch"
    else:
        engine = "openmm"
    if engine == "openmm":
        if cfg.is_toy:
            raise ValueError(f"{cfg.system} is an analytic system: use --engine torch")
        if cfg.walkers != 1:
            raise ValueError("the OpenMM engine runs one walker; use --engine torch for more")
    elif cfg.constraints is not None:
        raise ValueError(
            "the torch integrators do not apply constraints: drop --constraints or use "
            "--engine openmm"
        )
    return engine


def build_md_system(cfg: MDConfig) -> tuple[MDSystem, str]:
    """Build the system of ``cfg``.

    Returns
    -------
    MDSystem
    engine : str
        ``"openmm"`` or ``"torch"``; for torch, ``MDSystem.provider`` is set.
    """
    engine = resolve_engine(cfg)
    if cfg.is_toy:
        out = _toy(cfg)
        if cfg.model is not None:  # a learned model of the toy (e.g. ScoreMD's Muller-Brown)
            _attach_model(cfg, out, engine)
        return out, engine
    if cfg.system == "alanine-dipeptide" and cfg.model is not None:
        # A learned model replaces the force field: no OpenMM system to build (~0.5 s).
        pdb_path = alanine_dipeptide_pdb()
        topology, pos = load_pdb(pdb_path)
        masses = _topology_masses(topology)
        out = MDSystem("alanine dipeptide", pos, masses, topology, pdb_path=pdb_path)
        _attach_model(cfg, out, engine)
        return out, engine
    if cfg.system == "alanine-dipeptide":
        topology, system, pos = build_system(cfg.forcefield, cfg.implicit_solvent, cfg.constraints)
        pdb_path = alanine_dipeptide_pdb()
        solvent = cfg.implicit_solvent or "vacuum"
        name = f"alanine dipeptide, {cfg.forcefield} + {solvent}"
    elif cfg.system.lower().endswith(".pdb") or Path(cfg.system).is_file():
        if not cfg.system.lower().endswith(".pdb"):
            raise ValueError(f"{cfg.system}: only .pdb structure files are supported")
        topology, system, pos = _pdb_system(cfg)
        pdb_path = Path(cfg.system)
        name = f"{Path(cfg.system).name}, {cfg.forcefield} + {cfg.implicit_solvent or 'vacuum'}"
    else:
        raise ValueError(
            f"unknown system {cfg.system!r}: use one of {', '.join(BUILTIN_SYSTEMS)} or a .pdb file"
        )
    out = MDSystem(name, pos, _masses(system), topology, system=system, pdb_path=pdb_path)
    if cfg.model is not None:
        _attach_model(cfg, out, engine)
    elif engine == "torch":
        from .forces import OpenMMForces

        props = None
        if cfg.deterministic and cfg.platform == "CPU":
            props = {"DeterministicForces": "true", "Threads": "1"}
        elif cfg.deterministic and cfg.platform in ("CUDA", "OpenCL", "HIP"):
            props = {"DeterministicForces": "true"}
        out.provider = OpenMMForces(system, platform=cfg.platform, properties=props)
    return out, engine


def _attach_model(cfg: MDConfig, out: MDSystem, engine: str) -> None:
    import torch

    from .forces import ModelForces

    info = check_model_file(cfg.model)
    load_energy_model = _MODEL_LOADERS.get(info["kind"])
    if load_energy_model is None:
        raise ValueError(
            "learned models need sci_moe.sampling.diffusion.load_energy_model, which this "
            "installation does not provide; run with a force field instead (no --model)"
        )
    try:
        model, masses, atom_names, pdb = load_energy_model(cfg.model)
    except ValueError:
        raise
    except Exception as err:  # corrupt weights, shape mismatch
        raise ValueError(f"cannot load model {cfg.model}: {type(err).__name__}: {err}") from None
    if pdb is not None and not cfg.is_toy:
        out.topology, out.positions = load_pdb(pdb)
        out.pdb_path = Path(pdb)
        out.masses = _topology_masses(out.topology)
    indices = (info.get("config") or {}).get("atom_indices")
    if indices is not None and not cfg.is_toy:
        idx = [int(i) for i in indices]
        out.positions = out.positions[idx]
        out.masses = out.masses[idx]
        out.topology = _subset_topology(out.topology, idx)
        out.pdb_path = None
    if masses is not None:
        masses = np.asarray(torch.as_tensor(masses, dtype=torch.float64))
        if masses.shape != out.masses.shape:
            raise ValueError(
                f"model {Path(cfg.model).name} is for {masses.shape[0]} particles but "
                f"{cfg.system} has {len(out.positions)}"
            )
        out.masses = masses
    model.eval()
    out.model_info = {**info, "atom_names": list(atom_names or [])}
    out.name = f"{out.name.split(',')[0].split(' (')[0]}, learned model {Path(cfg.model).name}"
    if engine == "openmm":
        if out.positions.shape[1] != 3:
            raise ValueError("the OpenMM engine needs 3-D positions; use --engine torch")
        from .openmm_bridge import model_system

        params = list(model.parameters())
        dtype = params[0].dtype if params else torch.float64
        out.system = model_system(model, out.masses, dtype=dtype)
    else:
        dim = out.positions.shape[1]
        out.provider = ModelForces(
            model, torch.as_tensor(out.masses), dim=dim, compile=cfg.compile_forces
        )


def _subset_topology(topology, indices):
    """The atoms ``indices`` of an OpenMM topology, as a new ``openmm.app.Topology``.

    What ``mdtraj.Topology.from_openmm(topology).subset(indices).to_openmm()`` gives,
    without importing mdtraj on ``sci-moe md run``'s start-up path: the kept atoms in the
    topology's order (not the order of ``indices``) with their names, elements and formal
    charges; their residues (name, id as an integer string, or the residue's index where
    the id is not an integer) and chains (id); the bonds between kept atoms (type, order;
    the lower index first). Empty residues and chains are dropped; atom ids are renumbered
    from 1 and no periodic box is set.

    Parameters
    ----------
    topology : openmm.app.Topology
    indices : sequence of int
        0-based atom indices into ``topology``.

    Returns
    -------
    openmm.app.Topology
    """
    from openmm import app

    keep = {int(i) for i in indices}
    out = app.Topology()
    new_atom = {}
    for chain in topology.chains():
        new_chain = None
        for residue in chain.residues():
            atoms = [a for a in residue.atoms() if a.index in keep]
            if not atoms:
                continue
            if new_chain is None:
                new_chain = out.addChain(id=chain.id)
            try:
                res_id = str(int(residue.id))
            except ValueError:
                res_id = str(residue.index)
            new_res = out.addResidue(residue.name, new_chain, id=res_id)
            for atom in atoms:
                charge = getattr(atom, "formalCharge", None)
                new_atom[atom] = out.addAtom(atom.name, atom.element, new_res, formalCharge=charge)
    for bond in topology.bonds():
        a, b = sorted(bond, key=lambda atom: atom.index)
        if a in new_atom and b in new_atom:
            out.addBond(new_atom[a], new_atom[b], type=bond.type, order=bond.order)
    return out


def _topology_masses(topology) -> np.ndarray:
    masses = []
    for atom in topology.atoms():
        if atom.element is None:
            raise ValueError(f"atom {atom.name} of the model's PDB has no element (mass)")
        masses.append(atom.element.mass._value)
    return np.asarray(masses, dtype=np.float64)
