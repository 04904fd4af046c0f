"""Transcoder baselines of the sparse layer decompositions (TopK, with or without a skip).

Same interface and output (:class:`~sci_moe.language.mxd.DecompositionOutput`) as
:class:`~sci_moe.language.mxd.MixtureOfDecoders`, whose paper (Oldfield et al., NeurIPS 2025,
arXiv 2505.21364) compares against them at equal parameters.
"""

from __future__ import annotations

import torch
from torch import nn

from .decoders import (
    DecompositionOutput,
    _check_sizes,
    _check_top_k,
    _Decomposition,
    _sparse_decode,
    _sparse_top_k,
    _unit_rows,
)

__all__ = ["SkipTranscoder", "Transcoder"]


class Transcoder(_Decomposition):
    """TopK transcoder: a sparse autoencoder from an MLP's input to its output.

    .. math::

        h = \\mathrm{TopK}_k\\big(\\mathrm{ReLU}(W_{enc}^\\top x + b_{enc})\\big), \\qquad
        y = W_{dec}^\\top h + b_{dec}

    (Dunefsky et al. 2024; the baseline of the MxD paper, whose public code,
    james-oldfield/MxD ``sparse_autoencoder.py``, this follows: ``nn.Linear``
    initialisation, zero biases, no pre-encoder bias for transcoders). The decode
    gathers only the ``k`` active rows of :attr:`W_dec`.

    Parameters
    ----------
    d_in, d_out : int
        MLP input and output sizes.
    d_latent : int
        Number of latents (the public code's ``d_sae``, e.g. ``32 * d_in``).
    top_k : int
        Active latents per token, ``1 <= k <= d_latent``.
    normalize_decoder : bool
        Initialise the rows of :attr:`W_dec` with unit norm (keep them there with
        :meth:`renormalize_`). Not available for :class:`SkipTranscoder` (its decoder
        starts at zero).

    Attributes
    ----------
    W_enc : Parameter, shape (d_in, d_latent)
    b_enc : Parameter, shape (d_latent,)
    W_dec : Parameter, shape (d_latent, d_out)
    b_dec : Parameter, shape (d_out,)

    Examples
    --------
    >>> tc = Transcoder(d_in=8, d_out=6, d_latent=64, top_k=4)
    >>> tc(torch.randn(3, 8)).y.shape
    torch.Size([3, 6])
    """

    _skip = False

    def __init__(
        self,
        d_in: int,
        d_out: int,
        d_latent: int,
        top_k: int,
        normalize_decoder: bool = False,
    ) -> None:
        super().__init__()
        s = _check_sizes(d_in=d_in, d_out=d_out, d_latent=d_latent)
        self.d_in, self.d_out, self.d_latent = s["d_in"], s["d_out"], s["d_latent"]
        self.top_k = _check_top_k(top_k, self.d_latent, "latents")
        self.normalize_decoder = bool(normalize_decoder)
        if self.normalize_decoder and self._skip:
            raise ValueError(
                "a SkipTranscoder's decoder is zero-initialised and cannot start with unit "
                "rows; pass normalize_decoder=False"
            )
        self.W_enc = nn.Parameter(nn.Linear(self.d_in, self.d_latent).weight.data.t().contiguous())
        self.b_enc = nn.Parameter(torch.zeros(self.d_latent))
        if self._skip:
            self.W_dec = nn.Parameter(torch.zeros(self.d_latent, self.d_out))
            self.W_skip = nn.Parameter(torch.zeros(self.d_in, self.d_out))
        else:
            w = nn.Linear(self.d_latent, self.d_out).weight.data.t().contiguous()
            self.W_dec = nn.Parameter(_unit_rows(w) if self.normalize_decoder else w)
        self.b_dec = nn.Parameter(torch.zeros(self.d_out))

    def extra_repr(self) -> str:
        return f"d_in={self.d_in}, d_out={self.d_out}, d_latent={self.d_latent}, top_k={self.top_k}"

    def encode(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``TopK_k(ReLU(x W_enc + b_enc))`` of ``(T, d_in)`` rows: values, indices ``(T, k)``."""
        return _sparse_top_k(x, self.W_enc.t(), self.b_enc, self.top_k)

    def forward(self, x: torch.Tensor) -> DecompositionOutput:
        """Reconstruct the MLP output.

        Parameters
        ----------
        x : Tensor, shape (..., d_in)

        Returns
        -------
        DecompositionOutput
            ``y`` of shape ``(..., d_out)``, the latent code ``(..., k)``,
            ``num_units = d_latent``.
        """
        xf = self._flatten(x)
        values, indices = self.encode(xf)
        y = _sparse_decode(values, indices, self.W_dec) + self.b_dec
        if self._skip:
            y = y + xf @ self.W_skip
        return self._output(x, y, values, indices, self.d_latent)

    @torch.no_grad()
    def renormalize_(self) -> None:
        """Project every row of :attr:`W_dec` to unit norm (zero rows stay zero)."""
        self.W_dec.copy_(_unit_rows(self.W_dec))

    @torch.no_grad()
    def remove_parallel_grad_(self) -> None:
        """Remove from ``W_dec.grad`` its component along each (unit) row of :attr:`W_dec`.

        ``g_l <- g_l - (g_l . w_l) w_l`` (call before the optimiser step, then
        :meth:`renormalize_` after it), as for :class:`~sci_moe.language.mxd.MixtureOfDecoders`.
        """
        if self.W_dec.grad is not None:
            parallel = (self.W_dec.grad * self.W_dec).sum(-1, keepdim=True)
            self.W_dec.grad -= parallel * self.W_dec


class SkipTranscoder(Transcoder):
    """Skip-transcoder: a :class:`Transcoder` plus a linear skip connection.

    .. math::

        y = W_{dec}^\\top\\,\\mathrm{TopK}_k\\big(\\mathrm{ReLU}(W_{enc}^\\top x + b_{enc})\\big)
            + W_{skip}^\\top x + b_{dec}

    (Paulo et al. 2025, "Transcoders beat sparse autoencoders for interpretability";
    the public MxD code's ``use_skip``). As there, :attr:`W_skip` **and** :attr:`W_dec`
    are zero-initialised. ``W_skip`` is ``d_in x d_out`` (the public code's is
    ``d_in x d_in`` and needs ``d_out = d_in``).

    Parameters
    ----------
    d_in, d_out, d_latent, top_k
        As for :class:`Transcoder`.

    Attributes
    ----------
    W_skip : Parameter, shape (d_in, d_out)

    Examples
    --------
    >>> stc = SkipTranscoder(d_in=8, d_out=8, d_latent=64, top_k=4)
    >>> float(stc(torch.randn(3, 8)).y.detach().abs().max())
    0.0
    """

    _skip = True

    def __init__(self, d_in: int, d_out: int, d_latent: int, top_k: int) -> None:
        super().__init__(d_in, d_out, d_latent, top_k, normalize_decoder=False)
