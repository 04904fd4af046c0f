"""``sci-moe train mome``: MoME (or a baseline adapter) for speech recognition on espeak-ng speech.

The data are corpus phrases spoken by espeak-ng with a synthetic viseme stream
(:func:`sci_moe.speech.mome.build_speech_set`, split by phrase); the recogniser is a
trainable projector into the frozen all-MiniLM-L6-v2 (its first ``--layers`` layers),
adapters beside its attention blocks and a CTC character head
(:class:`sci_moe.speech.mome.SpeechRecognizer`). Training visits every rate combination
per step (:func:`sci_moe.speech.mome.train_recognizer`, on the engine); the test split is
then transcribed at every combination and test SNR.

**A pretrained audio encoder.** Without one, the recogniser hears through a few trainable
convolutions at most (``--encoder-dim``) and, at the default sizes, transcribes next to
nothing: MoME's audio encoder (Whisper) comes pretrained and frozen. As in the benchmark
(``benchmarks/mome/full.py``), ``--pretrain-encoder-steps N`` first trains a
:class:`~sci_moe.speech.mome.SpeechEncoder` (``--pretrain-encoder-dim``,
``--pretrain-encoder-layers``, the benchmark's SpecAugment masks
:data:`~sci_moe.speech.mome.PRETRAIN_SPEC_MASK`) alone with CTC on the same training split
for at most ``N`` steps (:func:`sci_moe.speech.mome.pretrain_encoder`; learning rate 2e-3,
the run's batch size, evaluation interval, patience, SNRs and seed), writes it to
``OUT/audio_encoder.pt`` (:func:`~sci_moe.speech.mome.save_encoder`, verified) and loads it
frozen into the recogniser (:func:`~sci_moe.speech.mome.load_encoder`); ``--encoder PATH``
loads such a file instead (another run's ``OUT/audio_encoder.pt``; its architecture sets the
recogniser's encoder; a damaged or unfitting file is refused, exit code 2).
``--finetune-encoder LR`` trains the loaded encoder at peak learning rate ``LR`` instead of
freezing it. ``--resume`` continues an unfinished pretraining exactly (its checkpoints are
in ``OUT/audio_encoder_run/``) and reuses a finished ``OUT/audio_encoder.pt``;
``--max-hours`` is the budget of each stage. ``--voices`` sets the espeak-ng voices that
speak the training phrases (default: :class:`~sci_moe.speech.mome.SpeechSetConfig`'s four;
the benchmark's six: ``en-us,en-gb-x-rp,en-us+f3,en-us+m3,en-gb-scotland+f1,en-029+m2``,
:data:`~sci_moe.speech.mome.TRAIN_VOICES`) and ``--heldout-voices`` lets other voices speak
the validation and test phrases (the benchmark's: ``en-us-nyc+f4,en-gb-x-gbclan+m1``,
:data:`~sci_moe.speech.mome.HELDOUT_VOICES`); without it the training voices speak every
split.

``--device cuda`` runs both stages (the encoder's pretraining and the recogniser, frozen
MiniLM included) and the test transcriptions on a GPU; the speech is synthesised and its
features computed on the CPU, as are the random draws, and ``model.pt`` and
``audio_encoder.pt`` hold CPU tensors.

Writes ``OUT/model.pt`` (the trainable parts and the model description; the backbone is
rebuilt from the installed MiniLM), ``OUT/results.json`` (test CER/WER per combination and
SNR, MoME's cross-rate routing consistency, the encoder's record), the engine's files, the
pretrained encoder (above) and, without ``--cache``, ``OUT/data/`` (the synthesised data
set, which ``--resume`` reads again).

Examples
--------
.. code-block:: console

    $ sci-moe train mome --out runs/mome --steps 1000 --pretrain-encoder-steps 20000
    $ sci-moe train mome --out runs/mome2 --encoder runs/mome/audio_encoder.pt
    $ sci-moe train mome --out runs/ft --encoder runs/mome/audio_encoder.pt \\
          --finetune-encoder 3e-4
    $ sci-moe train mome --out runs/unheard --pretrain-encoder-steps 20000 \\
          --voices en-us,en-gb-x-rp,en-us+f3,en-us+m3,en-gb-scotland+f1,en-029+m2 \\
          --heldout-voices en-us-nyc+f4,en-gb-x-gbclan+m1
    $ sci-moe train mome --out runs/single --adapter single --train-rates audio=4 \\
          --encoder runs/mome/audio_encoder.pt
    $ sci-moe train mome --out runs/avsr --rates 4,16 --video-rates 1,2 \\
          --encoder runs/mome/audio_encoder.pt
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path

from ..._util import check_int_attr
from ...speech.mome.train import TrainConfig
from ._common import TrainMethod
from ._mome_encoder import ENCODER_FILE, ENCODER_HEADS, check_encoder_file, pretrain_stage

__all__ = ["ENCODER_FILE", "METHOD", "MoMERunConfig", "build_recognizer", "run"]

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
        trains on the same data without synthesising it again; synthesis is
        reproducible, and the cache records the synthesiser).
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
    voices : tuple of str
        espeak-ng voices (``"en-us"``, with an optional variant ``"en-us+f3"``) that speak
        the training phrases (and every split without heldout_voices); distinct, known to
        :func:`sci_moe.speech.list_voices`. Empty: SpeechSetConfig's default four. For
        example the benchmark's six (:data:`~sci_moe.speech.mome.TRAIN_VOICES`),
        en-us,en-gb-x-rp,en-us+f3,en-us+m3,en-gb-scotland+f1,en-029+m2.
    heldout_voices : tuple of str
        espeak-ng voices that speak only the validation and test phrases (empty: the
        training voices speak every split), for example the benchmark's
        en-us-nyc+f4,en-gb-x-gbclan+m1.
    encoder : str or None
        A pretrained audio encoder file (save_encoder's, such as another run's
        OUT/audio_encoder.pt) loaded frozen into the recogniser; its architecture sets the
        recogniser's audio encoder.
    pretrain_encoder_steps : int
        Pretrain the audio encoder alone with CTC for at most this many steps first, into
        OUT/audio_encoder.pt, and load it frozen (0: no pretraining; --resume continues
        it).
    pretrain_encoder_dim : int
        Width of the pretrained audio encoder, a multiple of its 4 heads.
    pretrain_encoder_layers : int
        Transformer layers of the pretrained audio encoder.
    finetune_encoder : float or None
        Fine-tune the loaded or pretrained encoder at this peak learning rate instead of
        freezing it (None: frozen).
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
    voices: tuple[str, ...] = ()
    heldout_voices: tuple[str, ...] = ()
    encoder: str | None = None
    pretrain_encoder_steps: int = 0
    pretrain_encoder_dim: int = 128
    pretrain_encoder_layers: int = 2
    finetune_encoder: float | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        from ...speech.mome import (
            ADAPTER_KINDS,
            COMPRESSION_MODES,
            HELDOUT_VOICES,
            TRAIN_VOICES,
            MoMEConfig,
        )

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
        self._check_encoder()
        self.heldout_voices = tuple(v.strip() for v in self.heldout_voices if v.strip())
        self.voices = tuple(v.strip() for v in self.voices if v.strip())
        for name in ("voices", "heldout_voices"):
            vs = getattr(self, name)
            if len(set(vs)) != len(vs):
                raise ValueError(f"{name} must be distinct, got {','.join(vs)}; give each "
                                 f"voice once (e.g. {','.join(TRAIN_VOICES)})")  # fmt: skip
        try:
            self.speech_set_config()
        except ValueError as err:
            raise ValueError(f"{err}; pick held-out voices other than the training ones "
                             f"(--voices; e.g. --voices {','.join(TRAIN_VOICES)} "
                             f"--heldout-voices {','.join(HELDOUT_VOICES)})") from None  # fmt: skip
        if self.voices or self.heldout_voices:
            self._check_voices_known()
        model_rates = self.model_rates()
        for m, rs in (self.train_rates or {}).items():
            if m not in model_rates or not set(rs) <= set(model_rates[m]):
                raise ValueError(
                    f"train_rates {m}={','.join(map(str, rs))} must be among the model's rates "
                    f"{ {k: list(v) for k, v in model_rates.items()} }"
                )

    def _check_voices_known(self) -> None:
        """Refuse a voice espeak-ng does not have (skipped where espeak-ng is not installed:
        the data set's build then checks)."""
        try:
            from ...speech import list_voices

            known = list_voices()
        except (ImportError, OSError):
            return
        from ...speech.mome import check_voices_known

        check_voices_known(self.voices + self.heldout_voices, known)

    def _check_encoder(self) -> None:
        for name, lo in (("pretrain_encoder_steps", 0), ("pretrain_encoder_dim", ENCODER_HEADS),
                         ("pretrain_encoder_layers", 0)):  # fmt: skip
            check_int_attr(self, name, lo)
        if self.pretrain_encoder_dim % ENCODER_HEADS:
            raise ValueError(f"pretrain_encoder_dim must be a multiple of the {ENCODER_HEADS} "
                             f"heads, got {self.pretrain_encoder_dim}")  # fmt: skip
        if self.encoder is not None and (not isinstance(self.encoder, str) or not self.encoder):
            raise ValueError(f"encoder must be the path of an encoder file, got {self.encoder!r}")
        pretrained = self.encoder is not None or self.pretrain_encoder_steps > 0
        if self.encoder is not None and self.pretrain_encoder_steps:
            raise ValueError(
                "encoder and pretrain_encoder_steps exclude each other: load a pretrained "
                "encoder file (--encoder PATH) or pretrain one (--pretrain-encoder-steps N)"
            )
        if pretrained and self.encoder_dim:
            raise ValueError(
                "encoder_dim (the convolutional encoder) and a pretrained encoder exclude "
                "each other: drop --encoder-dim (the pretrained SpeechEncoder replaces it)"
            )
        f = self.finetune_encoder
        if f is not None:
            if (
                isinstance(f, bool)
                or not isinstance(f, int | float)
                or not (math.isfinite(f) and f > 0)
            ):
                raise ValueError(f"finetune_encoder must be a learning rate > 0, got {f!r}")
            if not pretrained:
                raise ValueError(
                    "finetune_encoder needs a pretrained encoder: give --encoder PATH or "
                    "--pretrain-encoder-steps N"
                )
            if self.encoder_lr is not None:
                raise ValueError(
                    "finetune_encoder and encoder_lr both set the encoder's learning rate: "
                    "give only --finetune-encoder"
                )

    def speech_set_config(self):
        """The :class:`~sci_moe.speech.mome.SpeechSetConfig` of the run's data."""
        from ...speech.mome import SpeechSetConfig

        voices = {"voices": self.voices} if self.voices else {}
        return SpeechSetConfig(num_phrases=self.num_phrases, variants=self.variants,
                               heldout_voices=self.heldout_voices, **voices,
                               seed=self.data_seed)  # fmt: skip

    def model_rates(self) -> dict[str, tuple[int, ...]]:
        """Compression rates per modality of the model."""
        out = {"audio": self.rates}
        if self.video_rates:
            out["video"] = self.video_rates
        return out


def build_recognizer(cfg: MoMERunConfig, encoder=None):
    """The recogniser of ``cfg`` on the frozen MiniLM (initialised after seeding ``cfg.seed``).

    Parameters
    ----------
    cfg : MoMERunConfig
    encoder : EncoderConfig, optional
        A :class:`~sci_moe.speech.mome.SpeechEncoder` for the audio stream (to load a
        pretrained one into); none: ``cfg.encoder_dim``'s convolutions, if any.
    """
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
        encoders={} if encoder is None else {"audio": encoder},
    )
    seed_everything(cfg.seed)
    return SpeechRecognizer(backbone, rcfg)


