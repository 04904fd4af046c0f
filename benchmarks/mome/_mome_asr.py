"""The audio-only part of ``run.py``: MoME vs per-rate and single models over rates and SNRs.

:func:`settings` sizes the run, :func:`run` trains every method of :data:`METHODS` per seed
(:func:`build_model`) and evaluates it at every compression rate of :data:`RATES` and
noise level of :data:`SNRS`; :func:`report` prints the tables and appends the rows,
:func:`plot` draws the figures. A helper module: ``run.py`` imports it.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import torch
from _common import (
    Row,
    print_table,
)
from _mome import snr_name

from sci_moe.speech.mome import (
    MatryoshkaRates,
    MoMEConfig,
    RecognizerConfig,
    SpeechRecognizer,
    SpeechSetConfig,
    TrainConfig,
    build_speech_set,
    evaluate,
    load_minilm,
    matched_bottleneck,
    routing_consistency,
    train_recognizer,
)

__all__ = [
    "METHODS",
    "RATES",
    "SNRS",
    "build_model",
    "plot",
    "report",
    "run",
    "settings",
]


RATES = (4, 8, 16)
SNRS = (None, 10.0, 5.0, 0.0)
METHODS = ("mome", "per_rate", "single")


def settings(
    quick: bool, layers: int | None, steps: int | None = None, batch: int | None = None
) -> dict:
    return dict(
        num_phrases=40 if quick else 150,
        layers=layers if layers is not None else (1 if quick else 2),
        steps=steps if steps is not None else (30 if quick else 100),
        batch_size=batch if batch is not None else (8 if quick else 6),
        lr=3e-3,
        num_experts=8,
        top_k=2,
        num_shared=1,
        bottleneck=8,
        upsample=8,
        encoder_dim=0,
        train_snr=(None, 10.0, 5.0),
    )


def build_model(method: str, s: dict, backbone, seed: int) -> SpeechRecognizer:
    mc = MoMEConfig(
        d_model=384,
        num_experts=s["num_experts"],
        top_k=s["top_k"],
        num_shared=s["num_shared"],
        bottleneck=s["bottleneck"],
    )
    n = len(RATES) if method == "per_rate" else 1
    cfg = RecognizerConfig(
        compression=MatryoshkaRates({"audio": RATES}),
        adapter=method,
        mome=mc,
        bottleneck=matched_bottleneck(mc, n),
        upsample=s["upsample"],
        encoder_dim=s["encoder_dim"],
    )
    torch.manual_seed(seed)
    return SpeechRecognizer(backbone, cfg)


def run(quick: bool, seed0: int, layers, cache: Path, steps, batch, device: str = "cpu") -> dict:
    """The ASR part: every method and seed trained and scored on ``device`` (the
    recogniser's ``TrainConfig.device``; the speech batches are built on the CPU)."""
    s = settings(quick, layers, steps, batch)
    data = build_speech_set(
        SpeechSetConfig(num_phrases=s["num_phrases"], variants=2, seed=0), cache, progress=True
    )
    results = {"settings": s, "n_utts": {k: len(v) for k, v in data.splits.items()}}
    runs = []
    for seed in range(seed0, seed0 + 3):
        for method in METHODS:
            backbone = load_minilm(s["layers"])
            model = build_model(method, s, backbone, seed)
            train_rates = {"audio": (RATES[0],)} if method == "single" else None
            tcfg = TrainConfig(
                steps=s["steps"],
                batch_size=s["batch_size"],
                lr=s["lr"],
                train_rates=train_rates,
                snr_db=s["train_snr"],
                seed=seed,
                device=device,
            )
            t0 = time.perf_counter()
            hist = train_recognizer(model, data, tcfg, progress=True).history
            train_s = time.perf_counter() - t0
            rec = {
                "seed": seed,
                "method": method,
                "train_s": train_s,
                "final_ctc": float(np.mean([h["ctc"] for h in hist[-10:]])),
                "params": model.parameter_counts(),
                "eval": {},
            }
            for r in RATES:
                for snr in SNRS:
                    ev = evaluate(model, data, {"audio": r}, "test", snr_db=snr, seed=0)
                    rec["eval"][(r, snr_name(snr))] = (ev["cer"], ev["wer"])
            if method == "mome":
                rc = routing_consistency(model, data, [{"audio": r} for r in RATES], "test")
                rec["routing"] = rc
            print(
                f"seed {seed} {method:9s} train {train_s:5.0f} s, ctc {rec['final_ctc']:.3f}, "
                + ", ".join(f"r{r} CER {rec['eval'][(r, 'clean')][0]:.3f}" for r in RATES),
                flush=True,
            )
            runs.append(rec)
    results["runs"] = runs
    return results


def _jsonable(rec: dict) -> dict:
    out = dict(rec)
    out["eval"] = {f"{r}/{snr}": v for (r, snr), v in rec["eval"].items()}
    return out


def _stat(runs, method, key, which):
    vals = [r["eval"][key][which] for r in runs if r["method"] == method]
    return float(np.mean(vals)), float(np.std(vals))


def report(res: dict, rows: list[Row]) -> None:
    runs = res["runs"]
    table = []
    for r in RATES:
        for snr in SNRS:
            key = (r, snr_name(snr))
            for metric, which in (("cer", 0), ("wer", 1)):
                means = {m: _stat(runs, m, key, which) for m in METHODS}
                for m in METHODS:
                    case = f"asr/{m}/audio={r}/{key[1]}"
                    mean, sd = means[m]
                    if m == "mome":
                        for base in ("per_rate", "single"):
                            b = means[base][0]
                            rows.append(
                                Row(case, metric, round(mean, 4), "fraction",
                                    f"asr/{base}/audio={r}/{key[1]}",
                                    round(b / mean, 3) if mean > 0 else None)
                            )  # fmt: skip
                    else:
                        rows.append(Row(case, metric, round(mean, 4), "fraction"))
                    rows.append(Row(case, f"{metric}_std", round(sd, 4), "fraction"))
            table.append(
                [f"{r}", key[1]]
                + [
                    f"{_stat(runs, m, key, 0)[0]:.3f}±{_stat(runs, m, key, 0)[1]:.3f}"
                    for m in METHODS
                ]
            )
    print_table(["rate", "SNR", *(f"CER {m}" for m in METHODS)], table, "ASR character error rate")
    # parameters
    for m in METHODS:
        p = next(r["params"] for r in runs if r["method"] == m)
        rows.append(Row(f"params/{m}", "trainable", p["trainable"], "parameters"))
        rows.append(Row(f"params/{m}", "adapter", p["adapter"], "parameters"))
        rows.append(Row(f"params/{m}", "adapter_active", p["adapter_active"], "parameters"))
        t = float(np.mean([r["train_s"] for r in runs if r["method"] == m]))
        rows.append(Row(f"time/{m}", "train_s", round(t, 1), "s"))
    # routing consistency
    mome = [r for r in runs if r["method"] == "mome"]
    js = [r["routing"]["js"] for r in mome]
    ctl = [r["routing"]["js_shuffled"] for r in mome]
    rows.append(
        Row("routing/mome", "js_across_rates", round(float(np.mean(js)), 4), "nats",
            "routing/shuffled", round(float(np.mean(ctl)) / max(float(np.mean(js)), 1e-12), 3))
    )  # fmt: skip
    rows.append(Row("routing/mome", "js_across_rates_std", round(float(np.std(js)), 4), "nats"))
    rows.append(Row("routing/shuffled", "js_across_rates", round(float(np.mean(ctl)), 4), "nats"))
    n_layers = len(mome[0]["routing"]["js_per_layer"])
    for layer in range(n_layers):
        lj = float(np.mean([r["routing"]["js_per_layer"][layer] for r in mome]))
        lc = float(np.mean([r["routing"]["js_shuffled_per_layer"][layer] for r in mome]))
        ratio = round(lc / max(lj, 1e-12), 3)
        ctl_case = f"routing/shuffled/layer{layer}"
        rows.append(
            Row(
                f"routing/mome/layer{layer}",
                "js_across_rates",
                round(lj, 4),
                "nats",
                ctl_case,
                ratio,
            )
        )
        rows.append(Row(f"routing/shuffled/layer{layer}", "js_across_rates", round(lc, 4), "nats"))
    print(f"routing JS across rates: MoME {np.mean(js):.4f} vs shuffled {np.mean(ctl):.4f} nats")


def plot(res: dict, folder: Path, suffix: str) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = res["runs"]
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for m in METHODS:
        for ax, which, name in ((axes[0], 0, "CER"), (axes[1], 1, "WER")):
            st = [_stat(runs, m, (r, "clean"), which) for r in RATES]
            ax.errorbar(RATES, [a for a, _ in st], yerr=[b for _, b in st], marker="o", label=m,
                        capsize=3)  # fmt: skip
            ax.set(xscale="log", xticks=RATES, xticklabels=[str(r) for r in RATES],
                   xlabel="audio compression rate", ylabel=f"{name} (clean test)")  # fmt: skip
    axes[0].legend()
    fig.suptitle("synthetic espeak-ng speech, frozen MiniLM, mean ± sd over 3 seeds")
    fig.tight_layout()
    out.append(folder / f"mome_rates{suffix}.png")
    fig.savefig(out[-1], dpi=110)
    plt.close(fig)
    fig, axes = plt.subplots(1, len(RATES), figsize=(12, 3.6), sharey=True)
    xs = [30 if s is None else s for s in SNRS]
    for ax, r in zip(axes, RATES, strict=True):
        for m in METHODS:
            st = [_stat(runs, m, (r, snr_name(s)), 0) for s in SNRS]
            ax.errorbar(xs, [a for a, _ in st], yerr=[b for _, b in st], marker="o", label=m,
                        capsize=3)  # fmt: skip
        ax.set(title=f"audio rate {r}", xlabel="test SNR (dB; 30 = clean)")
    axes[0].set_ylabel("CER")
    axes[0].legend()
    fig.tight_layout()
    out.append(folder / f"mome_snr{suffix}.png")
    fig.savefig(out[-1], dpi=110)
    plt.close(fig)
    mome = [r for r in runs if r["method"] == "mome"]
    n_layers = len(mome[0]["routing"]["js_per_layer"])
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    layers = np.arange(n_layers)
    js = np.array([r["routing"]["js_per_layer"] for r in mome])
    ctl = np.array([r["routing"]["js_shuffled_per_layer"] for r in mome])
    axes[0].bar(layers - 0.2, js.mean(0), 0.4, yerr=js.std(0), label="MoME router")
    axes[0].bar(layers + 0.2, ctl.mean(0), 0.4, yerr=ctl.std(0), label="shuffled control")
    axes[0].set(xlabel="layer", ylabel="mean JS across rates (nats)", xticks=layers)
    axes[0].legend()
    usage = mome[0]["routing"]["usage"][-1]
    E = len(next(iter(usage.values())))
    for i, (lab, u) in enumerate(usage.items()):
        axes[1].bar(np.arange(E) + (i - 1) * 0.27, u, 0.27, label=lab)
    axes[1].set(xlabel="expert", ylabel="usage (last layer, seed 0)", xticks=range(E))
    axes[1].legend(fontsize=8)
    fig.tight_layout()
    out.append(folder / f"mome_routing{suffix}.png")
    fig.savefig(out[-1], dpi=110)
    plt.close(fig)
    return out
