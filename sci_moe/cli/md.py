"""``sci-moe md``: run molecular dynamics and analyse the results.

Examples
--------
.. code-block:: console

    $ sci-moe md run                                  # alanine dipeptide, default settings
    $ sci-moe md run --system alanine-dipeptide --forcefield amber14 --implicit-solvent obc2 \\
          --timestep-fs 2 --temperature-k 300 --friction-per-ps 1 --time-ns 0.1 --seed 1 \\
          --out ala_run
    $ sci-moe md run --config md.toml --steps 200000 --max-hours 2 --out ala_run
    $ sci-moe md run --out ala_run --resume           # continue a killed or time-limited run
    $ sci-moe md run --system protein.pdb --forcefield charmm36 --out protein_run
    $ sci-moe md run --model my_model.safetensors --walkers 16 --out learned_run
    $ sci-moe md run --system muller-brown --walkers 64 --steps 20000 --out mb_run
    $ sci-moe md analyse ala_run                      # Ramachandran PNG + JS divergence

Exit codes: 0 success (also when ``--max-hours`` stopped the run after a checkpoint),
1 the dynamics became unstable (message names the step and the cause), 2 bad input
(including a refused ``--resume``, which changes no file, and an ``--out`` in use by
another process), 3 an output could not be written (disk full, file-size limit, I/O
error; the last checkpoint is kept, ``--resume`` continues once there is room),
130/143 stopped by Ctrl-C/SIGTERM: the run stops after the current step and writes a
checkpoint (a second signal aborts at once, keeping the previous checkpoint).
See ``docs/guarantees.rst``.
"""

from __future__ import annotations

import argparse
import errno
import json
import signal
import sys
from pathlib import Path

from .md_analyse import analyse
from .md_build import build_simulation, check_memory, dump_failure_state, write_topology
from .md_config import HELP, VALUE_FLAGS, check_out, resolve, resumable

__all__ = ["EXIT_WRITE_FAILED", "add_parser", "analyse", "run"]

#: Exit code when an output could not be written (disk full, ``ulimit -f``, I/O error).
EXIT_WRITE_FAILED = 3

#: torch threads of an MD run unless --threads / the config key says otherwise: MD's small
#: batched systems run fastest on one (and a second busy process does not slow it 10x).
DEFAULT_THREADS = 1
# Files every `sci-moe md run` writes besides its trajectories, listed in OUT/manifest.json
# before they are written; --overwrite removes what the manifest lists, nothing else.
_OUTPUTS = ("config.yaml", "topology.pdb", "log.csv", "checkpoint.pt", "checkpoint_prev.pt")
_FAILURE_OUTPUTS = ("failure.json", "failure_state.pt")
# What a run of a version without a manifest wrote (its trajectories: from its config.yaml).
_LEGACY_OUTPUTS = (
    *_OUTPUTS,
    *_FAILURE_OUTPUTS,
    "analysis.json",
    "ramachandran.png",
    "density.png",
    "traces.png",
)


