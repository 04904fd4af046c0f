"""Reusing a fixed-step run's flat runs for ``run.py --until-flat`` (``--reuse-flat-from STATE``).

The flat runs of a stored fixed-step state are stored as the until-flat path stores a run
flat after cycle 0 (+ ``reused_from``), after the state's plan and models are checked and
this machine retrains the cheapest stored run's first evaluations bit for bit
(:func:`verify_state`). A helper module: ``run.py`` imports it.
"""

from __future__ import annotations

import hashlib
import json
import statistics
import sys
from pathlib import Path

import torch
from _common import check_resume_settings, cpu_model, refuse
from _rm_plan import count, models, train_keys
from _rm_train import flat, train_cycle

__all__ = [
    "VERIFY_EVALS",
    "cycle0_plan",
    "reuse_flat",
    "reuse_info",
    "reuse_into",
    "verify_run",
    "verify_state",
]


#: Evaluations of the stored run that :func:`verify_state` retrains (after the one before
#: the first step).
VERIFY_EVALS = 2


_ROOT = Path(__file__).resolve().parents[2]


def cycle0_plan(p: dict) -> dict:
    """The fixed-step plan whose run is cycle 0 of the until-flat plan ``p`` (``p`` without
    ``until_flat`` and ``max_steps``: what ``--steps N`` stores)."""
    return {k: v for k, v in p.items() if k not in ("until_flat", "max_steps")}


def _shown_path(path: Path) -> str:
    """``path`` relative to the repository when it lies inside it, else as given."""
    try:
        return str(Path(path).resolve().relative_to(_ROOT))
    except ValueError:
        return str(path)


def verify_run(runs: dict) -> str:
    """The stored run :func:`verify_state` retrains: the cheapest one, the lowest seed of
    the model with the highest median stored throughput (``tps``)."""
    by_model: dict[str, list] = {}
    for key, r in runs.items():
        name, seed = key.rsplit(" seed ", 1)
        by_model.setdefault(name, []).append((int(seed), r["tps"]))
    name = max(by_model, key=lambda n: (statistics.median(t for _, t in by_model[n]), n))
    return f"{name} seed {min(s for s, _ in by_model[name])}"


def verify_state(
    p: dict, runs: dict, corpus, key: str | None = None, evals: int = VERIFY_EVALS
) -> dict:
    """Whether this machine reproduces a stored fixed-step run bit for bit.

    Retrains run ``key`` (default :func:`verify_run`) of the fixed-step plan ``p`` for the
    first ``evals`` validation evaluations of its full ``p["steps"]``-step schedule (the same
    warmup and cosine, stopped early: :func:`train_cycle`'s ``stop_after``) and compares
    its validation curve, the evaluation before the first step included, with the stored
    one's first ``evals + 1`` points for exact equality.

    Parameters
    ----------
    p : dict
        The fixed-step plan the runs were trained by (:func:`cycle0_plan`).
    runs : dict
        The stored runs, ``"<model> seed <s>"`` -> record (``hist``: ``tokens``,
        ``val_loss`` in nats; ``tps``).
    corpus : TextCorpus
        :func:`sci_moe.language.load_corpus`'s.
    key : str, optional
        The run to retrain.
    evals : int
        Evaluations to retrain (at most the schedule's).

    Returns
    -------
    dict
        ``run``, ``evaluations``, ``steps`` (retrained, of ``schedule_steps``), ``tokens``,
        ``stored_val_loss`` and ``retrained_val_loss`` (nats, one per evaluation),
        ``bit_for_bit`` (bool), ``threads`` (torch threads of this run) and ``cpu``
        (:func:`_common.cpu_model`).
    """
    key = verify_run(runs) if key is None else key
    name, seed = key.rsplit(" seed ", 1)
    stored = runs[key]["hist"]
    evals = max(1, min(evals, len(stored["val_loss"]) - 1))
    steps = min(evals * p["eval_every"], p["steps"])
    hist, _model = train_cycle(p, models(p)[name], int(seed), corpus, stop_after=steps)
    got_tok, got = [int(t) for t in hist["tokens"]], [float(v) for v in hist["val_loss"]]
    want_tok, want = stored["tokens"][: evals + 1], stored["val_loss"][: evals + 1]
    return dict(
        run=key,
        evaluations=evals,
        steps=steps,
        schedule_steps=p["steps"],
        tokens=want_tok,
        stored_val_loss=want,
        retrained_val_loss=got,
        bit_for_bit=got == want and got_tok == want_tok,
        threads=torch.get_num_threads(),
        cpu=cpu_model(),
    )


