"""Checkpoint files of OpenMM simulated tempering, through the md run layer's checkpoint code.

A checkpoint is one :func:`sci_moe.sampling.md.checkpoint.save_checkpoint` file (atomic,
``fsync``-ed, loaded with ``torch.load(weights_only=True)``, so nothing is unpickled)
holding ``{"meta": JSON-ready dict, "arrays": {name: tensor}}``: the OpenMM context
checkpoint, positions, velocities, box, weights, online-weight and trace arrays in
``arrays``; levels, counters, generator states and fingerprints of the config, system,
integrator and platform in ``meta``. :func:`check_fingerprints` refuses a checkpoint of
another run with a ``ValueError`` that says what differs. Files of the first format (one
``.npz`` with a JSON ``meta`` entry) are still read.
"""

from __future__ import annotations

import json
import time
import zipfile
from pathlib import Path

import numpy as np
import openmm
import openmm.unit as u
import torch

from .. import md
from .openmm_config import json_default

__all__ = [
    "CHECKPOINT_FORMAT",
    "LEGACY_CHECKPOINT_FORMAT",
    "PARENT_FIELDS",
    "capture_state",
    "check_fingerprints",
    "read_checkpoint",
    "restore_state",
    "write_checkpoint",
]

#: Format tag of OpenMM simulated-tempering checkpoints.
CHECKPOINT_FORMAT = "sci-moe/openmm-tempering-checkpoint/2"
#: The first format: an ``.npz`` of arrays and a JSON ``meta`` string (still read).
LEGACY_CHECKPOINT_FORMAT = "sci-moe/openmm-tempering-checkpoint/1"
_WHAT = "OpenMMSimulatedTempering checkpoint"
#: ``ExpandedEnsembleSampler`` state (its own Wang-Landau weights for ``weights="openmm"``).
PARENT_FIELDS = (
    "currentIteration",
    "_stage",
    "currentStateIndex",
    "_weights",
    "_weightUpdateFactor",
    "_histogram",
    "_hasMadeTransition",
)


def write_checkpoint(path: str | Path, meta: dict, arrays: dict[str, np.ndarray]) -> Path:
    """Write ``meta`` (JSON-ready) and ``arrays`` (NumPy) to ``path`` atomically.

    The previous file is replaced, not kept (a crash leaves the old or the new one).
    """
    meta = json.loads(json.dumps(meta, default=json_default))
    tensors = {k: torch.from_numpy(np.array(v, copy=True)) for k, v in arrays.items()}
    state = {"meta": meta, "arrays": tensors}
    return md.checkpoint.save_checkpoint(path, state, keep_previous=False, format=CHECKPOINT_FORMAT)


def _read_legacy(path: Path) -> tuple[dict, dict[str, np.ndarray]]:
    try:
        with np.load(path, allow_pickle=False) as z:
            data = {k: z[k] for k in z.files}
        meta = json.loads(str(data.pop("meta")))
    except (ValueError, OSError, KeyError, zipfile.BadZipFile) as exc:
        raise ValueError(f"{path} is not a readable tempering checkpoint") from exc
    if not isinstance(meta, dict) or meta.get("format") != LEGACY_CHECKPOINT_FORMAT:
        raise ValueError(f"{path} is not a checkpoint of OpenMMSimulatedTempering")
    return meta, data


