r"""Pretraining the speech encoder alone with CTC, and loading it (frozen) into a recogniser.

MoME's audio and video encoders (Whisper, AV-HuBERT) come pretrained and stay frozen; the
stand-in here, :class:`~sci_moe.speech.mome.SpeechEncoder`, has to learn to hear first.
:func:`pretrain_encoder` trains it once, on its own, with a CTC character head:

.. math::

    \mathcal L = \frac{1}{|R|} \sum_{r \in R}
        \mathcal L_{CTC}\big(Y \mid W\, \mathrm{avg}_r(\mathrm{Enc}(\tilde x))\big),

with ``R`` the ``rates`` (default rate 1 only, as the paper's encoders never see the
Matryoshka compression), :func:`~sci_moe.speech.mome.compress` average pooling, a linear
head ``W`` emitting ``upsample`` characters per token and ``\tilde x`` the frames with
noise augmentation and SpecAugment masking (the ``time_masks`` / ``freq_masks`` of the
:class:`~sci_moe.speech.mome.EncoderConfig`, :func:`~sci_moe.speech.mome.spec_mask`). It
runs on the engine (:class:`sci_moe.train.Trainer`): checkpoints, exact resume, the
wall-time budget, the best validation CER kept.

The head is discarded: :func:`save_encoder` writes the encoder with its config (a verified
file), and :func:`load_encoder` loads it into a :class:`~sci_moe.speech.mome.SpeechRecognizer`
after checking that the architecture matches, frozen by default (then it stays in eval mode
and out of the optimiser, and its digest enters the training run's ``meta``); the encoder
files are :mod:`.encoder_file`'s.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from sci_moe._util import module_device, to_device
from sci_moe.train import StreamBatches, Trainer, TrainResult, seed_everything
from sci_moe.train import TrainConfig as EngineConfig

from .dataset import SpeechSet
from .encoder import EncoderConfig, SpeechEncoder
from .encoder_file import _MODALITIES, load_encoder, read_encoder, save_encoder
from .matryoshka import compress
from .text import BLANK, VOCAB, char_error_rate, ctc_greedy_decode, word_error_rate
from .train import _data_meta

__all__ = [
    "PRETRAIN_SPEC_MASK",
    "EncoderCTC",
    "PretrainConfig",
    "PretrainRun",
    "evaluate_encoder",
    "load_encoder",
    "pretrain_encoder",
    "read_encoder",
    "save_encoder",
]


#: The SpecAugment masks of the MoME benchmark's encoder pretraining (``benchmarks/mome``),
#: :class:`~sci_moe.speech.mome.EncoderConfig` keywords: two time masks of up to 20 frames
#: (0.2 s, at most a fifth of the utterance) and two bands of up to 8 of the 40 mel bins.
PRETRAIN_SPEC_MASK = {
    "time_masks": 2,
    "time_mask_width": 20,
    "time_mask_ratio": 0.2,
    "freq_masks": 2,
    "freq_mask_width": 8,
}


@dataclass
class PretrainConfig(EngineConfig):
    """Options of :func:`pretrain_encoder`: the engine's (:class:`sci_moe.train.TrainConfig`)
    and the pretraining's own.

    Evaluations (every ``eval_every`` steps) measure the greedy-CTC character error rate
    of the validation split (noise-free) at every rate; ``monitor`` defaults to their
    mean, ``val_cer``.

    Parameters
    ----------
    modality : {"audio", "video"}
        The stream the encoder hears (or sees).
    rates : tuple of int
        Compression rates the CTC loss averages over (default ``(1,)``: the encoder's own
        token rate).
    upsample : int
        CTC output frames per token, >= 1 (the head's characters per token).
    snr_db : tuple of float or None
        SNRs (dB, ``None`` = clean) drawn uniformly per batch: noise augmentation.
    video_dropout : float
        Probability of a zeroed video frame in training batches, in [0, 1).
    """

    steps: int = 20000
    batch_size: int = 16
    lr: float = 2e-3
    warmup: float = 0.05
    eval_every: int = 500
    monitor: str = "val_cer"
    modality: str = "audio"
    rates: tuple[int, ...] = (1,)
    upsample: int = 2
    snr_db: tuple[float | None, ...] = (None,)
    video_dropout: float = 0.0

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.modality not in _MODALITIES:
            raise ValueError(f"modality must be one of {_MODALITIES}, got {self.modality!r}")
        rates = (self.rates,) if isinstance(self.rates, int) else tuple(self.rates)
        if not rates or not all(
            isinstance(r, int) and not isinstance(r, bool) and r >= 1 for r in rates
        ):
            raise ValueError(f"rates must be integers >= 1, got {self.rates!r}")
        self.rates = rates
        u = self.upsample
        if isinstance(u, bool) or not isinstance(u, int) or u < 1:
            raise ValueError(f"upsample must be an integer >= 1, got {u!r}")
        snr = tuple(self.snr_db) if isinstance(self.snr_db, list | tuple) else (self.snr_db,)
        if not snr:
            raise ValueError("snr_db is empty: use (None,) for clean training")
        for x in snr:
            if x is not None and (
                isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(x)
            ):
                raise ValueError(f"snr_db must hold finite numbers (dB) or None, got {x!r}")
        self.snr_db = snr
        v = self.video_dropout
        if isinstance(v, bool) or not isinstance(v, int | float) or not 0 <= v < 1:
            raise ValueError(f"video_dropout must be a number in [0, 1), got {v!r}")


class EncoderCTC(nn.Module):
    """A :class:`~sci_moe.speech.mome.SpeechEncoder` with a linear CTC character head.

    Parameters
    ----------
    d_in : int
        Features per input frame.
    encoder : EncoderConfig, optional
    upsample : int
        CTC output frames per token.

    Examples
    --------
    >>> m = EncoderCTC(40, EncoderConfig(dim=16, layers=1, heads=2), upsample=2)
    >>> x, mask = torch.randn(2, 32, 40), torch.ones(2, 32, dtype=torch.bool)
    >>> log_probs, lengths = m(x, mask, rate=4)
    >>> log_probs.shape, lengths.tolist()
    (torch.Size([2, 8, 29]), [8, 8])
    """

    def __init__(self, d_in: int, encoder: EncoderConfig | None = None, upsample: int = 2):
        super().__init__()
        if isinstance(upsample, bool) or not isinstance(upsample, int) or upsample < 1:
            raise ValueError(f"upsample must be an integer >= 1, got {upsample!r}")
        self.encoder = SpeechEncoder(d_in, encoder)
        self.upsample = upsample
        self.head = nn.Linear(self.encoder.config.dim, upsample * len(VOCAB))

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor, rate: int = 1
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """CTC log-probabilities ``(B, L * upsample, len(VOCAB))`` and valid lengths ``(B,)``
        of ``(B, T, d_in)`` frames, the encoder's tokens averaged over windows of ``rate``
        (``T`` a multiple of ``subsample * rate``)."""
        h, m = self.encoder(x, mask)
        if rate > 1:
            h, m = compress(h, rate, "avg", m)
        B, L, _ = h.shape
        logits = self.head(h).view(B, L * self.upsample, len(VOCAB))
        return F.log_softmax(logits.float(), -1), m.sum(1) * self.upsample

    def ctc_loss(self, log_probs, lengths, targets, target_lengths) -> torch.Tensor:
        """Mean CTC loss per target character (infinite -> 0)."""
        return F.ctc_loss(log_probs.transpose(0, 1), targets, lengths, target_lengths,
                          blank=BLANK, reduction="mean", zero_infinity=True)  # fmt: skip


@dataclass
class PretrainRun:
    """What :func:`pretrain_encoder` did.

    Attributes
    ----------
    model : EncoderCTC
        The encoder and its head, with the best evaluated weights, in eval mode.
    result : sci_moe.train.TrainResult
        The engine's summary (steps, reason, evaluations, best step).
    history : list of dict
        Per step of this call: ``step``, ``loss`` (mean CTC over the rates).
    """

    model: EncoderCTC
    result: TrainResult
    history: list


def _multiple(model: EncoderCTC, rates) -> int:
    return model.encoder.subsample * math.lcm(*rates)


def _stream(batch, modality: str):
    x, mask = batch.streams[modality]
    return x, mask.bool()


def pretrain_encoder(
    data: SpeechSet,
    encoder: EncoderConfig,
    config: PretrainConfig,
    *,
    out_dir: str | Path | None = None,
    resume: bool = False,
    stop_after: int | None = None,
    progress: bool | None = None,
) -> PretrainRun:
    """Train a speech encoder alone with CTC on ``data``'s training split (on the engine).

    The weights are initialised from ``config.seed`` (:func:`sci_moe.train.seed_everything`),
    and every step draws ``batch_size`` training utterances (without replacement), one
    SNR of ``config.snr_db`` and the noise from the engine's generator of that step; the
    SpecAugment masks of ``encoder`` are drawn from torch's global generator, which the
    engine seeds and checkpoints; so a run is a function of the seed and resumes exactly.
    On a GPU (``config.device``) the batches are built on the CPU (the same draws) and
    moved by the engine, the validation batches once; the masks are drawn on the CPU.

    Parameters
    ----------
    data : SpeechSet
        Its validation split (held-out voices) picks the best weights.
    encoder : EncoderConfig
        The encoder to train, with its masking (``time_masks``, ``freq_masks``).
    config : PretrainConfig
    out_dir : path, optional
        Trainer checkpoints and ``metrics.jsonl``; needed for ``resume``.
    resume : bool
        Continue the run in ``out_dir`` exactly.
    stop_after : int, optional
        Return after this many steps of this call (an interruption, for tests).
    progress : bool, optional
        Overrides ``config.progress``.

    Returns
    -------
    PretrainRun
        ``result.reason == "budget"`` when ``config.max_hours`` ran out first (resume it).
    """
    if not isinstance(config, PretrainConfig):
        raise TypeError(f"config must be a PretrainConfig, got {type(config).__name__}")
    if not isinstance(encoder, EncoderConfig):
        raise TypeError(f"encoder must be an EncoderConfig, got {type(encoder).__name__}")
    if progress is not None:
        config = dataclasses.replace(config, progress=bool(progress))
    train_idx = np.asarray(data.splits["train"])
    if len(train_idx) == 0:
        raise ValueError("the training split is empty: build the data set with more phrases")
    mod, rates = config.modality, config.rates
    d_in = int(data.batch(train_idx[:1]).streams[mod][0].shape[-1])
    seed_everything(config.seed)
    model = EncoderCTC(d_in, encoder, config.upsample)
    multiple = {mod: _multiple(model, rates)}

    def sample(gen: torch.Generator, n: int):
        pick = torch.randperm(len(train_idx), generator=gen)[: min(n, len(train_idx))]
        snr = config.snr_db[int(torch.randint(len(config.snr_db), (1,), generator=gen))]
        rng = np.random.default_rng(int(torch.randint(2**62, (1,), generator=gen)))
        return data.batch(train_idx[pick.numpy()], snr, rng, multiple, config.video_dropout)

    def loss_fn(m: EncoderCTC, batch):
        x, mask = _stream(batch, mod)
        h, hm = m.encoder(x, mask)  # masked once, then pooled at every rate
        total = 0.0
        for r in rates:
            z, zm = (h, hm) if r == 1 else compress(h, r, "avg", hm)
            B, L, _ = z.shape
            lp = F.log_softmax(m.head(z).view(B, L * m.upsample, len(VOCAB)).float(), -1)
            total = total + m.ctc_loss(lp, zm.sum(1) * m.upsample, batch.targets,
                                       batch.target_lengths)  # fmt: skip
        return total / len(rates)

    val_idx = np.asarray(data.splits["val"])
    batches: list = []

    def evaluate_fn(m: EncoderCTC) -> dict:
        if not batches:  # the same noise-free validation batches at every evaluation
            rng = np.random.default_rng(0)
            device = module_device(m)  # built on the CPU, moved once to the model's device
            for s in range(0, len(val_idx), 16):
                b = data.batch(val_idx[s : s + 16], None, rng, multiple, 0.0)
                batches.append(to_device(b, device))
        out: dict[str, float] = {}
        for r in rates:
            hyps, refs, ctc = [], [], 0.0
            for b in batches:
                lp, lengths = m(*_stream(b, mod), rate=r)
                ctc += float(m.ctc_loss(lp, lengths, b.targets, b.target_lengths)) * len(b.texts)
                hyps += ctc_greedy_decode(lp, lengths)
                refs += b.texts
            out[f"val_ctc[{r}]"] = ctc / len(refs)
            out[f"val_cer[{r}]"] = char_error_rate(hyps, refs)
            out[f"val_wer[{r}]"] = word_error_rate(hyps, refs)
        for name in ("ctc", "cer", "wer"):
            out[f"val_{name}"] = float(np.mean([out[f"val_{name}[{r}]"] for r in rates]))
        return out

    history: list[dict] = []

    def record(info) -> None:
        history.append({"step": info.step - 1, **info.metrics})

    meta = {
        "encoder": dataclasses.asdict(encoder),
        "d_in": d_in,
        "upsample": config.upsample,
        "data": _data_meta(data),
    }
    trainer = Trainer(
        model,
        loss_fn,
        StreamBatches(sample, config.batch_size, seed=config.seed),
        config,
        evaluate=evaluate_fn if len(val_idx) else None,
        out_dir=out_dir,
        hooks=[record],
        meta=meta,
        name="mome-encoder",
    )
    result = trainer.fit(resume=resume, stop_after=stop_after)
    model.eval()
    return PretrainRun(model, result, history)


@torch.no_grad()
def evaluate_encoder(
    model: EncoderCTC,
    data: SpeechSet,
    split: str = "test",
    rate: int = 1,
    snr_db: float | None = None,
    modality: str = "audio",
    seed: int = 0,
    batch_size: int = 16,
) -> dict:
    """CER and WER of an :class:`EncoderCTC`'s greedy CTC transcripts on one split.

    Parameters
    ----------
    model : EncoderCTC
    data : SpeechSet
    split : {"train", "val", "test"}
    rate : int
        Compression rate of the encoder's tokens before the head.
    snr_db : float or None
        Test noise (dB); ``None`` is clean.
    modality : {"audio", "video"}
    seed : int
        Noise source (the same seed gives the same noisy test set).
    batch_size : int

    Returns
    -------
    dict
        ``cer``, ``wer`` (fractions), ``hyps``, ``refs``.
    """
    if split not in data.splits:
        raise ValueError(f"split must be one of {list(data.splits)}, got {split!r}")
    idx = np.asarray(data.splits[split])
    if len(idx) == 0:
        raise ValueError(f"the {split!r} split is empty")
    model.eval()
    rng = np.random.default_rng(seed)
    multiple = {modality: _multiple(model, (rate,))}
    hyps, refs = [], []
    device = module_device(model)
    for s in range(0, len(idx), batch_size):
        b = to_device(data.batch(idx[s : s + batch_size], snr_db, rng, multiple, 0.0), device)
        lp, lengths = model(*_stream(b, modality), rate=rate)
        hyps += ctc_greedy_decode(lp, lengths)
        refs += b.texts
    return {
        "cer": char_error_rate(hyps, refs),
        "wer": word_error_rate(hyps, refs),
        "hyps": hyps,
        "refs": refs,
    }
