"""Routing Mamba vs dense Mamba on offline byte-level text; scan throughput.

Zhan et al., NeurIPS 2025 (arXiv 2506.18145). Byte-level LMs on the text shipped in
gensim's wheel (``sci_moe.language.load_corpus``), trained by ``sci_moe.language.train``:

* (a) dense Mamba vs RoM (shared routing, top-1 of E) at equal **active** parameters,
  a dense Mamba at (about) equal **total** parameters (wider ``expand``), and RoM with
  independent routers per projection; >= 3 seeds; validation bits per byte vs tokens,
  tokens to reach the dense model's final loss, training tokens/s;
* (b) loss across context lengths: trained at L, evaluated at L, 2L, 4L (no position
  table: Mamba needs none);
* (c) hybrid (Mamba + attention, FFN per block) dense vs RoM, with active FLOPs/token;
* (d) selective-scan throughput (fwd + bwd, tokens/s) of the parallel scan vs the
  step-by-step reference and vs transformers' ``MambaMixer`` slow path.

Per-seed rows (metric ``val_bpb seed <s>``) carry the final validation loss of each
seed; :func:`verdicts` compares them with a paired test. ``--verdicts-only PATH``
recomputes a stored JSON's verdicts from its rows (no training).
"""

from __future__ import annotations

import math
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
    machine_info,
    print_table,
    seed_verdict,
    setup,
    time_fn,
    verdicts_only,
    write_json,
)

from sci_moe.language import (
    MoELMConfig,
    MoETransformerLM,
    TrainConfig,
    evaluate,
    load_corpus,
    train,
    validation_windows,
)
from sci_moe.language.mamba import MambaBlock, RoMBlock

BENCHMARK = "routing_mamba"
LN2 = math.log(2.0)


def plan(quick: bool) -> dict:
    if quick:
        return dict(
            d=32,
            steps=40,
            batch=8,
            seq=64,
            seeds=3,
            E=4,
            eval_every=10,
            hyb_steps=24,
            scan=(8, 128, 64),
        )
    return dict(
        d=32,
        steps=120,
        batch=16,
        seq=64,
        seeds=3,
        E=4,
        eval_every=10,
        hyb_steps=40,
        scan=(8, 128, 64),
    )


def lm_config(p, layers, mamba, ffn=False, positions=False):
    return MoELMConfig(
        d_model=p["d"],
        n_layers=len(layers),
        n_heads=4,
        seq_len=p["seq"],
        d_hidden=2 * p["d"],
        num_experts=1,
        top_k=1,
        layers=layers,
        positions=positions,
        mamba={"d_state": 16, "ffn": ffn, **mamba},
    )


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


def mean_curve(runs):
    """Training tokens and the seed-mean validation loss (nats) at each evaluation."""
    tok = runs[0]["hist"]["tokens"]
    return tok, [statistics.mean(r["hist"]["val_loss"][i] for r in runs) for i in range(len(tok))]


class RunStore:
    """Training runs by key, optionally cached as JSON files and split into shards.

    With ``cache`` every finished run is written to ``cache/<key>.json`` and later
    lookups read it back; with ``shard=(i, n)`` only the runs whose position in the
    fixed job order is ``i`` mod ``n`` are computed (the others return ``None``), so
    ``n`` processes can train in parallel and a final process without ``--shard``
    aggregates from the cache; ``jobs`` (a regular expression) likewise computes only
    the runs whose key (``"lm RoM shared seed 0"``, ``"hybrid ... seed 0"``) matches.
    """

    def __init__(self, cache=None, shard=None, jobs=None, train=True):
        self.cache, self.shard, self.jobs, self.position = cache, shard, jobs, 0
        self.train = train

    def get(self, key, compute):
        import json
        import re

        from _common import write_json_doc

        position, self.position = self.position, self.position + 1
        path = None
        if self.cache is not None:
            path = self.cache / (re.sub(r"[^A-Za-z0-9]+", "_", key) + ".json")
            if path.is_file():
                return json.loads(path.read_text())
        if self.shard is not None and position % self.shard[1] != self.shard[0]:
            return None
        if self.jobs is not None and not re.search(self.jobs, key):
            return None
        if not self.train:
            return None
        result = compute()
        if path is not None:
            write_json_doc(path, result)
        return result


STORE = RunStore()


