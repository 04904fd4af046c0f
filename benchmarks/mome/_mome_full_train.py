"""The units of ``full.py``: :func:`run_unit` trains and scores one recogniser.

One (modality, method, seed) unit, keyed by :func:`unit_key`: the model of the grid,
the pretrained audio encoder loaded where given, trained until flat or its cap (resuming
its checkpoint; ``None`` when the piece's time ran out), then evaluated at every rate
combination and SNR, with the routing consistency of MoME before and after training. A
helper module: ``full.py`` imports it.
"""

from __future__ import annotations

import time
from pathlib import Path

from _mome import (
    build_model,
    evaluate_grid,
    flat,
)

from sci_moe.speech.mome import (
    TrainConfig,
    load_encoder,
    routing_consistency,
    train_recognizer,
)
from sci_moe.train import seed_everything

__all__ = [
    "run_unit",
    "unit_key",
]


def unit_key(modality: str, method: str, seed: int) -> str:
    return f"{modality}/{method}/seed={seed}"


def run_unit(modality, method, seed, s, data, backbone, ckpt: Path | None,
             max_hours: float | None = None, progress: bool = False,
             encoder: Path | None = None, device: str = "cpu") -> dict | None:  # fmt: skip
    """Train one recogniser (resuming its checkpoint in ``ckpt``) and score it; ``None``
    when ``max_hours`` (the piece's time left) ran out first, the checkpoint kept for
    ``--resume``. ``encoder``: the pretrained audio encoder file (:func:`pretrain_stage`),
    loaded (verified) into audio and audio-visual models, frozen unless
    ``s["encoder_lr"]`` is set. ``device``: where it trains and is scored (the untrained
    routing control runs on the CPU, before the engine moves the model); not a setting."""
    if max_hours is not None and max_hours <= 0:
        return None
    t0 = time.perf_counter()
    seed_everything(seed)
    model = build_model(method, modality, s, backbone, seed)
    enc_info = None
    if encoder is not None and "audio" in model.config.encoders:
        enc_info = load_encoder(model, encoder, "audio", freeze=s["encoder_lr"] is None)
    combos = model.config.compression.combinations()
    rec: dict = {"params": model.parameter_counts()}
    if enc_info is not None:
        rec["encoder"] = {"digest": enc_info["digest"], "frozen": enc_info["frozen"]}
    if method == "mome":  # the control: the same router before any training
        rec["routing_untrained"] = routing_consistency(model.eval(), data, combos, "test")
    cfg = TrainConfig(steps=s["steps"], batch_size=s["batch_size"], lr=s["lr"],
                      eval_every=s["eval_every"], monitor="val_cer", patience=s["patience"],
                      snr_db=tuple(s["train_snr"]), video_dropout=s["video_dropout"], seed=seed,
                      max_hours=max_hours, progress=progress, encoder_lr=s["encoder_lr"],
                      checkpoint_minutes=5.0, device=device)  # fmt: skip
    resume = ckpt is not None and (ckpt / "checkpoint.pt").is_file()
    run = train_recognizer(model, data, cfg, out_dir=ckpt, resume=resume)
    r = run.result
    if r.reason == "budget":
        return None
    curve = [[e["step"], e["val_cer"]] for e in r.evals if "val_cer" in e]
    rec["train"] = dict(steps=r.step, cap=r.steps, reason=r.reason, best_step=r.best_step,
                        best_val_cer=r.best_metric, converged=flat(curve, s),
                        curve=curve)  # fmt: skip
    rec["train_s"] = time.perf_counter() - t0
    rec["eval"] = evaluate_grid(model, data, s["test_snr"], s["video_dropout"])
    if method == "mome":
        rec["routing"] = routing_consistency(model, data, combos, "test")
    rec["seconds"] = time.perf_counter() - t0
    return rec
