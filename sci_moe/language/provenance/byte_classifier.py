r"""The byte-level MoE transformer of :mod:`sci_moe.language` fine-tuned as a K-way classifier.

Mansour & Heckel fine-tune a small pretrained causal LM with a classification head; here the
backbone is :class:`sci_moe.language.MoETransformerLM` (optionally initialised from a
checkpoint of :func:`sci_moe.language.train`). A sequence's UTF-8 bytes (the first
``seq_len``) run through the LM; the final-LayerNorm states :math:`h_t` are mean-pooled over
the real (non-padding) bytes and mapped to logits,

.. math:: \text{logits} = W \frac{1}{T}\sum_{t<T} h_t + b,

trained with cross-entropy plus the MoE layers' auxiliary loss. Padding sits at the end, so
causal attention keeps it out of the real positions.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace

import numpy as np
import torch
from torch import nn

from ..._util import check_device_name
from ...train import is_flat, until_flat
from .. import MoELMConfig, MoETransformerLM, encode, load_checkpoint
from ._fit import fit_classifier, predict_logits
from .bow import _check_labels, _class_names

__all__ = [
    "ByteClassifierConfig",
    "ByteTransformerClassifier",
    "LMSequenceClassifier",
    "fit_until_flat",
]


def _default_lm() -> dict:
    return {
        "d_model": 64,
        "n_layers": 2,
        "n_heads": 4,
        "seq_len": 256,
        "d_hidden": 64,
        "num_experts": 4,
        "top_k": 2,
    }


@dataclass
class ByteClassifierConfig:
    """Options of :class:`ByteTransformerClassifier`.

    Parameters
    ----------
    lm : dict
        :class:`~sci_moe.language.MoELMConfig` fields of the backbone (``seq_len`` is the
        number of bytes a sequence is truncated to).
    steps, batch_size : int
    lr, weight_decay : float
    seed : int
    """

    lm: dict = field(default_factory=_default_lm)
    steps: int = 300
    batch_size: int = 32
    lr: float = 2e-3
    weight_decay: float = 0.05
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("steps", "batch_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if not self.lr > 0:
            raise ValueError(f"lr must be > 0, got {self.lr}")
        self.lm_config()

    def lm_config(self) -> MoELMConfig:
        """The backbone's :class:`~sci_moe.language.MoELMConfig`."""
        return MoELMConfig(**self.lm)


