"""The ``--avsr`` part of ``run.py``: audio-visual MoME at audio and video rates.

:func:`run_avsr` trains every method of :data:`AV_METHODS` per seed
(:func:`build_av_model`) and evaluates it at every (audio, video) rate pair of
:data:`AV_RATES` and noise level of :data:`AV_SNRS`; :func:`report_avsr` prints the tables
and appends the rows, :func:`plot_avsr` draws the figure. A helper module: ``run.py``
imports it.
"""

from __future__ import annotations

import time
from pathlib import Path

import torch
from _common import (
    Row,
    print_table,
)
from _mome import snr_name
from _mome_asr import _stat, settings

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
    train_recognizer,
)

__all__ = [
    "AV_METHODS",
    "AV_RATES",
    "AV_SNRS",
    "build_av_model",
    "combo_name",
    "plot_avsr",
    "report_avsr",
    "run_avsr",
]


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


def run_avsr(
    quick: bool, seed0: int, layers, cache: Path, steps, batch, device: str = "cpu"
) -> dict:
    """AVSR: audio rates (4, 16) x video rates (1, 2) of the synthetic viseme stream; every
    model trained and scored on ``device`` (``TrainConfig.device``)."""
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
                device=device,
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
