"""MoME on synthetic espeak-ng speech: CER/WER per compression rate vs per-rate and single adapters.

Task (synthetic speech, not LRS2/LRS3): phrases of 2-4 words cut from the offline corpus
of ``sci_moe.language.load_corpus``, spoken by espeak-ng with 4 voices, 3 speaking rates
and 3 pitches (2 variants per phrase; 40 phrases quick, 150 full), split by phrase
(seeded). Features: 40 log-mel bins at 100 frames/s, per-utterance normalised; white
noise at a chosen SNR. Model: a trainable linear projector into the **frozen**
all-MiniLM-L6-v2 (its first ``--layers`` transformer layers: 1 quick, 2 full; the
average-pooled log-mel frames go straight into the projector, no audio encoder),
adapters beside every attention block, a CTC character head with 8 outputs per token;
greedy decoding.

ASR at audio rates 4, 8, 16 (average pooling; 25, 12.5, 6.25 tokens/s). Methods at equal
trainable adapter parameters:

* ``mome``: 8 routed (top-2) + 1 shared bottleneck experts of width 8 per layer, one
  router for every rate, trained on all three rates per step (loss = mean CTC over rates
  + 0.01 Switch balance);
* ``per_rate``: one dense adapter per rate (bottleneck matched), trained on all rates;
* ``single``: one dense adapter (bottleneck matched) trained at the lowest compression
  (rate 4) only, evaluated at every rate.

Training (the engine, ``sci_moe.train``): 30 steps of batch 8 (quick) / 100 of batch 6, AdamW
3e-3 with a 10 % linear warm-up and cosine decay, the weights of the best validation CTC
kept, noise augmentation (clean, 10 dB, 5 dB per batch). (The recorded results up to
issue 39 used a one-cycle schedule and the final weights.) Evaluation on the test phrases:
clean, and at 10, 5, 0 dB (noise seed 0).
Routing consistency of MoME: per layer, expert-usage histograms of the test tokens at
each rate; mean pairwise Jensen-Shannon divergence across rates, against a control that
permutes expert ids independently per rate (200 draws).

AVSR (``--avsr``): audio rates 4, 16 x video rates 1, 2 of the **synthetic** viseme
stream (22 SAPI visemes at 25 frames/s from espeak's phoneme timings, one-hot, 30 % of
the frames zeroed in training and test), video tokens added to the audio tokens at the
nearest time. MoME and per-rate adapters (one per rate pair) trained on all four pairs
per step, and MoME trained on audio only (rates 4, 16) as the reference; CER at audio
SNR clean, 5, 0, -5 dB. Rows ``avsr/*`` carry ``ratio`` = baseline CER / MoME CER.

Run: ``python benchmarks/mome/run.py [--quick] [--avsr] [--json PATH] [--seed 0]
[--plots DIR] [--cache DIR] [--layers N] [--steps N] [--batch N] [--raw PATH]``
(``--seed`` offsets the three seeds; ``--replot RAW`` redraws the plots from a ``--raw``
dump; ``--untrained-routing`` measures only the routing consistency of the untrained
MoME models, the control for the trained router's). Needs ``sci-moe[speech,features]``.
:func:`verdicts` decides the paper's claims from the rows and writes them into the JSON;
``--verdicts-only PATH`` recomputes a stored JSON's verdicts (no training).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/_common/

import numpy as np
import torch
from _common import (
    OtherLoad,
    Row,
    base_parser,
    finish,
    machine_info,
    print_table,
    rederive_verdicts,
    setup,
    summary_verdict,
    verdicts_only,
    write_json_doc,
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

BENCHMARK = "mome"
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


def run(quick: bool, seed0: int, layers, cache: Path, steps, batch) -> dict:
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


AV_RATES = {"audio": (4, 16), "video": (1, 2)}
AV_SNRS = (None, 5.0, 0.0, -5.0)
AV_METHODS = ("mome", "per_rate", "mome_audio_only")


def build_av_model(method: str, s: dict, backbone, seed: int) -> SpeechRecognizer:
    mc = MoMEConfig(
        d_model=384,
        num_experts=s["num_experts"],
        top_k=s["top_k"],
        num_shared=s["num_shared"],
        bottleneck=s["bottleneck"],
    )
    rates = {"audio": AV_RATES["audio"]} if method == "mome_audio_only" else AV_RATES
    comp = MatryoshkaRates(rates)
    adapter = "per_rate" if method == "per_rate" else "mome"
    cfg = RecognizerConfig(
        input_dims={"audio": 40, "video": 22},
        frame_rates={"audio": 100.0, "video": 25.0},
        compression=comp,
        adapter=adapter,
        mome=mc,
        bottleneck=matched_bottleneck(mc, len(comp.combinations())),
        upsample=s["upsample"],
    )
    torch.manual_seed(seed)
    return SpeechRecognizer(backbone, cfg)


def run_avsr(quick: bool, seed0: int, layers, cache: Path, steps, batch) -> dict:
    """AVSR: audio rates (4, 16) x video rates (1, 2) of the synthetic viseme stream."""
    s = settings(quick, layers, steps, batch)
    data = build_speech_set(
        SpeechSetConfig(num_phrases=s["num_phrases"], variants=2, seed=0), cache, progress=True
    )
    runs = []
    for seed in range(seed0, seed0 + 3):
        for method in AV_METHODS:
            model = build_av_model(method, s, load_minilm(s["layers"]), seed)
            tcfg = TrainConfig(
                steps=s["steps"],
                batch_size=s["batch_size"],
                lr=s["lr"],
                snr_db=s["train_snr"],
                video_dropout=0.3,
                seed=seed,
            )
            t0 = time.perf_counter()
            train_recognizer(model, data, tcfg, progress=True)
            rec = {"seed": seed, "method": method, "train_s": time.perf_counter() - t0, "eval": {}}
            rec["params"] = model.parameter_counts()
            combos = model.config.compression.combinations()
            for combo in combos:
                for snr in AV_SNRS:
                    ev = evaluate(model, data, combo, "test", snr_db=snr, video_dropout=0.3)
                    rec["eval"][(combo_name(combo), snr_name(snr))] = (ev["cer"], ev["wer"])
            print(f"seed {seed} {method}: " + ", ".join(
                f"{k[0]} {k[1]} CER {v[0]:.3f}" for k, v in rec["eval"].items() if k[1] == "0dB"
            ), flush=True)  # fmt: skip
            runs.append(rec)
    return {"settings": s, "n_utts": {k: len(v) for k, v in data.splits.items()}, "runs": runs}


def combo_name(combo: dict) -> str:
    return ",".join(f"{m}={r}" for m, r in combo.items())


def report_avsr(res: dict, rows: list[Row]) -> None:
    runs = res["runs"]
    table = []
    for a in AV_RATES["audio"]:
        for v in AV_RATES["video"]:
            for snr in AV_SNRS:
                sn = snr_name(snr)
                key_av, key_a = (f"audio={a},video={v}", sn), (f"audio={a}", sn)
                cells = [f"{a}", f"{v}", sn]
                for metric, which in (("cer", 0), ("wer", 1)):
                    mome = _stat(runs, "mome", key_av, which)
                    per = _stat(runs, "per_rate", key_av, which)
                    aud = _stat(runs, "mome_audio_only", key_a, which)
                    case = f"avsr/mome/{key_av[0]}/{sn}"
                    for base_case, base in (
                        (f"avsr/per_rate/{key_av[0]}/{sn}", per),
                        (f"asr/mome_audio_only/{key_a[0]}/{sn}", aud),
                    ):
                        ratio = round(base[0] / mome[0], 3) if mome[0] > 0 else None
                        rows.append(Row(case, metric, round(mome[0], 4), "fraction", base_case,
                                        ratio))  # fmt: skip
                    rows.append(Row(case, f"{metric}_std", round(mome[1], 4), "fraction"))
                    rows.append(Row(f"avsr/per_rate/{key_av[0]}/{sn}", metric, round(per[0], 4),
                                    "fraction"))  # fmt: skip
                    rows.append(Row(f"avsr/per_rate/{key_av[0]}/{sn}", f"{metric}_std",
                                    round(per[1], 4), "fraction"))  # fmt: skip
                    if v == AV_RATES["video"][0]:
                        rows.append(Row(f"asr/mome_audio_only/{key_a[0]}/{sn}", metric,
                                        round(aud[0], 4), "fraction"))  # fmt: skip
                        rows.append(Row(f"asr/mome_audio_only/{key_a[0]}/{sn}", f"{metric}_std",
                                        round(aud[1], 4), "fraction"))  # fmt: skip
                    if which == 0:
                        cells += [f"{mome[0]:.3f}", f"{per[0]:.3f}", f"{aud[0]:.3f}"]
                table.append(cells)
    for m in AV_METHODS:
        p = next(r["params"] for r in runs if r["method"] == m)
        for k in ("trainable", "adapter", "adapter_active"):
            rows.append(Row(f"params/avsr/{m}", k, p[k], "parameters"))
    print_table(["audio", "video", "SNR", "CER MoME AV", "CER per-rate AV", "CER MoME A-only"],
                table, "AVSR character error rate (synthetic viseme stream)")  # fmt: skip


def plot_avsr(res: dict, folder: Path, suffix: str = "") -> Path:
    """CER vs audio SNR per rate pair: MoME AV, per-rate AV, MoME audio only."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = res["runs"]
    folder.mkdir(parents=True, exist_ok=True)
    pairs = [(a, v) for a in AV_RATES["audio"] for v in AV_RATES["video"]]
    fig, axes = plt.subplots(1, len(pairs), figsize=(14, 3.6), sharey=True)
    xs = [10 if s is None else s for s in AV_SNRS]
    for ax, (a, v) in zip(axes, pairs, strict=True):
        for m, stream in (
            ("mome", f"audio={a},video={v}"),
            ("per_rate", f"audio={a},video={v}"),
            ("mome_audio_only", f"audio={a}"),
        ):
            st = [_stat(runs, m, (stream, snr_name(snr)), 0) for snr in AV_SNRS]
            ax.errorbar(xs, [x for x, _ in st], yerr=[y for _, y in st], marker="o", capsize=3,
                        label=m)  # fmt: skip
        ax.set(title=f"audio {a}, video {v}", xlabel="audio SNR (dB; 10 = clean)")
    axes[0].set_ylabel("CER")
    axes[0].legend(fontsize=8)
    fig.suptitle("synthetic viseme stream (30 % frame dropout), mean ± sd over 3 seeds")
    fig.tight_layout()
    path = folder / f"mome_avsr{suffix}.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def load_raw(path: Path) -> dict:
    """A ``--raw`` dump back in the form :func:`report` / :func:`plot` take."""
    import json

    res = json.loads(Path(path).read_text())
    for rec in res["runs"]:
        ev = {}
        for k, v in rec["eval"].items():
            rate, snr = k.rsplit("/", 1)
            ev[(int(rate) if rate.isdigit() else rate, snr)] = tuple(v)
        rec["eval"] = ev
    return res


