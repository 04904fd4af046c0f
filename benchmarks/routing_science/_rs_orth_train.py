"""The training units of ``orthogonality.py``: pre-training, fine-tuning, probes, the run loop.

:func:`one_cycle` trains one cycle, :func:`pretrain_cycle` one cycle of the shared
pre-training (checked by :func:`check_pretrained`), :func:`finetune_unit` one fine-tuning
of a grid point and seed until flat with its routing diagnostics and probes,
:func:`reference_unit` probes the pre-trained model, and :func:`run_units` runs every unit
not yet stored while the piece has time (:class:`Stop` ends a piece). A helper module:
``orthogonality.py`` imports it.
"""

from __future__ import annotations

import hashlib
import statistics
import tempfile
import time
from pathlib import Path

from _common import (
    CYCLE_SEED,
    until_flat,
)
from _orthogonality import (
    DIAG,
    byte_features,
    curve_flat,
    cycles_curve,
    grid,
    model_features,
    probe_accuracy,
    probe_tasks,
    record_curve,
    unzip,
)
from _routing_science import flat
from _rs_orth_configs import lm_config, train_keys

__all__ = [
    "Stop",
    "check_pretrained",
    "finetune_unit",
    "mean_over_layers",
    "news_text",
    "one_cycle",
    "pretrain_cycle",
    "reference_unit",
    "run_units",
    "sha256",
]


class Stop(Exception):
    """This piece may start no more units (``--max-hours``, ``--max-units``)."""


# ------------------------------------------------------------------------ training


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def news_text() -> str:
    """The Lee news stream exactly as :func:`~sci_moe.language.load_corpus` joins it."""
    from sci_moe.language.data import lee_documents

    return "\n\n".join(lee_documents()) + "\n\n"


def one_cycle(keys, seed, env, corpus, init_from, save_to: Path | None):
    """One training of ``keys`` (an LMConfig's worth); returns its record and model."""
    from sci_moe.language import run_training, save_model

    cfg = lm_config(keys, seed, env)
    t0 = time.perf_counter()
    run = run_training(cfg.model_config(), cfg, None, init_from=init_from, corpus=corpus)
    h = run.history
    if save_to is not None:
        save_model(save_to, cfg.model_config(), run.model.state_dict(), run.result.step)
    rec = {
        "seed": seed,
        "step": h["step"],
        "val_loss": h["val_loss"],
        "seconds": time.perf_counter() - t0,
        "step_ms": 1e3 * statistics.median(h["step_time"]),
    }
    return rec, h, run.model


def pretrain_cycle(p, state, env, files: Path) -> dict:
    """The next pretraining cycle, from the previous one's weights (``files``)."""
    from sci_moe.language import load_corpus

    cycles = state["pretrain"]
    c = len(cycles)
    init = None
    if c:
        init = check_pretrained(files, cycles)
    rec, _, _ = one_cycle(
        train_keys(p, "pretrain"), CYCLE_SEED * c, env, load_corpus(), init, files / "pretrained.pt"
    )
    rec["sha256"] = sha256(files / "pretrained.pt")
    return rec


def check_pretrained(files: Path, cycles: list[dict]) -> Path:
    path = files / "pretrained.pt"
    if not path.is_file() or sha256(path) != cycles[-1]["sha256"]:
        raise SystemExit(
            f"{path} is missing or is not the weights of pretraining cycle {len(cycles)} "
            "(SHA-256 in the JSON): restore it (commit it with the partial JSON) or start "
            "afresh without --resume"
        )
    return path


def mean_over_layers(diag: list[dict], key: str) -> float:
    return statistics.fmean(layer[key] for layer in diag)


