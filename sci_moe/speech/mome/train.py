r"""Matryoshka training over every rate combination in one step (evaluation: :mod:`.evaluation`).

The MoME objective (Cappellazzo et al. 2025, Eq. for ``L``) averages the recognition
loss over the ``G L`` rate combinations of one batch and adds the Switch balance term
of every MoME layer:

.. math::

    \mathcal L = \frac{1}{|C|} \sum_{c \in C} \Big( \mathcal L_{CTC}(Y \mid Z^{c})
                 + \lambda \, \overline{L_{bal}}(c) \Big), \qquad \lambda = 0.01,

with ``Z^c`` the tokens compressed at combination ``c`` and ``\overline{L_{bal}}`` the
mean over layers of :func:`~sci_moe.moe.load_balancing_loss` (1 when balanced). Here
the recognition loss is CTC over characters instead of the LLM's cross-entropy. Only
the projectors, the adapters, the layer norm and the CTC head train; the backbone is
frozen.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from sci_moe._util import module_device, to_device
from sci_moe.train import StreamBatches, Trainer, TrainResult
from sci_moe.train import TrainConfig as EngineConfig

from .dataset import SpeechSet
from .evaluation import _multiple, evaluate, routing_consistency
from .matryoshka import rate_label
from .model import SpeechRecognizer
from .text import char_error_rate, ctc_greedy_decode, word_error_rate

__all__ = [
    "RecognizerRun",
    "TrainConfig",
    "TrainableParts",
    "evaluate",
    "recognizer_meta",
    "routing_consistency",
    "train_recognizer",
]


@dataclass
class TrainConfig(EngineConfig):
    """Options of :func:`train_recognizer`: the engine's
    (:class:`sci_moe.train.TrainConfig`) and MoME's own.

    The learning rate follows the engine's schedule (linear warm-up over ``warmup`` of
    the steps, then cosine decay), which is a proper schedule for any number of steps;
    evaluations (every ``eval_every`` steps) measure the validation split at every
    trained rate combination, and the weights of the best ``monitor`` (default: the mean
    validation CTC loss) are kept at the end.

    Parameters
    ----------
    balance_coef : float
        ``lambda`` of the balance term (0.01 in the paper), >= 0.
    train_rates : dict of str to tuple of int, or str, optional
        Rates to train on (default: every rate of the model), e.g. ``{"audio": (4,)}`` or
        the string ``"audio=4"`` (modalities separated by ``;``: ``"audio=4,16;video=1"``).
        The single-rate baseline passes only the lowest compression.
    snr_db : tuple of float or None
        SNRs (dB, ``None`` = clean) drawn uniformly per batch: noise augmentation.
    video_dropout : float
        Probability of a zeroed video frame in training batches (and in the validation
        batches), in [0, 1).
    encoder_lr : float, optional
        Peak learning rate of the encoders' trainable parameters (fine-tuning a
        pretrained encoder, :func:`~sci_moe.speech.mome.load_encoder` with
        ``freeze=False``, more gently than the adapters), > 0; ``None``: ``lr``.
    """

    steps: int = 300
    batch_size: int = 8
    lr: float = 2e-3
    warmup: float = 0.1
    eval_every: int = 50
    monitor: str = "val_ctc"
    balance_coef: float = 0.01
    train_rates: dict | None = None
    snr_db: tuple[float | None, ...] = (None,)
    video_dropout: float = 0.3
    encoder_lr: float | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        e = self.encoder_lr
        if e is not None and (
            isinstance(e, bool) or not isinstance(e, int | float) or not math.isfinite(e) or e <= 0
        ):
            raise ValueError(f"encoder_lr must be a number > 0 or None, got {e!r}")
        b = self.balance_coef
        if isinstance(b, bool) or not isinstance(b, int | float) or not b >= 0:
            raise ValueError(f"balance_coef must be a number >= 0, got {b!r}")
        v = self.video_dropout
        if isinstance(v, bool) or not isinstance(v, int | float) or not 0 <= v < 1:
            raise ValueError(f"video_dropout must be a number in [0, 1), got {v!r}")
        snr = tuple(self.snr_db) if isinstance(self.snr_db, list | tuple) else (self.snr_db,)
        for x in snr:
            if x is not None and (
                isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(x)
            ):
                raise ValueError(f"snr_db must hold finite numbers (dB) or None, got {x!r}")
        if not snr:
            raise ValueError("snr_db is empty: use (None,) for clean training")
        self.snr_db = snr
        self.train_rates = _parse_rates(self.train_rates)


def _parse_rates(value) -> dict | None:
    """``None``, a mapping ``modality -> rates`` or ``"audio=4,8;video=1"`` as a dict of tuples."""
    if value is None:
        return None
    if isinstance(value, str):
        text = value.strip()
        if text.lower() in ("", "none", "all"):
            return None
        out = {}
        for part in text.split(";"):
            m = re.fullmatch(r"\s*(\w+)\s*=\s*(\d+(?:\s*,\s*\d+)*)\s*", part)
            if m is None:
                raise ValueError(
                    f"train_rates must look like 'audio=4,8;video=1' (modality=rates), "
                    f"got {value!r}"
                )
            out[m.group(1)] = tuple(int(r) for r in m.group(2).split(","))
        return out
    if not isinstance(value, dict) or not value:
        raise ValueError(f"train_rates must be a dict of modality -> rates or None, got {value!r}")
    out = {}
    for m, rs in value.items():
        rs = (rs,) if isinstance(rs, int) else tuple(rs)
        if not rs or not all(isinstance(r, int) and not isinstance(r, bool) and r >= 1 for r in rs):
            raise ValueError(f"train_rates of {m!r} must be integers >= 1, got {rs!r}")
        out[str(m)] = rs
    return out


def _combinations(model: SpeechRecognizer, rates: dict | None) -> list[dict]:
    known = model.config.compression.rates
    if rates is None:
        return model.config.compression.combinations()
    for m, rs in rates.items():
        bad = [r for r in rs if m not in known or r not in known[m]]
        if bad:
            raise ValueError(f"train rates {bad} of {m!r} are not among the model's {known.get(m)}")
    mods = list(rates)
    return [dict(zip(mods, c, strict=True)) for c in itertools.product(*rates.values())]


class TrainableParts(nn.Module):
    """A :class:`SpeechRecognizer` seen by the training engine without its frozen backbone.

    ``state_dict`` holds only the trainable parts (projectors, encoders, adapters, norm,
    head), so checkpoints and the engine's copy of the best weights stay small (the
    frozen MiniLM is ~90 MB); :attr:`backbone_digest` identifies the backbone, and a
    resumed run must rebuild the same one (the engine compares it in ``meta``).

    Parameters
    ----------
    model : SpeechRecognizer
    """

    def __init__(self, model: SpeechRecognizer) -> None:
        super().__init__()
        self.model = model

    def forward(self, streams: dict, rates: dict):
        return self.model(streams, rates)

    def state_dict(self, *args, **kwargs) -> dict:
        full = self.model.state_dict(*args, **kwargs)
        return {k: v for k, v in full.items() if not k.startswith("backbone.")}

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        res = self.model.load_state_dict(state_dict, strict=False, assign=assign)
        missing = [k for k in res.missing_keys if not k.startswith("backbone.")]
        if strict and (missing or res.unexpected_keys):
            raise RuntimeError(
                f"state of the recogniser's trainable parts does not match: missing {missing}, "
                f"unexpected {res.unexpected_keys}"
            )
        return res

    def backbone_digest(self) -> str:
        """SHA-256 (16 hex digits) of the frozen backbone's tensors."""
        return _tensor_digest(self.model.backbone)