class LMSequenceClassifier(nn.Module):
    """:class:`~sci_moe.language.MoETransformerLM` + masked mean pooling + linear head.

    Parameters
    ----------
    lm : MoETransformerLM
    num_classes : int
    """

    def __init__(self, lm: MoETransformerLM, num_classes: int) -> None:
        super().__init__()
        self.lm = lm
        self.head = nn.Linear(lm.config.d_model, num_classes)

    def forward(self, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``tokens`` (B, T) int64, ``-1`` = padding -> ``(logits (B, K), aux_loss)``."""
        mask = tokens >= 0
        states = []
        hook = self.lm.norm.register_forward_hook(lambda _m, _a, out: states.append(out))
        try:
            _, aux, _ = self.lm(tokens.clamp_min(0))
        finally:
            hook.remove()
        h = states[0]
        w = mask.to(h.dtype).unsqueeze(-1)
        pooled = (h * w).sum(1) / w.sum(1).clamp_min(1.0)
        return self.head(pooled), aux


def encode_batch(texts: Sequence[str], seq_len: int) -> torch.Tensor:
    """UTF-8 bytes of each text, truncated to ``seq_len``, right-padded with ``-1``.

    Returns
    -------
    Tensor, int64, shape (n, seq_len)
    """
    out = torch.full((len(texts), seq_len), -1, dtype=torch.long)
    for i, t in enumerate(texts):
        b = encode(t)[:seq_len].long()
        if b.numel() == 0:
            raise ValueError(f"text {i} is empty; a sequence needs at least one byte")
        out[i, : b.numel()] = b
    return out


class ByteTransformerClassifier:
    """K-way provenance classifier fine-tuning the byte-level MoE LM.

    Parameters
    ----------
    config : ByteClassifierConfig, optional
    init_from : path-like, optional
        A :func:`sci_moe.language.train` checkpoint whose model weights initialise the
        backbone (its model config must match ``config.lm``).
    progress : bool
    device : str
        Where :meth:`fit` trains (``"cpu"``, ``"cuda"``, ``"cuda:N"``): the model moves
        there and stays there; predictions take any input and return CPU results. Not
        saved with the classifier (a loaded one is on the CPU).
    """

    kind = "byte_transformer"

    def __init__(
        self,
        config: ByteClassifierConfig | None = None,
        init_from: str | os.PathLike | None = None,
        progress: bool = True,
        device: str = "cpu",
    ) -> None:
        self.config = config or ByteClassifierConfig()
        self.init_from = init_from
        self.progress = progress
        self.device = check_device_name(device)
        self.classes: tuple[str, ...] = ()
        self.model: LMSequenceClassifier | None = None
        #: Training losses per step and ``(step, validation accuracy)`` of the last fit.
        self.losses: list[float] = []
        self.curve: list[tuple[int, float]] = []

    def _build(self, k: int) -> LMSequenceClassifier:
        torch.manual_seed(self.config.seed)
        lm = MoETransformerLM(self.config.lm_config())
        if self.init_from is not None:
            state = load_checkpoint(self.init_from)["model"]
            missing, unexpected = lm.load_state_dict(state, strict=False)
            bad = [k for k in [*missing, *unexpected] if not k.endswith(".default.ema")]
            if bad:
                raise ValueError(f"checkpoint {self.init_from} does not fit config.lm: {bad[:5]}")
        return LMSequenceClassifier(lm, k).float()

    def fit(
        self,
        texts: Sequence[str],
        labels,
        classes: Sequence[str] | None = None,
        *,
        val: tuple[Sequence[str], Sequence[int]] | None = None,
        eval_every: int = 0,
        warm_start: bool = False,
    ):
        """Fine-tune on ``texts`` with integer ``labels``; returns ``self``.

        With ``val = (texts, labels)`` and ``eval_every > 0``, the accuracy on ``val`` is
        measured every ``eval_every`` steps and after the last, into :attr:`curve` (steps
        counted from this call's start). With ``warm_start`` the fitted model (same
        classes) trains on instead of a fresh one: a further cycle of ``config.steps``
        steps with a fresh optimiser and schedule (change ``config.seed`` to draw other
        batches than the previous cycle).

        Raises
        ------
        ValueError
            With ``warm_start`` when the classifier is not fitted or the classes differ.
        """
        y = torch.as_tensor(_check_labels(texts, labels))
        names = _class_names(y, classes)
        c = self.config
        if warm_start:
            if self.model is None:
                raise ValueError("warm_start needs a fitted classifier: call fit first")
            if names != self.classes:
                raise ValueError(
                    f"warm_start: classes {names} differ from the fitted {self.classes}"
                )
        else:
            self.model = self._build(len(names))
        self.classes = names
        x = encode_batch(texts, c.lm_config().seq_len)
        self.curve = []
        evaluate = None
        if val is not None and eval_every > 0:
            xv = encode_batch(val[0], c.lm_config().seq_len)
            yv = torch.as_tensor(np.asarray(val[1], dtype=np.int64))

            def evaluate(step: int) -> None:
                pred = predict_logits(self.model, xv, 64).argmax(-1)
                self.curve.append((step, float((pred == yv).double().mean())))

        self.losses = fit_classifier(
            self.model,
            x,
            y,
            c,
            progress=self.progress,
            desc="byte transformer",
            evaluate=evaluate,
            eval_every=eval_every,
            device=self.device,
        )
        return self

    def predict_proba(self, texts: Sequence[str]) -> np.ndarray:
        """Class probabilities, shape (n, K)."""
        if self.model is None:
            raise ValueError("the classifier is not fitted: call fit first")
        x = encode_batch(texts, self.config.lm_config().seq_len)
        return torch.softmax(predict_logits(self.model, x, 64), -1).numpy()

    def predict(self, texts: Sequence[str]) -> np.ndarray:
        """Predicted class indices, shape (n,)."""
        return self.predict_proba(texts).argmax(axis=1)

    def state(self) -> tuple[dict, dict]:
        """``(config, arrays)`` for :func:`~sci_moe.language.provenance.save_classifier`."""
        if self.model is None:
            raise ValueError("the classifier is not fitted: call fit first")
        arrays = {k: v.detach().cpu() for k, v in self.model.state_dict().items()}
        return {"config": asdict(self.config)}, arrays

    @classmethod
    def from_state(cls, classes, config: dict, arrays: dict, **_):
        """Rebuild from :meth:`state`."""
        clf = cls(ByteClassifierConfig(**config["config"]), progress=False)
        clf.classes = tuple(classes)
        clf.model = clf._build(len(clf.classes))
        clf.model.load_state_dict({k: torch.as_tensor(v) for k, v in arrays.items()})
        clf.model.eval()
        return clf


def _accuracy_flat(curve: list) -> bool:
    """Whether a validation-accuracy curve ``[[step, accuracy], ...]`` is flat by
    :func:`sci_moe.train.is_flat`'s defaults, ``mode="max"``."""
    return is_flat([s for s, _ in curve], [a for _, a in curve], mode="max")


def fit_until_flat(
    clf: ByteTransformerClassifier,
    texts: Sequence[str],
    labels,
    classes: Sequence[str] | None = None,
    *,
    val: tuple[Sequence[str], Sequence[int]],
    eval_every: int,
    max_cycles: int,
    min_cycles: int = 1,
) -> tuple[ByteTransformerClassifier, list, int, bool]:
    """Fit ``clf`` in cycles until its validation accuracy is flat (the benchmark's rule).

    Each cycle ``c`` is :meth:`ByteTransformerClassifier.fit` for ``clf.config.steps``
    steps (a fresh warm-up + cosine schedule; from the previous cycle's weights when
    ``c > 0``, ``warm_start``), its batches drawn with the seed ``clf.config.seed + 100 c``
    (:data:`sci_moe.train.cycles.CYCLE_SEED`; cycle 0 is the plain fit), run by
    :func:`sci_moe.train.until_flat`. After each cycle the validation accuracy curve of all
    cycles on one step axis is judged: flat when the best accuracy of its last 20 % of the
    steps is less than 1 % (relative) better than the best before, over five evaluations
    at least (:func:`sci_moe.train.is_flat`, ``mode="max"``), from cycle ``min_cycles`` on.
    A flat curve, or ``max_cycles`` cycles, end the fit. The curve is thus judged at the end
    of an annealed schedule, never in the middle of one. ``benchmarks/fingerprints`` trains
    its byte classifier with this function.

    ``min_cycles=2`` asks that a second cycle gain too little before the accuracy counts
    as flat: the end of one annealed warm-up + cosine schedule always looks flat (the
    learning rate decays to its floor), also when a restart would still gain (the
    benchmark's ``fingerprints_v2.json``: the byte classifier stopped flat after exactly
    one cycle on all 5 seeds; on the Routing Mamba benchmark every language model given a
    second cycle ended it with a 3-5 % lower validation loss).

    Parameters
    ----------
    clf : ByteTransformerClassifier or EncoderFinetuneClassifier
        The classifier (any with a dataclass ``config`` holding ``steps`` and ``seed``, a
        ``fit(texts, labels, classes, val=, eval_every=, warm_start=)`` and a ``curve``, as
        :class:`~sci_moe.language.provenance.EncoderFinetuneClassifier`);
        ``clf.config.steps`` is the cycle length and ``clf.config.seed`` the seed of
        cycle 0 (restored on return).
    texts : sequence of str, length n
        Training sequences.
    labels : array-like of int, shape (n,)
        Their class indices.
    classes : sequence of str, optional
        Class names (as :meth:`ByteTransformerClassifier.fit`).
    val : (sequence of str, array-like of int)
        Validation sequences and labels (e.g. held-out training documents).
    eval_every : int
        Steps between evaluations of the validation accuracy (>= 1); each cycle also
        evaluates after its last step.
    max_cycles : int
        The most cycles (>= 1): at most ``max_cycles * clf.config.steps`` steps.
    min_cycles : int
        The fewest cycles (1 to ``max_cycles``; default 1): the curve is judged only
        after cycle ``min_cycles``, so at least ``min_cycles * clf.config.steps`` steps.

    Returns
    -------
    clf : ByteTransformerClassifier
        ``clf``, fitted (its :attr:`~ByteTransformerClassifier.losses` and
        :attr:`~ByteTransformerClassifier.curve` are the last cycle's).
    curve : list of [int, float]
        ``[[step, validation accuracy], ...]`` of all cycles, cycle ``c``'s steps shifted
        by ``c * clf.config.steps``.
    cycles : int
        Cycles run, ``min_cycles`` to ``max_cycles``: ``cycles * clf.config.steps`` steps
        in all.
    converged : bool
        Whether ``curve`` is flat (False: ``max_cycles`` was reached unflat).

    Raises
    ------
    ValueError
        When ``eval_every`` or ``max_cycles`` is below 1, or ``min_cycles`` outside 1 to
        ``max_cycles``.

    Examples
    --------
    >>> from sci_moe.language.provenance import (
    ...     ByteClassifierConfig, ByteTransformerClassifier, fit_until_flat)
    >>> clf = ByteTransformerClassifier(ByteClassifierConfig(steps=300), progress=False)
    >>> clf, curve, cycles, converged = fit_until_flat(  # doctest: +SKIP
    ...     clf, texts, labels, ["c4", "gopher"], val=(val_texts, val_labels),
    ...     eval_every=25, max_cycles=4, min_cycles=2)
    """
    if eval_every < 1:
        raise ValueError(f"eval_every must be >= 1, got {eval_every}")
    if max_cycles < 1:
        raise ValueError(f"max_cycles must be >= 1, got {max_cycles}")
    if not 1 <= min_cycles <= max_cycles:
        raise ValueError(
            f"min_cycles must be in 1..max_cycles, got min_cycles={min_cycles} with "
            f"max_cycles={max_cycles}"
        )
    seed = clf.config.seed

    def cycle(c: int, cycle_seed: int) -> list:
        clf.config = replace(clf.config, seed=cycle_seed)
        clf.fit(texts, labels, classes, val=val, eval_every=eval_every, warm_start=c > 0)
        return [[int(s), float(a)] for s, a in clf.curve]

    try:
        curve, n, converged = until_flat(
            cycle, _accuracy_flat, max_cycles, seed, clf.config.steps, min_cycles=min_cycles
        )
    finally:
        clf.config = replace(clf.config, seed=seed)
    return clf, curve, n, converged
