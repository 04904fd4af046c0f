"""Run configuration for ``sci-moe md run``: one validated dataclass, TOML/YAML files, overrides.

A configuration file holds the same keys as :class:`MDConfig` (``-`` and ``_`` are both
accepted; keys may sit at the top level or under a ``[md]`` table), for example
``md.toml``::

    system = "alanine-dipeptide"
    forcefield = "amber99sbildn"
    implicit_solvent = "obc"
    timestep_fs = 2.0
    temperature_k = 300.0
    friction_per_ps = 1.0
    time_ns = 0.1
    report_interval = 500
    checkpoint_interval = 5000
    seed = 1

Command-line flags override the file; the resolved configuration is written next to the
outputs as ``config.yaml`` (loadable again with ``--config``), as torchmd writes
``input.yaml``.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..._util import atomic_write_text

__all__ = [
    "COMPILE_MIN_STEPS",
    "ENGINES",
    "INTEGRATORS",
    "TOY_SYSTEMS",
    "TRAJECTORY_FORMATS",
    "MDConfig",
    "load_config_file",
    "resolve_config",
    "write_config",
]

#: Analytic systems (reduced units) and their defaults: kT, masses, timestep, friction.
TOY_SYSTEMS = {
    # ScoreMD's Muller-Brown protocol (Plainer et al. 2025): kT 23, mass 0.5, dt 5e-3, gamma 1.
    # Overdamped steps move by h F / (m gamma): Muller-Brown's stiff wells need h ~ 1e-4.
    "muller-brown": {
        "kt": 23.0,
        "mass": 0.5,
        "timestep_fs": 5.0,
        "overdamped_timestep_fs": 0.1,
        "friction_per_ps": 1.0,
    },
    "double-well": {
        "kt": 1.0,
        "mass": 1.0,
        "timestep_fs": 10.0,
        "overdamped_timestep_fs": 10.0,
        "friction_per_ps": 1.0,
    },
}
ENGINES = ("auto", "openmm", "torch")
#: Steps from which a run compiles a learned model's forces by default: compiling costs
#: 10-15 CPU-seconds and saves about 0.7 ms per step at 64 walkers (shipped model, one
#: thread), so it pays from about 20,000 steps on.
COMPILE_MIN_STEPS = 20_000
# Type of each setting (checked strictly, nothing is coerced) and which may be None.
_KINDS = {
    **dict.fromkeys(("deterministic", "minimize", "compile"), "bool"),
    **dict.fromkeys(
        (
            "timestep_fs",
            "temperature_k",
            "friction_per_ps",
            "kt",
            "time_ns",
            "max_hours",
            "energy_jump_kj_mol",
        ),
        "number",
    ),
    **dict.fromkeys(
        ("steps", "walkers", "seed", "report_interval", "checkpoint_interval", "threads"),
        "integer",
    ),
    **dict.fromkeys(
        (
            "system",
            "model",
            "forcefield",
            "implicit_solvent",
            "constraints",
            "engine",
            "integrator",
            "trajectory_format",
            "platform",
            "device",
        ),
        "str",
    ),
    "extra": "table",
}
_OPTIONAL = {
    "model",
    "implicit_solvent",
    "constraints",
    "timestep_fs",
    "kt",
    "steps",
    "time_ns",
    "max_hours",
    "energy_jump_kj_mol",
    "threads",
    "compile",
}
INTEGRATORS = ("langevin", "overdamped")
TRAJECTORY_FORMATS = ("dcd", "xtc", "h5")


@dataclass
class MDConfig:
    """Everything ``sci-moe md run`` needs; validated on construction.

    Attributes
    ----------
    system : str
        A built-in system (``"alanine-dipeptide"``, ``"muller-brown"``, ``"double-well"``)
        or the path of a PDB file (with :attr:`forcefield`).
    model : str or None
        A learned energy model (safetensors, kind ``"energy-diffusion"``); its forces
        replace the force field. ``"default"`` means the model shipped with the package.
    forcefield : str
        ``"amber99sbildn"``, ``"amber14"``, ``"amber99sb"`` or ``"charmm36"`` (PDB input).
    implicit_solvent : str or None
        ``"obc"``, ``"obc2"``, ``"gbn2"`` or ``None`` (vacuum).
    constraints : str or None
        OpenMM constraints (``"hbonds"``...; only with the OpenMM engine).
    engine : str
        ``"openmm"`` (OpenMM's LangevinMiddleIntegrator; force-field systems only),
        ``"torch"`` (this package's integrators, many walkers) or ``"auto"`` (OpenMM for
        force fields, torch for models and toy systems).
    integrator : str
        ``"langevin"`` (BAOAB in torch, LangevinMiddle in OpenMM) or ``"overdamped"``.
    timestep_fs, temperature_k, friction_per_ps : float
        Integrator parameters (fs, K, 1/ps); the timestep defaults to 1 fs (toy systems:
        their own default). Toy systems are in reduced units: their time unit is read as
        ps (so ``timestep_fs = 5`` is 5e-3) and :attr:`kt` replaces the temperature.
    kt : float or None
        Thermal energy of toy systems (reduced units; default per system).
    steps, time_ns : int or float or None
        Run length: steps, or simulated ns (converted with the timestep); one of them.
    walkers : int
        Independent copies simulated together (torch engine).
    seed : int
    deterministic : bool
        Bitwise reproducible forces (``torch.use_deterministic_algorithms``, OpenMM
        ``DeterministicForces``).
    report_interval : int
        Steps between trajectory frames and log rows.
    checkpoint_interval : int
        Steps between checkpoints.
    trajectory_format : str
        ``"dcd"``, ``"xtc"`` or ``"h5"`` (needs PyTables).
    max_hours : float or None
        Wall-clock limit; the run stops cleanly after a checkpoint.
    energy_jump_kj_mol : float or None
        Stop when the potential energy changes by more than this between two checks.
    minimize : bool
        Minimise before the run (OpenMM engine, fresh starts).
    platform : str
        OpenMM platform (OpenMM engine, and OpenMM force fields on the torch engine).
    device : str
        Torch device of the torch engine (``"cpu"``, ``"cuda"``, ``"cuda:1"``): positions,
        learned models and the random generator live there.
    threads : int or None
        CPU threads of torch (``None``: the command's default, 1 for ``sci-moe md run``;
        ``0``: every core; see :func:`sci_moe._util.set_threads`). May change on resume.
    compile : bool or None
        ``torch.compile`` a learned model's energy and forces (torch engine): about 1.6x
        fewer microseconds per force call for the shipped alanine-dipeptide model at 64
        walkers, for 10-15 CPU-seconds of compiling at the start; forces equal autograd's
        to float rounding (so a compiled trajectory is not bitwise the eager one).
        ``None`` (default): compile runs of at least :data:`COMPILE_MIN_STEPS` steps that
        are not :attr:`deterministic`. May change on resume.
    """

    system: str = "alanine-dipeptide"
    model: str | None = None
    forcefield: str = "amber99sbildn"
    implicit_solvent: str | None = "obc"
    constraints: str | None = None
    engine: str = "auto"
    integrator: str = "langevin"
    timestep_fs: float | None = None
    temperature_k: float = 300.0
    friction_per_ps: float = 1.0
    kt: float | None = None
    steps: int | None = None
    time_ns: float | None = None
    walkers: int = 1
    seed: int = 0
    deterministic: bool = False
    report_interval: int = 500
    checkpoint_interval: int = 5000
    trajectory_format: str = "dcd"
    max_hours: float | None = None
    energy_jump_kj_mol: float | None = 1.0e4
    minimize: bool = True
    platform: str = "CPU"
    device: str = "cpu"
    threads: int | None = None
    compile: bool | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        self._check_types()
        for name in ("model", "implicit_solvent", "constraints"):
            v = getattr(self, name)
            if isinstance(v, str) and v.strip().lower() in ("", "none", "null", "vacuum"):
                setattr(self, name, None)

        def positive(name, integer=False, allow_none=False):
            v = getattr(self, name)
            if v is None and allow_none:
                return
            ok = isinstance(v, (int, float)) and not isinstance(v, bool)
            if ok and integer:
                ok = float(v).is_integer()
            if not ok or not math.isfinite(v) or v <= 0:
                kind = "a positive integer" if integer else "a positive number"
                raise ValueError(f"{name} must be {kind}, got {v!r}")
            if integer:
                setattr(self, name, int(v))

        if self.is_toy:
            spec = TOY_SYSTEMS[self.system]
            if self.timestep_fs is None:
                key = "overdamped_timestep_fs" if self.integrator == "overdamped" else "timestep_fs"
                self.timestep_fs = spec[key]
            if self.kt is None:
                self.kt = spec["kt"]
        elif self.timestep_fs is None:
            self.timestep_fs = 1.0
        for name in ("timestep_fs", "temperature_k"):
            positive(name)
        if not isinstance(self.friction_per_ps, (int, float)) or not self.friction_per_ps > 0:
            raise ValueError(f"friction_per_ps must be positive, got {self.friction_per_ps!r}")
        for name in ("walkers", "report_interval", "checkpoint_interval"):
            positive(name, integer=True)
        positive("steps", integer=True, allow_none=True)
        for name in ("time_ns", "kt", "max_hours", "energy_jump_kj_mol"):
            positive(name, allow_none=True)
        if self.steps is not None and self.time_ns is not None:
            raise ValueError("give either steps or time_ns, not both")
        if self.threads is not None:
            if self.threads < 0:
                raise ValueError(
                    f"threads must be an integer >= 0 (0 = every core), got {self.threads!r}"
                )
            self.threads = int(self.threads)
        if self.compile and self.deterministic:
            raise ValueError(
                "compile and deterministic exclude each other: compiled kernels are not "
                "bitwise reproducible; drop --compile (or --deterministic)"
            )
        if not isinstance(self.seed, int) or isinstance(self.seed, bool) or self.seed < 0:
            raise ValueError(f"seed must be a non-negative integer, got {self.seed!r}")
        for name, options in (
            ("engine", ENGINES),
            ("integrator", INTEGRATORS),
            ("trajectory_format", TRAJECTORY_FORMATS),
        ):
            if getattr(self, name) not in options:
                raise ValueError(f"{name} must be one of {options}, got {getattr(self, name)!r}")
        if not isinstance(self.system, str) or not self.system:
            raise ValueError("system must be a built-in name or a PDB file path")
        if not isinstance(self.device, str) or not (
            self.device == "cpu" or self.device.split(":")[0] == "cuda"
        ):
            raise ValueError(f"device must be 'cpu' or 'cuda[:N]', got {self.device!r}")
        if self.integrator == "overdamped" and self.engine == "openmm":
            raise ValueError("the overdamped integrator runs on the torch engine (--engine torch)")

    def _check_types(self) -> None:
        """Strict types (no coercion): a bool is a bool, a number a number, a name a str."""
        for f in dataclasses.fields(self):
            name, v = f.name, getattr(self, f.name)
            kind = _KINDS.get(name)
            if kind is None:
                continue
            if v is None and name in _OPTIONAL:
                continue
            ok = {
                "bool": isinstance(v, bool),
                "number": isinstance(v, (int, float)) and not isinstance(v, bool),
                "integer": isinstance(v, (int, float))
                and not isinstance(v, bool)
                and math.isfinite(v)
                and float(v).is_integer(),
                "str": isinstance(v, str),
                "table": isinstance(v, dict),
            }[kind]
            if not ok:
                what = {
                    "bool": "true or false",
                    "number": "a number",
                    "integer": "an integer",
                    "str": "a string",
                    "table": "a table (mapping)",
                }[kind]
                raise ValueError(
                    f"{name} must be {what}{' or none' if name in _OPTIONAL else ''} (config "
                    f"key {name!r}, flag {_flag(name)}), got {v!r} of type {type(v).__name__}"
                )

    # ------------------------------------------------------------------ derived
    @property
    def is_toy(self) -> bool:
        """Whether :attr:`system` is an analytic toy system (reduced units)."""
        return self.system in TOY_SYSTEMS

    @property
    def timestep_ps(self) -> float:
        """Timestep in ps (reduced time units for toy systems)."""
        return self.timestep_fs * 1e-3

    @property
    def n_steps(self) -> int:
        """Total steps of the run (from :attr:`steps` or :attr:`time_ns`; default 10 000)."""
        if self.steps is not None:
            return self.steps
        if self.time_ns is not None:
            return max(1, round(self.time_ns * 1e6 / self.timestep_fs))
        return 10_000

    @property
    def compile_forces(self) -> bool:
        """Whether a learned model's forces are compiled: :attr:`compile`, or by default
        runs of at least :data:`COMPILE_MIN_STEPS` steps that are not deterministic."""
        if self.compile is not None:
            return self.compile
        return not self.deterministic and self.n_steps >= COMPILE_MIN_STEPS

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (``None`` values kept), the inverse of ``MDConfig(**d)``."""
        return dataclasses.asdict(self)


_KEYS = {f.name for f in dataclasses.fields(MDConfig)}


def _flag(name: str) -> str:
    """The ``sci-moe md run`` flag that sets config key ``name``."""
    return {"minimize": "--no-minimize", "extra": "(none)"}.get(name, "--" + name.replace("_", "-"))


def _normalise(d: dict[str, Any], source: str) -> dict[str, Any]:
    out = {}
    for key, value in d.items():
        k = str(key).replace("-", "_").lower()
        if k not in _KEYS:
            raise ValueError(
                f"unknown key {key!r} in {source}; valid keys: {', '.join(sorted(_KEYS))}"
            )
        out[k] = value
    return out


def load_config_file(path: str | Path) -> dict[str, Any]:
    """Read a TOML (``.toml``) or YAML (``.yaml``/``.yml``) run configuration.

    Returns
    -------
    dict
        Keys of :class:`MDConfig` (normalised to ``snake_case``), unvalidated.

    Raises
    ------
    ValueError
        Missing file, unknown suffix, syntax error or unknown key.
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"config file {path} does not exist")
    text = path.read_text(encoding="utf-8")
    suffix = path.suffix.lower()
    if suffix not in (".toml", ".yaml", ".yml"):
        raise ValueError(f"config file {path} must end in .toml, .yaml or .yml")
    try:
        if suffix == ".toml":
            import tomllib

            data = tomllib.loads(text)
        else:
            import yaml

            data = yaml.safe_load(text) or {}
    except Exception as err:  # tomllib.TOMLDecodeError, yaml.YAMLError
        raise ValueError(f"cannot parse {path}: {err}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path} must hold a table of settings, got {type(data).__name__}")
    if "md" in data:
        if not isinstance(data["md"], dict) or len(data) > 1:
            raise ValueError(
                f"{path}: 'md' must be a table of settings ([md] in TOML, md: in YAML) and "
                "the only top-level entry; or put the settings at the top level"
            )
        data = data["md"]
    return _normalise(data, str(path))


def resolve_config(
    file: str | Path | None = None,
    overrides: dict[str, Any] | None = None,
    base: dict[str, Any] | None = None,
) -> MDConfig:
    """Defaults < ``base`` < config ``file`` < ``overrides`` (``None`` values are skipped).

    ``steps`` and ``time_ns`` replace each other: setting one at a later level clears the
    other.
    """
    merged: dict[str, Any] = {}
    for layer, source in ((base, "base"), (None, "file"), (overrides, "flags")):
        if source == "file":
            layer = load_config_file(file) if file is not None else None
        if not layer:
            continue
        layer = _normalise({k: v for k, v in layer.items() if v is not None}, source)
        if "steps" in layer:
            merged.pop("time_ns", None)
        if "time_ns" in layer:
            merged.pop("steps", None)
        merged.update(layer)
    return MDConfig(**merged)


def write_config(cfg: MDConfig, path: str | Path, extra: dict[str, Any] | None = None) -> Path:
    """Write the resolved configuration as YAML (atomically), with ``extra`` merged into
    its ``extra`` entry (e.g. the engine chosen, the total steps)."""
    import yaml

    path = Path(path)
    data = cfg.to_dict()
    if extra:
        data["extra"] = {**data.get("extra", {}), **extra}
    return atomic_write_text(
        path,
        "# sci-moe md run: resolved configuration (reuse with --config)\n"
        + yaml.safe_dump(data, sort_keys=False),
    )
