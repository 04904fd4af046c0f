"""The figures of ``run.py``: Ramachandran free-energy panels and training curves.

:func:`plot` draws the reference, the model before and after; :func:`plot_protocol` and
:func:`plot_finetune` the curves of a training history. A helper module: ``run.py``
imports it.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from _aem_eval import ROOT
from _alanine_energy_model import (
    BINS,
    reference,
)

from sci_moe.sampling.md import alanine_phi_psi, angle_histogram, js_divergence
from sci_moe.sampling.md.analysis import load_run_positions

__all__ = [
    "plot",
    "plot_finetune",
    "plot_protocol",
]


def _free_energy(p: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        f = -np.log(p / p.sum())
    return f - f[np.isfinite(f)].min()


def _ramachandran_figure(plt, ref, panels, path: Path, panel_size, dpi: int) -> None:
    """One row of phi/psi free-energy panels (kT, 0-8), each titled with its JS to ``ref``.

    ``panels``: ``(title, histogram)`` pairs, the first the reference itself (no JS);
    ``panel_size``: (width, height) inches per panel.
    """
    w, hgt = panel_size
    fig, axes = plt.subplots(1, len(panels), figsize=(w * len(panels), hgt), sharey=True)
    for ax, (title, h) in zip(axes, panels, strict=True):
        im = ax.imshow(
            _free_energy(h).T, origin="lower", extent=[-np.pi, np.pi] * 2, vmin=0, vmax=8
        )
        ax.set_title(title if h is ref else f"{title}\nJS {js_divergence(ref, h):.3f}", fontsize=9)
        ax.set_xlabel("phi (rad)")
    axes[0].set_ylabel("psi (rad)")
    fig.colorbar(im, ax=axes, label="free energy (kT)", shrink=0.85)
    fig.savefig(path, dpi=dpi, bbox_inches="tight")
    plt.close(fig)


def plot(before_dir, after_dir, curves_json, out_dir: Path) -> None:
    """Ramachandran free energies (reference, MD runs of the demo) and learning curves.

    Writes ``alanine_energy_model_ramachandran.png`` and ``alanine_energy_model_curves.png``.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    ref = reference()["p"]
    idx = [4, 6, 8, 14, 16]

    def run_hist(d, ps=None):
        x = load_run_positions(d)
        w = max(1, len(list(Path(d).glob("trajectory_w*"))))
        a = alanine_phi_psi(x, idx).reshape(w, len(x) // w, 2)
        if ps is not None:
            a = a[:, : round(5 * ps)]
        return angle_histogram(a.reshape(-1, 2), BINS)[0]

    panels = [("reference (amber, 36.8 ns)", ref)]
    panels.append(("shipped: MD 16 x 100 ps", run_hist(before_dir)))
    panels.append(("shipped: MD, first 10 ps", run_hist(before_dir, 10)))
    panels.append(("continued: MD, first 10 ps", run_hist(after_dir, 10)))
    _ramachandran_figure(
        plt, ref, panels, out_dir / "alanine_energy_model_ramachandran.png", (3.4, 3.6), 110
    )
    _plot_curves(json.loads(Path(curves_json).read_text())["rows"], out_dir)


def _plot_curves(rows: list[dict], out_dir: Path) -> None:
    """Training loss per epoch and JS before / during / after (training JSON + results)."""
    import matplotlib.pyplot as plt

    res = ROOT / "benchmarks/alanine_energy_model/results"
    ep = sorted(
        (int(r["case"].split()[1]), r["metric"], r["value"])
        for r in rows
        if r["case"].startswith("epoch ")
    )
    dsm = {e: v for e, m, v in ep if m == "dsm"}
    stage = {e: v for e, m, v in ep if m == "stage"}
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 3.8))
    names = ["expert 0 (t 0.6-1)", "expert 1 (t 0.099-0.6)", "expert 2 (t 1e-5-0.099)"]
    for st, name in enumerate(names):
        es = [e for e in dsm if stage[e] == st]
        if es:
            ax1.plot([100 * e for e in es], [dsm[e] for e in es], ".-", label=name)
    ax1.set_xlabel("optimiser steps (this run; batch 256)")
    ax1.set_ylabel("DSM loss of the stage's expert (epoch mean)")
    ax1.legend(fontsize=8)

    def val(name, case, metric):
        f = res / name if (res / name).is_file() else res / "history" / name
        if not f.is_file():
            return np.nan
        for r in json.loads(f.read_text())["rows"]:
            if r["case"] == case and r["metric"] == metric:
                return r["value"]
        return np.nan

    total = max(dsm) * 100
    mid = {r["metric"]: r["value"] for r in rows if r["case"].startswith("step ")}
    mid_step = next((int(r["case"].split()[1]) for r in rows if r["case"].startswith("step ")), 0)
    b = "alanine_energy_model_before.json"
    a = "alanine_energy_model.json"
    ax2.plot(
        [0, total],
        [val(b, "before mean", "iid_js"), val(a, "after mean", "iid_js")],
        "o-",
        label="i.i.d., 5000 samples, mean of 3 seeds",
    )
    ax2.plot(
        [0, total],
        [val(b, "before seed 0", "md_js"), val(a, "after seed 0", "md_js")],
        "s-",
        label="MD = make demo (16 x 100 ps, seed 0)",
    )
    if mid:
        ax2.plot([mid_step], [mid.get("iid_js", np.nan)], "o", mfc="none", label="i.i.d., 1000")
        ax2.plot([mid_step], [mid.get("md_js", np.nan)], "s", mfc="none", label="MD 16 x 10 ps")
    ax2.axhline(0.04, color="k", ls="--", lw=0.8, label="target 0.04")
    ax2.set_xlabel("optimiser steps (this run)")
    ax2.set_ylabel("phi/psi JS vs reference (nats)")
    ax2.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out_dir / "alanine_energy_model_curves.png", dpi=110)
    plt.close(fig)