def _tensor_digest(module: nn.Module) -> str:
    """SHA-256 (16 hex digits) of a module's state (names and tensors)."""
    h = hashlib.sha256()
    for k, v in module.state_dict().items():
        h.update(k.encode())
        h.update(v.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


def _data_meta(data: SpeechSet) -> dict:
    """The data set's key, a digest of its utterances and the synthesiser that built it
    (absent for sets from caches written before synthesis was reproducible, whose audio
    depended on the order of the calls)."""
    h = hashlib.sha256("\n".join(data.texts).encode())
    for a in data.audio:
        h.update(np.ascontiguousarray(a).tobytes())
    meta = {"key": data.config.key(), "audio": h.hexdigest()[:16]}
    if data.synthesis is not None:
        meta["synthesis"] = data.synthesis
    return meta


def recognizer_meta(model: SpeechRecognizer, data: SpeechSet | None = None) -> dict:
    """Plain JSON data describing the recogniser (and the data set): the engine's ``meta``.

    Encoders whose parameters are all frozen (pretrained, loaded by
    :func:`~sci_moe.speech.mome.load_encoder`) add their digest under ``frozen_encoders``,
    so a run resumes only with the same pretrained encoder.
    """
    meta = {
        "recognizer": dataclasses.asdict(model.config),
        "backbone": TrainableParts(model).backbone_digest(),
    }
    frozen = {
        m: _tensor_digest(enc)
        for m, enc in model.encoders.items()
        if not any(p.requires_grad for p in enc.parameters())
    }
    if frozen:
        meta["frozen_encoders"] = frozen
    if data is not None:
        meta["data"] = _data_meta(data)
    return json.loads(json.dumps(meta))


@dataclass
class RecognizerRun:
    """What :func:`train_recognizer` did.

    Attributes
    ----------
    result : sci_moe.train.TrainResult
        The engine's summary (steps, reason, evaluations, best step).
    history : list of dict
        Per step of this call: ``step``, ``loss`` (the objective), ``ctc`` (mean CTC),
        ``balance``.
    """

    result: TrainResult
    history: list


def _validation(model: SpeechRecognizer, data: SpeechSet, combos, config: TrainConfig):
    """``evaluate(view) -> {"val_ctc", "val_cer", "val_wer", "val_cer[<rates>]", ...}``."""
    idx = data.splits["val"]
    if len(idx) == 0:
        return None
    multiple = _multiple(model)
    batches = []  # built once: the same noise-free validation batches at every evaluation
    rng = np.random.default_rng(0)

    def evaluate_fn(view: nn.Module) -> dict:
        if not batches:  # on the CPU, then moved once to the model's device
            device = module_device(view)
            for s in range(0, len(idx), 16):
                b = data.batch(idx[s : s + 16], None, rng, multiple, config.video_dropout)
                batches.append(to_device(b, device))
        with torch.no_grad():  # the encoders once per batch, for every rate combination
            encoded = [(b, view.model.encode(b.streams)) for b in batches]
        out: dict[str, float] = {}
        for combo in combos:
            ctc, hyps, refs = 0.0, [], []
            for b, enc in encoded:
                o = view.model(b.streams, combo, enc)
                ctc += float(view.model.ctc_loss(o, b.targets, b.target_lengths)) * len(b.texts)
                hyps += ctc_greedy_decode(o.log_probs, o.lengths)
                refs += b.texts
            label = rate_label(combo)
            out[f"val_ctc[{label}]"] = ctc / len(refs)
            out[f"val_cer[{label}]"] = char_error_rate(hyps, refs)
            out[f"val_wer[{label}]"] = word_error_rate(hyps, refs)
        for name in ("ctc", "cer", "wer"):
            vals = [v for k, v in out.items() if k.startswith(f"val_{name}[")]
            out[f"val_{name}"] = float(np.mean(vals))
        return out

    return evaluate_fn


def train_recognizer(
    model: SpeechRecognizer,
    data: SpeechSet,
    config: TrainConfig,
    progress: bool | None = None,
    *,
    out_dir: str | Path | None = None,
    resume: bool = False,
    stop_after: int | None = None,
) -> RecognizerRun:
    """Train the trainable parts of ``model`` on ``data``'s training split (on the engine).

    Every step draws ``batch_size`` training utterances (without replacement, at most
    the split's size), one SNR of ``config.snr_db`` and the noise and video dropout, all
    from the engine's generator of that step (:class:`sci_moe.train.StreamBatches`), so
    a run is a function of ``config.seed`` and resumes exactly; the loss is the mean
    over the rate combinations of CTC + ``balance_coef`` x balance. On a GPU
    (``config.device``) the whole recogniser, frozen backbone included, moves there; the
    batches are built on the CPU (the same draws as a CPU run) and the engine moves them,
    the validation batches are moved once.

    Parameters
    ----------
    model : SpeechRecognizer
        Built by the caller (after :func:`sci_moe.train.seed_everything` for
        reproducible initial weights).
    data : SpeechSet
    config : TrainConfig
    progress : bool, optional
        Overrides ``config.progress``.
    out_dir : path, optional
        Checkpoints (trainable parts only, see :class:`TrainableParts`) and
        ``metrics.jsonl``; needed for ``resume``.
    resume : bool
        Continue the run in ``out_dir`` exactly.
    stop_after : int, optional
        Return after this many steps of this call (an interruption, for tests).

    Returns
    -------
    RecognizerRun
        The engine's result and this call's per-step history. The model holds the best
        evaluated weights (``config.restore_best``) and is left in eval mode.
    """
    if not isinstance(config, TrainConfig):
        raise TypeError(
            f"config must be a sci_moe.speech.mome.TrainConfig, got {type(config).__name__}"
        )
    if progress is not None:
        config = dataclasses.replace(config, progress=bool(progress))
    combos = _combinations(model, config.train_rates)
    train_idx = np.asarray(data.splits["train"])
    if len(train_idx) == 0:
        raise ValueError("the training split is empty: build the data set with more phrases")
    multiple = _multiple(model)

    def sample(gen: torch.Generator, n: int):
        pick = torch.randperm(len(train_idx), generator=gen)[: min(n, len(train_idx))]
        snr = config.snr_db[int(torch.randint(len(config.snr_db), (1,), generator=gen))]
        rng = np.random.default_rng(int(torch.randint(2**62, (1,), generator=gen)))
        return data.batch(train_idx[pick.numpy()], snr, rng, multiple, config.video_dropout)

    def loss_fn(view: TrainableParts, batch):
        total = ctc_sum = bal_sum = 0.0
        encoded = view.model.encode(batch.streams)  # once for every rate combination
        for combo in combos:
            out = view.model(batch.streams, combo, encoded)
            ctc = view.model.ctc_loss(out, batch.targets, batch.target_lengths)
            total = total + ctc + config.balance_coef * out.aux_loss
            ctc_sum += float(ctc.detach())
            bal_sum += float(out.aux_loss.detach())
        n = len(combos)
        return total / n, {"ctc": ctc_sum / n, "balance": bal_sum / n}

    history: list[dict] = []

    def record(info) -> None:
        history.append({"step": info.step - 1, **info.metrics})

    view = TrainableParts(model)
    groups = None
    if config.encoder_lr is not None:  # the encoders at their own (smaller) peak rate
        enc = {id(p) for p in model.encoders.parameters() if p.requires_grad}
        rest = [p for p in model.parameters() if p.requires_grad and id(p) not in enc]
        groups = [{"params": rest, "lr": config.lr}]
        if enc:
            params = [p for p in model.encoders.parameters() if p.requires_grad]
            groups.append({"params": params, "lr": config.encoder_lr})
    trainer = Trainer(
        view,
        loss_fn,
        StreamBatches(sample, config.batch_size, seed=config.seed),
        config,
        param_groups=groups,
        evaluate=_validation(model, data, combos, config),
        out_dir=out_dir,
        hooks=[record],
        meta=recognizer_meta(model, data),
        name="mome",
    )
    result = trainer.fit(resume=resume, stop_after=stop_after)
    model.eval()
    return RecognizerRun(result, history)
