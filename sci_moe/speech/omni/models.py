"""The Omni-Expert (OE), its phoneme-independent (PI) model, the 40-expert MoE and the
phoneme classifier (Saha, Ojuba, Collins, Mainsah, NeurIPS 2025).

All mask networks share one expert architecture: a causal MLP over a window of
``context`` log-magnitude frames (the current one last) -> ``hidden`` ReLU units -> a
sigmoid mask of ``n_bins``. (The paper's expert is an LSTM(123) or GRU(117)+attention; an
MLP over past frames keeps every model on the core's stacked expert banks.)

* **PI**: one expert trained on all frames.
* **MoE** (paper's baseline): ``y = \\sum_n p_n E_n(x)``, 40 experts (39 phonemes +
  silence) copied from PI (:func:`~sci_moe.moe.upcycle`), expert ``n`` trained on the
  frames of phoneme ``n`` (oracle routing). Its routed layer :class:`PhonemeMixture` is
  a :class:`~sci_moe.moe.RoutedModule` routed by the given probabilities, oracle one-hot
  (MoE\\ :sup:`k`) or predicted dense (MoE\\ :sup:`p`), run through
  :func:`~sci_moe.moe.dispatch`.
* **OE**: one expert copied from PI, inputs transformed per phoneme,
  ``z_n = a_n \\odot x + b_n`` (65-vectors from one-layer ReLU / LeakyReLU MLPs of the
  one-hot, folded into 40 x 65 tables), ``y = \\sum_n p_n E(z_n)`` (``"mixture"``, Eq. 3)
  or ``E(\\bar a \\odot x + \\bar b)`` (``"folded"``, one pass), with oracle (OE\\ :sup:`k`)
  or predicted (OE\\ :sup:`p`) ``p``.
* **Phoneme classifier**: the same MLP family, 40 softmax outputs (the paper: sigmoids).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch
from torch import nn

from sci_moe.moe import MLPExperts, RoutedModule, Routing, upcycle

from ..phonemes import N_PHONEME_CLASSES
from .task_affine import TaskAffineTable, task_affine_forward

__all__ = [
    "MaskNetConfig",
    "OmniExpertMask",
    "PhonemeClassifier",
    "PhonemeIndependentMask",
    "PhonemeMixture",
    "PhonemeMoEMask",
    "oracle_probs",
]


@dataclass(frozen=True)
class MaskNetConfig:
    """Sizes shared by every mask network and the classifier.

    Parameters
    ----------
    n_bins : int
        Frequency bins per frame (65 at 16 kHz, 8 ms).
    context : int
        Frames per input window (causal).
    hidden : int
        Hidden units of the expert MLP.
    n_classes : int
        Subtasks (39 phonemes + silence).
    classifier_hidden : int
        Hidden units of the phoneme classifier.
    """

    n_bins: int = 65
    context: int = 8
    hidden: int = 256
    n_classes: int = N_PHONEME_CLASSES
    classifier_hidden: int = 256

    def __post_init__(self):
        for name in ("n_bins", "context", "hidden", "n_classes", "classifier_hidden"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")

    @property
    def d_in(self) -> int:
        """Expert input size ``context * n_bins``."""
        return self.context * self.n_bins


def _check(x: torch.Tensor, cfg: MaskNetConfig) -> None:
    if x.dim() != 3 or x.shape[1:] != (cfg.context, cfg.n_bins):
        raise ValueError(
            f"features must have shape (T, context={cfg.context}, n_bins={cfg.n_bins}), "
            f"got {tuple(x.shape)}"
        )


def _mask_bank(num_experts: int, cfg: MaskNetConfig) -> MLPExperts:
    """``num_experts`` MLP experts ``d_in -> hidden (ReLU) -> n_bins (sigmoid)``."""
    return MLPExperts(
        num_experts, cfg.d_in, cfg.hidden, "relu", True, cfg.n_bins, output_activation="sigmoid"
    )


def oracle_probs(labels: torch.Tensor, n_classes: int = N_PHONEME_CLASSES) -> torch.Tensor:
    """One-hot probabilities of oracle labels, shape ``(T, n_classes)`` (default dtype)."""
    return nn.functional.one_hot(labels.long(), n_classes).to(torch.get_default_dtype())


class PhonemeIndependentMask(nn.Module):
    """PI model: one expert (a one-expert sigmoid-output MLP bank) for all frames.

    Parameters
    ----------
    config : MaskNetConfig
    """

    def __init__(self, config: MaskNetConfig | None = None) -> None:
        super().__init__()
        self.config = cfg = config or MaskNetConfig()
        self.bank = _mask_bank(1, cfg)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Mask of shape ``(T, n_bins)`` from features ``(T, context, n_bins)``."""
        _check(x, self.config)
        return self.bank.forward_expert(0, x.reshape(x.shape[0], -1))


def _probs_routing(probs: torch.Tensor) -> Routing:
    T, N = probs.shape
    if bool(((probs == 0) | (probs == 1)).all()) and bool((probs.sum(1) == 1).all()):
        idx = probs.argmax(1, keepdim=True)
        return Routing.from_assignments(idx, torch.ones_like(probs[:, :1]), N, probs=probs)
    idx = torch.arange(N, device=probs.device).expand(T, N)
    return Routing.from_assignments(idx, probs, N, probs=probs)