def plot_protocol(hist_npz, out_dir: Path) -> None:
    """Ramachandran panels of a ``--no-iid`` demo-protocol run's ``--hist-out``: reference,
    each model's MD (seed 0) and, if stored, the exact force field's (``exact_md``).
    Writes ``alanine_energy_model_protocol_ramachandran.png``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    with np.load(hist_npz) as f:
        h = {k: f[k] for k in f.files}
    ref = h["reference"]
    names = {
        "exact_md": "exact force field",
        "before_md": "previous model",
        "after_md": "shipped model",
    }
    panels = [("reference (amber, 36.8 ns)", ref)]
    for k in ("exact_md", "before_md", *sorted(k for k in h if k.endswith("_md"))):
        if k in h and k != "md" and all(k != q for q, _ in panels):
            panels.append((k, h[k]))
    panels = [panels[0]] + [
        (f"{names.get(k, k[:-3] + ' (shipped)')}: MD seed 0", hk) for k, hk in panels[1:]
    ]
    _ramachandran_figure(
        plt,
        ref,
        panels,
        out_dir / "alanine_energy_model_protocol_ramachandran.png",
        (3.1, 3.5),
        100,
    )


def plot_finetune(hist_npz, training_json, result_json, out_dir: Path) -> None:
    """Figures of an FP fine-tune: Ramachandran panels and its learning curves.

    ``hist_npz`` (``--hist-out`` of a ``--before`` comparison run: ``before_iid``,
    ``before_md``, ``<label>_iid``, ``<label>_md``), ``training_json`` (rows ``epoch N``
    and ``step N`` of ``scripts/train_alanine_energy_model.py --curves-json``) and
    ``result_json`` (the comparison run's rows). Writes
    ``alanine_energy_model_fp_ramachandran.png`` and ``alanine_energy_model_fp_curves.png``.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    with np.load(hist_npz) as f:
        h = {k: f[k] for k in f.files}
    ref = h["reference"]
    new = next(k[:-4] for k in h if k.endswith("_iid") and not k.startswith("before"))
    panels = [("reference (amber, 36.8 ns)", ref)]
    for lab, name in (("before", "shipped"), (new, "FP fine-tune")):
        panels += [
            (f"{name}: i.i.d., seed 0", h[f"{lab}_iid"]),
            (f"{name}: MD (demo)", h[f"{lab}_md"]),
        ]
    _ramachandran_figure(
        plt, ref, panels, out_dir / "alanine_energy_model_fp_ramachandran.png", (3.1, 3.5), 100
    )

    rows = json.loads(Path(training_json).read_text())["rows"]
    res = {
        (r["case"], r["metric"]): r["value"]
        for r in json.loads(Path(result_json).read_text())["rows"]
    }

    def series(prefix, metric):
        pts = sorted(
            (int(r["case"].split()[1]), r["value"])
            for r in rows
            if r["case"].startswith(prefix) and r["metric"] == metric
        )
        return np.array(pts, dtype=float).reshape(-1, 2)

    budget = {r["metric"]: r["value"] for r in rows if r["case"] == "budget"}
    n_epochs = sum(1 for r in rows if r["case"].startswith("epoch ") and r["metric"] == "dsm")
    spe = budget["steps_total"] / n_epochs  # optimiser steps per epoch
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 3.8))
    d, f = series("epoch ", "dsm"), series("epoch ", "fp")
    ax1.plot(spe * d[:, 0], d[:, 1], lw=0.8, label="DSM loss (epoch mean)")
    ax1.set_xlabel("optimiser steps of the FP fine-tune (batch 256)")
    ax1.set_ylabel("DSM loss, small-t expert")
    ax1b = ax1.twinx()
    ax1b.plot(spe * f[:, 0], f[:, 1], color="C1", lw=0.6, alpha=0.7, label="FP term (epoch mean)")
    ax1b.set_ylabel("FP term (two-probe estimate)")
    ax1.legend(loc="upper left", fontsize=8)
    ax1b.legend(loc="upper right", fontsize=8)
    total = spe * d[-1, 0]
    for metric, mk, lab in (("iid_js", "o", "i.i.d."), ("md_js", "s", "MD")):
        c = series("step ", metric)
        ax2.plot(c[:, 0], c[:, 1], mk + ":", mfc="none", label=f"{lab}, curve point (small run)")
        case = "mean" if metric == "iid_js" else "seed 0"
        b, a = res.get((f"before {case}", metric)), res.get((f"{new} {case}", metric))
        ax2.plot([0, total], [b, a], mk + "-", label=f"{lab}, full evaluation")
    ax2.axhline(0.04, color="k", ls="--", lw=0.8, label="target 0.04")
    ax2.set_xlabel("optimiser steps of the FP fine-tune")
    ax2.set_ylabel("phi/psi JS vs reference (nats)")
    ax2.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out_dir / "alanine_energy_model_fp_curves.png", dpi=100)
    plt.close(fig)
