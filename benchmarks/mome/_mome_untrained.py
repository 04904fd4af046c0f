"""The untrained-routing control of ``run.py``: routing consistency of fresh MoME routers.

:func:`run_untrained_routing` measures the JS of the expert-usage histograms across rates
of the untrained model of each seed, against a shuffled control;
:func:`report_untrained_routing` appends the rows. A helper module: ``run.py`` imports it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from _common import (
    Row,
)
from _mome_asr import RATES, build_model, settings

from sci_moe.speech.mome import (
    SpeechSetConfig,
    build_speech_set,
    load_minilm,
    routing_consistency,
)

__all__ = [
    "report_untrained_routing",
    "run_untrained_routing",
]


def run_untrained_routing(
    quick: bool, seed0: int, layers, cache: Path, steps, batch, device: str = "cpu"
) -> dict:
    """Routing consistency of *untrained* MoME routers (the fresh model of each seed, built
    on the CPU and moved to ``device``, where the test batches follow it)."""
    from sci_moe.train import run_device

    dev = run_device(device)
    s = settings(quick, layers, steps, batch)
    data = build_speech_set(
        SpeechSetConfig(num_phrases=s["num_phrases"], variants=2, seed=0), cache, progress=True
    )
    runs = []
    for seed in range(seed0, seed0 + 3):
        model = build_model("mome", s, load_minilm(s["layers"]), seed).eval().to(dev)
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