def add_parser(sub) -> argparse.ArgumentParser:
    """Add the ``md`` subcommand (``run``, ``analyse``) to the ``sci-moe`` subparsers."""
    p = sub.add_parser(
        "md",
        help="molecular dynamics: run (OpenMM or learned forces) and analyse",
        description="Molecular dynamics with OpenMM force fields, learned energy models or "
        "analytic potentials: checkpoints, exact resume, CSV logs, DCD/XTC trajectories.",
    )
    p.set_defaults(func=lambda args: (p.print_help(), 0)[1])
    msub = p.add_subparsers(dest="md_command")

    r = msub.add_parser(
        "run",
        help="run a simulation (no arguments: alanine dipeptide)",
        description="Run MD. Settings come from defaults < --config file < flags; the "
        "resolved configuration is written to OUT/config.yaml.",
    )
    r.add_argument("--config", help="TOML or YAML file with the settings (keys as the flags)")
    for name, typ in VALUE_FLAGS.items():
        flag = "--" + name.replace("_", "-")
        r.add_argument(flag, type=typ, default=None, help=HELP[name])
    r.add_argument(
        "--deterministic",
        action="store_true",
        default=None,
        help="bitwise reproducible forces (torch deterministic algorithms, OpenMM "
        "DeterministicForces)",
    )
    comp = r.add_mutually_exclusive_group()
    comp.add_argument(
        "--compile",
        dest="compile",
        action="store_const",
        const=True,
        default=None,
        help="torch.compile a learned model's forces (about 1.6x faster force calls for "
        "10-15 s of compiling; default: on for runs of at least 20,000 steps that are not "
        "--deterministic)",
    )
    comp.add_argument(
        "--no-compile",
        dest="compile",
        action="store_const",
        const=False,
        help="never compile: autograd forces (bitwise the same as earlier versions)",
    )
    r.add_argument("--no-minimize", action="store_true", help="skip energy minimisation")
    r.add_argument("--out", default="md_out", help="output folder (default md_out)")
    r.add_argument("--resume", action="store_true", help="continue from OUT/checkpoint.pt")
    r.add_argument(
        "--change-timestep",
        action="store_true",
        help="with --resume: continue with the --timestep-fs given (e.g. smaller after an "
        "instability); recorded in OUT/config.yaml's history",
    )
    r.add_argument(
        "--overwrite", action="store_true", help="replace the outputs of a previous run in OUT"
    )
    r.add_argument("--no-progress", action="store_true", help="no progress bar")
    r.set_defaults(func=run)

    a = msub.add_parser(
        "analyse",
        aliases=["analyze"],
        help="Ramachandran/free-energy and trace plots, JS divergence vs a reference",
        description="Analyse a `sci-moe md run` folder: free-energy PNG (phi/psi for alanine "
        "dipeptide, coordinates for toy systems), energy and temperature traces, and the "
        "Jensen-Shannon divergence against a reference (default: the shipped alanine "
        "dipeptide reference; exact Boltzmann density for toy systems). Writes analysis.json.",
    )
    a.add_argument("run_dir", help="the --out folder of `sci-moe md run`")
    a.add_argument(
        "--reference",
        help="reference: .npz (histogram, phi_psi or positions) or a trajectory with the "
        "run's topology",
    )
    a.add_argument("--bins", type=int, default=64, help="histogram bins per axis (default 64)")
    a.add_argument("--burn-in-ps", type=float, default=0.0, help="drop frames before this time")
    a.add_argument("--json", metavar="PATH", help="also write the results here")
    a.set_defaults(func=analyse)
    return p


def _trajectory_names(trajectory_format, walkers) -> list[str]:
    from ..sampling.md.trajectory_formats import walker_paths

    return [p.name for p in walker_paths(f"trajectory.{trajectory_format}", int(walkers))]


def _legacy_outputs(out: Path) -> list[str]:
    """The files a run without a manifest (an older version) wrote: fixed names, and the
    trajectories its ``config.yaml`` implies (never a glob: a user's file stays)."""
    names = list(_LEGACY_OUTPUTS)
    try:
        import yaml

        saved = yaml.safe_load((out / "config.yaml").read_text(encoding="utf-8"))
        names += _trajectory_names(saved["trajectory_format"], saved["walkers"])
    except Exception:  # no (readable) config.yaml: no trajectory of a run to remove
        pass
    return names


def _clear_outputs(out: Path) -> None:
    """Remove what the previous run's manifest lists (only that; see ``manifest.py``)."""
    from ..sampling.md.manifest import remove_outputs

    try:
        remove_outputs(out, fallback=_legacy_outputs(out))
    except ValueError as err:
        raise ValueError(
            f"--overwrite: {err}; cannot tell which files of {out} a run wrote, so none was "
            "removed: remove them yourself or choose another --out"
        ) from None


def run(args: argparse.Namespace) -> int:
    """``sci-moe md run``; raises ``ValueError`` on bad input (exit code 2)."""
    from .._util import set_threads

    out = Path(args.out)
    cfg, notes, history = resolve(args)
    check_out(out, args.resume, args.overwrite)
    import torch

    threads_before = torch.get_num_threads()
    try:
        if cfg.threads is None:  # recorded in config.yaml: the number, or 0 (every core)
            cfg.threads = DEFAULT_THREADS
        set_threads(cfg.threads)
        return _run_threaded(args, cfg, notes, history, out)
    finally:
        torch.set_num_threads(threads_before)