def run_lm(p, cfg, seed, corpus, steps):
    tc = TrainConfig(
        steps=steps,
        batch_size=p["batch"],
        lr=3e-3,
        warmup=min(20, steps // 4) / steps,
        eval_every=p["eval_every"],
        eval_batches=4,
        seed=seed,
        progress=True,
    )
    t0 = time.perf_counter()
    hist, model = train(cfg, tc, corpus=corpus, return_model=True)
    wall = time.perf_counter() - t0
    tps = steps * p["batch"] * p["seq"] / sum(hist["step_time"])
    return hist, model, tps, wall


def exp_lm(p, seeds, corpus, rows, table, curves, ctx_rows):
    E = p["E"]
    variants = {
        "dense (equal active)": ("mm", {"expand": 2}),
        "RoM shared": ("rr", {"expand": 2, "num_experts": E, "top_k": 1}),
        "RoM independent": (
            "rr",
            {"expand": 2, "num_experts": E, "top_k": 1, "routing": "independent"},
        ),
    }
    rom_total = active_params(MoETransformerLM(lm_config(p, *variants["RoM shared"])))[1]
    best = min(
        range(2, 4 * E + 1),
        key=lambda e: abs(
            active_params(MoETransformerLM(lm_config(p, "mm", {"expand": e})))[1] - rom_total
        ),
    )
    variants["dense (equal total)"] = ("mm", {"expand": best})
    res = {}
    for name, (layers, mamba) in variants.items():
        cfg = lm_config(p, layers, mamba)
        res[name] = []
        for s in seeds:

            def job(cfg=cfg, s=s, name=name):
                hist, model, tps, _ = run_lm(p, cfg, s, corpus, p["steps"])
                ctx = {}
                for mult in (1, 2, 4):
                    L = p["seq"] * mult
                    vx, vy = validation_windows(corpus.val, L, max(4, 32 // mult))
                    ctx[str(mult)] = evaluate(model, vx, vy, 8)["loss"] / LN2
                print(
                    f"  {name} seed {s}: bpb {hist['val_loss'][-1] / LN2:.3f}, {tps:.0f} tok/s",
                    file=sys.stderr,
                )
                h = {"tokens": hist["tokens"], "val_loss": hist["val_loss"]}
                return dict(hist=h, tps=tps, ctx=ctx, params=list(active_params(model)))

            res[name].append(STORE.get(f"lm {name} seed {s}", job))
        if any(r is None for r in res[name]):
            continue
        tok, loss = mean_curve(res[name])
        curves[name] = (tok, [v / LN2 for v in loss])
    if STORE.shard is not None:
        return  # a shard: the other runs are another process's
    for name in [n for n, rs in res.items() if any(r is None for r in rs)]:
        print(f"  {name}: runs missing from the cache, left out", file=sys.stderr)
        del res[name]
    if "dense (equal active)" not in res:
        return
    base = res["dense (equal active)"]
    target = statistics.mean(r["hist"]["val_loss"][-1] for r in base)
    base_reach = tokens_to(*mean_curve(base), target)
    base_bpb = target / LN2
    base_tps = statistics.mean(r["tps"] for r in base)
    for name, rs in res.items():
        bpb = [r["hist"]["val_loss"][-1] / LN2 for r in rs]
        m, sd = statistics.mean(bpb), statistics.stdev(bpb)
        tps = statistics.mean(r["tps"] for r in rs)
        reach = [tokens_to(r["hist"]["tokens"], r["hist"]["val_loss"], target) for r in rs]
        reached = [t for t in reach if t is not None]
        mean_reach = tokens_to(*mean_curve(rs), target)
        act, tot = rs[0]["params"]
        vs = None if name.startswith("dense (equal active)") else "dense (equal active)"
        rows.append(Row(name, "val_bpb", m, "bits/byte", vs, base_bpb / m if vs else None))
        rows.append(Row(name, "val_bpb_sd", sd, "bits/byte"))
        rows += [
            Row(name, f"val_bpb seed {s}", v, "bits/byte") for s, v in zip(seeds, bpb, strict=True)
        ]
        rows.append(
            Row(name, "train_tokens_per_s", tps, "tokens/s", vs, tps / base_tps if vs else None)
        )
        rows.append(Row(name, "active_params", act, "params"))
        rows.append(Row(name, "total_params", tot, "params"))
        rows.append(Row(name, "seeds_reaching_dense_final", len(reached), "seeds"))
        if mean_reach is not None:
            ratio = base_reach / mean_reach if vs else None
            rows.append(Row(name, "tokens_to_dense_final", mean_reach, "tokens", vs, ratio))
        for mult in (1, 2, 4):
            v = statistics.mean(r["ctx"][str(mult)] for r in rs)
            b = statistics.mean(r["ctx"][str(mult)] for r in base)
            rows.append(Row(name, f"val_bpb_ctx{mult}x", v, "bits/byte", vs, b / v if vs else None))
            ctx_rows.append([name, f"{mult}x", v])
        table.append(
            [
                name,
                act,
                tot,
                m,
                sd,
                tps,
                f"{len(reached)}/{len(rs)}",
                mean_reach,
            ]
        )


def exp_hybrid(p, seeds, corpus, rows, table, curves):
    """Hybrid stacks; training FLOPs to reach the dense hybrid's final loss.

    Training FLOPs = 3 x forward FLOPs/token (forward + backward) x tokens, at the
    seed-mean curve's (interpolated) crossing of the dense hybrid's final mean loss.
    """
    E = p["E"]
    cases = {
        "hybrid dense (ma)": ("ma", {"expand": 2}),
        "hybrid RoM (ra)": ("ra", {"expand": 2, "num_experts": E, "top_k": 1}),
    }
    out = {}
    for name, (layers, mamba) in cases.items():
        cfg = lm_config(p, layers, mamba, ffn=True, positions=True)
        runs = []
        for s in seeds:

            def job(cfg=cfg, s=s):
                hist, _, _, _ = run_lm(p, cfg, s, corpus, p["hyb_steps"])
                return dict(hist={"tokens": hist["tokens"], "val_loss": hist["val_loss"]})

            runs.append(STORE.get(f"hybrid {name} seed {s}", job))
        if any(r is None for r in runs):
            continue
        model = MoETransformerLM(cfg)  # for the parameter and FLOP counts
        bpb = [r["hist"]["val_loss"][-1] / LN2 for r in runs]
        rows += [
            Row(name, f"val_bpb seed {s}", v, "bits/byte") for s, v in zip(seeds, bpb, strict=True)
        ]
        tok, loss = mean_curve(runs)
        curves[name] = (tok, [v / LN2 for v in loss])
        out[name] = dict(
            bpb=statistics.mean(bpb),
            sd=statistics.stdev(bpb),
            flops=flops_per_token(model, p["seq"]),
            params=active_params(model),
            curve=(tok, loss),
            final=statistics.mean(r["hist"]["val_loss"][-1] for r in runs),
        )
    if STORE.shard is not None or "hybrid dense (ma)" not in out:
        return  # a shard, or the baseline's runs are missing
    base = out["hybrid dense (ma)"]
    for name, o in out.items():
        vs = None if name == "hybrid dense (ma)" else "hybrid dense (ma)"
        reach = tokens_to(*o["curve"], base["final"])
        b_reach = tokens_to(*base["curve"], base["final"])
        fl = o["flops"]
        rows.append(
            Row(name, "val_bpb", o["bpb"], "bits/byte", vs, base["bpb"] / o["bpb"] if vs else None)
        )
        rows.append(Row(name, "val_bpb_sd", o["sd"], "bits/byte"))
        rows.append(
            Row(name, "active_flops_per_token", fl, "FLOP", vs, base["flops"] / fl if vs else None)
        )
        rows.append(Row(name, "active_params", o["params"][0], "params"))
        rows.append(Row(name, "total_params", o["params"][1], "params"))
        train_fl = None
        if reach is not None:
            rows.append(
                Row(
                    name,
                    "tokens_to_dense_final",
                    reach,
                    "tokens",
                    vs,
                    b_reach / reach if vs else None,
                )
            )
            train_fl = 3 * fl * reach
            b_fl = 3 * base["flops"] * b_reach
            rows.append(
                Row(
                    name,
                    "train_flops_to_dense_final",
                    train_fl,
                    "FLOP",
                    vs,
                    b_fl / train_fl if vs else None,
                )
            )
        table.append([name, o["bpb"], o["sd"], fl, *o["params"], reach, train_fl])


def exp_scan(p, rows, table):
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

    tps = STORE.get("scan", job)
    if tps is None:
        return
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


def save_plots(curves, hyb_curves, out_dir):
    """Validation curves (mean of seeds) of (a) and of the hybrids (c), as PNGs."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for fname, cs, title in (
        ("routing_mamba_curves.png", curves, "Mamba stacks"),
        ("routing_mamba_hybrid_curves.png", hyb_curves, "hybrid (Mamba + attention) stacks"),
    ):
        fig, ax = plt.subplots(figsize=(5.5, 3.5))
        for name, (tok, bpb) in cs.items():
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
    return paths


#: The paper's claims that this run can test: (claim, ours, the same-run baseline).
CLAIMS = (
    ("RoM beats dense Mamba at equal active parameters", "RoM shared", "dense (equal active)"),
    (
        "RoM matches a dense Mamba with about three times its active parameters",
        "RoM shared",
        "dense (equal total)",
    ),
    ("one shared router beats independent routers", "RoM shared", "RoM independent"),
    (
        "RoM saves training compute in hybrid (attention + Mamba) models",
        "hybrid RoM (ra)",
        "hybrid dense (ma)",
    ),
)


def verdicts(doc: dict) -> list[dict]:
    """One verdict per claim of :data:`CLAIMS`, by a rule applied to the run's rows (issue 41).

    The rule: :func:`_common.seed_verdict`, a paired t-test (alpha 0.05) over the seeds'
    final validation bits per byte (lower is better; seed ``s`` of both models shares the
    batch order); for a JSON without per-seed rows (runs before they were written), Welch's
    t-test from the stored means and standard deviations (``val_bpb_sd``, sample sd).
    "Matches" is tested as "beats": a resolved loss is a contradiction, an unresolved
    difference is not decided. The hybrid claim compares the loss at the same steps and
    (nearly) the same active FLOPs per token. The runs have a fixed step budget, so nothing
    is converged or decisive.
    """
    out = []
    for claim, ours, base in CLAIMS:
        out.append(
            seed_verdict(
                claim,
                doc,
                metric="val_bpb",
                ours=ours,
                baseline=base,
                higher_is_better=False,
                converged=False,
                sd_metric="val_bpb_sd",
                ddof=1,
            )
        )
    return out


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0], verdicts=verdicts)
    parser.add_argument("--plots", type=Path, default=None, metavar="DIR")
    parser.add_argument(
        "--cache", type=Path, default=None, metavar="DIR", help="keep each training run here"
    )
    parser.add_argument(
        "--shard",
        default=None,
        metavar="I/N",
        help="train only shard I of N of the runs into --cache, then stop (run N of "
        "these in parallel, then once without --shard to aggregate)",
    )
    parser.add_argument(
        "--jobs",
        default=None,
        metavar="REGEX",
        help="like --shard: train only the runs whose key matches REGEX into --cache",
    )
    parser.add_argument(
        "--cached-only",
        action="store_true",
        help="aggregate the runs in --cache without training missing ones (they are left out)",
    )
    args = parser.parse_args()
    if verdicts_only(args) is not None:
        return
    global STORE
    shard = None
    if args.shard is not None:
        i, n = (int(v) for v in args.shard.split("/"))
        if args.cache is None or not 0 <= i < n:
            parser.error("--shard I/N needs --cache and 0 <= I < N")
        shard = (i, n)
    if args.jobs is not None:
        if args.cache is None:
            parser.error("--jobs needs --cache")
        shard = shard or (0, 1)
    STORE = RunStore(args.cache, shard, args.jobs, train=not args.cached_only)
    if args.threads is None:
        args.threads = 1
    setup(args)
    p = plan(args.quick)
    seeds = list(range(args.seed, args.seed + p["seeds"]))
    other = OtherLoad()
    corpus = load_corpus()
    rows, t_lm, t_ctx, t_hyb, t_scan, curves, hyb_curves = [], [], [], [], [], {}, {}
    exp_scan(p, rows, t_scan)
    exp_lm(p, seeds, corpus, rows, t_lm, curves, t_ctx)
    exp_hybrid(p, seeds, corpus, rows, t_hyb, hyb_curves)
    if shard is not None:
        print(f"shard {args.shard} {args.jobs} done, wall time {other.report()['wall_s']} s")
        return
    tokens = p["steps"] * p["batch"] * p["seq"]
    print_table(
        ["model", "active", "total", "val bpb", "sd", "tok/s", "reach dense", "tokens to dense"],
        t_lm,
        f"(a) {p['steps']} steps = {tokens} tokens, seeds {seeds}",
    )
    print_table(
        ["model", "eval context", "val bpb"],
        t_ctx,
        f"(b) trained at {p['seq']}, evaluated at 1x/2x/4x",
    )
    print_table(
        [
            "model",
            "val bpb",
            "sd",
            "FLOP/token",
            "active",
            "total",
            "tokens to dense",
            "train FLOP",
        ],
        t_hyb,
        f"(c) hybrid, {p['hyb_steps']} steps",
    )
    print_table(
        ["scan", "fwd+bwd tokens/s", "parallel / this"],
        t_scan,
        f"(d) one block, batch x length x d_model = {p['scan']}",
    )
    if args.plots is not None:
        for path in save_plots(curves, hyb_curves, args.plots):
            print(f"saved {path}")
    machine = machine_info(
        seed=args.seed,
        quick=args.quick,
        seeds=seeds,
        plan=p,
        contention=other.report(),
        command=" ".join(["python", *sys.argv]),
        training_runs_cache=None if args.cache is None else str(args.cache),
    )
    print(f"wall time {machine['contention']['wall_s']} s")
    if args.json is not None:
        doc = {"machine": machine, "rows": [vars(r) for r in rows]}
        write_json(args.json, BENCHMARK, machine, rows, verdicts=verdicts(doc))
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