def _as_until_flat(r: dict, p: dict, provenance: dict) -> dict:
    """A stored fixed-step run that is flat, as :func:`run_one` of the until-flat plan
    stores a run that stops flat after cycle 0 (+ ``reused_from``)."""
    out = dict(
        hist={"tokens": list(r["hist"]["tokens"]), "val_loss": list(r["hist"]["val_loss"])},
        tps=r["tps"],
        params=list(r["params"]),
        flops=r["flops"],
        converged=True,
        steps=p["steps"],
        tokens=p["steps"] * p["batch"] * p["seq"],
        cycles=1,
        reason="flat",
    )
    if "ctx" in r:
        out["ctx"] = dict(r["ctx"])
    out["reused_from"] = dict(provenance)
    return out


def reuse_flat(
    p: dict, path: str | Path, seeds, corpus, have=(), evals: int = VERIFY_EVALS
) -> dict:
    """The runs of a stored fixed-step run (``--reuse-flat-from STATE``) that an until-flat
    run of plan ``p`` would stop flat after cycle 0, in the form it would store them.

    STATE must be the state of the fixed ``--steps p["steps"]`` run of the same plan
    (:func:`cycle0_plan`: model sizes, batch, sequence, seeds, evaluations), its runs of the
    same models (active and total parameters, and the configurations in the JSON beside
    it when there is one). A run of ``seeds`` that is flat by :func:`flat` and not in
    ``have`` is taken: its curve, throughput, parameters, FLOPs and context losses as
    stored, ``steps``/``tokens`` of one cycle, ``cycles`` 1, ``reason`` ``"flat"`` and
    ``reused_from`` (``file``, ``sha256`` of STATE). Unflat runs are not: their next cycle
    starts from cycle 0's best weights, which STATE does not hold. Before any run is taken
    :func:`verify_state` retrains the cheapest stored run's first ``evals`` evaluations:
    this machine must reproduce them bit for bit.

    Returns
    -------
    dict
        ``file`` (STATE, relative to the repository when inside it), ``sha256``, ``runs``
        (key -> record, only the runs taken) and ``verification`` (:func:`verify_state`'s
        result; ``None`` when no run is taken, so nothing was retrained).

    Raises
    ------
    ValueError
        STATE is missing or not a state, of another plan (the message names the differing
        keys) or other models, or this machine does not reproduce it (the message shows the
        stored and the retrained curve).
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"--reuse-flat-from: no stored state {path}")
    raw = path.read_bytes()
    try:
        stored = json.loads(raw)
    except json.JSONDecodeError as err:
        raise ValueError(f"--reuse-flat-from: {path} is not JSON ({err})") from err
    if not isinstance(stored, dict) or not isinstance(stored.get("runs"), dict):
        raise ValueError(f"--reuse-flat-from: {path} is not a run's state (no runs)")
    p0 = cycle0_plan(p)
    fix = (
        f"reuse the state of the fixed-step run --steps {p['steps']} of this plan, or run "
        "without --reuse-flat-from"
    )
    check_resume_settings(
        stored.get("plan"),
        p0,
        path,
        what="plan",
        before="a run before plans were stored",
        fix=fix,
        flag="--reuse-flat-from",
    )
    configs = {n: {**train_keys(p0), **k} for n, k in models(p0).items()}
    doc, doc_path = None, path.parent / (path.name.removesuffix(".state.json") + ".json")
    if path.name.endswith(".state.json") and doc_path.is_file():
        doc = json.loads(doc_path.read_text())  # the results JSON beside STATE
    if doc is not None and "configs" in doc.get("machine", {}):
        check_resume_settings(
            doc["machine"]["configs"],
            configs,
            doc_path,
            what="model configurations",
            fix=fix,
            flag="--reuse-flat-from",
        )
    runs = stored["runs"]
    bl = p0["batch"] * p0["seq"]
    schedule = list(range(0, p0["steps"] + 1, p0["eval_every"]))
    if schedule[-1] != p0["steps"]:
        schedule.append(p0["steps"])
    sizes = {n: list(count(p0, k)) for n, k in models(p0).items()}
    take, bad = [], []
    for s in seeds:
        for name in models(p0):
            key = f"{name} seed {s}"
            if key not in runs:
                continue
            r = runs[key]
            if r["hist"]["tokens"] != [e * bl for e in schedule] or r["params"] != sizes[name]:
                bad.append(key)
            elif key not in have and flat(r["hist"]["tokens"], r["hist"]["val_loss"]):
                take.append(key)
    if bad:
        raise ValueError(
            f"--reuse-flat-from: {path} holds runs of other models or evaluations than this "
            f"plan's ({', '.join(bad)}: parameters or evaluation tokens differ); {fix}"
        )
    provenance = {"file": _shown_path(path), "sha256": hashlib.sha256(raw).hexdigest()}
    out = {**provenance, "runs": {}, "verification": None}
    if not take:
        return out
    check = verify_state(p0, runs, corpus, evals=evals)
    if not check["bit_for_bit"]:
        there = (doc or {}).get("machine", {})
        raise ValueError(
            f"--reuse-flat-from: this machine does not reproduce {path} bit for bit: "
            f"{check['run']}, the first {check['evaluations']} evaluations of its "
            f"{p0['steps']}-step schedule (tokens {check['tokens']}): stored val_loss "
            f"{check['stored_val_loss']}, retrained {check['retrained_val_loss']} "
            f"(here {check['cpu']!r}, {check['threads']} threads"
            + (
                f"; stored on {there.get('cpu')!r}, {there.get('torch_threads')} threads"
                if there
                else ""
            )
            + "); nothing reused: run without --reuse-flat-from"
        )
    out["verification"] = check
    out["runs"] = {k: _as_until_flat(runs[k], p0, provenance) for k in take}
    return out


def reuse_into(state: dict, p: dict, path: Path, seeds, corpus) -> None:
    """``--reuse-flat-from``: put :func:`reuse_flat`'s runs into ``state["runs"]`` (runs
    already there are kept) and record where from under ``state["reused"]`` (``file``,
    ``sha256``, ``runs``: every reused key, ``verification``). Refuses (exit status 2) what
    :func:`reuse_flat` raises for, and a resumed state that reused another file."""
    runs = state.setdefault("runs", {})
    try:
        got = reuse_flat(p, path, seeds, corpus, have=set(runs))
    except ValueError as err:
        refuse(str(err))
    before = state.get("reused")
    if before is not None and before["sha256"] != got["sha256"]:
        refuse(
            f"--reuse-flat-from: this run reused the runs of {before['file']} (sha256 "
            f"{before['sha256']}), not of {got['file']} (sha256 {got['sha256']}); resume "
            "with that file or without --reuse-flat-from"
        )
    runs.update(got["runs"])
    keys = sorted({*(before or {}).get("runs", []), *got["runs"]})
    state["reused"] = {
        "file": got["file"],
        "sha256": got["sha256"],
        "runs": keys,
        "verification": got["verification"] or (before or {}).get("verification"),
    }
    check = got["verification"]
    print(
        f"reused {len(got['runs'])} flat runs of {got['file']}"
        + (
            f" (verified: {check['run']}, its first {check['evaluations']} evaluations "
            "retrained bit for bit)"
            if check
            else ""
        ),
        file=sys.stderr,
    )


def reuse_info(state: dict) -> dict:
    """The machine info of a run that reused runs: ``file``, ``sha256``, ``reused_runs``
    (how many), ``runs`` (which) and ``verification``."""
    r = state["reused"]
    return {
        "file": r["file"],
        "sha256": r["sha256"],
        "reused_runs": len(r["runs"]),
        "runs": r["runs"],
        "verification": r["verification"],
    }