def finetune_unit(p, state, env, files: Path, name, ortho, var, seed, tasks) -> dict:
    """Fine-tune the pretrained model at one grid point and seed until flat; measure it."""
    from sci_moe.language import text_corpus

    corpus = text_corpus(news_text(), name="lee_news")
    last = {"init": check_pretrained(files, state["pretrain"])}  # the latest cycle's
    cycles, t0 = [], time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:

        def cycle(c: int, cycle_seed: int) -> list[list[float]]:
            save = Path(tmp) / f"cycle{c}.pt"
            keys = train_keys(p, "ft", ortho, var)
            rec, h, last["model"] = one_cycle(keys, cycle_seed, env, corpus, last["init"], save)
            cycles.append(rec)
            if c == 0:  # the pretrained model on the news validation windows
                initial = {"val_loss": h["val_loss"][0]}
                initial.update({k: mean_over_layers(h["diagnostics"][0], k) for k in DIAG})
                last["initial"] = initial
            last["init"], last["diag"] = save, h["diagnostics"][-1]
            return record_curve(rec)

        curve, _, converged = until_flat(cycle, curve_flat, p["ft_cycles"], seed)
    steps, loss = unzip(curve)
    diag, model = last["diag"], last["model"]
    out = {
        "cycles": cycles,
        "initial": last["initial"],
        "val_loss": loss[-1],
        **{k: mean_over_layers(diag, k) for k in DIAG},
        "probe": {
            t: probe_accuracy(model_features(model, x), y, g) for t, (x, y, g) in tasks.items()
        },
        "steps": steps[-1],
        "converged": converged,
        "seconds": time.perf_counter() - t0,
    }
    print(
        f"  {name} seed {seed}: news val loss {out['val_loss']:.4f}, overlap "
        f"{out['overlap']:.4f}, variance {out['score_variance']:.4g}, MaxVio "
        f"{out['max_violation']:.3f}, probe {out['probe']}, {len(cycles)} cycle(s), "
        f"flat {out['converged']} ({out['seconds']:.0f} s)",
        flush=True,
    )
    return out


# ------------------------------------------------------------------------- probes


def reference_unit(state, files: Path, tasks: dict) -> dict:
    """Probe accuracy of the pretrained model and of byte histograms."""
    import torch

    from sci_moe.language import MoELMConfig, MoETransformerLM, load_checkpoint

    ck = load_checkpoint(check_pretrained(files, state["pretrain"]))
    model = MoETransformerLM(MoELMConfig(**ck["model_config"]))
    model.load_state_dict(ck["model"])
    torch.manual_seed(0)
    return {
        "pretrained": {
            t: probe_accuracy(model_features(model, x), y, g) for t, (x, y, g) in tasks.items()
        },
        "bytes": {t: probe_accuracy(byte_features(x), y, g) for t, (x, y, g) in tasks.items()},
    }


# --------------------------------------------------------------------- run, rows


def run_units(p, seeds, runs, env, files: Path, deadline: float, budget: list, save) -> None:
    """Every unit not yet in ``runs``, in order, while the piece has time (``budget``:
    units this piece may still start, ``[None]`` for no limit)."""

    def may_start(what: str) -> None:
        if time.perf_counter() > deadline or budget[0] == 0:
            raise Stop(what)
        if budget[0] is not None:
            budget[0] -= 1

    runs.setdefault("pretrain", [])
    files.mkdir(parents=True, exist_ok=True)
    (files / "lee_news.txt").write_text(news_text(), encoding="utf-8")
    while not runs.get("pretrain_done"):
        may_start(f"pretraining cycle {len(runs['pretrain']) + 1}")
        runs["pretrain"].append(pretrain_cycle(p, runs, env, files))
        steps, loss = cycles_curve(runs["pretrain"])
        done = flat(steps, loss) or len(runs["pretrain"]) >= p["pretrain_cycles"]
        runs["pretrain_done"] = done
        print(
            f"  pretraining cycle {len(runs['pretrain'])}: val loss {loss[-1]:.4f} after "
            f"{steps[-1]} steps, flat {flat(steps, loss)} "
            f"({runs['pretrain'][-1]['seconds']:.0f} s)",
            flush=True,
        )
        save()
    tasks = None
    if "reference" not in runs:
        may_start("the reference probes")
        tasks = probe_tasks(p["probe_per_class"])
        runs["reference"] = reference_unit(runs, files, tasks)
        save()
    ft = runs.setdefault("finetune", {})
    for s in seeds:
        for name, o, v in grid(p):
            key = f"{name}/s{s}"
            if key in ft:
                continue
            may_start(f"fine-tune {key}")
            tasks = tasks or probe_tasks(p["probe_per_class"])
            ft[key] = finetune_unit(p, runs, env, files, name, o, v, s, tasks)
            save()
