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

Cost, from ``routing_mamba_long.state.json`` (the ``--steps 2400`` run = cycle 0 of every
run here; one thread, beside other jobs): 12,441 s for the 35 runs' first 2,400 steps
(per run 127-624 s by model, medians: hybrids ~130 s, RoM 281 s, dense 1x/1.5x/2.3x/3x
218/316/624/619 s; a run's time varied ~2x across seeds with the load); 18 of the 35
were flat there and stop after cycle 0 (if it reproduces them: same seeds, one thread),
the 17 others cost 5,150 s per further cycle. So the run costs at least 12,441 + 5,150 = 17,600 s
(~4.9 h, if every unflat run is flat after cycle 1) and at most 12,441 + 3 x 5,150 =
27,900 s (~7.7 h, every one of the 17 to the cap), against ~13.8 h if all 35 ran to the
cap. The command (the first piece without ``--resume``, then the same with it until the
output says the run is complete)::

    nice -n 10 env OMP_NUM_THREADS=1 python benchmarks/routing_mamba/run.py --threads 1 \\
        --until-flat --min-steps 2400 --max-steps 9600 \\
        --json benchmarks/routing_mamba/results/routing_mamba_flat.json --max-hours 1 --resume
"""

from __future__ import annotations

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


def train_cycle(p, keys, seed, corpus, init=None):
    """One training run of ``p["steps"]`` steps (one cycle); ``init``: a model file to
    start from (:func:`sci_moe.language.save_model`), else a fresh initialisation.

    Returns the history of :func:`sci_moe.language.train` and the model (its best
    validation weights)."""
    cfg = lm_config(p, {**keys, "seed": seed, "progress": False})
    return train(cfg.model_config(), cfg, corpus=corpus, return_model=True, init_from=init)


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