def read_checkpoint(path: str | Path) -> tuple[dict, dict[str, np.ndarray]]:
    """``(meta, arrays)`` of a checkpoint written by :func:`write_checkpoint` (or the `.npz`
    format before it).

    Raises
    ------
    FileNotFoundError
        If there is no file at ``path``.
    ValueError
        If the file is not a readable tempering checkpoint.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint at {path}")
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as z:
            legacy = "meta.npy" in z.namelist()
        if legacy:
            return _read_legacy(path)
    state = md.checkpoint.load_checkpoint(path, format=CHECKPOINT_FORMAT, what=_WHAT)
    try:
        meta, arrays = state["meta"], {k: v.numpy() for k, v in state["arrays"].items()}
    except (KeyError, AttributeError, TypeError) as exc:
        raise ValueError(f"{path} is not a readable tempering checkpoint") from exc
    return meta, arrays


def check_fingerprints(path: Path, meta: dict, mine: dict, *, exact: bool) -> None:
    """Refuse a checkpoint written with another config, system, integrator (or platform).

    Parameters
    ----------
    path : Path
        For messages.
    meta : dict
        The checkpoint's ``meta``.
    mine : dict
        The fingerprints of the sampler that loads it.
    exact : bool
        Also require the same OpenMM platform (for the binary context checkpoint).
    """
    theirs, ours = meta["config"], mine["config"]
    diff = sorted(k for k in set(theirs) | set(ours) if theirs.get(k) != ours.get(k))
    if diff:
        raise ValueError(
            f"checkpoint {path} was written with a different config (differs in: "
            f"{', '.join(diff)}); build the sampler with the checkpoint's config or use "
            "another checkpoint path"
        )
    for key, what in (
        ("n_particles", "system (number of particles)"),
        ("system_sha256", "system (serialised System XML)"),
        ("integrator", "integrator (class, step size or friction)"),
    ):
        if meta[key] != mine[key]:
            raise ValueError(
                f"checkpoint {path} was written for a different {what}: {meta[key]!r} vs "
                f"{mine[key]!r}; resume with the same system and integrator settings"
            )
    if exact and meta["platform"] != mine["platform"]:
        raise ValueError(
            f"checkpoint {path} holds a {meta['platform']} context checkpoint but this "
            f"simulation runs on {mine['platform']}; use that platform, or pass "
            "exact=False to restore positions, velocities and box only"
        )


def capture_state(sampler) -> tuple[dict, dict[str, np.ndarray]]:
    """``(meta, arrays)``: the whole chain state of an ``OpenMMSimulatedTempering``.

    What :meth:`~sci_moe.sampling.tempering.OpenMMSimulatedTempering.save_checkpoint`
    writes: the OpenMM context checkpoint, positions (nm), velocities (nm/ps), box (nm),
    level, weights, online-weight / OpenMM Wang-Landau state, generator states, counters,
    the trace of an unfinished run and the fingerprints :func:`check_fingerprints` checks.
    """
    ctx = sampler.simulation.context
    st = ctx.getState(positions=True, velocities=True)
    py_state = sampler._py_rng.getstate()
    meta = {
        "format": CHECKPOINT_FORMAT,
        **sampler._fingerprints(),
        "started": sampler._sampler is not None,
        "level": sampler.current_level,
        "iteration": sampler._iteration,
        "time_ps": st.getTime().value_in_unit(u.picosecond),
        "step_count": int(ctx.getStepCount()),
        "numpy_rng": sampler._rng.bit_generator.state,
        "python_rng": [py_state[0], list(py_state[1]), py_state[2]],
    }
    arrays = {
        "context_checkpoint": np.frombuffer(ctx.createCheckpoint(), dtype=np.uint8),
        "positions": np.asarray(st.getPositions(asNumpy=True).value_in_unit(u.nanometer)),
        "velocities": np.asarray(
            st.getVelocities(asNumpy=True).value_in_unit(u.nanometer / u.picosecond)
        ),
        "box": np.asarray(st.getPeriodicBoxVectors(asNumpy=True).value_in_unit(u.nanometer)),
        "log_weights": np.asarray(sampler._g, dtype=np.float64),
    }
    if sampler._online is not None:
        on = sampler._online
        meta["online"] = {"stage": on.stage, "t_stage": on.t_stage, "gamma": on.gamma}
        if on.hist is not None:
            arrays["online_hist"] = np.asarray(on.hist, dtype=np.float64)
    if sampler._sampler is not None and sampler.config.weights == "openmm":
        meta["openmm_sampler"] = {f: getattr(sampler._sampler, f) for f in PARENT_FIELDS}
    if sampler._in_run is not None:  # part-way through run(n): keep its trace
        total, t0, wall0 = sampler._in_run
        tr = sampler._trace
        meta["run"] = {"n_iterations": total, "wall_time": wall0 + time.perf_counter() - t0}
        n_atoms = sampler.simulation.system.getNumParticles()
        arrays.update(
            trace_level=np.asarray(tr["level"], dtype=np.int64),
            trace_sampled=np.asarray(tr["sampled"], dtype=np.int64),
            trace_energy=np.asarray(tr["energy"], dtype=np.float64),
            trace_g=np.asarray(tr["g"], dtype=np.float64).reshape(-1, sampler.config.n_levels),
            trace_pos=np.stack(tr["pos"]) if tr["pos"] else np.zeros((0, n_atoms, 3), "f4"),
            trace_pos_it=np.asarray(tr["pos_it"], dtype=np.int64),
            trace_acc=sampler._acc.copy(),
            trace_cnt=sampler._cnt.copy(),
        )
    return meta, arrays


def restore_state(sampler, path: Path, *, exact: bool) -> None:
    """Restore the chain state of ``sampler`` from the checkpoint at ``path`` (see
    :meth:`~sci_moe.sampling.tempering.OpenMMSimulatedTempering.load_checkpoint`)."""
    if sampler._sampler is not None or sampler._iteration or sampler._unfinished is not None:
        raise ValueError(
            "load_checkpoint needs a freshly built sampler (before run()); build a new "
            "OpenMMSimulatedTempering and load the checkpoint into it"
        )
    path = Path(path)
    meta, data = read_checkpoint(path)
    check_fingerprints(path, meta, sampler._fingerprints(), exact=exact)
    cfg, ctx = sampler.config, sampler.simulation.context
    sampler._g = np.asarray(data["log_weights"], dtype=np.float64).copy()
    sampler._iteration = int(meta["iteration"])
    sampler._rng.bit_generator.state = meta["numpy_rng"]
    v, state, gauss = meta["python_rng"]
    sampler._py_rng.setstate((v, tuple(state), gauss))
    if meta["started"]:
        sampler._start(pilot=False)
        if sampler._online is not None:
            on = meta["online"]
            sampler._online.stage, sampler._online.t_stage = int(on["stage"]), int(on["t_stage"])
            sampler._online.gamma = float(on["gamma"])
            sampler._online.hist = data.get("online_hist")
        if cfg.weights == "openmm":
            for f in PARENT_FIELDS:
                setattr(sampler._sampler, f, meta["openmm_sampler"][f])
        level = int(meta["level"])
        sampler._sampler.currentStateIndex = level
        sampler._sampler._sampler.applyState(level)
    if exact:
        try:
            ctx.loadCheckpoint(data["context_checkpoint"].tobytes())
        except openmm.OpenMMException as exc:
            raise ValueError(
                f"OpenMM cannot load the context checkpoint in {path} ({exc}); it may come "
                "from another OpenMM version or device: pass exact=False to restore "
                "positions, velocities and box only"
            ) from exc
    else:
        a, b, c = (openmm.Vec3(*row) for row in data["box"])
        ctx.setPeriodicBoxVectors(a, b, c)
        ctx.setPositions(data["positions"] * u.nanometer)
        ctx.setVelocities(data["velocities"] * (u.nanometer / u.picosecond))
        ctx.setTime(float(meta["time_ps"]) * u.picosecond)
        ctx.setStepCount(int(meta["step_count"]))
    sampler._reset_trace()
    if "run" in meta:
        tr = sampler._trace
        tr["level"] = [int(x) for x in data["trace_level"]]
        tr["sampled"] = [int(x) for x in data["trace_sampled"]]
        tr["energy"] = [float(x) for x in data["trace_energy"]]
        tr["g"] = list(data["trace_g"])
        tr["pos"] = list(data["trace_pos"])
        tr["pos_it"] = [int(x) for x in data["trace_pos_it"]]
        sampler._acc, sampler._cnt = data["trace_acc"].copy(), data["trace_cnt"].copy()
        sampler._unfinished = (int(meta["run"]["n_iterations"]), float(meta["run"]["wall_time"]))
