"""The training runs of ``run.py``: the flatness rule, one run (fixed or until flat), all runs.

:func:`flat` (:func:`sci_moe.train.is_flat` over the training tokens), one training cycle
(:func:`train_cycle`), cycles until flat (:func:`cycles_until_flat`), one run's record
(:func:`run_one`: curves in nats over training tokens, tokens/s, parameters, FLOPs) and
every run of every seed into the state (:func:`run_all`). A helper module: ``run.py``
imports it.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

from _common import until_flat
from _rm_plan import LN2, active_params, flops_per_token, lm_config, models

from sci_moe.language import evaluate, load_checkpoint, save_model, train, validation_windows
from sci_moe.train import is_flat
from sci_moe.train.cycles import split_cycles

__all__ = [
    "FLAT",
    "FLAT_TAIL",
    "cycles_until_flat",
    "flat",
    "raise_cap",
    "run_all",
    "run_one",
    "train_cycle",
    "upgrade_min_cycles",
]


#: Flat (:func:`sci_moe.train.is_flat`): the best validation loss of the last
#: ``FLAT_TAIL`` of the training tokens is less than ``FLAT`` (relative) below the best
#: before them.
FLAT = 0.01


FLAT_TAIL = 0.2


def flat(tokens, losses) -> bool:
    """The convergence criterion, :func:`sci_moe.train.is_flat` over the training tokens
    with ``tail=FLAT_TAIL`` and ``tol=FLAT`` (lower loss is better).

    The stored ``routing_mamba.json``, ``routing_mamba_quick.json`` and the first pieces
    of ``routing_mamba_long.json`` were judged by the older point-to-point rule (the last
    evaluation < 1 % better than the one at 80 % of the tokens); re-judged from the curves
    their ``.state.json`` keeps, ``routing_mamba.json``'s flags and those of the long run's
    runs so far are the same under this one.
    """
    return is_flat(tokens, losses, tail=FLAT_TAIL, tol=FLAT, mode="min")


def train_cycle(p, keys, seed, corpus, init=None, device="cpu"):
    """One training run of ``p["steps"]`` steps (one cycle); ``init``: a model file to
    start from (:func:`sci_moe.language.save_model`), else a fresh initialisation;
    ``device``: where it trains (not part of the plan: a run may change it on resume).

    Returns the history of :func:`sci_moe.language.train` and the model (its final
    weights: the language models' training keeps them, ``restore_best=False``)."""
    cfg = lm_config(p, {**keys, "seed": seed, "progress": False, "device": device})
    return train(cfg.model_config(), cfg, corpus=corpus, return_model=True, init_from=init)


def cycles_until_flat(p, keys, seed, corpus, cycle=None, resume=None):
    """Train one run in cycles of ``p["steps"]`` until :func:`flat` or ``p["max_steps"]``.

    Cycle ``c`` is ``cycle(p, keys, seed + CYCLE_SEED c, corpus, init)`` (default
    :func:`train_cycle`), ``init`` the final weights of cycle ``c - 1`` (``None`` for
    cycle 0: the fixed-step run); :func:`_common.until_flat` judges the joined curve
    after each cycle from the plan's ``min_cycles``-th on. ``resume``: a run that reached
    an earlier, smaller cap continues where it stopped: ``{"hist": its joined curve (tokens,
    val_loss), "init": the model file of its final weights, "step_time": seconds}``; its
    cycles count towards the cap and the next one starts from that file.

    Returns
    -------
    hist : dict
        ``tokens`` and ``val_loss`` (nats) of the joined curve, one entry per evaluation.
    model : MoETransformerLM
        The last cycle's model (its final weights).
    info : dict
        ``steps``, ``tokens``, ``cycles``, ``reason`` (``"flat"`` or ``"cap"``) and
        ``step_time`` (seconds of the training steps of all cycles).
    """
    cycle = train_cycle if cycle is None else cycle
    bl = p["batch"] * p["seq"]
    last: dict = {"model": None, "step_time": 0.0}
    done: list = []
    if resume is not None:
        h = resume["hist"]
        steps = [int(t) // bl for t in h["tokens"]]
        done = split_cycles([[s, v] for s, v in zip(steps, h["val_loss"], strict=True)], p["steps"])
        last["step_time"] = float(resume["step_time"])

    def one(c, cycle_seed):
        with tempfile.TemporaryDirectory() as tmp:
            init = None
            if c and last["model"] is None:  # the first cycle after a resumed run's end
                init = resume["init"]
            elif c:
                init = Path(tmp) / "start.pt"
                model = last["model"]
                save_model(init, model.config, model.state_dict())
            hist, model = cycle(p, keys, cycle_seed, corpus, init)
        last["model"] = model
        last["step_time"] += sum(hist["step_time"])
        return [[int(t) // bl, v] for t, v in zip(hist["tokens"], hist["val_loss"], strict=True)]

    def judge(curve):
        return flat([s * bl for s, _ in curve], [v for _, v in curve])

    curve, n, converged = until_flat(
        one,
        judge,
        p["max_steps"] // p["steps"],
        seed=seed,
        cycle_steps=p["steps"],
        min_cycles=p.get("min_cycles", 1),
        done=done,
    )
    hist = {"tokens": [s * bl for s, _ in curve], "val_loss": [v for _, v in curve]}
    info = dict(
        steps=curve[-1][0],
        tokens=curve[-1][0] * bl,
        cycles=n,
        reason="flat" if converged else "cap",
        step_time=last["step_time"],
    )
    return hist, last["model"], info


def run_one(p, keys, seed, corpus, ctx: bool, device: str = "cpu", resume=None, keep=None) -> dict:
    """One run of the plan: fixed steps, or in cycles until flat (``p["until_flat"]``),
    trained on ``device`` (the context evaluation of ``ctx`` runs there too).

    ``resume``: continue a run capped under a smaller cap (:func:`cycles_until_flat`);
    ``keep``: a path where a run that ends at the cap writes its final weights (so a larger
    cap can continue it; :func:`run_all`)."""
    # on the CPU the calls are those of the runs before --device (the plan's reference)
    on = {} if device == "cpu" else {"device": device}
    if p.get("until_flat"):
        cycle = partial(train_cycle, **on) if on else None
        hist, model, info = cycles_until_flat(p, keys, seed, corpus, cycle, resume)
        step_time, steps = info.pop("step_time"), info["steps"]
        if keep is not None and info["reason"] == "cap":
            sd = {k: v.detach().cpu() for k, v in model.state_dict().items()}
            save_model(keep, model.config, sd, step=steps)
    else:
        hist, model = train_cycle(p, keys, seed, corpus, **on)
        step_time, steps, info = sum(hist["step_time"]), p["steps"], {}
    tps = steps * p["batch"] * p["seq"] / step_time
    out = dict(
        hist={"tokens": hist["tokens"], "val_loss": hist["val_loss"]},
        step_time=step_time,
        tps=tps,
        params=list(active_params(model)),
        flops=flops_per_token(model, p["seq"]),
        converged=flat(hist["tokens"], hist["val_loss"]),
        **info,
    )
    if ctx:
        out["ctx"] = {}
        for mult in (1, 2, 4):
            L = p["seq"] * mult
            vx, vy = validation_windows(corpus.val, L, max(4, 32 // mult))
            out["ctx"][str(mult)] = evaluate(model, vx, vy, 8)["loss"] / LN2
    return out


def _capped_below(p: dict, record: dict) -> bool:
    """A run of an until-flat plan that stopped at a cap smaller than ``p``'s."""
    return (
        bool(p.get("until_flat"))
        and record.get("reason") == "cap"
        and (record.get("steps", p["max_steps"]) < p["max_steps"])
    )


def weights_path(weights: Path, key: str) -> Path:
    """The model file of run ``key`` (``"<model> seed <s>"``) under ``weights``."""
    return Path(weights) / (key.replace(" ", "_") + ".pt")


def _resume_from(p, key, record, weights) -> dict | None:
    """How a run capped below ``p``'s cap continues: from its final weights when
    ``weights`` holds a verified file of them (its step the run's last), else ``None``
    (it trains again from the start)."""
    if weights is None:
        return None
    path = weights_path(weights, key)
    if not path.exists():
        return None
    try:
        ckpt = load_checkpoint(path)
    except (OSError, ValueError, RuntimeError) as err:
        print(f"  {key}: {path} unreadable ({err}); trains again", file=sys.stderr)
        return None
    if int(ckpt.get("step", -1)) != int(record["steps"]):
        print(f"  {key}: {path} holds step {ckpt.get('step')}, not the run's", file=sys.stderr)
        return None
    step_time = record.get("step_time")
    if step_time is None:  # records written before step_time was kept
        step_time = record["tokens"] / record["tps"]
    return {"hist": record["hist"], "init": path, "step_time": step_time}


def run_all(
    p, seeds, corpus, state, deadline, save, device: str = "cpu", weights=None
) -> list[int]:
    """Train every model of every seed not in ``state`` (seed by seed), until ``deadline``.

    ``state["runs"]`` maps ``"<model> seed <s>"`` to the run's record; ``save()`` is called
    after each run; ``device`` is where they train (not recorded in the state). A run that
    reached a cap smaller than the plan's (:func:`raise_cap`) trains on: from its final
    weights when ``weights`` (a directory) holds them, else again from the start. With
    ``weights``, every run that ends at the cap writes its final weights there
    (:func:`weights_path`). Returns the seeds whose every model is done.
    """
    runs = state.setdefault("runs", {})
    names = list(models(p))

    def complete(t):
        return all(
            f"{n} seed {t}" in runs and not _capped_below(p, runs[f"{n} seed {t}"]) for n in names
        )

    for s in seeds:
        for name in names:
            key = f"{name} seed {s}"
            if key in runs and not _capped_below(p, runs[key]):
                continue
            if time.perf_counter() > deadline:
                return [t for t in seeds if complete(t)]
            t0 = time.perf_counter()
            resume = _resume_from(p, key, runs[key], weights) if key in runs else None
            keep = None if weights is None else weights_path(weights, key)
            if keep is not None:
                keep.parent.mkdir(parents=True, exist_ok=True)
            runs[key] = run_one(
                p,
                models(p)[name],
                s,
                corpus,
                ctx=not name.startswith("hybrid"),
                device=device,
                resume=resume,
                keep=keep,
            )
            r = runs[key]
            print(
                f"  {key}: bpb {r['hist']['val_loss'][-1] / LN2:.3f}, converged {r['converged']}, "
                + (f"{r['steps']} steps ({r['reason']}), " if "steps" in r else "")
                + ("continued, " if resume else "")
                + f"{time.perf_counter() - t0:.0f} s",
                file=sys.stderr,
            )
            save()
    return [t for t in seeds if complete(t)]


def raise_cap(state: dict, p: dict) -> list[str]:
    """Carry a state over to plan ``p`` whose only change is a larger ``max_steps``.

    A run that stopped flat below the old cap is what the larger cap would train too, and
    is kept; a run that reached the old cap trains on (:func:`run_all`). Any other
    difference of plans (a smaller cap included) is left for
    :func:`check_resume_settings` to refuse.

    Returns the keys of the runs that train on.
    """
    old = state.get("plan")
    if not old or not p.get("until_flat") or not old.get("until_flat"):
        return []
    plain = json.loads(json.dumps(p))
    if {**old, "max_steps": plain["max_steps"]} != plain or plain["max_steps"] <= old["max_steps"]:
        return []
    state["plan"] = plain
    return [k for k, r in state.get("runs", {}).items() if _capped_below(plain, r)]


def upgrade_min_cycles(state: dict, p: dict) -> list[str]:
    """Carry a state written before the plan had ``min_cycles`` over to plan ``p``.

    Such a state judged every run from its first cycle on. When its plan is ``p`` but for
    ``min_cycles``, the runs that stopped after fewer cycles than ``p["min_cycles"]`` are
    dropped from ``state["runs"]`` (``--resume`` trains them again under the new rule; the
    weights of their cycles were not kept), every other run is kept (it ran at least that
    many cycles: what the rule would have trained), and the state gets plan ``p``. Any
    other difference of plans is left for :func:`check_resume_settings` to refuse.

    Returns the keys of the dropped runs.
    """
    old = state.get("plan")
    need = p.get("min_cycles")
    if not old or need is None or "min_cycles" in old:
        return []
    plain = json.loads(json.dumps(p))
    if {**old, "min_cycles": need} != plain:
        return []
    runs = state.setdefault("runs", {})
    dropped = [k for k, r in runs.items() if r.get("cycles", need) < need]
    for k in dropped:
        del runs[k]
    state["plan"] = plain
    return dropped