def run(cfg: MoMERunConfig, out: Path, resume: bool) -> dict:
    """Synthesise the data, train on the engine, test every rate combination and SNR."""
    from ..._util import atomic_torch_save
    from ...speech.mome import (
        EncoderConfig,
        TrainableParts,
        build_speech_set,
        evaluate,
        load_encoder,
        rate_label,
        recognizer_meta,
        routing_consistency,
        train_recognizer,
    )
    from ...train import current_context

    if cfg.encoder is not None:  # refused before any data is synthesised
        check_encoder_file(Path(cfg.encoder))
    data = build_speech_set(
        cfg.speech_set_config(),
        Path(cfg.cache) if cfg.cache is not None else out / "data",
        progress=cfg.progress,
    )
    results: dict = {"data": {k: len(v) for k, v in data.splits.items()}}
    path = Path(cfg.encoder) if cfg.encoder is not None else None
    if cfg.pretrain_encoder_steps:
        pre = pretrain_stage(cfg, data, out, resume)
        results["pretrain"] = pre
        if pre["train"]["reason"] == "budget":  # the recogniser waits for the encoder
            return {**results, "train": pre["train"]}
        path = out / ENCODER_FILE
    encoder = None
    if path is not None:
        encoder = EncoderConfig(**check_encoder_file(path)["config"])
    model = build_recognizer(cfg, encoder)
    if path is not None:
        info = load_encoder(model, path, "audio", freeze=cfg.finetune_encoder is None)
        results["encoder"] = {"path": str(path), "digest": info["digest"],
                              "frozen": info["frozen"]}  # fmt: skip
    tcfg = cfg
    if cfg.finetune_encoder is not None:
        tcfg = dataclasses.replace(cfg, encoder_lr=cfg.finetune_encoder, finetune_encoder=None,
                                   encoder=None, pretrain_encoder_steps=0)  # fmt: skip
    trained = train_recognizer(model, data, tcfg, out_dir=out, resume=resume)
    res = trained.result
    results.update(train=res.to_dict(), parameters=model.parameter_counts())
    if not res.finished or not current_context().is_main:
        return results
    atomic_torch_save(
        out / "model.pt",
        {
            "meta": recognizer_meta(model, data),
            "state": {k: v.detach().cpu() for k, v in TrainableParts(model).state_dict().items()},
        },
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
    outputs=("model.pt", ENCODER_FILE),
    description=(
        "Train MoME (Matryoshka mixture-of-experts adapters, one router for every "
        "compression rate) or a baseline adapter for speech recognition on espeak-ng "
        "speech (and a synthetic viseme stream), beside the frozen all-MiniLM-L6-v2, "
        "on the shared training engine; test CER/WER per rate and SNR."
    ),
)
