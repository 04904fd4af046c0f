"""Exact parameter and multiply-accumulate (MAC) counts of the OE models, per frame.

Counted from the modules (:func:`~sci_moe.speech.omni.complexity.model_costs` reads the
stacked bank weights and ``nn.Linear`` layers) with the rules of
:func:`~sci_moe.speech.omni.task_affine_macs`: a matrix-vector product is
``d_out d_in`` MACs, ``a x + b`` one MAC per element, biases and activations free.
For the expert MLP (``d_in = C F`` inputs, ``H`` hidden, ``F`` outputs) one pass is
``C F H + H F`` MACs and ``C F H + H + H F + F`` parameters.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import nn

from .models import OmniExpertMask, PhonemeClassifier, PhonemeIndependentMask, PhonemeMoEMask
from .task_affine import bank_macs_per_token, task_affine_macs

__all__ = ["ModelCost", "model_costs", "parameter_count"]


def parameter_count(module: nn.Module) -> int:
    """Number of parameters (trainable tensors; buffers such as folded tables excluded)."""
    return sum(p.numel() for p in module.parameters())


@dataclass(frozen=True)
class ModelCost:
    """Size and per-frame compute of one model at inference.

    Attributes
    ----------
    name : str
    parameters : int
        Numbers stored at inference (for OE: the expert plus the folded tables).
    train_parameters : int
        Parameters trained (for OE: the expert plus the scale/shift MLPs).
    macs : int
        Multiply-accumulates per frame, phoneme classifier excluded.
    """

    name: str
    parameters: int
    train_parameters: int
    macs: int


def model_costs(
    pi: PhonemeIndependentMask,
    moe: PhonemeMoEMask,
    oe: OmniExpertMask,
    classifier: PhonemeClassifier,
) -> dict[str, ModelCost]:
    """Costs of PI, MoE^k, MoE^p, OE^k, OE^p (folded and mixture forms) and the classifier.

    The predicted forms use every class (dense ``p``), the oracle forms one.

    Returns
    -------
    dict of str to ModelCost
        Keys ``"PI"``, ``"MoE^k"``, ``"MoE^p"``, ``"OE^k"``, ``"OE^p"`` (folded),
        ``"OE^p-mixture"``, ``"classifier"``.
    """
    cfg = pi.config
    N, F, C = cfg.n_classes, cfg.n_bins, cfg.context
    one = bank_macs_per_token(pi.bank)
    p_pi = parameter_count(pi)
    p_moe = parameter_count(moe)
    p_oe_expert = parameter_count(oe.expert)
    p_oe_train = p_oe_expert + oe.table.num_parameters() if not oe.table.folded else None
    if p_oe_train is None:  # folded: the MLPs are gone; count them as the same-shape MLPs
        p_oe_train = p_oe_expert + (N + 1) * F * (int(oe.table.use_scale) + int(oe.table.use_shift))
    p_oe_inf = p_oe_expert + oe.table.table_entries()
    aff = {"dim": F, "positions": C, "num_tasks": N}
    return {
        "PI": ModelCost("PI", p_pi, p_pi, one),
        "MoE^k": ModelCost(
            "MoE^k", p_moe, p_moe, task_affine_macs(one, 0, num_tasks=N, mode="mixture")
        ),
        "MoE^p": ModelCost(
            "MoE^p",
            p_moe,
            p_moe,
            task_affine_macs(one, 0, num_tasks=N, active_tasks=N, mode="mixture", d_out=F),
        ),
        "OE^k": ModelCost("OE^k", p_oe_inf, p_oe_train, task_affine_macs(one, **aff)),
        "OE^p": ModelCost(
            "OE^p", p_oe_inf, p_oe_train, task_affine_macs(one, **aff, active_tasks=N)
        ),
        "OE^p-mixture": ModelCost(
            "OE^p-mixture",
            p_oe_inf,
            p_oe_train,
            task_affine_macs(one, **aff, active_tasks=N, mode="mixture", d_out=F),
        ),
        "classifier": ModelCost(
            "classifier",
            parameter_count(classifier),
            parameter_count(classifier),
            bank_macs_per_token(classifier),
        ),
    }
