"""``sci-moe train lm``: the byte-level MoE language model on the shared engine.

Trains :class:`sci_moe.language.MoETransformerLM` on the Wikipedia excerpt and news
articles shipped in gensim's wheel (or ``--text-file``) with
:func:`sci_moe.language.run_training`. Every option of the model is a flag: the mixer of
each block (``--layers``: attention, Mamba or Routing Mamba), Default MoE
(``--default-moe``), the specialisation losses (``--orthogonality-coef``,
``--variance-coef``), auxiliary-loss-free balancing (``--selection-bias`` with
``--bias-balancing``) and fine-tuning from a checkpoint (``--init-from``).

Writes ``OUT/model.pt`` (single-process weights and the model config, checksummed;
:func:`sci_moe.language.load_checkpoint` reads it), ``OUT/results.json`` (final
validation loss, perplexity, bits per byte and routing diagnostics) and the engine's
files (``checkpoint.pt``, ``metrics.jsonl``).

``--until-flat`` trains in cycles as the Routing Mamba benchmark
(``benchmarks/routing_mamba/run.py --until-flat``) does, with
:func:`sci_moe.train.until_flat`: cycle ``c`` is a fresh warm-up + cosine schedule of
``--steps`` steps in ``OUT/cycle_<c>/`` (the engine's files, ``model.pt`` and
``cycle.json``), its batches drawn with the seed ``--seed + 100 c``, starting from cycle
``c - 1``'s ``model.pt`` (the weights the cycle ended with: the final ones, as in the
benchmark, or the best evaluated ones with ``--restore-best``), until the validation
loss of all cycles joined on one step axis is flat (:func:`sci_moe.train.is_flat`, mode
``min``, its default tail and tolerance; judged from cycle ``--min-cycles`` on) or
``--max-cycles`` cycles ran. ``OUT/model.pt``
is then the last cycle's model file and ``results.json`` records ``until_flat``:
``cycles``, ``steps`` (cycles x ``--steps``), ``cap`` (``--steps`` x ``--max-cycles``),
``converged``, ``cycle_steps``, ``max_cycles``, ``min_cycles``, ``tokens_per_step`` and the joined
``curve`` (``[step, val_loss]``, nats). ``--resume`` reads the finished cycles back from
their folders (not retrained) and resumes the unfinished one through the engine;
``--max-hours`` is the budget of all cycles together (a run stopped between or inside
cycles says to continue with ``--resume``). The settings, ``--max-cycles`` included,
cannot change on ``--resume``: to allow more cycles, start a new ``--out``.
``--until-flat`` excludes ``--init-from``, ``--stop-when-flat`` and ``--patience``.

``--device cuda`` trains on a GPU (without it: the CPU, or each process's GPU under
``torchrun`` with NCCL): the training windows are drawn on the CPU, as in a CPU run, and
moved by the engine, the validation windows once; the routing diagnostics come back to the
CPU and the model files hold CPU tensors.

Examples
--------
.. code-block:: console

    $ sci-moe train lm --out runs/lm --steps 2000 --max-hours 1
    $ sci-moe train lm --out runs/lm --steps 2000 --max-hours 1 --resume
    $ sci-moe train lm --out runs/rom --layers rr --no-positions --d-state 8
    $ sci-moe train lm --out runs/ft --init-from runs/lm/model.pt \\
          --orthogonality-coef 0.01 --variance-coef 0.01 --steps 200
    $ torchrun --standalone --nproc_per_node 2 -m sci_moe.cli.main \\
          train lm --out runs/ep --expert-parallel

One row of the Routing Mamba benchmark's until-flat run (RoM, seed 3), rerun:

.. code-block:: console

    $ sci-moe train lm --config benchmarks/routing_mamba/configs/until_flat/RoM.toml \\
          --seed 3 --out rom_s3
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import time
from dataclasses import dataclass
from pathlib import Path

from ..._util import check_int_attr
from ...language.train_config import LMConfig
from ._common import TrainMethod

__all__ = ["CYCLE_RECORD", "METHOD", "LMRunConfig", "run"]

#: The record of a finished cycle in its folder ``OUT/cycle_<c>/``.
CYCLE_RECORD = "cycle.json"
_CYCLE_DIR = re.compile(r"cycle_\d+")


@dataclass
class LMRunConfig(LMConfig):
    """Options of ``sci-moe train lm``: :class:`~sci_moe.language.LMConfig` and these.

    Parameters
    ----------
    until_flat : bool
        Train in cycles of ``steps`` steps until the joined validation loss is flat.
    max_cycles : int
        The most cycles of ``until_flat`` (>= 1).
    min_cycles : int
        The cycles ``until_flat`` trains before it judges the curve (1 to
        ``max_cycles``; the Routing Mamba benchmark's 2: the end of one annealed cycle
        always looks flat).
    """

    until_flat: bool = False
    max_cycles: int = 4
    min_cycles: int = 1

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.until_flat, bool):
            raise ValueError(f"until_flat must be true or false, got {self.until_flat!r}")
        check_int_attr(self, "max_cycles", minimum=1)
        check_int_attr(self, "min_cycles", minimum=1)
        if self.min_cycles > self.max_cycles:
            raise ValueError(
                f"min_cycles ({self.min_cycles}) must be <= max_cycles ({self.max_cycles})"
            )
        if self.until_flat:
            for name, value, off in (
                ("init_from", self.init_from, None),
                ("stop_when_flat", self.stop_when_flat, None),
                ("patience", self.patience, 0),
            ):
                if value != off:
                    raise ValueError(
                        f"until_flat excludes {name} (got {value!r}): every cycle trains "
                        "its whole schedule, cycle 0 from a fresh initialisation; drop "
                        f"--{name.replace('_', '-')} or --until-flat"
                    )

    def lm_config(self, **changes) -> LMConfig:
        """The :class:`~sci_moe.language.LMConfig` of these fields, with ``changes``."""
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(LMConfig)}
        return LMConfig(**{**fields, **changes})


def _config():
    return LMRunConfig


def _corpus(cfg):
    from ...language import load_corpus, text_corpus

    if cfg.text_file is not None:
        path = Path(cfg.text_file)
        if not path.is_file():
            raise ValueError(f"text_file {path} does not exist")
        return text_corpus(path.read_text(encoding="utf-8"), cfg.val_fraction, path.name)
    return load_corpus(cfg.val_fraction)


def _cpu(state: dict) -> dict:
    """CPU copies of a state dict's tensors (a model file any machine reads)."""
    return {k: v.detach().cpu() for k, v in state.items()}


