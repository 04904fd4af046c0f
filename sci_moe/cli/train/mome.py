"""``sci-moe train mome``: MoME (or a baseline adapter) for speech recognition on espeak-ng speech.

The data are corpus phrases spoken by espeak-ng with a synthetic viseme stream
(:func:`sci_moe.speech.mome.build_speech_set`, split by phrase); the recogniser is a
trainable projector into the frozen all-MiniLM-L6-v2 (its first ``--layers`` layers),
adapters beside its attention blocks and a CTC character head
(:class:`sci_moe.speech.mome.SpeechRecognizer`). Training visits every rate combination
per step (:func:`sci_moe.speech.mome.train_recognizer`, on the engine); the test split is
then transcribed at every combination and test SNR.

Writes ``OUT/model.pt`` (the trainable parts and the model description; the backbone is
rebuilt from the installed MiniLM), ``OUT/results.json`` (test CER/WER per combination and
SNR, MoME's cross-rate routing consistency), the engine's files and, without ``--cache``,
``OUT/data/`` (the synthesised data set, which ``--resume`` reads again).

Examples
--------
.. code-block:: console

    $ sci-moe train mome --out runs/mome --steps 1000
    $ sci-moe train mome --out runs/single --adapter single --train-rates audio=4
    $ sci-moe train mome --out runs/avsr --rates 4,16 --video-rates 1,2
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..._util import check_int_attr
from ...speech.mome.train import TrainConfig
from ._common import TrainMethod

__all__ = ["METHOD", "MoMERunConfig", "build_recognizer", "run"]

_MODALITIES = ("audio", "video")


def _rates(name: str, value, allow_empty: bool) -> tuple[int, ...]:
    rs = tuple(value)
    if not rs and not allow_empty:
        raise ValueError(f"{name} must hold at least one rate, got ()")
    if not all(isinstance(r, int) and not isinstance(r, bool) and r >= 1 for r in rs):
        raise ValueError(f"{name} must be integers >= 1, got {rs!r}")
    if len(set(rs)) != len(rs):
        raise ValueError(f"{name} must be distinct, got {rs!r}")
    return rs


@dataclass
class MoMERunConfig(TrainConfig):
    """Options of ``sci-moe train mome``: training (the engine's and MoME's), data and model.

    Parameters
    ----------
    num_phrases : int
        Distinct corpus phrases spoken (split by phrase 70/15/15 into train/val/test).
    variants : int
        Spoken variants per phrase (voice, speaking rate and pitch drawn per variant).
    data_seed : int
        Seed of the phrases, the voices and the split.
    cache : str or None
        Folder of cached synthesised data sets (none: OUT/data, so that a resumed run
        trains on the same data; espeak-ng is not bit-reproducible).
    layers : int
        Layers of the frozen all-MiniLM-L6-v2 backbone kept, 1-6.
    adapter : {"mome", "per_rate", "single", "none"}
        Adapters beside the backbone blocks: MoME, one dense adapter per rate, one dense
        adapter, or none.
    rates : tuple of int
        Audio compression rates (log-mel frames per token).
    video_rates : tuple of int
        Rates of the synthetic viseme stream (empty: audio only).
    compression : {"avg", "stack"}
        How frames are compressed: average pooling or stacking.
    num_experts : int
        Routed experts of each MoME adapter.
    top_k : int
        Routed experts per token.
    num_shared : int
        Shared (always-on) experts of each MoME adapter.
    expert_bottleneck : int
        Bottleneck width of every MoME expert.
    bottleneck : int
        Bottleneck of the dense adapters (0: matched to MoME's adapter parameters).
    upsample : int
        CTC output frames per token.
    encoder_dim : int
        Width of a trainable convolutional encoder before compression (0: none).
    test_snr_db : tuple of float or None
        Test SNRs in dB (None: clean).
    """

    steps: int = 1000
    batch_size: int = 8
    lr: float = 3e-3
    eval_every: int = 100
    snr_db: tuple[float | None, ...] = (None, 10.0, 5.0)
    num_phrases: int = 120
    variants: int = 2
    data_seed: int = 0
    cache: str | None = None
    layers: int = 2
    adapter: str = "mome"
    rates: tuple[int, ...] = (4, 8, 16)
    video_rates: tuple[int, ...] = ()
    compression: str = "avg"
    num_experts: int = 8
    top_k: int = 2
    num_shared: int = 1
    expert_bottleneck: int = 8
    bottleneck: int = 0
    upsample: int = 8
    encoder_dim: int = 0
    test_snr_db: tuple[float | None, ...] = (None, 10.0, 5.0, 0.0)

    def __post_init__(self) -> None:
        super().__post_init__()
        from ...speech.mome import ADAPTER_KINDS, COMPRESSION_MODES, MoMEConfig

        for name, lo in (("num_phrases", 3), ("variants", 1), ("upsample", 1)):
            check_int_attr(self, name, lo)
        v = self.layers
        if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= 6:
            raise ValueError(f"layers must be an integer in [1, 6] (MiniLM has 6), got {v!r}")
        for name in ("bottleneck", "encoder_dim"):
            check_int_attr(self, name, 0)
        if self.adapter not in ADAPTER_KINDS:
            raise ValueError(f"adapter must be one of {ADAPTER_KINDS}, got {self.adapter!r}")
        if self.compression not in COMPRESSION_MODES:
            raise ValueError(
                f"compression must be one of {COMPRESSION_MODES}, got {self.compression!r}"
            )
        self.rates = _rates("rates", self.rates, allow_empty=False)
        self.video_rates = _rates("video_rates", self.video_rates, allow_empty=True)
        self.test_snr_db = tuple(self.test_snr_db)
        if not self.test_snr_db:
            raise ValueError("test_snr_db is empty: give at least one SNR (none = clean)")
        try:
            MoMEConfig(
                d_model=384,
                num_experts=self.num_experts,
                top_k=self.top_k,
                num_shared=self.num_shared,
                bottleneck=self.expert_bottleneck,
            )
        except ValueError as err:
            msg = str(err)
            if msg.startswith("bottleneck"):
                msg = "expert_" + msg
            raise ValueError(msg) from None
        model_rates = self.model_rates()
        for m, rs in (self.train_rates or {}).items():
            if m not in model_rates or not set(rs) <= set(model_rates[m]):
                raise ValueError(
                    f"train_rates {m}={','.join(map(str, rs))} must be among the model's rates "
                    f"{ {k: list(v) for k, v in model_rates.items()} }"
                )

    def model_rates(self) -> dict[str, tuple[int, ...]]:
        """Compression rates per modality of the model."""
        out = {"audio": self.rates}
        if self.video_rates:
            out["video"] = self.video_rates
        return out


def build_recognizer(cfg: MoMERunConfig):
    """The recogniser of ``cfg`` on the frozen MiniLM (initialised after seeding ``cfg.seed``)."""
    from ...speech.mome import (
        MatryoshkaRates,
        MoMEConfig,
        RecognizerConfig,
        SpeechRecognizer,
        load_minilm,
        matched_bottleneck,
    )
    from ...train import seed_everything

    backbone = load_minilm(cfg.layers)
    d = int(backbone.config.hidden_size)
    mome = MoMEConfig(
        d_model=d,
        num_experts=cfg.num_experts,
        top_k=cfg.top_k,
        num_shared=cfg.num_shared,
        bottleneck=cfg.expert_bottleneck,
    )
    comp = MatryoshkaRates(cfg.model_rates(), cfg.compression)
    n_adapters = len(comp.combinations()) if cfg.adapter == "per_rate" else 1
    rcfg = RecognizerConfig(
        input_dims={"audio": 40, "video": 22},
        frame_rates={"audio": 100.0, "video": 25.0},
        compression=comp,
        adapter=cfg.adapter,
        mome=mome,
        bottleneck=cfg.bottleneck or matched_bottleneck(mome, n_adapters),
        upsample=cfg.upsample,
        encoder_dim=cfg.encoder_dim,
    )
    seed_everything(cfg.seed)
    return SpeechRecognizer(backbone, rcfg)


def run(cfg: MoMERunConfig, out: Path, resume: bool) -> dict:
    """Synthesise the data, train on the engine, test every rate combination and SNR."""
    from ..._util import atomic_torch_save
    from ...speech.mome import (
        SpeechSetConfig,
        TrainableParts,
        build_speech_set,
        evaluate,
        rate_label,
        recognizer_meta,
        routing_consistency,
        train_recognizer,
    )
    from ...train import current_context

    data = build_speech_set(
        SpeechSetConfig(num_phrases=cfg.num_phrases, variants=cfg.variants, seed=cfg.data_seed),
        Path(cfg.cache) if cfg.cache is not None else out / "data",
        progress=cfg.progress,
    )
    model = build_recognizer(cfg)
    trained = train_recognizer(model, data, cfg, out_dir=out, resume=resume)
    res = trained.result
    results: dict = {
        "train": res.to_dict(),
        "data": {k: len(v) for k, v in data.splits.items()},
        "parameters": model.parameter_counts(),
    }
    if not res.finished or not current_context().is_main:
        return results
    atomic_torch_save(
        out / "model.pt",
        {"meta": recognizer_meta(model, data), "state": TrainableParts(model).state_dict()},
    )
    combos = model.config.compression.combinations()
    test = {}
    for combo in combos:
        for snr in cfg.test_snr_db:
            ev = evaluate(
                model, data, combo, "test", snr_db=snr, video_dropout=cfg.video_dropout, seed=0
            )
            key = f"{rate_label(combo)}/{'clean' if snr is None else f'{snr:g}dB'}"
            test[key] = {"cer": ev["cer"], "wer": ev["wer"]}
    results["test"] = test
    if cfg.adapter == "mome" and len(combos) >= 2:
        rc = routing_consistency(model, data, combos, "test")
        results["routing"] = {k: rc[k] for k in ("js", "js_shuffled", "js_per_layer")}
    return results


METHOD = TrainMethod(
    name="mome",
    help="MoME: Matryoshka MoE adapters for speech recognition on a frozen LM",
    config=lambda: MoMERunConfig,
    run=run,
    outputs=("model.pt",),
    description=(
        "Train MoME (Matryoshka mixture-of-experts adapters, one router for every "
        "compression rate) or a baseline adapter for speech recognition on espeak-ng "
        "speech (and a synthetic viseme stream), beside the frozen all-MiniLM-L6-v2, "
        "on the shared training engine; test CER/WER per rate and SNR."
    ),
)