def _run_threaded(args, cfg, notes, history, out: Path) -> int:
    import torch

    from .._util import lock_directory
    from ..sampling.md import build_md_system

    if cfg.device != "cpu" and not torch.cuda.is_available():
        raise ValueError(f"--device {cfg.device}: CUDA is not available; use --device cpu")
    system, engine = build_md_system(cfg)  # all input errors surface before any write
    check_memory(cfg, system, engine)  # --walkers beyond the memory: refused, not allocated
    # One writer per --out (who holds it is in the message); dropped when this process ends.
    lock = lock_directory(
        out, command=f"sci-moe md run --out {out}" + (" --resume" if args.resume else "")
    )
    try:
        for note in notes:
            print(note)
        if not cfg.deterministic:
            # torch.use_deterministic_algorithms imports torch's compiler stack (~2.5 s):
            # only a --deterministic run pays for it
            return _run_built(args, cfg, system, engine, out, history)
        was_deterministic = torch.are_deterministic_algorithms_enabled()
        torch.use_deterministic_algorithms(True)
        try:
            return _run_built(args, cfg, system, engine, out, history)
        finally:
            torch.use_deterministic_algorithms(was_deterministic)
    finally:
        lock.release()


def _write_failed(err: OSError, out: Path, sim) -> int:
    last = getattr(sim, "last_checkpoint_step", None)
    kept = (
        f"the last checkpoint (step {last}) is kept; once there is room, continue with: "
        f"sci-moe md run --out {out} --resume"
        if last is not None
        else "no checkpoint was written in this run"
    )
    what = {
        errno.ENOSPC: "the disk is full",
        errno.EFBIG: "a file exceeds the file-size limit (ulimit -f)",
        getattr(errno, "EDQUOT", -1): "the disk quota is exceeded",
    }.get(err.errno, err.strerror or type(err).__name__)
    where = f" writing {err.filename}" if err.filename else ""
    print(
        f"sci-moe md run: error: cannot write the outputs{where}: {what} ({err}); {kept}",
        file=sys.stderr,
    )
    return EXIT_WRITE_FAILED


def _written(out: Path, cfg, total_steps: int) -> str:
    """What the finished run left in ``out``, for the closing line."""
    names = _trajectory_names(cfg.trajectory_format, cfg.walkers)
    frames = [n for n in names if (out / n).is_file()]
    names = ([frames[0]] if len(frames) == 1 else [f"{len(frames)} trajectory files"]) * bool(
        frames
    )
    names += [n for n in ("log.csv", "checkpoint.pt") if (out / n).is_file()]
    text = ", ".join(names) + f" in {out}"
    if not frames:
        text += (
            f" (no trajectory frame or log row: the run ends at step {total_steps}, before the "
            f"first report at --report-interval {cfg.report_interval})"
        )
    return text


