"""The rows and figure of ``full.py``: :func:`make_rows` and :func:`plot_curves`.

:func:`make_rows` summarises the finished units (per seed and mean: CER/WER per rate and
SNR, training, parameters, routing consistency; the pretrained encoder's record);
:func:`plot_curves` draws the validation curves. A helper module: ``full.py`` imports it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from _common import (
    Row,
)
from _mome import (
    METHODS,
    MODALITIES,
    compression,
    snr_name,
)
from _mome_full_train import unit_key

__all__ = [
    "make_rows",
    "plot_curves",
]


def _labels(modality: str, rates) -> list[str]:
    return compression(modality, rates).labels()


def _rate_of(label: str) -> int:
    return int(label.split(",")[0].split("=")[1])


def make_rows(runs: dict, s: dict, seeds: list, pretrain: dict | None = None) -> list[Row]:
    """Per-seed and mean rows of the finished units: CER/WER per rate and SNR, the mean CER
    over the rates, training, parameters, routing consistency; and of the pretrained audio
    encoder (``pretrain``, its record): test CER/WER at rate 1 per SNR, flatness, steps."""
    rows: list[Row] = []
    if pretrain is not None:
        base = "audio/pretrained_encoder"
        for key, (cer, wer) in pretrain["test"].items():
            rows.append(Row(f"{base}/{key}", "cer", float(cer), "fraction"))
            rows.append(Row(f"{base}/{key}", "wer", float(wer), "fraction"))
        rows.append(Row(base, "converged_fraction", float(bool(pretrain["converged"])),
                        "fraction"))  # fmt: skip
        rows.append(Row(base, "steps", float(pretrain["steps"]), "steps"))
        rows.append(Row(base, "train_s", float(pretrain["train_s"]), "s"))
    for mod in MODALITIES:
        labels = _labels(mod, s["rates"])
        snrs = [snr_name(x) for x in (s["test_snr"] if mod != "video" else [None])]
        for method in METHODS:
            done = [sd for sd in seeds if unit_key(mod, method, sd) in runs]
            if not done:
                continue
            units = [runs[unit_key(mod, method, sd)] for sd in done]
            base = f"{mod}/{method}"
            for snr in snrs:
                per_seed_mean = np.zeros(len(done))
                for lab in labels:
                    vals = np.array([u["eval"][f"{lab}/{snr}"] for u in units])
                    per_seed_mean += vals[:, 0] / len(labels)
                    case = f"{base}/{lab}/{snr}"
                    for sd, v in zip(done, vals[:, 0], strict=True):
                        rows.append(Row(f"{case}/seed={sd}", "cer", float(v), "fraction"))
                    rows.append(Row(case, "cer", float(vals[:, 0].mean()), "fraction"))
                    rows.append(Row(case, "cer_std", float(vals[:, 0].std()), "fraction"))
                    rows.append(Row(case, "wer", float(vals[:, 1].mean()), "fraction"))
                case = f"{base}/mean_over_rates/{snr}"
                for sd, v in zip(done, per_seed_mean, strict=True):
                    rows.append(Row(f"{case}/seed={sd}", "cer", float(v), "fraction"))
                rows.append(Row(case, "cer", float(per_seed_mean.mean()), "fraction"))
            tr = [u["train"] for u in units]
            rows.append(Row(base, "converged_fraction",
                            float(np.mean([t["converged"] for t in tr])), "fraction"))  # fmt: skip
            rows.append(Row(base, "steps_median", float(np.median([t["steps"] for t in tr])),
                            "steps"))  # fmt: skip
            rows.append(Row(base, "train_s_mean", float(np.mean([u["train_s"] for u in units])),
                            "s"))  # fmt: skip
            rows.append(Row(base, "seeds_done", float(len(done)), "count"))
            p = units[0]["params"]
            for k in ("trainable", "adapter", "adapter_active", "frozen"):
                rows.append(Row(base, f"params_{k}", p[k], "parameters"))
            if method == "mome":
                for which in ("routing", "routing_untrained"):
                    js = [u[which]["js"] for u in units]
                    ctl = [u[which]["js_shuffled"] for u in units]
                    for sd, v in zip(done, js, strict=True):
                        rows.append(Row(f"{mod}/{which}/seed={sd}", "js_across_rates", v, "nats"))
                    ratio = float(np.mean(ctl)) / max(float(np.mean(js)), 1e-12)
                    rows.append(Row(f"{mod}/{which}", "js_across_rates", float(np.mean(js)),
                                    "nats", f"{mod}/{which}/shuffled", ratio))  # fmt: skip
                    rows.append(Row(f"{mod}/{which}/shuffled", "js_across_rates",
                                    float(np.mean(ctl)), "nats"))  # fmt: skip
    return rows


def plot_curves(runs: dict, path: Path, pretrain: dict | None = None) -> None:
    """Validation CER against steps of every model and seed, one panel per modality (the
    pretrained audio encoder's, CTC alone, in black in the audio panel)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(MODALITIES), figsize=(4.5 * len(MODALITIES), 3.8))
    for ax, mod in zip(axes, MODALITIES, strict=True):
        for i, method in enumerate(METHODS):
            first = True
            for key, u in runs.items():
                if not key.startswith(f"{mod}/{method}/"):
                    continue
                st, v = np.asarray(u["train"]["curve"]).T
                ls = "-" if u["train"]["converged"] else ":"
                ax.plot(st, v, ls, color=f"C{i}", lw=0.9, label=method if first else None)
                first = False
        if mod == "audio" and pretrain is not None and pretrain["curve"]:
            st, v = np.asarray(pretrain["curve"]).T
            ls = "-" if pretrain["converged"] else ":"
            ax.plot(st, v, ls, color="k", lw=0.9, label="encoder pretraining (CTC)")
        ax.set(title=f"{mod} (dotted: not flat)", xlabel="step", ylabel="validation CER",
               ylim=(0, 1.05))  # fmt: skip
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