def run_untrained_routing(quick: bool, seed0: int, layers, cache: Path, steps, batch) -> dict:
    """Routing consistency of *untrained* MoME routers (the fresh model of each seed)."""
    s = settings(quick, layers, steps, batch)
    data = build_speech_set(
        SpeechSetConfig(num_phrases=s["num_phrases"], variants=2, seed=0), cache, progress=True
    )
    runs = []
    for seed in range(seed0, seed0 + 3):
        model = build_model("mome", s, load_minilm(s["layers"]), seed).eval()
        rc = routing_consistency(model, data, [{"audio": r} for r in RATES], "test")
        runs.append({"seed": seed, "routing": rc})
        print(f"seed {seed} untrained: JS {rc['js']:.4f} vs shuffled {rc['js_shuffled']:.4f}")
    return {"settings": s, "n_utts": {k: len(v) for k, v in data.splits.items()}, "runs": runs}


def report_untrained_routing(res: dict, rows: list[Row]) -> None:
    js = [r["routing"]["js"] for r in res["runs"]]
    ctl = [r["routing"]["js_shuffled"] for r in res["runs"]]
    rows.append(
        Row("routing/untrained", "js_across_rates", round(float(np.mean(js)), 4), "nats",
            "routing/untrained_shuffled",
            round(float(np.mean(ctl)) / max(float(np.mean(js)), 1e-12), 3))
    )  # fmt: skip
    rows.append(
        Row("routing/untrained", "js_across_rates_std", round(float(np.std(js)), 4), "nats")
    )
    rows.append(
        Row("routing/untrained_shuffled", "js_across_rates", round(float(np.mean(ctl)), 4), "nats")
    )
    print(f"untrained router JS {np.mean(js):.4f} vs shuffled {np.mean(ctl):.4f} nats")