def _val(hist: dict) -> dict | None:
    """The last evaluation of a history of :func:`sci_moe.language.train`."""
    if not hist["val_loss"]:
        return None
    loss = hist["val_loss"][-1]
    return {
        "step": hist["step"][-1],
        "loss": loss,
        "ppl": hist["val_ppl"][-1],
        "bits_per_byte": loss / math.log(2),
        "layers": hist["diagnostics"][-1],
    }


def run(cfg, out: Path, resume: bool) -> dict:
    """Train with ``cfg`` (:class:`LMRunConfig`) into ``out``."""
    from ...language import run_training, save_model
    from ...train import current_context

    corpus = _corpus(cfg)
    if getattr(cfg, "until_flat", False):
        return _run_cycles(cfg, out, resume, corpus)
    model_cfg = cfg.model_config()
    lm = run_training(model_cfg, cfg, out, resume, init_from=cfg.init_from, corpus=corpus)
    weights = _cpu(lm.full_state_dict())  # a collective under expert parallelism
    if not current_context().is_main:
        return {}
    hist = lm.history
    save_model(out / "model.pt", model_cfg, weights, lm.result.step, hist)
    results = {"train": lm.result.to_dict()}
    val = _val(hist)
    if val is not None:
        results["val"] = val
    results["data"] = {"train_bytes": corpus.train.numel(), "val_bytes": corpus.val.numel()}
    return results


class _Stopped(Exception):
    """A cycle stopped before its end (the budget): ``args[0]`` is its ``train`` record."""


def _clear_cycles(out: Path) -> None:
    """Remove the cycle folders of a replaced run (``--overwrite``): their files only."""
    from ...train import run_files

    if not out.is_dir():
        return
    for folder in out.iterdir():
        if folder.is_dir() and _CYCLE_DIR.fullmatch(folder.name):
            for f in [*run_files(folder), folder / "model.pt", folder / CYCLE_RECORD]:
                f.unlink(missing_ok=True)
            try:
                folder.rmdir()
            except OSError:
                pass  # a file not ours: the engine refuses a folder that holds a run