class PhonemeMixture(RoutedModule):
    """The phoneme MoE's routed layer: ``n_classes`` mask experts mixed by given probabilities.

    A :class:`~sci_moe.moe.RoutedModule` on flattened windows (tokens of
    ``d_model = context * n_bins`` features) whose :meth:`route` turns the phoneme
    probabilities into a :class:`~sci_moe.moe.Routing` (no learned router): a one-hot
    row keeps one slot (one expert pass), otherwise every expert is used with weight
    ``p_n`` (dense gating). Call it as ``layer(x, probs=p)``.

    Parameters
    ----------
    config : MaskNetConfig

    Attributes
    ----------
    experts : MLPExperts
        ``n_classes`` experts ``d_in -> hidden (ReLU) -> n_bins (sigmoid)``.
    """

    def __init__(self, config: MaskNetConfig) -> None:
        super().__init__()
        self.config = config
        self.d_model = config.d_in
        self.experts = _mask_bank(config.n_classes, config)

    def route(self, x: torch.Tensor, *, probs: torch.Tensor) -> Routing:
        """Routing of the ``(T, d_in)`` windows ``x`` by probabilities ``(T, n_classes)``."""
        want = (x.shape[0], self.config.n_classes)
        if probs.dim() != 2 or tuple(probs.shape) != want:
            raise ValueError(
                f"probs must have shape (T, n_classes) = {want}, got {tuple(probs.shape)}"
            )
        return _probs_routing(probs)


class PhonemeMoEMask(nn.Module):
    """The phoneme MoE: ``n_classes`` experts, mixed by oracle or predicted probabilities.

    Parameters
    ----------
    config : MaskNetConfig

    Attributes
    ----------
    mixture : PhonemeMixture
        The routed layer (its ``experts`` are the ``n_classes`` mask experts).
    """

    def __init__(self, config: MaskNetConfig | None = None) -> None:
        super().__init__()
        self.config = cfg = config or MaskNetConfig()
        self.mixture = PhonemeMixture(cfg)

    @classmethod
    def from_pi(cls, pi: PhonemeIndependentMask) -> PhonemeMoEMask:
        """Every expert starts as a copy of the PI expert (sparse upcycling)."""
        moe = cls(pi.config)
        moe.mixture.experts = upcycle(pi.bank, pi.config.n_classes)
        return moe

    def routing(self, probs: torch.Tensor) -> Routing:
        """Core :class:`~sci_moe.moe.Routing` of probabilities ``(T, n_classes)``.

        A one-hot row keeps one slot (one expert pass); otherwise every expert is used
        with weight ``p_n`` (dense gating).
        """
        return _probs_routing(probs)

    def forward(self, x: torch.Tensor, probs: torch.Tensor) -> torch.Tensor:
        """``sum_n p_n E_n(x)``, shape ``(T, n_bins)``; ``probs`` of shape ``(T, n_classes)``."""
        _check(x, self.config)
        return self.mixture(x.reshape(x.shape[0], -1), probs=probs)


class OmniExpertMask(nn.Module):
    """The Omni-Expert: one expert, per-phoneme input scale and shift.

    Parameters
    ----------
    config : MaskNetConfig
    scale, shift : bool
        Learn ``a_n`` / ``b_n`` (the shift/scale ablation; both False is PI fine-tuned).
    """

    def __init__(
        self, config: MaskNetConfig | None = None, *, scale: bool = True, shift: bool = True
    ) -> None:
        super().__init__()
        self.config = cfg = config or MaskNetConfig()
        self.expert = PhonemeIndependentMask(cfg)
        self.table = TaskAffineTable(cfg.n_classes, cfg.n_bins, scale=scale, shift=shift)

    @classmethod
    def from_pi(cls, pi: PhonemeIndependentMask, **kwargs) -> OmniExpertMask:
        """Expert copied from PI; the tables start at ``a_n = 1``, ``b_n = 0`` (= PI)."""
        oe = cls(pi.config, **kwargs)
        oe.expert = copy.deepcopy(pi)
        return oe

    def forward(self, x: torch.Tensor, probs: torch.Tensor, mode: str = "folded") -> torch.Tensor:
        """Mask ``(T, n_bins)``; ``mode`` ``"mixture"`` (N passes) or ``"folded"`` (one)."""
        _check(x, self.config)
        return task_affine_forward(self.expert, x, probs, self.table, mode)


class PhonemeClassifier(nn.Module):
    """Frame phoneme classifier: causal MLP over the same features, 40 logits.

    Parameters
    ----------
    config : MaskNetConfig
    """

    def __init__(self, config: MaskNetConfig | None = None) -> None:
        super().__init__()
        self.config = cfg = config or MaskNetConfig()
        self.net = nn.Sequential(
            nn.Linear(cfg.d_in, cfg.classifier_hidden),
            nn.ReLU(),
            nn.Linear(cfg.classifier_hidden, cfg.n_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits ``(T, n_classes)``."""
        _check(x, self.config)
        return self.net(x.reshape(x.shape[0], -1))

    def probs(self, x: torch.Tensor) -> torch.Tensor:
        """Softmax probabilities ``(T, n_classes)``."""
        return torch.softmax(self.forward(x), dim=-1)
