"""Model files of energy-based diffusion models (contract B of ``sci-moe md run --model``).

A model file is a ``safetensors`` file holding the weights only, plus JSON metadata under
the key ``"sci_moe"``::

    {"kind": "energy-diffusion",
     "config": {"model": {...network spec...}, "sde": {"type": "VP", ...},
                "kT": 2.494, "scale": 5.1, "t_eval": 1e-5,
                "masses": [...], "atom_names": [...], "pdb": null | "alanine_dipeptide",
                "atom_indices": [...] | null, "extra": {...}}}

The network is rebuilt from its spec (class name + constructor arguments of a known class),
so nothing is unpickled. :class:`EnergyAtTime` turns the diffusion model into a force field
in OpenMM units: :math:`U(x) = k_BT\\,E_\\theta(x\\cdot\\mathrm{scale}, t_{eval})` kJ/mol for
positions in nm, so :math:`F = k_BT\\,\\mathrm{scale}\\,s_\\theta` (ScoreMD's force).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save
from torch import nn

from ..._util import atomic_write_bytes
from ..md import alanine_dipeptide_pdb, register_model_loader
from .networks import InvariantEnergyNet, InvariantMLPEnergy, MLPEnergy, MLPScore
from .sde import SDE, VESDE, VPSDE
from .time_moe import TimeMixture

__all__ = [
    "ALANINE_MODEL",
    "EnergyAtTime",
    "build_model",
    "load_diffusion_model",
    "load_energy_model",
    "model_spec",
    "save_energy_model",
]

KIND = "energy-diffusion"

#: The shipped alanine-dipeptide model (5 backbone beads, amber99sbildn + OBC, 300 K) in
#: ``sci_moe/sampling/files`` (package data), trained
#: by ``scripts/train_alanine_energy_model.py``; load it with :func:`load_energy_model`.
ALANINE_MODEL = Path(
    str(resources.files("sci_moe.sampling").joinpath("files", "alanine_energy_model.safetensors"))
)
_CLASSES = {c.__name__: c for c in (MLPEnergy, MLPScore, InvariantEnergyNet, InvariantMLPEnergy)}


class EnergyAtTime(nn.Module):
    """Energy of a diffusion model at a fixed time, in kJ/mol for positions in nm.

    .. math:: U(x) = k_BT\\; E_\\theta(\\mathrm{scale}\\cdot x,\\ t_{eval})

    Parameters
    ----------
    model : nn.Module
        Energy network or :class:`~.time_moe.TimeMixture` with ``energy(x, t)``.
    kT : float
        Thermal energy of the training data, kJ/mol (reduced units for toys).
    scale : float
        Model units per nm (ScoreMD's ``nf = 1/std``).
    t_eval : float
        Diffusion time of the force field (ScoreMD: 1e-5; 0 for Mueller-Brown).
    """

    def __init__(
        self, model: nn.Module, kT: float = 1.0, scale: float = 1.0, t_eval: float = 1e-5
    ) -> None:
        super().__init__()
        if kT <= 0 or scale <= 0 or not 0 <= t_eval <= 1:
            raise ValueError(
                f"need kT > 0, scale > 0, 0 <= t_eval <= 1; got {kT}, {scale}, {t_eval}"
            )
        self.model, self.kT, self.scale, self.t_eval = model, float(kT), float(scale), t_eval
        # With ranged gating one expert owns t_eval with weight exactly 1: evaluate it
        # directly (the same numbers as the mixture, without routing every call: ~14 % of
        # an MD force call, and no graph break under torch.compile).
        self._expert = None
        if getattr(model, "gating", None) == "ranged":
            e = int(model.expert_index(torch.tensor([t_eval], dtype=torch.float64)))
            if getattr(model.experts[e], "conservative", False):
                self._expert = e

    def forward(self, positions: torch.Tensor) -> torch.Tensor:
        """Energy (W,) in kJ/mol of positions (W, N, D) in nm."""
        t = torch.full(
            positions.shape[:1], self.t_eval, dtype=positions.dtype, device=positions.device
        )
        net = self.model if self._expert is None else self.model.experts[self._expert]
        return self.kT * net.energy(positions * self.scale, t)


def model_spec(model: nn.Module) -> dict:
    """JSON-able description (class + constructor arguments) of a network or time mixture."""
    if isinstance(model, TimeMixture):
        return {
            "class": "TimeMixture",
            "experts": [model_spec(e) for e in model.experts],
            "ranges": [list(r) for r in model.ranges],
            "gating": model.gating,
        }
    name = type(model).__name__
    if name not in _CLASSES or not hasattr(model, "spec"):
        raise ValueError(f"cannot save a {name}; use one of {sorted(_CLASSES)} or TimeMixture")
    return {"class": name, "kwargs": model.spec()}


def build_model(spec: dict) -> nn.Module:
    """Inverse of :func:`model_spec` (fresh weights)."""
    if spec.get("class") == "TimeMixture":
        experts = [build_model(e) for e in spec["experts"]]
        return TimeMixture(experts, [tuple(r) for r in spec["ranges"]], spec["gating"])
    cls = _CLASSES.get(spec.get("class"))
    if cls is None:
        raise ValueError(f"unknown network class {spec.get('class')!r} in the model file")
    return cls(**spec["kwargs"])


def _sde_spec(sde: SDE) -> dict:
    if isinstance(sde, VPSDE):
        return {"type": "VP", "beta_min": sde.beta_min, "beta_max": sde.beta_max}
    if isinstance(sde, VESDE):
        return {"type": "VE", "sigma_min": sde.sigma_min, "sigma_max": sde.sigma_max}
    raise ValueError(f"cannot save SDE {type(sde).__name__}")


def _build_sde(spec: dict) -> SDE:
    kw = {k: v for k, v in spec.items() if k != "type"}
    return VPSDE(**kw) if spec["type"] == "VP" else VESDE(**kw)


def save_energy_model(
    model: nn.Module,
    path: str | Path,
    *,
    sde: SDE,
    kT: float,
    scale: float = 1.0,
    t_eval: float = 1e-5,
    masses: Sequence[float] | torch.Tensor | None = None,
    atom_names: Sequence[str] | None = None,
    pdb: str | None = None,
    atom_indices: Sequence[int] | None = None,
    extra: dict | None = None,
) -> Path:
    """Write a model file (weights + metadata), atomically.

    Parameters
    ----------
    model : nn.Module
        :class:`~.networks.MLPEnergy`, :class:`~.networks.InvariantEnergyNet`,
        :class:`~.networks.MLPScore` or a :class:`~.time_moe.TimeMixture` of them.
    path : path
    sde : SDE
        The SDE it was trained with.
    kT : float
        Thermal energy of the data, kJ/mol (reduced units for toys).
    scale : float
        Model units per nm.
    t_eval : float
        Time of the force field.
    masses : sequence of float, shape (N,), optional
        amu, one per particle.
    atom_names : sequence of str, optional
    pdb : str, optional
        ``"alanine_dipeptide"`` for the shipped all-atom PDB of
        :func:`sci_moe.sampling.md.alanine_dipeptide_pdb`, a file path, or None.
    atom_indices : sequence of int, optional
        Indices of the particles in that PDB (coarse-grained models).
    extra : dict, optional
        JSON-able provenance (training data, metrics).

    Returns
    -------
    pathlib.Path
    """
    path = Path(path)
    n = None
    if masses is not None:
        masses = [float(m) for m in torch.as_tensor(masses).flatten()]
        n = len(masses)
        if min(masses) <= 0:
            raise ValueError("masses must be positive (amu)")
    if atom_names is not None:
        atom_names = [str(a) for a in atom_names]
        if n is not None and len(atom_names) != n:
            raise ValueError(f"{len(atom_names)} atom names for {n} masses")
    meta = {
        "kind": KIND,
        "config": {
            "model": model_spec(model),
            "sde": _sde_spec(sde),
            "kT": float(kT),
            "scale": float(scale),
            "t_eval": float(t_eval),
            "masses": masses,
            "atom_names": atom_names,
            "pdb": pdb,
            "atom_indices": None if atom_indices is None else [int(i) for i in atom_indices],
            "extra": extra or {},
        },
    }
    tensors = {k: v.detach().cpu().contiguous().clone() for k, v in model.state_dict().items()}
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, save(tensors, metadata={"sci_moe": json.dumps(meta)}))
    return path


def _read(path: str | Path) -> tuple[dict, dict]:
    path = Path(path)
    if not path.exists():
        raise ValueError(f"model file {path} does not exist")
    with safe_open(str(path), framework="pt") as f:
        md = f.metadata() or {}
        if "sci_moe" not in md:
            raise ValueError(f"{path} has no 'sci_moe' metadata; write it with save_energy_model")
        meta = json.loads(md["sci_moe"])
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    if meta.get("kind") != KIND:
        raise ValueError(f"{path} holds a {meta.get('kind')!r} model, not {KIND!r}")
    return meta["config"], tensors


def load_diffusion_model(path: str | Path, dtype: torch.dtype | None = None):
    """Load the full diffusion model (for sampling) from a model file.

    Returns
    -------
    model : nn.Module
        In eval mode.
    sde : SDE
    config : dict
        The metadata's ``config`` (kT, scale, t_eval, masses, atom_names, ...).
    """
    cfg, tensors = _read(path)
    model = build_model(cfg["model"])
    model.load_state_dict(tensors)
    model = model.to(dtype or torch.get_default_dtype()).eval()
    return model, _build_sde(cfg["sde"]), cfg


def load_energy_model(path: str | Path, dtype: torch.dtype | None = None):
    """Load a model file as a force field (contract B).

    Returns
    -------
    energy : EnergyAtTime
        ``positions (W, N, D) nm -> (W,) kJ/mol`` at ``t_eval``.
    masses : Tensor, shape (N,) or None
        amu.
    atom_names : list of str or None
    pdb : pathlib.Path or None
        Topology file, when the model names one.
    """
    model, _sde, cfg = load_diffusion_model(path, dtype)
    energy = EnergyAtTime(model, cfg["kT"], cfg["scale"], cfg["t_eval"]).eval()
    masses = None if cfg["masses"] is None else torch.tensor(cfg["masses"], dtype=torch.float64)
    pdb = cfg.get("pdb")
    if pdb == "alanine_dipeptide":
        pdb = alanine_dipeptide_pdb()
    return energy, masses, cfg["atom_names"], None if pdb is None else Path(pdb)


register_model_loader(KIND, load_energy_model)  # sci-moe md run --model