def _run_built(args, cfg, system, engine, out: Path, history=()) -> int:
    from .._util import remove_stale_temps
    from ..sampling.md import SimulationFailure, write_config
    from ..sampling.md.checkpoint import load_latest_checkpoint
    from ..sampling.md.manifest import record_outputs

    total = cfg.n_steps
    state = None
    if args.resume:  # check the checkpoint before any file is touched
        # Checksum verified; a damaged or missing checkpoint.pt falls back to checkpoint_prev.pt.
        state, used, note = load_latest_checkpoint(out / "checkpoint.pt")
        if note:
            print(f"sci-moe md run: warning: {note}", file=sys.stderr)
        saved = state.get("metadata", {}).get("config", {})
        mismatch = [
            k
            for k, v in cfg.to_dict().items()
            if k not in resumable(args) | {"extra"} and saved.get(k, v) != v
        ]
        if mismatch:
            raise ValueError(
                f"OUT/config.yaml and the checkpoint disagree on {', '.join(mismatch)}"
            )
        done = int(state.get("step", 0))
        if done > total:
            asked = f"--time-ns {cfg.time_ns:g}" if cfg.time_ns is not None else f"--steps {total}"
            raise ValueError(
                f"{used.name} is at step {done}, past the end of the run that {asked} asks for "
                f"(step {total}): a resume cannot go back (nothing was changed); pass --steps "
                f"{done} or more, or start a new run in another --out"
            )
    if args.overwrite and out.is_dir():
        _clear_outputs(out)
    out.mkdir(parents=True, exist_ok=True)
    sim = build_simulation(cfg, system, engine, out, total, progress=not args.no_progress)
    outputs = [*_OUTPUTS, *_trajectory_names(cfg.trajectory_format, cfg.walkers)]
    try:
        if state is not None:
            # Verifies every output (size, CRC-32 up to the checkpoint) before truncating any.
            sim.load_checkpoint(state)
            # Listed before anything is written (runs of older versions get their manifest).
            record_outputs(out, outputs)
            for name in (*outputs, "manifest.json"):  # left by a kill mid-write
                remove_stale_temps(out / name)
            print(
                f"resuming {out} from step {sim.current_step} of {total}"
                + (f" ({used.name})" if note else "")
            )
            if history and args.change_timestep:
                history[-1]["step"] = sim.current_step
        else:
            record_outputs(out, outputs)  # before the first output is written
            write_topology(system, out / "topology.pdb")
        extra = {
            "engine": engine,
            "system_description": system.name,
            "total_steps": total,
            # Coarse-grained models: which atoms of the system the particles are.
            "atom_indices": ((system.model_info or {}).get("config") or {}).get("atom_indices"),
        }
        if history:
            extra["history"] = list(history)
        write_config(cfg, out / "config.yaml", extra)
    except OSError as err:
        return _write_failed(err, out, sim)
    print(
        f"{system.name}: {engine} engine, {cfg.walkers} walker(s)"
        + (f", {_torch_threads()} torch thread(s)" if engine == "torch" or cfg.model else "")
        + f", {total} steps of "
        + (
            f"dt {cfg.timestep_fs * 1e-3:g} (reduced time units)"
            if cfg.is_toy
            else f"{cfg.timestep_fs:g} fs"
        )
        + f" -> {out}"
    )
    remaining = max(0, total - sim.current_step)
    received: list[int] = []

    def stop(signum, frame):
        if received:  # a second signal aborts at once
            raise KeyboardInterrupt
        received.append(signum)
        sim.stop_requested = True
        print(
            f"\nsci-moe md run: {signal.Signals(signum).name}: stopping after the current step "
            "with a checkpoint (send it again to abort)",
            file=sys.stderr,
        )

    previous = {}
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            previous[sig] = signal.signal(sig, stop)
        except ValueError:  # not the main thread: keep the default handlers
            pass
    try:
        result = sim.run(remaining, max_hours=cfg.max_hours)
    except KeyboardInterrupt:
        # The step in flight may be half done: keep the last checkpoint, write nothing.
        last = sim.last_checkpoint_step
        where = f"step {last}" if last is not None else "the start"
        print(
            f"sci-moe md run: interrupted at step {sim.current_step}; continue from the last "
            f"checkpoint ({where}) with: sci-moe md run --out {out} --resume",
            file=sys.stderr,
        )
        return 130
    except OSError as err:  # disk full, ulimit -f: the atomic checkpoint survives
        return _write_failed(err, out, sim)
    except SimulationFailure as err:
        report = {
            "step": err.step,
            "cause": err.cause,
            "walker": err.walker,
            "checkpoint_step": err.checkpoint_step,
            "message": str(err),
        }
        try:
            record_outputs(out, _FAILURE_OUTPUTS)
            (out / "failure.json").write_text(json.dumps(report, indent=2) + "\n")
            dump_failure_state(sim, out / "failure_state.pt")
        except OSError:
            pass
        print(f"sci-moe md run: error: {err}", file=sys.stderr)
        if err.checkpoint_step is not None:
            print(
                f"sci-moe md run: to continue from step {err.checkpoint_step} with a smaller "
                f"timestep: sci-moe md run --out {out} --resume --change-timestep "
                f"--timestep-fs {cfg.timestep_fs / 2:g}",
                file=sys.stderr,
            )
        return 1
    finally:
        try:
            sim.close()
        except OSError:  # flushing into a full disk; the checkpoint is what counts
            pass
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if result.status == "stopped":
        print(
            f"stopped by {signal.Signals(received[0]).name} at step {result.final_step} of "
            f"{total} (checkpoint written); continue with: sci-moe md run --out {out} --resume"
        )
        return 128 + received[0]
    if result.status == "time-limit":
        print(
            f"stopped by --max-hours at step {result.final_step} of {total} (checkpoint "
            f"written); continue with: sci-moe md run --out {out} --resume"
        )
    else:
        print(
            f"done: {result.steps} steps in {result.wall_s:.1f} s ({_speed(result, cfg)}); "
            f"{_written(out, cfg, total)}"
        )
    return 0


def _torch_threads() -> int:
    import torch

    return torch.get_num_threads()


def _speed(result, cfg) -> str:
    """The run's speed: per walker, and summed over the walkers when there are several."""
    unit = "time units/day" if cfg.is_toy else "ns/day"
    if cfg.walkers == 1:
        return f"{result.ns_per_day:.3g} {unit}"
    total = result.ns_per_day * cfg.walkers
    per = f"{result.ns_per_day:.3g} {unit} per walker"
    return f"{per}, {total:.4g} {unit} summed over the {cfg.walkers} walkers"