def _stats(doc: dict, case: str, metric: str) -> tuple[float, float, int]:
    """(mean, population sd, seeds) of ``metric`` of ``case`` (a row may repeat per ``vs``)."""
    found = {(r["metric"]): r["value"] for r in doc["rows"] if r["case"] == case}
    return found[metric], found.get(f"{metric}_std", 0.0), len(doc["machine"]["seeds"])


def verdicts(doc: dict) -> list[dict]:
    """One verdict per claim of the paper that the run can test, by rules (issue 41).

    The runs store means and population standard deviations over the seeds (no per-seed
    rows): every comparison is Welch's t-test from them (:func:`_common.summary_verdict`,
    ``ddof=0``; a control without a deviation makes it a one-sample test), alpha 0.05,
    character error rate (lower is better) on the clean test phrases unless said:

    * ASR run: MoME vs per-rate adapters at every audio rate (cross-scale generalisation),
      MoME vs the single adapter trained at the lowest compression at every rate, MoME vs
      per-rate adapters at the highest compression at the lowest SNR (robustness), and the
      routing consistency across rates (JS divergence, lower) vs the shuffled control;
    * AVSR run: MoME vs per-rate adapters at every rate pair, and the audio-visual MoME vs
      the audio-only MoME at the lowest SNR of every rate pair (the visual stream helps);
    * the untrained-routing control: its consistency vs its shuffled control.

    The recognisers are far from converged: nothing is decisive.
    """
    cases = {r["case"] for r in doc["rows"]}

    def cer(claim, ours, base, metric="cer"):
        return summary_verdict(
            claim,
            metric=f"{metric} ({ours})",
            ours=_stats(doc, ours, metric),
            baseline=base,
            baseline_stats=_stats(doc, base, metric),
            higher_is_better=False,
            converged=False,
            ddof=0,
        )

    out = []
    asr_rates = sorted(
        {int(c.split("audio=")[1].split("/")[0]) for c in cases if c.startswith("asr/mome/audio=")}
    )
    if any(c.startswith("asr/per_rate/") for c in cases):
        for rate in asr_rates:
            out.append(
                cer(
                    f"MoME beats per-rate adapters across scales (audio rate {rate})",
                    f"asr/mome/audio={rate}/clean",
                    f"asr/per_rate/audio={rate}/clean",
                )
            )
        for rate in asr_rates:
            out.append(
                cer(
                    f"MoME beats a single adapter trained at the lowest compression "
                    f"(audio rate {rate})",
                    f"asr/mome/audio={rate}/clean",
                    f"asr/single/audio={rate}/clean",
                )
            )
        worst = sorted(
            {c.rsplit("/", 1)[1] for c in cases if c.startswith("asr/mome/")},
            key=lambda x: -1e9 if x == "clean" else -float(x.rstrip("dB")),
        )[-1]
        top = asr_rates[-1]
        out.append(
            cer(
                f"MoME is robust at high compression and noise (audio rate {top}, {worst})",
                f"asr/mome/audio={top}/{worst}",
                f"asr/per_rate/audio={top}/{worst}",
            )
        )
    for trained, control in (
        ("routing/mome", "routing/shuffled"),
        ("routing/untrained", "routing/untrained_shuffled"),
    ):
        if trained in cases:
            out.append(
                summary_verdict(
                    f"expert usage is consistent across rates ({trained.split('/')[1]} router)",
                    metric="JS divergence of expert usage across rates (nats)",
                    ours=_stats(doc, trained, "js_across_rates"),
                    baseline=control,
                    baseline_stats=_stats(doc, control, "js_across_rates"),
                    higher_is_better=False,
                    converged=False,
                    ddof=0,
                )
            )
    pairs = sorted(
        {c.split("/")[2] for c in cases if c.startswith("avsr/mome/")},
        key=lambda x: [int(v.split("=")[1]) for v in x.split(",")],
    )
    for pair in pairs:
        out.append(
            cer(
                f"MoME beats per-rate adapters in AVSR ({pair})",
                f"avsr/mome/{pair}/clean",
                f"avsr/per_rate/{pair}/clean",
            )
        )
    for pair in pairs:
        audio = pair.split(",")[0]
        worst = sorted(
            {c.rsplit("/", 1)[1] for c in cases if c.startswith(f"avsr/mome/{pair}/")},
            key=lambda x: -1e9 if x == "clean" else -float(x.rstrip("dB")),
        )[-1]
        out.append(
            cer(
                f"the visual stream helps under audio noise ({pair}, {worst})",
                f"avsr/mome/{pair}/{worst}",
                f"asr/mome_audio_only/{audio}/{worst}",
            )
        )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = base_parser(__doc__.split("\n", 1)[0], verdicts=verdicts)
    parser.add_argument("--plots", type=Path, default=None, metavar="DIR", help="PNG folder")
    parser.add_argument("--layers", type=int, default=None, help="MiniLM layers (1 quick, 2 full)")
    parser.add_argument("--steps", type=int, default=None, help="training steps (30 quick, 100)")
    parser.add_argument("--batch", type=int, default=None, help="batch size (8 quick, 6)")
    parser.add_argument("--raw", type=Path, default=None, help="also dump the raw runs (JSON)")
    parser.add_argument(
        "--replot", type=Path, default=None, help="only redraw the plots from a --raw dump"
    )
    parser.add_argument(
        "--untrained-routing",
        action="store_true",
        help="only the routing consistency of untrained MoME routers (control)",
    )
    parser.add_argument(
        "--avsr", action="store_true", help="run the audio-visual part instead (synthetic visemes)"
    )
    parser.add_argument(
        "--cache",
        type=Path,
        default=Path.home() / ".cache" / "sci-moe" / "mome",
        help="data set cache folder",
    )
    args = parser.parse_args(argv)
    if (done := verdicts_only(args)) is not None:
        return done
    setup(args)
    if args.replot is not None:
        res = load_raw(args.replot)
        folder = args.plots or Path(".")
        suffix = "_quick" if args.quick else ""
        paths = [plot_avsr(res, folder, suffix)] if args.avsr else plot(res, folder, suffix)
        for p in paths:
            print(f"plot in {p}")
        return 0
    s = settings(args.quick, args.layers, args.steps, args.batch)
    machine = machine_info(
        seed=args.seed,
        quick=args.quick,
        seeds=[args.seed + i for i in range(3)],
        settings={k: list(v) if isinstance(v, tuple) else v for k, v in s.items()},
        task="synthetic espeak-ng speech (not LRS2/LRS3)",
    )
    print(
        f"mome: torch {machine['torch']}, {torch.get_num_threads()} threads, git {machine['git']}"
    )
    other = OtherLoad()
    t0 = time.perf_counter()
    runner = run_avsr if args.avsr else run
    reporter = report_avsr if args.avsr else report
    if args.untrained_routing:
        runner, reporter = run_untrained_routing, report_untrained_routing
        args.plots = None
    res = runner(args.quick, args.seed, args.layers, args.cache, args.steps, args.batch)
    if args.raw is not None:
        raw = {**res, "runs": [_jsonable(r) for r in res["runs"]]}
        write_json_doc(args.raw, raw)
    machine["n_utterances"] = res["n_utts"]
    machine["part"] = "avsr" if args.avsr else "asr"
    if args.untrained_routing:
        machine["part"] = "untrained routing control"
    rows: list[Row] = []
    reporter(res, rows)
    if args.plots is not None:
        suffix = "_quick" if args.quick else ""
        paths = [plot_avsr(res, args.plots, suffix)] if args.avsr else plot(res, args.plots, suffix)
        for p in paths:
            print(f"plot in {p}")
    code = finish(args, BENCHMARK, machine, rows, other, t0)
    if args.json is not None:  # the verdicts, by the same rule as --verdicts-only
        rederive_verdicts(args.json, verdicts)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
