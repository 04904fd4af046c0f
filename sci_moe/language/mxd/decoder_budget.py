"""Parameter counts of the sparse layer decompositions, and sizes that match a budget.

A fair comparison of :class:`~sci_moe.language.mxd.MixtureOfDecoders`,
:class:`~sci_moe.language.mxd.Transcoder` and
:class:`~sci_moe.language.mxd.SkipTranscoder` gives each the same number of trainable
parameters (Oldfield et al., NeurIPS 2025, arXiv 2505.21364:
``H = 4 d`` and ``N`` matched to a transcoder with ``d_sae = 32 d``).
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import nn

from sci_moe._util import check_int

from .decoders import MixtureOfDecoders
from .transcoders import SkipTranscoder, Transcoder

__all__ = [
    "DECOMPOSITION_KINDS",
    "DecompositionSizes",
    "decomposition_parameters",
    "match_decomposition_sizes",
]

#: Kinds understood by :func:`decomposition_parameters` and :class:`DecompositionSizes`.
DECOMPOSITION_KINDS = ("mxd", "transcoder", "skip_transcoder")

_SIZE_NAMES = {
    "mxd": ("num_experts", "d_hidden"),
    "transcoder": ("d_latent",),
    "skip_transcoder": ("d_latent",),
}


def _positive(name: str, value) -> int:
    value = check_int(name, value)
    if value < 1:
        raise ValueError(f"{name} must be >= 1, got {value}")
    return value


def decomposition_parameters(kind: str, d_in: int, d_out: int, **sizes: int) -> int:
    """Trainable parameters of a decomposition (equal to ``sum(p.numel())`` of the layer).

    .. math::

        P_{\\mathrm{MxD}} &= H (d_{in} + d_{out} + 1) + N (d_{in} + d_{out} + 1) + d_{out}
        \\quad (E, b_e;\\ G, b_g, C;\\ D;\\ b) \\\\
        P_{\\mathrm{TC}} &= L (d_{in} + d_{out} + 1) + d_{out}
        \\quad (W_{enc}, b_{enc}, W_{dec};\\ b_{dec}) \\\\
        P_{\\mathrm{skip}} &= P_{\\mathrm{TC}} + d_{in} d_{out} \\quad (W_{skip})

    An expert of MxD and a latent of a transcoder cost the same ``d_in + d_out + 1``.

    Parameters
    ----------
    kind : {"mxd", "transcoder", "skip_transcoder"}
    d_in, d_out : int
    **sizes : int
        ``num_experts`` (and optionally ``d_hidden``, default ``4 * d_in``) for
        ``"mxd"``; ``d_latent`` for the transcoders.

    Returns
    -------
    int

    Examples
    --------
    >>> decomposition_parameters("transcoder", 768, 768, d_latent=32 * 768)
    37774080
    """
    if kind not in DECOMPOSITION_KINDS:
        raise ValueError(f"kind must be one of {DECOMPOSITION_KINDS}, got {kind!r}")
    d_in, d_out = _positive("d_in", d_in), _positive("d_out", d_out)
    allowed = _SIZE_NAMES[kind]
    extra = set(sizes) - set(allowed)
    if extra:
        raise ValueError(f"{kind} takes the sizes {allowed}, not {sorted(extra)}")
    unit = d_in + d_out + 1
    if kind == "mxd":
        if "num_experts" not in sizes:
            raise ValueError("mxd needs num_experts=...")
        n = _positive("num_experts", sizes["num_experts"])
        h = _positive("d_hidden", sizes.get("d_hidden", 4 * d_in))
        return h * unit + n * unit + d_out
    if "d_latent" not in sizes:
        raise ValueError(f"{kind} needs d_latent=...")
    count = _positive("d_latent", sizes["d_latent"]) * unit + d_out
    return count + d_in * d_out if kind == "skip_transcoder" else count


@dataclass(frozen=True)
class DecompositionSizes:
    """Sizes of the three decompositions at one parameter budget.

    Each size is the largest whose count does not exceed :attr:`budget`; since an
    expert and a latent cost the same ``d_in + d_out + 1``, MxD and the transcoder are
    matched exactly when the budget is a transcoder's (the default), and the
    skip-transcoder is short of it by less than one latent.

    Attributes
    ----------
    d_in, d_out : int
    budget : int
        The parameter budget.
    d_hidden, num_experts : int
        MxD's ``H`` and ``N``.
    d_latent : int
        The transcoder's latents.
    skip_d_latent : int
        The skip-transcoder's latents (fewer: ``W_skip`` costs ``d_in d_out``).
    parameters : dict
        Exact count of each kind at these sizes (``<= budget``).
    """

    d_in: int
    d_out: int
    budget: int
    d_hidden: int
    num_experts: int
    d_latent: int
    skip_d_latent: int
    parameters: dict

    def sizes(self, kind: str) -> dict:
        """Constructor sizes of ``kind`` (``num_experts``/``d_hidden`` or ``d_latent``)."""
        if kind == "mxd":
            return {"num_experts": self.num_experts, "d_hidden": self.d_hidden}
        if kind == "transcoder":
            return {"d_latent": self.d_latent}
        if kind == "skip_transcoder":
            return {"d_latent": self.skip_d_latent}
        raise ValueError(f"kind must be one of {DECOMPOSITION_KINDS}, got {kind!r}")

    def build(self, kind: str, top_k: int, **kwargs) -> nn.Module:
        """The layer of ``kind`` at these sizes (``kwargs`` go to its constructor)."""
        cls = {
            "mxd": MixtureOfDecoders,
            "transcoder": Transcoder,
            "skip_transcoder": SkipTranscoder,
        }
        sizes = self.sizes(kind)
        return cls[kind](self.d_in, self.d_out, top_k=top_k, **sizes, **kwargs)


def match_decomposition_sizes(
    d_in: int,
    d_out: int,
    budget: int | None = None,
    *,
    latent_multiplier: int = 32,
    d_hidden: int | None = None,
) -> DecompositionSizes:
    """Sizes giving MxD, transcoder and skip-transcoder (at most) the same parameters.

    .. math::

        L = \\Big\\lfloor \\frac{P - d_{out}}{u} \\Big\\rfloor,\\quad
        L_{skip} = \\Big\\lfloor \\frac{P - d_{out} - d_{in} d_{out}}{u} \\Big\\rfloor,\\quad
        N = \\Big\\lfloor \\frac{P - d_{out}}{u} \\Big\\rfloor - H,\\qquad
        u = d_{in} + d_{out} + 1

    with ``P`` the budget (:func:`decomposition_parameters`). For GPT-2
    (``d = 768``, ``H = 3072``, budget of a transcoder with ``32 d = 24,576`` latents:
    37,774,080) this gives ``N = 21,504`` experts, exactly matched. The public code
    (``compute_expert_count`` in james-oldfield/MxD ``train_gpt2.py``) gives 21,490
    because it counts the transcoder's encoder bias (``d_sae = 24,576``) instead of
    MxD's (``H = 3,072``) among MxD's fixed parameters: its MxD has 21,518 parameters
    fewer than the transcoder.

    Parameters
    ----------
    d_in, d_out : int
    budget : int, optional
        Parameter budget; default the transcoder with ``latent_multiplier * d_in``
        latents.
    latent_multiplier : int
        See ``budget`` (the paper's 32).
    d_hidden : int, optional
        MxD's ``H``; default ``4 * d_in``.

    Returns
    -------
    DecompositionSizes

    Examples
    --------
    >>> s = match_decomposition_sizes(768, 768)
    >>> s.budget, s.num_experts, s.d_latent, s.skip_d_latent
    (37774080, 21504, 24576, 24192)
    """
    d_in, d_out = _positive("d_in", d_in), _positive("d_out", d_out)
    if budget is None:
        latents = _positive("latent_multiplier", latent_multiplier) * d_in
        budget = decomposition_parameters("transcoder", d_in, d_out, d_latent=latents)
    budget = _positive("budget", budget)
    h = _positive("d_hidden", 4 * d_in if d_hidden is None else d_hidden)
    unit = d_in + d_out + 1
    d_latent = (budget - d_out) // unit
    skip = (budget - d_out - d_in * d_out) // unit
    n = d_latent - h
    for name, value in (("d_latent", d_latent), ("skip_d_latent", skip), ("num_experts", n)):
        if value < 1:
            raise ValueError(
                f"a budget of {budget} parameters leaves {name}={value} (< 1) for "
                f"d_in={d_in}, d_out={d_out}, d_hidden={h}; raise the budget or lower d_hidden"
            )
    counts = {
        "mxd": decomposition_parameters("mxd", d_in, d_out, num_experts=n, d_hidden=h),
        "transcoder": decomposition_parameters("transcoder", d_in, d_out, d_latent=d_latent),
        "skip_transcoder": decomposition_parameters("skip_transcoder", d_in, d_out, d_latent=skip),
    }
    return DecompositionSizes(d_in, d_out, budget, h, n, d_latent, skip, counts)
