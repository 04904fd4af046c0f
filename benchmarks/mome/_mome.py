"""Shared by the MoME scripts (run.py, full.py): SNR names, the grid's models and the
evaluation of one trained recogniser at every rate combination and SNR."""

from __future__ import annotations

import torch

from sci_moe.speech.mome import (
    EncoderConfig,
    MatryoshkaRates,
    MoMEConfig,
    RecognizerConfig,
    SpeechRecognizer,
    evaluate,
    matched_bottleneck,
)

__all__ = [
    "METHODS",
    "MODALITIES",
    "build_model",
    "compression",
    "evaluate_grid",
    "snr_name",
]

#: The adapters compared, each at MoME's total or active adapter parameters.
METHODS = ("mome", "per_rate", "shared", "dense_active")
#: What the recogniser hears or sees: audio, the synthetic viseme stream, both.
MODALITIES = ("audio", "video", "av")


def snr_name(snr: float | None) -> str:
    """``"clean"`` or ``"10dB"``."""
    return "clean" if snr is None else f"{snr:g}dB"


def compression(modality: str, rates) -> MatryoshkaRates:
    """The rates of one modality setting; audio-visual pairs the audio and video rates."""
    if modality == "av":
        return MatryoshkaRates({"audio": tuple(rates), "video": tuple(rates)}, paired=True)
    if modality not in ("audio", "video"):
        raise ValueError(f"modality must be one of {MODALITIES}, got {modality!r}")
    return MatryoshkaRates({modality: tuple(rates)})


def build_model(method: str, modality: str, s: dict, backbone, seed: int) -> SpeechRecognizer:
    """A fresh recogniser of the grid (seeded), on ``backbone`` (frozen).

    ``mome``: ``s["num_experts"]`` routed (top ``s["top_k"]``) + ``s["num_shared"]``
    shared experts of width ``s["bottleneck"]`` per layer; ``per_rate``: one dense adapter
    per rate combination, together as many parameters as MoME; ``shared``: one dense
    adapter for every rate with MoME's total parameters; ``dense_active``: one dense
    adapter with MoME's active parameters (router, shared and ``top_k`` experts).
    Encoders: ``s["audio_encoder"]`` and ``s["video_encoder"]`` (:class:`EncoderConfig`
    keyword dicts).
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    d = int(backbone.config.hidden_size)
    comp = compression(modality, s["rates"])
    mc = MoMEConfig(
        d_model=d,
        num_experts=s["num_experts"],
        top_k=s["top_k"],
        num_shared=s["num_shared"],
        bottleneck=s["bottleneck"],
    )
    n = len(comp.combinations())
    bottleneck = {
        "mome": mc.bottleneck,
        "per_rate": matched_bottleneck(mc, n),
        "shared": matched_bottleneck(mc, 1),
        "dense_active": matched_bottleneck(mc, 1, active=True),
    }[method]
    encoders = {"audio": EncoderConfig(**s["audio_encoder"])}
    encoders["video"] = EncoderConfig(**s["video_encoder"])
    cfg = RecognizerConfig(
        input_dims={"audio": 40, "video": 22},
        frame_rates={"audio": 100.0, "video": 25.0},
        compression=comp,
        adapter={"mome": "mome", "per_rate": "per_rate"}.get(method, "single"),
        mome=mc,
        bottleneck=bottleneck,
        upsample=s["upsample"],
        encoders={m: encoders[m] for m in comp.modalities},
    )
    torch.manual_seed(seed)
    return SpeechRecognizer(backbone, cfg)


def evaluate_grid(model: SpeechRecognizer, data, snrs, video_dropout: float) -> dict:
    """Test CER and WER of every rate combination of ``model`` at every SNR.

    The noise is added to the audio (noise seed 0: the same noisy test set for every
    model); a video-only model is scored clean only. Returns ``{"<label>/<snr>": [cer,
    wer]}``.
    """
    combos = model.config.compression.combinations()
    has_audio = "audio" in model.config.compression.modalities
    out = {}
    for combo in combos:
        label = ",".join(f"{m}={r}" for m, r in combo.items())
        for snr in snrs if has_audio else (None,):
            drop = video_dropout if "video" in combo else 0.0
            ev = evaluate(model, data, combo, "test", snr_db=snr, video_dropout=drop, seed=0)
            out[f"{label}/{snr_name(snr)}"] = [float(ev["cer"]), float(ev["wer"])]
    return out