def _run_cycles(cfg: LMRunConfig, out: Path, resume: bool, corpus) -> dict:
    """``--until-flat``: cycles of ``cfg.steps`` steps in ``OUT/cycle_<c>/``."""
    from ..._util import atomic_save_json
    from ...language import load_checkpoint, run_training, save_model
    from ...train import barrier, broadcast_object, current_context, is_flat, run_files
    from ...train.cycles import concat, until_flat

    ctx = current_context()
    t_start = time.perf_counter()
    model_cfg = cfg.model_config()
    if ctx.is_main and not resume:
        _clear_cycles(out)
    barrier(ctx)
    records: list[dict] = []

    def cycle(c: int, seed: int) -> list:
        folder = out / f"cycle_{c}"
        record = None
        if resume and ctx.is_main and (folder / CYCLE_RECORD).is_file():
            record = json.loads((folder / CYCLE_RECORD).read_text(encoding="utf-8"))
        record = broadcast_object(record, ctx)
        if record is not None:  # finished before: read back, not retrained
            records.append(record)
            return record["curve"]
        changes: dict = {"seed": seed, "init_from": None}
        if cfg.max_hours is not None:
            left = cfg.max_hours - (time.perf_counter() - t_start) / 3600
            if left <= 0:
                raise _Stopped({"reason": "budget", "step": 0, "steps": cfg.steps, "cycle": c})
            changes["max_hours"] = left
        started = resume and any(p.exists() for p in run_files(folder))
        init = out / f"cycle_{c - 1}" / "model.pt" if c else None
        if ctx.is_main:
            folder.mkdir(parents=True, exist_ok=True)
        barrier(ctx)
        lm = run_training(
            model_cfg, cfg.lm_config(**changes), folder, started, init_from=init, corpus=corpus
        )
        weights = _cpu(lm.full_state_dict())  # a collective under expert parallelism
        train = {**lm.result.to_dict(), "cycle": c}
        if lm.result.reason != "completed":
            raise _Stopped(train)
        hist = lm.history
        if ctx.is_main:
            save_model(folder / "model.pt", model_cfg, weights, lm.result.step, hist)
            points = zip(hist["step"], hist["val_loss"], strict=True)
            curve = [[int(s), float(v)] for s, v in points]
            record = {"cycle": c, "seed": seed, "curve": curve, "train": train, "val": _val(hist)}
            atomic_save_json(folder / CYCLE_RECORD, record, indent=1)
        record = broadcast_object(record, ctx)  # and: model.pt is written before cycle c + 1
        records.append(record)
        return record["curve"]

    def judge(curve: list) -> bool:
        return is_flat([s for s, _ in curve], [v for _, v in curve], mode="min")

    data = {"train_bytes": corpus.train.numel(), "val_bytes": corpus.val.numel()}
    flat = {
        "cycle_steps": cfg.steps,
        "max_cycles": cfg.max_cycles,
        "min_cycles": cfg.min_cycles,
        "cap": cfg.steps * cfg.max_cycles,
        "tokens_per_step": cfg.batch_size * cfg.seq_len,
    }
    try:
        curve, n, converged = until_flat(
            cycle,
            judge,
            cfg.max_cycles,
            seed=cfg.seed,
            cycle_steps=cfg.steps,
            min_cycles=cfg.min_cycles,
        )
    except _Stopped as stop:
        train = stop.args[0]
        if not ctx.is_main:
            return {}
        done = len(records)
        print(
            f"stopped in cycle {done} (at most {cfg.max_cycles}) at its step {train['step']} "
            f"of {train['steps']} ({train['reason']}); continue with --resume"
        )
        curve = concat([r["curve"] for r in records], cfg.steps) if records else []
        flat.update(finished=False, cycles_done=done, curve=curve)
        return {"train": train, "until_flat": flat, "data": data}
    if not ctx.is_main:
        return {}
    saved = load_checkpoint(out / f"cycle_{n - 1}" / "model.pt")
    save_model(out / "model.pt", model_cfg, saved["model"], saved["step"], saved["history"])
    last = records[-1]
    flat.update(finished=True, cycles=n, steps=n * cfg.steps, converged=converged, curve=curve)
    results = {"train": last["train"]}
    if last["val"] is not None:
        results["val"] = last["val"]
    return {**results, "until_flat": flat, "data": data}


METHOD = TrainMethod(
    name="lm",
    help="MoE language model: Routing Mamba, Default MoE, specialisation losses",
    config=_config,
    run=run,
    outputs=("model.pt",),
    description=__doc__.split("\n\n")[1].replace("\n", " "),
)
