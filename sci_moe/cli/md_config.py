"""The settings of ``sci-moe md run``: its value flags and help, and the resolution of
defaults < ``--config`` file < flags, or of a resumed run's ``OUT/config.yaml`` (with the
settings a resume may change).

Split from :mod:`sci_moe.cli.md` (the subcommand and its run loop).
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["HELP", "RESUMABLE", "VALUE_FLAGS", "check_out", "overrides", "resolve", "resumable"]

# Flags that take a value from the config file unless given (argparse default None).
VALUE_FLAGS = {
    "system": str,
    "model": str,
    "forcefield": str,
    "implicit_solvent": str,
    "constraints": str,
    "engine": str,
    "integrator": str,
    "timestep_fs": float,
    "temperature_k": float,
    "friction_per_ps": float,
    "kt": float,
    "steps": int,
    "time_ns": float,
    "walkers": int,
    "seed": int,
    "report_interval": int,
    "checkpoint_interval": int,
    "trajectory_format": str,
    "max_hours": float,
    "energy_jump_kj_mol": float,
    "platform": str,
    "device": str,
    "threads": int,
}  # Settings a resumed run may change; everything else must match the checkpoint.
RESUMABLE = {"steps", "time_ns", "max_hours", "platform", "device", "threads", "compile"}
HELP = {
    "system": "built-in system (alanine-dipeptide, muller-brown, double-well) or a .pdb file",
    "model": "learned energy model (.safetensors of kind energy-diffusion); 'default' = the "
    "shipped alanine-dipeptide model",
    "forcefield": "OpenMM force field: amber99sbildn (default), amber14 or amber99sb (also "
    "charmm36 for --system PDB files); without --system it runs alanine dipeptide with it",
    "implicit_solvent": "obc (default), obc2, gbn2 or none",
    "constraints": "none (default), hbonds, allbonds, hangles (OpenMM engine only)",
    "engine": "auto (default: OpenMM for force fields, torch for models/toys), openmm, torch",
    "integrator": "langevin (BAOAB / LangevinMiddle, default) or overdamped (torch)",
    "timestep_fs": "timestep in fs (default 1; toy systems: reduced units x 1e-3)",
    "temperature_k": "temperature in K (default 300)",
    "friction_per_ps": "Langevin friction in 1/ps (default 1)",
    "kt": "thermal energy of toy systems, reduced units (default per system)",
    "steps": "number of steps (default 10000)",
    "time_ns": "simulated time in ns instead of --steps",
    "walkers": "independent walkers simulated together (torch engine; default 1)",
    "seed": "random seed (default 0)",
    "report_interval": "steps between trajectory frames and log rows (default 500)",
    "checkpoint_interval": "steps between checkpoints (default 5000)",
    "trajectory_format": "dcd (default), xtc or h5 (needs PyTables)",
    "max_hours": "wall-clock limit: stop cleanly after a checkpoint",
    "energy_jump_kj_mol": "stop when the energy jumps by more than this between checks "
    "(default 1e4)",
    "platform": "OpenMM platform (default CPU)",
    "device": "torch device of the torch engine: cpu (default) or cuda[:N]",
    "threads": "CPU threads of torch (learned models, toy systems): default 1, the fastest "
    "for MD's small batched systems and robust to other busy processes; 0 = every core",
}


def overrides(args) -> dict:
    out = {name: getattr(args, name) for name in VALUE_FLAGS}
    if args.deterministic:
        out["deterministic"] = True
    if args.compile is not None:
        out["compile"] = args.compile
    if args.no_minimize:
        out["minimize"] = False
    return out


def _new_run_hint(out: Path) -> str:
    """How to start over in ``out``: plain when empty, ``--overwrite`` when it has outputs."""
    if out.is_dir() and any(p.name != ".lock" for p in out.iterdir()):
        return (
            f"start a new run there with --overwrite (replaces the outputs in {out}) or "
            "choose another --out"
        )
    return "start a new run without --resume"


def resumable(args) -> set[str]:
    return RESUMABLE | ({"timestep_fs"} if args.change_timestep else set())


def resolve(args):
    """The run configuration, notes to print, and the config history (resumes)."""
    from ..sampling.md import MDConfig, default_model_path, load_config_file, resolve_config

    out = Path(args.out)
    given = overrides(args)
    notes = []
    if args.change_timestep and not args.resume:
        raise ValueError("--change-timestep continues a run: use it with --resume")
    if args.resume:
        if args.overwrite:
            raise ValueError("--resume and --overwrite exclude each other")
        if args.config:
            raise ValueError("--resume reads OUT/config.yaml; do not pass --config")
        ckpts = [n for n in ("checkpoint.pt", "checkpoint_prev.pt") if (out / n).is_file()]
        if not ckpts or not (out / "config.yaml").is_file():
            raise ValueError(
                f"{out} holds no checkpoint.pt/config.yaml to resume from; " + _new_run_hint(out)
            )
        base = load_config_file(out / "config.yaml")
        extra = base.pop("extra", None)
        history = list((extra or {}).get("history") or []) if isinstance(extra, dict) else []
        saved = MDConfig(**base)
        cfg = resolve_config(None, given, base)
        changed = [
            k
            for k, v in cfg.to_dict().items()
            if k not in resumable(args) | {"extra"} and getattr(saved, k) != v
        ]
        if changed:
            hint = (
                " (to continue with another timestep, e.g. a smaller one after an "
                "instability, add --change-timestep)"
                if "timestep_fs" in changed
                else ""
            )
            raise ValueError(
                f"cannot change {', '.join(sorted(changed))} when resuming (only "
                f"{', '.join(sorted(RESUMABLE))}){hint}; start a new run in another --out"
            )
        if args.change_timestep and cfg.timestep_fs != saved.timestep_fs:
            history.append(
                {"change": "timestep_fs", "from": saved.timestep_fs, "to": cfg.timestep_fs}
            )
        return cfg, notes, history
    file_keys = set(load_config_file(args.config)) if args.config else set()
    chosen = (
        given["system"] is not None or given["model"] is not None or {"system", "model"} & file_keys
    )
    if not chosen and (given["forcefield"] is not None or "forcefield" in file_keys):
        chosen = True  # an OpenMM force field on the default system, never a learned model
        ff = given["forcefield"] or load_config_file(args.config)["forcefield"]
        notes.append(f"no system given: simulating alanine dipeptide with the {ff} force field")
    if not chosen:
        model = default_model_path()
        if model is not None:
            given["model"] = str(model)
            notes.append(
                f"no system given: simulating alanine dipeptide with the shipped learned "
                f"model {model.name}"
            )
        else:
            notes.append(
                "no system given: simulating alanine dipeptide with amber99sbildn + OBC "
                "implicit solvent (no learned model is shipped in this installation)"
            )
    if given["model"] == "default":
        model = default_model_path()
        if model is None:
            raise ValueError("--model default: no learned model is shipped in this installation")
        given["model"] = str(model)
    return resolve_config(args.config, given), notes, []


def check_out(out: Path, resume: bool, overwrite: bool) -> None:
    if resume or not out.exists():
        return
    if not out.is_dir():
        raise ValueError(f"--out {out} exists and is not a folder")
    if any(p.name != ".lock" for p in out.iterdir()) and not overwrite:
        raise ValueError(
            f"--out {out} is not empty; pass --resume to continue that run, --overwrite to "
            "replace its outputs, or choose another folder"
        )
