"""Routing Mamba vs dense Mamba on offline byte-level text: scaling, context, hybrid.

Zhan et al., NeurIPS 2025 (arXiv 2506.18145). Byte-level LMs on the text shipped in
gensim's wheel (``sci_moe.language.load_corpus``), trained by the shared trainer
(``sci_moe.language.train``), every model from one ``sci-moe train lm`` configuration
(``--write-configs DIR`` writes them; ``configs/`` holds the full run's):

* (a) dense Mamba at 1x, 1.5x, 2.3x and 3x the active parameters of RoM (shared routing,
  top-1 of E), and RoM itself, on >= 5 paired seeds (seed ``s`` fixes the initialisation
  and the batch order of every model); validation bits per byte, learning curves and a
  convergence flag per run (flat by :func:`sci_moe.train.is_flat`: the best validation
  loss of the last 20 % of the training tokens is < 1 % below the best before them);
* (b) the scaling fit: bits per byte = a + b ln(active parameters) through the dense
  models' seed means, the dense size RoM's loss equals (as a multiple of RoM's active
  parameters), with a 95 % bootstrap interval over the seeds (paired resampling);
* (c) loss across context lengths: trained at L, evaluated at L, 2L, 4L (no position
  table: Mamba needs none);
* (d) hybrid (Mamba + attention, FFN per block) dense vs RoM at equal active
  parameters, with active FLOPs/token and training FLOPs to the dense hybrid's loss;
* (e) selective-scan throughput (fwd + bwd, tokens/s) of the parallel scan vs the
  step-by-step reference and vs transformers' ``MambaMixer`` slow path.

The run goes seed by seed (every model of seed 0, then seed 1, ...); with
``--max-hours H`` a piece starts no new training run after H hours and writes the JSON of
the complete seeds so far (each finished run is kept in ``PATH.state.json``);
``--resume`` continues it. ``--verdicts-only PATH`` recomputes a stored JSON's verdicts
from its rows (no training). ``--steps N`` trains every run N steps instead of the plan's
240 (the longer runs the issue asks for; give them their own ``--json``). The plots are
named after the JSON (``<stem>_curves.png``, ``<stem>_hybrid_curves.png``,
``<stem>_scaling.png``; ``routing_mamba_*`` without ``--json``), so runs do not overwrite
each other's; ``--plots-only --json PATH --plots DIR`` re-renders them from the stored
JSON and its state file, training nothing and leaving both files as they are.

**Until flat** (``--until-flat``): every run trains until its validation curve is flat by
:func:`flat` (the house rule, :func:`sci_moe.train.is_flat`), from a minimum of
``--min-steps`` (default 2,400, the long run's budget) to a cap of ``--max-steps``
(default 4x: 9,600 steps, 9.8M tokens). The schedule: the run trains in **cycles** of
``--min-steps`` steps, each a fresh warmup + cosine learning-rate schedule
(:func:`_common.until_flat`): cycle 0 is the fixed ``--steps 2400`` run exactly (same
seed, same batches), cycle ``c > 0`` starts from the best validation weights of cycle
``c - 1`` with batch seed ``s + 100 c`` (the same for every model of seed ``s``: the
pairing holds), and after each cycle the joined curve (:func:`_common.concat`) is judged;
a flat one ends the run, else the next cycle runs, at most ``--max-steps / --min-steps``
cycles. So every curve is judged at the end of an annealed schedule, never in the middle
of one at a high learning rate (a one-shot cosine over the cap stopped flat at 2,400 steps
would still be at ~94 % of its peak rate). Each run records its ``steps``, ``tokens``,
``cycles``, ``flat`` and stop ``reason`` (``"flat"``, or ``"cap"``: unflat after the last
cycle), as rows per seed (``steps seed s``, ``tokens seed s``, ``cycles seed s``,
``converged seed s``, ``capped seed s``); its loss is its curve's last evaluation (the end
of its last cycle) and a model's seed-mean curve holds a run that stopped at its final
value up to the longest run's tokens. A run at the cap is not flat and every verdict that
compares it stays non-decisive. The state stores the plan (``until_flat``, ``steps`` = the
minimum, ``max_steps``); ``--resume`` of a state of another plan (the fixed-step runs) is
refused. The unit of a piece is one run (all its cycles): a killed piece loses the run in
progress at most, and a piece may overrun ``--max-hours`` by that run (<= 4 cycles).

**Reusing the fixed-step run** (``--reuse-flat-from STATE``, only with ``--until-flat``):
cycle 0 of every run is the fixed ``--steps MIN`` run, so a run that STATE (that run's
``.state.json``) holds flat by :func:`flat` would stop after cycle 0 with exactly what
STATE stores. At the start of a fresh or resumed piece (:func:`reuse_flat`) STATE's plan
must be this plan's cycle 0 (:func:`cycle0_plan`: model sizes, batch, sequence, seeds,
evaluations; :func:`_common.check_resume_settings` names the differing keys), its runs of
these models (parameter counts, and the configurations of the JSON beside it), else the
run is refused (exit status 2). Then, before anything is taken, :func:`verify_state`
retrains the cheapest stored run (:func:`verify_run`: the model of the highest median
stored throughput, its lowest seed) for the first :data:`VERIFY_EVALS` evaluations of its
full MIN-step schedule (same warmup and cosine, stopped early by ``stop_after``) and needs
its validation curve, the evaluation before the first step included, equal to the stored
one's start bit for bit; else the run is refused with both curves, the CPUs and thread
counts (then run without the option: every run is retrained). Each flat run of the planned
seeds not yet in the state is stored as the until-flat path stores a run flat after cycle
0 (curve, ``tps``, parameters, FLOPs, context losses as STATE has them; ``steps`` MIN,
``tokens``, ``cycles`` 1, ``reason`` ``"flat"``) plus ``reused_from`` (``file``,
``sha256`` of STATE); the state's ``reused`` and the JSON's ``machine.reuse_flat_from``
say which runs (``reused_runs``: how many) and hold the verification. Unflat runs are
not reused: their cycle 1 starts from cycle 0's best weights, which STATE does not hold.
Reused runs add nothing to ``training_wall_s``. A resumed piece with the option takes
only what is new (nothing after the first piece: no verification then).

Cost, from ``routing_mamba_long.state.json`` (the ``--steps 2400`` run = cycle 0 of every
run here; one thread, beside other jobs): 12,441 s for the 35 runs' first 2,400 steps
(per run 127-624 s by model, medians: hybrids ~130 s, RoM 281 s, dense 1x/1.5x/2.3x/3x
218/316/624/619 s; a run's time varied ~2x across seeds with the load); 18 of the 35
were flat there and stop after cycle 0 (if it reproduces them: same seeds, one thread),
the 17 others cost 5,150 s per further cycle. So the run costs at least 12,441 + 5,150 = 17,600 s
(~4.9 h, if every unflat run is flat after cycle 1) and at most 12,441 + 3 x 5,150 =
27,900 s (~7.7 h, every one of the 17 to the cap), against ~13.8 h if all 35 ran to the
cap. ``--reuse-flat-from routing_mamba_long.state.json`` saves the 18 flat runs' cycle 0:
7,205 s of training steps as they ran there (6,884 s at the models' median times; ~2 h),
for a verification of ~30 s (480 steps of ``hybrid RoM`` seed 0), so at least ~10,400 s
(~2.9 h) and at most ~20,700 s (~5.8 h) -- only on a machine that reproduces that state
bit for bit. This one (an "AMD EPYC", one thread) does not: ``hybrid RoM`` seed 0's
evaluation before the first step is equal (5.544538974761963 nats) but its evaluations
at steps 240 and 480 are 2.448957920074463 and 2.146975576877594 here against
2.448893964290619 and 2.14796781539917 stored (an "Intel(R) Xeon(R) Processor", one
thread), so there the option refuses and every run is retrained. The command (the first
piece without ``--resume``, then the same with it until the output says the run is
complete; drop ``--reuse-flat-from`` where it is refused)::

    nice -n 10 env OMP_NUM_THREADS=1 python benchmarks/routing_mamba/run.py --threads 1 \\
        --until-flat --min-steps 2400 --max-steps 9600 \\
        --reuse-flat-from benchmarks/routing_mamba/results/routing_mamba_long.state.json \\
        --json benchmarks/routing_mamba/results/routing_mamba_flat.json --max-hours 1 --resume
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/_common.py

import torch
from _common import (
    CYCLE_SEED,
    OtherLoad,
    Row,
    base_parser,
    check_resume_settings,
    cpu_model,
    machine_info,
    piece_arguments,
    piece_deadline,
    print_table,
    refuse,
    resume_state,
    seed_verdict,
    setup,
    state_path,
    time_fn,
    until_flat,
    verdict_entry,
    verdicts_only,
    write_json,
    write_json_doc,
)

from sci_moe.language import (
    LMConfig,
    MoETransformerLM,
    evaluate,
    load_corpus,
    save_model,
    train,
    validation_windows,
)
from sci_moe.language.mamba import MambaBlock, RoMBlock
from sci_moe.train import is_flat

BENCHMARK = "routing_mamba"
LN2 = math.log(2.0)
#: Dense sizes, as multiples of RoM's active parameters (the paper: RoM matches 2.3x).
RATIOS = (1.0, 1.5, 2.3, 3.0)
CLAIMED_RATIO = 2.3
#: Flat (:func:`sci_moe.train.is_flat`): the best validation loss of the last
#: ``FLAT_TAIL`` of the training tokens is less than ``FLAT`` (relative) below the best
#: before them.
FLAT = 0.01
FLAT_TAIL = 0.2


#: The until-flat mode's defaults: the minimum (cycle) steps of the full run (the long
#: run's budget) and the cap as a multiple of it.
UNTIL_FLAT_MIN_STEPS = 2400
UNTIL_FLAT_CAP = 4


def plan(quick: bool, steps: int | None = None, max_steps: int | None = None) -> dict:
    """The run's settings; ``steps`` overrides the training steps (evaluated every tenth).

    ``max_steps`` (a multiple of the steps): the until-flat mode, cycles of ``steps``
    steps up to ``max_steps`` in all (the plan gets ``until_flat=True`` and ``max_steps``).
    Raises ``ValueError`` when ``max_steps`` is not a positive multiple of the steps.
    """
    if quick:
        p = dict(d=16, steps=8, batch=4, seq=32, seeds=2, E=4, eval_every=4, scan=(2, 32, 16))
    else:
        p = dict(d=32, steps=240, batch=16, seq=64, seeds=5, E=4, eval_every=24, scan=(8, 128, 64))
    if steps is not None:
        p.update(steps=steps, eval_every=max(1, steps // 10))
    if max_steps is not None:
        if max_steps < p["steps"] or max_steps % p["steps"]:
            raise ValueError(
                f"--max-steps must be a multiple of the minimum steps {p['steps']} "
                f"(whole cycles), got {max_steps}"
            )
        p.update(until_flat=True, max_steps=max_steps)
    return p


def train_keys(p: dict) -> dict:
    """The training keys of every configuration (``sci-moe train lm``'s names)."""
    return dict(
        steps=p["steps"],
        batch_size=p["batch"],
        lr=3e-3,
        warmup=0.1,
        eval_every=p["eval_every"],
        eval_batches=4,
        seq_len=p["seq"],
        n_heads=4,
        positions=False,
        d_state=16,
    )


def model_keys(d, layers, expand, experts=None, ffn=False):
    keys = dict(d_model=d, n_layers=len(layers), d_hidden=2 * d, layers=layers, expand=expand)
    if experts is not None:
        keys.update(mamba_experts=experts, mamba_top_k=1)
    if ffn:
        keys.update(mamba_ffn=True, positions=True)
    return keys


def lm_config(p: dict, keys: dict) -> LMConfig:
    return LMConfig(**{**train_keys(p), **keys})


def active_params(model: MoETransformerLM) -> tuple[int, int]:
    """(active, total) non-embedding parameters."""
    total = sum(p.numel() for n, p in model.named_parameters() if not n.startswith(("tok", "pos")))
    active = total
    for b in model.blocks:
        if isinstance(b.attn, RoMBlock):
            active -= (
                b.attn.expert_parameters()
                - b.attn.expert_parameters() * b.attn.config.top_k // b.attn.config.num_experts
            )
    return active, total


def count(p, keys) -> tuple[int, int]:
    return active_params(MoETransformerLM(lm_config(p, keys).model_config()))


def models(p: dict) -> dict[str, dict]:
    """The configurations of (a) and (d), by name: RoM, the dense sizes, the hybrids.

    A dense size is the (``d_model`` multiple of 4, ``expand`` 2..6) whose active
    parameters are closest to the target multiple of RoM's (``d_model`` as small as
    possible: the embedding is not counted).
    """
    d = p["d"]
    rom = model_keys(d, "rr", 2, experts=p["E"])
    base = count(p, rom)[0]
    out = {"RoM": rom}
    grid = [(dd, e) for dd in range(d, 2 * d + 1, 4) for e in range(2, 7)]
    sizes = {g: count(p, model_keys(g[0], "mm", g[1]))[0] for g in grid}
    for r in RATIOS:
        dd, e = min(
            grid,
            key=lambda g: (abs(sizes[g] / base - r) > 0.05 * r, g[0], abs(sizes[g] / base - r)),
        )
        out[f"dense {r:g}x"] = model_keys(dd, "mm", e)
    out["hybrid dense"] = model_keys(d, "ma", 2, ffn=True)
    out["hybrid RoM"] = model_keys(d, "ra", 2, experts=p["E"], ffn=True)
    return out


def write_configs(p: dict, folder: Path) -> list[Path]:
    """One ``sci-moe train lm --config`` TOML file per model (the seed is ``--seed``)."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, keys in models(p).items():
        path = folder / (name.replace(" ", "_").replace(".", "p") + ".toml")
        lines = [f"# {name}: sci-moe train lm --config {path.name} --seed S --out DIR"]
        for k, v in {**train_keys(p), **keys}.items():
            lines.append(
                f"{k} = {str(v).lower() if isinstance(v, bool) else repr(v)}".replace("'", '"')
            )
        path.write_text("\n".join(lines) + "\n")
        paths.append(path)
    return paths


def flops_per_token(model, seq) -> float:
    """2 x active matmul parameters + causal attention scores (2 * 2 * seq/2 * d per layer)."""
    active, _ = active_params(model)
    attn = sum(1 for b in model.blocks if b.kind == "a")
    return 2.0 * active + attn * 2 * seq * model.config.d_model


def tokens_to(tokens, losses, target):
    """First training-token count at which ``losses`` reach ``target``.

    Linear interpolation between the two evaluations around the crossing (``None`` if
    the curve never gets there; ``tokens[0]`` if it starts below).
    """
    for i, (tok, loss) in enumerate(zip(tokens, losses, strict=True)):
        if loss <= target:
            if i == 0:
                return float(tok)
            t0, l0 = tokens[i - 1], losses[i - 1]
            return float(t0 + (l0 - target) / (l0 - loss) * (tok - t0))
    return None


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


def mean_curve(runs):
    """Training tokens and the seed-mean validation loss (nats) at each evaluation.

    Runs of unequal length (until flat) are held at their last value up to the longest
    run's tokens (the evaluations of a plan fall on the same tokens in every run).
    """
    tok = max((r["hist"]["tokens"] for r in runs), key=len)
    losses = [r["hist"]["val_loss"] for r in runs]
    return tok, [statistics.mean(v[min(i, len(v) - 1)] for v in losses) for i in range(len(tok))]


def train_cycle(p, keys, seed, corpus, init=None, stop_after=None):
    """One training run of ``p["steps"]`` steps (one cycle); ``init``: a model file to
    start from (:func:`sci_moe.language.save_model`), else a fresh initialisation.

    ``stop_after``: stop after this many steps of the same ``p["steps"]``-step schedule
    (the warmup and cosine of the full run; :func:`sci_moe.language.train`'s
    ``stop_after``), for :func:`verify_state`'s prefix.

    Returns the history of :func:`sci_moe.language.train` and the model (its best
    validation weights)."""
    cfg = lm_config(p, {**keys, "seed": seed, "progress": False})
    return train(
        cfg.model_config(),
        cfg,
        corpus=corpus,
        return_model=True,
        init_from=init,
        stop_after=stop_after,
    )


def cycles_until_flat(p, keys, seed, corpus, cycle=None):
    """Train one run in cycles of ``p["steps"]`` until :func:`flat` or ``p["max_steps"]``.

    Cycle ``c`` is ``cycle(p, keys, seed + CYCLE_SEED c, corpus, init)`` (default
    :func:`train_cycle`), ``init`` the best weights of cycle ``c - 1`` (``None`` for
    cycle 0: the fixed-step run); :func:`_common.until_flat` judges the joined curve
    after each cycle.

    Returns
    -------
    hist : dict
        ``tokens`` and ``val_loss`` (nats) of the joined curve, one entry per evaluation.
    model : MoETransformerLM
        The last cycle's model (its best validation weights).
    info : dict
        ``steps``, ``tokens``, ``cycles``, ``reason`` (``"flat"`` or ``"cap"``) and
        ``step_time`` (seconds of the training steps of all cycles).
    """
    cycle = train_cycle if cycle is None else cycle
    bl = p["batch"] * p["seq"]
    last: dict = {"model": None, "step_time": 0.0}

    def one(c, cycle_seed):
        with tempfile.TemporaryDirectory() as tmp:
            init = None
            if c:
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
        one, judge, p["max_steps"] // p["steps"], seed=seed, cycle_steps=p["steps"]
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


def run_one(p, keys, seed, corpus, ctx: bool) -> dict:
    """One run of the plan: fixed steps, or in cycles until flat (``p["until_flat"]``)."""
    if p.get("until_flat"):
        hist, model, info = cycles_until_flat(p, keys, seed, corpus)
        step_time, steps = info.pop("step_time"), info["steps"]
    else:
        hist, model = train_cycle(p, keys, seed, corpus)
        step_time, steps, info = sum(hist["step_time"]), p["steps"], {}
    tps = steps * p["batch"] * p["seq"] / step_time
    out = dict(
        hist={"tokens": hist["tokens"], "val_loss": hist["val_loss"]},
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


# ------------------------------------------------------------------ reusing flat runs

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


def fit(xs, ys):
    """Least squares ``y = a + b x``."""
    mx, my = statistics.mean(xs), statistics.mean(ys)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum(
        (x - mx) ** 2 for x in xs
    )
    return my - b * mx, b


def equivalent_ratio(dense: dict, rom: list[float], rom_active: int, idx=None) -> float:
    """The dense size (multiple of RoM's active parameters) whose fitted loss is RoM's.

    ``dense``: {active parameters: per-seed bits per byte}; ``idx``: the seeds (indices)
    to average (a bootstrap resample), default all.
    """
    idx = range(len(rom)) if idx is None else idx
    xs = [math.log(n) for n in dense]
    ys = [statistics.mean(v[i] for i in idx) for v in dense.values()]
    a, b = fit(xs, ys)
    y = statistics.mean(rom[i] for i in idx)
    if b >= 0:
        return math.nan  # bigger dense models not better: no size to match
    return math.exp((y - a) / b) / rom_active


def bootstrap_ratio(dense, rom, rom_active, n=2000, seed=0) -> tuple[float, float]:
    """95 % percentile interval of :func:`equivalent_ratio` over seed resamples."""
    rng = random.Random(seed)
    k = len(rom)
    vals = sorted(
        v
        for v in (
            equivalent_ratio(dense, rom, rom_active, [rng.randrange(k) for _ in range(k)])
            for _ in range(n)
        )
        if not math.isnan(v)
    )
    if len(vals) < n // 2:
        return math.nan, math.nan
    return vals[int(0.025 * len(vals))], vals[int(0.975 * len(vals)) - 1]


def run_all(p, seeds, corpus, state, deadline, save) -> list[int]:
    """Train every model of every seed not in ``state`` (seed by seed), until ``deadline``.

    ``state["runs"]`` maps ``"<model> seed <s>"`` to the run's record; ``save()`` is called
    after each run. Returns the seeds whose every model is done.
    """
    runs = state.setdefault("runs", {})
    names = list(models(p))
    for s in seeds:
        for name in names:
            key = f"{name} seed {s}"
            if key in runs:
                continue
            if time.perf_counter() > deadline:
                return [t for t in seeds if all(f"{n} seed {t}" in runs for n in names)]
            t0 = time.perf_counter()
            runs[key] = run_one(p, models(p)[name], s, corpus, ctx=not name.startswith("hybrid"))
            r = runs[key]
            print(
                f"  {key}: bpb {r['hist']['val_loss'][-1] / LN2:.3f}, converged {r['converged']}, "
                + (f"{r['steps']} steps ({r['reason']}), " if "steps" in r else "")
                + f"{time.perf_counter() - t0:.0f} s",
                file=sys.stderr,
            )
            save()
    return [t for t in seeds if all(f"{n} seed {t}" in runs for n in names)]


def aggregate(p, seeds, runs, rows, tables, curves) -> dict:
    """Rows of (a)-(d) from the complete seeds' runs; returns the scaling fit."""
    names = list(models(p))
    res = {n: [runs[f"{n} seed {s}"] for s in seeds] for n in names}
    for name in names:
        tok, loss = mean_curve(res[name])
        curves[name] = (tok, [v / LN2 for v in loss])
    lm = [n for n in names if not n.startswith("hybrid")]
    for group, base in ((lm, "dense 1x"), (["hybrid dense", "hybrid RoM"], "hybrid dense")):
        base_bpb = statistics.mean(r["hist"]["val_loss"][-1] / LN2 for r in res[base])
        # the base's own mean curve ends exactly at base_final (base_bpb * LN2 can round
        # one ulp below it, and then the base would "never reach" its own final loss)
        base_tok, base_curve = mean_curve(res[base])
        base_final = base_curve[-1]
        base_reach = tokens_to(base_tok, base_curve, base_final)
        base_flops = res[base][0]["flops"]
        for name in group:
            rs = res[name]
            vs = None if name == base else base
            bpb = [r["hist"]["val_loss"][-1] / LN2 for r in rs]
            m = statistics.mean(bpb)
            sd = statistics.stdev(bpb) if len(bpb) > 1 else 0.0
            act, tot = rs[0]["params"]
            conv = [r["converged"] for r in rs]
            rows.append(Row(name, "val_bpb", m, "bits/byte", vs, base_bpb / m if vs else None))
            rows.append(Row(name, "val_bpb_sd", sd, "bits/byte"))
            rows.append(Row(name, "val_perplexity", 2.0**m, "per byte"))
            for s, v, c in zip(seeds, bpb, conv, strict=True):
                rows.append(Row(name, f"val_bpb seed {s}", v, "bits/byte"))
                rows.append(Row(name, f"converged seed {s}", float(c), "bool"))
            rows.append(Row(name, "converged_runs", sum(conv), "runs"))
            conv_cell = f"{sum(conv)}/{len(rs)}"
            if "steps" in rs[0]:  # until flat: how long each run trained and why it stopped
                capped = [r["reason"] == "cap" for r in rs]
                for s, r, c in zip(seeds, rs, capped, strict=True):
                    rows.append(Row(name, f"steps seed {s}", r["steps"], "steps"))
                    rows.append(Row(name, f"tokens seed {s}", r["tokens"], "tokens"))
                    rows.append(Row(name, f"cycles seed {s}", r["cycles"], "cycles"))
                    rows.append(Row(name, f"capped seed {s}", float(c), "bool"))
                steps_mean = statistics.mean(r["steps"] for r in rs)
                rows.append(Row(name, "steps_mean", steps_mean, "steps"))
                rows.append(Row(name, "capped_runs", sum(capped), "runs"))
                conv_cell += f" ({steps_mean:.0f} steps)"
            rows.append(Row(name, "active_params", act, "params"))
            rows.append(Row(name, "total_params", tot, "params"))
            fl = rs[0]["flops"]
            rows.append(
                Row(name, "active_flops_per_token", fl, "FLOP", vs, base_flops / fl if vs else None)
            )
            reach = tokens_to(*mean_curve(rs), base_final)
            train_fl = None
            if reach is not None:
                rows.append(
                    Row(
                        name,
                        "tokens_to_base_final",
                        reach,
                        "tokens",
                        vs,
                        base_reach / reach if vs else None,
                    )
                )
                train_fl = 3 * fl * reach
                rows.append(
                    Row(
                        name,
                        "train_flops_to_base_final",
                        train_fl,
                        "FLOP",
                        vs,
                        3 * base_flops * base_reach / train_fl if vs else None,
                    )
                )
            if "ctx" in rs[0]:
                for mult in (1, 2, 4):
                    vals = [r["ctx"][str(mult)] for r in rs]
                    b = statistics.mean(r["ctx"][str(mult)] for r in res[base])
                    v = statistics.mean(vals)
                    rows.append(
                        Row(name, f"val_bpb_ctx{mult}x", v, "bits/byte", vs, b / v if vs else None)
                    )
                    rows += [
                        Row(name, f"val_bpb_ctx{mult}x seed {s}", x, "bits/byte")
                        for s, x in zip(seeds, vals, strict=True)
                    ]
                    tables["ctx"].append([name, f"{mult}x", v])
            tables["lm" if name in lm else "hyb"].append(
                [name, act, tot, m, sd, conv_cell, fl, reach]
            )
    dense = {
        res[f"dense {r:g}x"][0]["params"][0]: [
            x["hist"]["val_loss"][-1] / LN2 for x in res[f"dense {r:g}x"]
        ]
        for r in RATIOS
    }
    rom = [x["hist"]["val_loss"][-1] / LN2 for x in res["RoM"]]
    rom_active = res["RoM"][0]["params"][0]
    xs = [math.log(n) for n in dense]
    a, b = fit(xs, [statistics.mean(v) for v in dense.values()])
    ratio = equivalent_ratio(dense, rom, rom_active)
    lo, hi = bootstrap_ratio(dense, rom, rom_active) if len(seeds) > 1 else (math.nan, math.nan)
    rows.append(Row("scaling fit", "intercept_a", a, "bits/byte"))
    rows.append(Row("scaling fit", "slope_b", b, "bits/byte per ln(params)"))
    for metric, v in (
        ("dense_equivalent_ratio", ratio),
        ("dense_equivalent_ratio_ci_low", lo),
        ("dense_equivalent_ratio_ci_high", hi),
    ):
        if math.isfinite(v):
            rows.append(Row("RoM", metric, v, "x RoM active params"))
    for n, v in dense.items():
        tables["fit"].append([n, n / rom_active, statistics.mean(v), a + b * math.log(n)])
    return dict(a=a, b=b, dense=dense, rom=rom, rom_active=rom_active, ratio=ratio, ci=(lo, hi))


def exp_scan(p, rows, table, state):
    Bsz, L, d = p["scan"]
    torch.manual_seed(0)
    fast = MambaBlock(d_model=d, d_state=16)
    ref = MambaBlock(d_model=d, d_state=16, scan="reference")
    ref.load_state_dict(fast.state_dict())
    x = torch.randn(Bsz, L, d)
    contenders = {"parallel scan": fast, "step-by-step reference": ref}
    try:
        import transformers
        from transformers.models.mamba.modeling_mamba import MambaMixer

        hf = MambaMixer(
            transformers.MambaConfig(
                hidden_size=d, state_size=16, expand=2, time_step_rank=fast.config.dt_rank
            ),
            0,
        )
        hf.load_state_dict(fast.state_dict())
        hf.eval()  # slow path; in training mode it also falls back to it
        contenders["transformers MambaMixer (slow path)"] = hf
    except ImportError:
        pass

    def fb(m):
        def go():
            xi = x.clone().requires_grad_(True)
            m(xi).square().mean().backward()

        return go

    def job():
        return {name: Bsz * L / time_fn(fb(m), repeats=5).median for name, m in contenders.items()}

    if "scan" not in state:
        state["scan"] = job()
    tps = state["scan"]
    for name, v in tps.items():
        vs = None if name == "parallel scan" else name
        rows.append(
            Row(
                "parallel scan",
                "fwd_bwd_tokens_per_s"
                if vs is None
                else f"fwd_bwd_tokens_per_s_vs_{'hf' if 'transformers' in name else 'ref'}",
                tps["parallel scan"],
                "tokens/s",
                vs,
                tps["parallel scan"] / v if vs else None,
            )
        )
        table.append([name, v, tps["parallel scan"] / v])


def plot_names(stem: str) -> dict[str, str]:
    """The PNG file names of the run whose JSON is ``<stem>.json``, by plot."""
    return {
        "curves": f"{stem}_curves.png",
        "hybrid": f"{stem}_hybrid_curves.png",
        "scaling": f"{stem}_scaling.png",
    }


def save_plots(curves, scaling, out_dir, stem: str = BENCHMARK):
    """Validation curves (mean of seeds) and the scaling fit, as PNGs named by
    :func:`plot_names` of ``stem`` (the JSON's stem)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    fnames = plot_names(stem)
    paths = []
    for fname, names, title in (
        (
            fnames["curves"],
            [n for n in curves if not n.startswith("hybrid")],
            "Mamba stacks",
        ),
        (
            fnames["hybrid"],
            [n for n in curves if n.startswith("hybrid")],
            "hybrid (Mamba + attention) stacks",
        ),
    ):
        fig, ax = plt.subplots(figsize=(5.5, 3.5))
        for name in names:
            tok, bpb = curves[name]
            ax.plot(tok[1:], bpb[1:], marker="o", ms=3, label=name)
        ax.set_xlabel("training tokens")
        ax.set_ylabel("validation bits per byte (mean of seeds)")
        ax.set_title(title)
        ax.legend()
        fig.tight_layout()
        path = out_dir / fname
        fig.savefig(path, dpi=120)
        plt.close(fig)
        paths.append(path)
    fig, ax = plt.subplots(figsize=(5.5, 3.5))
    ns = sorted(scaling["dense"])
    for n in ns:
        v = scaling["dense"][n]
        ax.scatter([n] * len(v), v, color="C0", s=8, alpha=0.5)
    ax.plot(
        ns,
        [statistics.mean(scaling["dense"][n]) for n in ns],
        "o",
        color="C0",
        label="dense (seeds, mean)",
    )
    grid = [ns[0] * (ns[-1] / ns[0]) ** (i / 50) for i in range(51)]
    ax.plot(
        grid,
        [scaling["a"] + scaling["b"] * math.log(n) for n in grid],
        "-",
        color="C0",
        label="fit a + b ln N",
    )
    r = scaling["rom"]
    ax.scatter([scaling["rom_active"]] * len(r), r, color="C3", s=8, alpha=0.5)
    ax.plot([scaling["rom_active"]], [statistics.mean(r)], "s", color="C3", label="RoM")
    ax.set_xscale("log")
    ax.set_xlabel("active non-embedding parameters")
    ax.set_ylabel("final validation bits per byte")
    ax.legend()
    fig.tight_layout()
    path = out_dir / fnames["scaling"]
    fig.savefig(path, dpi=120)
    plt.close(fig)
    paths.append(path)
    return paths


def _converged(doc: dict, *cases) -> bool:
    """Every run of ``cases`` met the flatness criterion."""
    done = [r for r in doc["rows"] if r["case"] in cases and r["metric"] == "converged_runs"]
    runs = len(doc["machine"]["seeds"])
    return len(done) == len(cases) and all(r["value"] == runs for r in done)


RATIO_METRIC = "dense_equivalent_ratio"
#: The abstract's claims in its order: (claim, metric, ours, baseline). Every claim is a
#: paired seed comparison (lower bits per byte is better) except the one on
#: :data:`RATIO_METRIC`, decided by :func:`_ratio_verdict`.
CLAIMS = (
    ("RoM beats dense Mamba at equal active parameters", "val_bpb", "RoM", "dense 1x"),
    (
        f"RoM matches a dense Mamba with {CLAIMED_RATIO:g}x its active parameters",
        RATIO_METRIC,
        "RoM",
        "dense 1x-3x scaling fit",
    ),
    (
        "RoM's advantage over dense Mamba holds across context lengths (4x the training one)",
        "val_bpb_ctx4x",
        "RoM",
        "dense 1x",
    ),
    (
        "RoM beats dense in hybrid (attention + Mamba) models at equal active FLOPs",
        "val_bpb",
        "hybrid RoM",
        "hybrid dense",
    ),
)


def _ratio_verdict(doc: dict, claim: str, ours: str, baseline: str) -> dict:
    """The dense-equivalent ratio's verdict: its 95 % bootstrap interval decides."""

    def value(metric):
        found = [r["value"] for r in doc["rows"] if r["case"] == ours and r["metric"] == metric]
        return found[0] if found else None

    ratio = value(RATIO_METRIC)
    lo, hi = value(f"{RATIO_METRIC}_ci_low"), value(f"{RATIO_METRIC}_ci_high")
    conv = _converged(doc, ours, *(f"dense {r:g}x" for r in RATIOS))
    if ratio is None or lo is None or hi is None:
        verdict, why = (
            "not decided",
            "no dense-equivalent ratio with an interval (scaling fit failed or one seed)",
        )
    elif hi < CLAIMED_RATIO:
        verdict = "contradicted"
        why = (
            f"RoM equals a dense model of {ratio:.2f}x its active parameters "
            f"(95 % CI {lo:.2f}-{hi:.2f}), below {CLAIMED_RATIO:g}x"
        )
    elif lo > 1.0:
        verdict = "reproduced"
        why = (
            f"RoM equals a dense model of {ratio:.2f}x its active parameters "
            f"(95 % CI {lo:.2f}-{hi:.2f})"
        )
    else:
        verdict = "not decided"
        why = (
            f"the 95 % CI of the dense-equivalent ratio ({lo:.2f}-{hi:.2f}) "
            f"includes 1 and {CLAIMED_RATIO:g}"
        )
    return verdict_entry(
        claim,
        verdict=verdict,
        why=why + ("" if conv else "; not every run met the flatness criterion"),
        metric=RATIO_METRIC,
        ours=ratio if ratio is not None and math.isfinite(ratio) else 0.0,
        baseline=baseline,
        baseline_value=CLAIMED_RATIO,
        seeds=len(doc["machine"]["seeds"]),
        p_value=None,
        converged=conv,
        decisive=False,
    )


def verdicts(doc: dict) -> list[dict]:
    """One verdict per claim of the abstract (:data:`CLAIMS`), by a fixed rule on the rows.

    Paired comparisons: :func:`_common.seed_verdict`, a paired t-test (alpha 0.05) over
    the seeds' final validation bits per byte (lower is better; seed ``s`` of every model
    shares the batch order). "RoM matches a dense model with 2.3x its active parameters":
    the 95 % bootstrap interval of the dense-equivalent ratio (scaling fit) decides:
    its upper end below 2.3 contradicts the claim, its lower end above 1 with the upper end
    at or above 2.3 reproduces it, anything else is not decided (this verdict is never
    decisive: no p-value). ``converged``: every run of both sides met the flatness
    criterion.
    """
    out = []
    for claim, metric, ours, baseline in CLAIMS:
        if metric == RATIO_METRIC:
            out.append(_ratio_verdict(doc, claim, ours, baseline))
            continue
        out.append(
            seed_verdict(
                claim,
                doc,
                metric=metric,
                ours=ours,
                baseline=baseline,
                higher_is_better=False,
                converged=_converged(doc, ours, baseline),
            )
        )
    return out


def plots_only(json_path: Path, out_dir: Path) -> list[Path]:
    """Re-render the plots of a stored run from its JSON and ``.state.json``.

    The plan is the state's, the seeds are the JSON's ``machine.seeds`` (the complete
    seeds the JSON's rows were computed from). Nothing is trained and neither file is
    written. Raises ``ValueError`` when a file or one of those seeds' runs is missing.
    """
    json_path = Path(json_path)
    spath = state_path(json_path)
    for path in (json_path, spath):
        if not path.is_file():
            raise ValueError(f"--plots-only: no stored run file {path}")
    doc = json.loads(json_path.read_text())
    state = json.loads(spath.read_text())
    p, seeds = state["plan"], doc["machine"]["seeds"]
    runs = state.get("runs", {})
    missing = [f"{n} seed {s}" for s in seeds for n in models(p) if f"{n} seed {s}" not in runs]
    if missing:
        raise ValueError(f"--plots-only: {spath} lacks the runs {missing}")
    rows, tables, curves = [], {"lm": [], "ctx": [], "hyb": [], "fit": [], "scan": []}, {}
    scaling = aggregate(p, seeds, runs, rows, tables, curves)
    return save_plots(curves, scaling, out_dir, json_path.stem)


def main(argv: list[str] | None = None) -> None:
    parser = base_parser(__doc__.splitlines()[0], verdicts=verdicts)
    piece_arguments(parser, unit="training run")
    parser.add_argument("--plots", type=Path, default=None, metavar="DIR")
    parser.add_argument(
        "--write-configs",
        type=Path,
        default=None,
        metavar="DIR",
        help="write one sci-moe train lm configuration per model into DIR and stop",
    )
    parser.add_argument(
        "--steps",
        type=int,
        default=None,
        metavar="N",
        help="training steps of every run instead of the plan's (evaluated every N/10 steps); "
        "write to another --json: --resume refuses a state with another plan",
    )
    parser.add_argument(
        "--until-flat",
        action="store_true",
        help="train every run in cycles of --min-steps steps (a fresh cosine schedule each, "
        "from the previous cycle's best weights) until its validation curve is flat, at most "
        "--max-steps steps (module docstring); write to another --json",
    )
    parser.add_argument(
        "--min-steps",
        type=int,
        default=None,
        metavar="N",
        help=f"with --until-flat: the minimum and cycle steps (default {UNTIL_FLAT_MIN_STEPS}; "
        "--quick: the quick plan's)",
    )
    parser.add_argument(
        "--max-steps",
        type=int,
        default=None,
        metavar="M",
        help=f"with --until-flat: the cap, a multiple of --min-steps (default "
        f"{UNTIL_FLAT_CAP}x --min-steps)",
    )
    parser.add_argument(
        "--reuse-flat-from",
        type=Path,
        default=None,
        metavar="STATE",
        help="with --until-flat: take the runs of the fixed --steps MIN run stored in STATE "
        "(a .state.json of this plan) that are flat after its steps, as runs that stopped "
        "flat after cycle 0, once this machine reproduces STATE bit for bit (module "
        "docstring)",
    )
    parser.add_argument(
        "--plots-only",
        action="store_true",
        help="re-render the plots of the stored run of --json (with its .state.json) into "
        "--plots DIR; trains nothing and rewrites neither file",
    )
    args = parser.parse_args(argv)
    if verdicts_only(args) is not None:
        return
    if args.plots_only:
        if args.json is None or args.plots is None:
            parser.error("--plots-only needs --json PATH (a stored run) and --plots DIR")
        try:
            paths = plots_only(args.json, args.plots)
        except ValueError as err:
            parser.error(str(err))
        for path in paths:
            print(f"saved {path}")
        return
    if args.steps is not None and args.steps < 10:
        parser.error(f"--steps must be an integer >= 10, got {args.steps}")
    if args.until_flat:
        if args.steps is not None:
            parser.error("--until-flat takes --min-steps (the cycle) instead of --steps")
        if args.min_steps is not None and args.min_steps < 10:
            parser.error(f"--min-steps must be an integer >= 10, got {args.min_steps}")
        steps = args.min_steps
        if steps is None and not args.quick:
            steps = UNTIL_FLAT_MIN_STEPS
        cycle = plan(args.quick, steps)["steps"]
        try:
            p = plan(args.quick, steps, args.max_steps or UNTIL_FLAT_CAP * cycle)
        except ValueError as err:
            parser.error(str(err))
    elif args.min_steps is not None or args.max_steps is not None:
        parser.error("--min-steps and --max-steps need --until-flat")
    elif args.reuse_flat_from is not None:
        parser.error("--reuse-flat-from needs --until-flat")
    else:
        p = plan(args.quick, args.steps)
    if args.write_configs is not None:
        for path in write_configs(p, args.write_configs):
            print(f"wrote {path}")
        return
    if args.threads is None:
        args.threads = 1
    setup(args)
    deadline = piece_deadline(args)
    state = resume_state(args)
    seeds = list(range(args.seed, args.seed + p["seeds"]))
    if state:
        try:
            check_resume_settings(state.get("plan"), p, state_path(args.json), what="plan")
        except ValueError as err:
            refuse(str(err))
    state["plan"] = p

    def save():
        if args.json is not None:
            write_json_doc(state_path(args.json), state)

    other = OtherLoad()
    corpus = load_corpus()
    if args.reuse_flat_from is not None:
        reuse_into(state, p, args.reuse_flat_from, seeds, corpus)
    rows, tables, curves = [], {"lm": [], "ctx": [], "hyb": [], "fit": [], "scan": []}, {}
    exp_scan(p, rows, tables["scan"], state)
    save()
    done = run_all(p, seeds, corpus, state, deadline, save)
    state["wall_s"] = state.get("wall_s", 0.0) + other.report()["wall_s"]
    save()
    complete = len(done) == len(seeds)
    if not done:
        print("no seed complete yet: continue with --resume", file=sys.stderr)
        return
    scaling = aggregate(p, done, state["runs"], rows, tables, curves)
    tokens = p["steps"] * p["batch"] * p["seq"]
    title = f"{p['steps']} steps = {tokens} tokens"
    if p.get("until_flat"):
        title = (
            f"until flat: cycles of {p['steps']} steps, cap {p['max_steps']} steps "
            f"= {p['max_steps'] * p['batch'] * p['seq']} tokens"
        )
    heads = [
        "model",
        "active",
        "total",
        "val bpb",
        "sd",
        "converged",
        "FLOP/token",
        "tokens to base",
    ]
    print_table(heads, tables["lm"], f"(a) {title}, seeds {done}")
    print_table(
        ["dense active", "x RoM active", "val bpb", "fit"],
        tables["fit"],
        f"(b) fit a={scaling['a']:.3f} b={scaling['b']:.4f}; RoM = dense of "
        f"{scaling['ratio']:.2f}x (95 % CI {scaling['ci'][0]:.2f}-{scaling['ci'][1]:.2f})",
    )
    print_table(["model", "eval context", "val bpb"], tables["ctx"], f"(c) trained at {p['seq']}")
    print_table(heads, tables["hyb"], "(d) hybrid")
    print_table(["scan", "fwd+bwd tokens/s", "parallel / this"], tables["scan"], f"(e) {p['scan']}")
    if args.plots is not None:
        stem = BENCHMARK if args.json is None else Path(args.json).stem
        for path in save_plots(curves, scaling, args.plots, stem):
            print(f"saved {path}")
    machine = machine_info(
        seed=args.seed,
        quick=args.quick,
        seeds=done,
        planned_seeds=seeds,
        complete=complete,
        plan=p,
        flat_criterion=f"sci_moe.train.is_flat: best validation loss of the last "
        f"{FLAT_TAIL:.0%} of the tokens < {FLAT:.0%} below the best before them",
        **(
            {
                "until_flat": f"cycles of {p['steps']} steps (a fresh warmup + cosine schedule "
                "each, from the previous cycle's best weights, batch seed s + "
                f"{CYCLE_SEED} c) until "
                f"the joined curve is flat, cap {p['max_steps']} steps"
            }
            if p.get("until_flat")
            else {}
        ),
        **({"reuse_flat_from": reuse_info(state)} if "reused" in state else {}),
        configs={n: {**train_keys(p), **k} for n, k in models(p).items()},
        contention=other.report(),
        training_wall_s=state["wall_s"],
        command=" ".join(["python", *sys.argv]),
    )
    if not complete:
        print(f"partial: seeds {done} of {seeds}; continue with --resume", file=sys.stderr)
    if args.json is not None:
        doc = {"machine": machine, "rows": [vars(r) for r in rows]}
        write_json(args.json, BENCHMARK, machine, rows, verdicts=verdicts(doc))
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
