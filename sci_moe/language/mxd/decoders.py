"""Sparse decompositions of a dense layer: Mixture of Decoders, transcoders, skip-transcoders.

All three map what a pretrained MLP reads (``x``, shape ``(..., d_in)``) to what it writes
(``y``, shape ``(..., d_out)``) through a *sparse code* of ``k`` active units per token,
and return a :class:`DecompositionOutput` with the same fields, so training, splicing and
probing code handles them alike.

* :class:`MixtureOfDecoders` (MxD; Oldfield et al., "Towards Interpretability Without
  Sacrifice: Faithful Dense Layer Decomposition with Mixture of Decoders", NeurIPS 2025,
  arXiv 2505.21364, public code james-oldfield/MxD): ``N`` full-rank experts
  ``W_n = D diag(c_n)`` that never exist as tensors.
* :class:`Transcoder`: a TopK sparse autoencoder from the MLP input to the MLP output.
* :class:`SkipTranscoder`: the transcoder plus a linear skip ``x W_skip``.

:func:`normalized_mse` is the public code's training loss. The transcoders live in
:mod:`sci_moe.language.mxd.transcoders`, the parameter budget helpers in
:mod:`sci_moe.language.mxd.decoder_budget`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from sci_moe._util import check_int, check_layer_input, check_real, get_activation
from sci_moe.moe import Routing

__all__ = [
    "DecompositionOutput",
    "MixtureOfDecoders",
    "normalized_mse",
]


@dataclass
class DecompositionOutput:
    """What a sparse layer decomposition returns.

    Attributes
    ----------
    y : Tensor, shape (..., d_out)
        The reconstruction of the dense layer's output.
    values : Tensor, shape (..., k)
        The ``k`` active coefficients of each token (expert gates ``a`` for MxD, latent
        activations for transcoders), sorted in decreasing order; they are ``>= 0``
        (ReLU before the top-k) and can be 0 when fewer than ``k`` units are positive.
    indices : Tensor, shape (..., k), int64
        Unit (expert or latent) of each coefficient, in ``[0, num_units)``.
    num_units : int
        ``N`` (experts) or ``d_latent`` (latents).
    """

    y: torch.Tensor
    values: torch.Tensor
    indices: torch.Tensor
    num_units: int

    def dense_code(self) -> torch.Tensor:
        """The code scattered into its dense form, shape ``(..., num_units)``.

        Costs ``T * num_units`` memory: use it for small batches and probing.
        """
        out = self.values.new_zeros(*self.values.shape[:-1], self.num_units)
        return out.scatter(-1, self.indices, self.values)

    def routing(self) -> Routing:
        """The code as a :class:`~sci_moe.moe.Routing` over ``num_units`` experts.

        Tokens are flattened to ``(T, k)``; ``probs`` is the dense code (``T *
        num_units`` memory), so the core's diagnostics (load, entropy) apply.
        """
        k = self.indices.shape[-1]
        return Routing.from_assignments(
            self.indices.reshape(-1, k), self.values.reshape(-1, k), self.num_units
        )


def _check_sizes(**sizes: int) -> dict[str, int]:
    out = {}
    for name, value in sizes.items():
        value = check_int(name, value)
        if value < 1:
            raise ValueError(f"{name} must be >= 1, got {value}")
        out[name] = value
    return out


def _check_top_k(top_k, num_units: int, what: str) -> int:
    top_k = check_int("top_k", top_k)
    if not 1 <= top_k <= num_units:
        raise ValueError(
            f"top_k={top_k} must be between 1 and the number of {what} ({num_units}); "
            f"lower top_k or add {what}"
        )
    return top_k


class _LinearTopK(torch.autograd.Function):
    """Top-``k`` of the affine map ``x W^T + b`` with a backward that stays sparse.

    The forward is the dense product and ``topk`` (as ``torch.addmm(b, x, W.t()).topk(k)``).
    Only the ``k`` selected pre-activations of a row carry a gradient, so the backward
    never forms the dense ``(T, U)`` gradient that autograd's ``topk`` backward scatters
    into: ``dW = G^T x`` is a sparse ``(U, T)`` by dense ``(T, d_in)`` product of ``T k``
    entries (not a dense ``U x T x d_in`` GEMM), ``db`` an index-add and ``dx`` the
    ``embedding_bag`` of the ``k`` selected rows. Equal to the autograd gradient up to
    float32 summation order.
    """

    @staticmethod
    def forward(ctx, x, weight, bias, k):
        top = torch.addmm(bias, x, weight.t()).topk(k, dim=-1)
        ctx.save_for_backward(x, weight, top.indices)
        ctx.mark_non_differentiable(top.indices)
        return top.values, top.indices

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_values, _grad_indices):
        x, weight, indices = ctx.saved_tensors
        T, k = indices.shape
        U = weight.shape[0]
        g = grad_values.to(weight.dtype)
        rows = indices.reshape(-1)
        grad_x = grad_w = grad_b = None
        if ctx.needs_input_grad[0]:
            grad_x = _sparse_decode(g, indices, weight).to(x.dtype)
        if ctx.needs_input_grad[1]:
            cols = torch.arange(T, device=x.device).repeat_interleave(k)
            sparse = torch.sparse_coo_tensor(
                torch.stack([rows, cols]), g.reshape(-1), (U, T), check_invariants=False
            ).coalesce()
            grad_w = torch.sparse.mm(sparse, x.to(weight.dtype))
        if ctx.needs_input_grad[2]:
            grad_b = g.new_zeros(U).index_add_(0, rows, g.reshape(-1))
        return grad_x, grad_w, grad_b, None


def _sparse_top_k(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, k: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """``TopK_k(ReLU(x W^T + b))`` over the units: values (decreasing) and indices.

    Parameters
    ----------
    x : Tensor, shape (T, d_in)
    weight : Tensor, shape (U, d_in)
        One row per unit (a transposed view is fine).
    bias : Tensor, shape (U,)
    k : int

    Returns
    -------
    values, indices : Tensor, shape (T, k)

    ReLU is monotone, so this is ``ReLU`` of the top-``k`` of the pre-activations (no
    ``(T, U)`` ReLU is formed); among units whose value is 0 the choice is arbitrary
    either way. The backward is sparse (:class:`_LinearTopK`).
    """
    values, indices = _LinearTopK.apply(x, weight, bias, k)
    return F.relu(values), indices


def _sparse_decode(values: torch.Tensor, indices: torch.Tensor, rows: torch.Tensor):
    """``sum_j values[t, j] * rows[indices[t, j]]`` without a ``(T, k, d)`` gather."""
    if values.shape[0] == 0:
        return rows.new_zeros(0, rows.shape[1])
    return F.embedding_bag(indices, rows, per_sample_weights=values.to(rows.dtype), mode="sum")


def _unit_rows(w: torch.Tensor) -> torch.Tensor:
    return w / w.norm(dim=1, keepdim=True).clamp_min(torch.finfo(w.dtype).tiny)


class _Decomposition(nn.Module):
    """Shared input handling of the three decompositions."""

    d_in: int
    d_out: int
    top_k: int

    def _flatten(self, x: torch.Tensor) -> torch.Tensor:
        # a floating (..., d_in) tensor of the weights' dtype (unless autocast is on)
        check_layer_input(x, self.d_in, check_finite=False, dtype=self._param_dtype())
        return x.reshape(-1, self.d_in)

    def _param_dtype(self) -> torch.dtype:
        return next(self.parameters()).dtype

    def _output(self, x, y, values, indices, num_units) -> DecompositionOutput:
        lead = x.shape[:-1]
        return DecompositionOutput(
            y.reshape(*lead, self.d_out),
            values.reshape(*lead, self.top_k),
            indices.reshape(*lead, self.top_k),
            num_units,
        )

    @property
    def num_units(self) -> int:
        """Units of the sparse code: experts ``N`` (MxD) or latents (transcoders)."""
        return self.num_experts if hasattr(self, "num_experts") else self.d_latent

    def num_parameters(self) -> int:
        """Number of trainable scalars (what :func:`decomposition_parameters` counts)."""
        return sum(p.numel() for p in self.parameters() if p.requires_grad)


class MixtureOfDecoders(_Decomposition):
    """Mixture of Decoders (MxD): a dense layer as ``N`` sparsely gated full-rank experts.

    From Oldfield et al., NeurIPS 2025 (arXiv 2505.21364; public code
    james-oldfield/MxD, ``use_conditional``). With ``z = phi(E^T x + b_e)`` (``H``
    hidden units) and the sparse gate ``a = TopK_k(ReLU(G^T x + b_g))`` over ``N``
    experts, expert ``n`` is the ``H x O`` matrix ``W_n = D diag(c_n)`` (``c_n`` the
    ``n``-th row of ``C``), and the layer is

    .. math::

        y = \\sum_{n=1}^{N} a_n W_n^\\top z + b
          = (C^\\top a) \\ast (D^\\top z) + b \\qquad \\text{(Lemma 2)}

    The right-hand side (the *efficient form*) is the forward: it costs one dense
    ``H x O`` GEMM, the ``N x d_in`` gate and a ``k``-row gather of ``C`` per token,
    never the ``N x H x O`` tensor of expert weights. :meth:`moe_form` computes the
    left-hand side for checking. ``rank(W_n) = rank(D)`` when ``c_n`` has no zero
    entry, so every expert is full rank while a GLU is the special case ``C = I`` of
    rank-1 experts.

    Parameters
    ----------
    d_in : int
        Input size (the MLP's input after its norm).
    d_out : int
        Output size ``O`` (the MLP's output).
    num_experts : int
        ``N``; tens of thousands are fine (memory ``N (d_in + d_out + 1)``).
    top_k : int
        Active experts per token, ``1 <= k <= N``.
    d_hidden : int, optional
        ``H``; default ``4 * d_in`` (the public code's expansion factor 4).
    activation : str
        ``phi``, a name of ``sci_moe._util.get_activation`` (public default
        ``"relu"``).
    normalize_experts : bool
        Initialise the rows ``c_n`` of ``C`` with unit norm (the public code's
        ``norm_dec``, its default). Keep them there during training with
        :meth:`remove_parallel_grad_` before and :meth:`renormalize_` after each
        optimiser step.

    Attributes
    ----------
    encoder : nn.Linear
        ``E^T x + b_e`` (weight ``(H, d_in)``), ``nn.Linear`` initialisation.
    gate : nn.Linear
        ``G^T x + b_g`` (weight ``(N, d_in)``), ``nn.Linear`` weights, zero bias.
    C : Parameter, shape (N, d_out)
        Expert vectors ``c_n`` (the public code's ``W_cond`` transposed).
    D : Parameter, shape (H, d_out)
        Shared decoder, **zero-initialised** as in the public code (the output starts
        at the bias; ``C`` and ``G`` receive gradients once ``D`` moves).
    bias : Parameter, shape (d_out,)
        ``b``, zero-initialised.

    Notes
    -----
    The gate chooses experts, yet the layer is not a :class:`~sci_moe.moe.RoutedModule`:
    its forward returns a :class:`DecompositionOutput` (the interface it shares with the
    transcoders), its experts exist only in the factorised form above (no expert bank to
    dispatch to), and a core :class:`~sci_moe.moe.Routing` carries dense ``(T, N)``
    scores, which the efficient form never forms for its tens of thousands of experts
    (:meth:`DecompositionOutput.routing` builds one on request). Its checks against the
    naive per-expert sum are :meth:`moe_form` and
    :func:`sci_moe.testing.reference_decomposition_forward`.

    Examples
    --------
    >>> mxd = MixtureOfDecoders(d_in=8, d_out=6, num_experts=100, top_k=4)
    >>> out = mxd(torch.randn(5, 8))
    >>> out.y.shape, out.values.shape, out.indices.shape
    (torch.Size([5, 6]), torch.Size([5, 4]), torch.Size([5, 4]))
    """

    def __init__(
        self,
        d_in: int,
        d_out: int,
        num_experts: int,
        top_k: int,
        d_hidden: int | None = None,
        activation: str = "relu",
        normalize_experts: bool = True,
    ) -> None:
        super().__init__()
        if d_hidden is None:
            d_hidden = 4 * check_int("d_in", d_in)
        s = _check_sizes(d_in=d_in, d_out=d_out, num_experts=num_experts, d_hidden=d_hidden)
        self.d_in, self.d_out, self.num_experts, self.d_hidden = (
            s["d_in"],
            s["d_out"],
            s["num_experts"],
            s["d_hidden"],
        )
        self.top_k = _check_top_k(top_k, self.num_experts, "experts")
        self.activation_name = activation
        self.activation = get_activation(activation)
        self.normalize_experts = bool(normalize_experts)
        self.encoder = nn.Linear(self.d_in, self.d_hidden)
        self.gate = nn.Linear(self.d_in, self.num_experts)
        nn.init.zeros_(self.gate.bias)
        N, O = self.num_experts, self.d_out
        if self.normalize_experts:
            self.C = nn.Parameter(_unit_rows(torch.empty(N, O).uniform_(-1.0, 1.0)))
        else:  # nn.Linear(N, d_out) initialisation, as the public code without norm_dec
            bound = N**-0.5
            self.C = nn.Parameter(torch.empty(N, O).uniform_(-bound, bound))
        self.D = nn.Parameter(torch.zeros(self.d_hidden, O))
        self.bias = nn.Parameter(torch.zeros(O))

    def extra_repr(self) -> str:
        return (
            f"d_in={self.d_in}, d_out={self.d_out}, num_experts={self.num_experts}, "
            f"top_k={self.top_k}, d_hidden={self.d_hidden}, activation={self.activation_name}"
        )

    def encode(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Hidden units and sparse gate of ``(T, d_in)`` rows.

        Returns
        -------
        z : Tensor, shape (T, H)
            ``phi(E^T x + b_e)``.
        values, indices : Tensor, shape (T, k)
            ``TopK_k(ReLU(G^T x + b_g))``: gate values (decreasing) and expert ids.
        """
        z = self.activation(self.encoder(x))
        values, indices = _sparse_top_k(x, self.gate.weight, self.gate.bias, self.top_k)
        return z, values, indices

    def forward(self, x: torch.Tensor) -> DecompositionOutput:
        """Efficient form ``y = (C^T a) * (D^T z) + b``.

        Parameters
        ----------
        x : Tensor, shape (..., d_in)

        Returns
        -------
        DecompositionOutput
            ``y`` of shape ``(..., d_out)``, the gate code ``(..., k)``, ``num_units = N``.
        """
        xf = self._flatten(x)
        z, values, indices = self.encode(xf)
        y = _sparse_decode(values, indices, self.C) * (z @ self.D) + self.bias
        return self._output(x, y, values, indices, self.num_experts)

    def moe_form(self, x: torch.Tensor, max_weight_elements: int = 2**28) -> DecompositionOutput:
        """MoE form ``y = sum_n a_n W_n^T z + b`` with ``W_n = D diag(c_n)``, for checking.

        Only the experts selected somewhere in the batch are built: ``W_n`` for the
        ``U <= T k`` distinct ids (``U x d_out x H`` memory), each applied to the rows that
        selected it and weighted by their codes (a plain loop over experts). Equal to
        :meth:`forward` up to rounding, with the same gradients. Meant for small
        batches: at SmolLM2-135M size (``H = 2304``, ``d_out = 576``) 64 tokens with
        ``k = 32`` can select 2,048 experts, 11 GB of float32 weights.

        Parameters
        ----------
        x : Tensor, shape (..., d_in)
        max_weight_elements : int
            Refuse (``ValueError``) to build more than this many expert-weight entries
            (default ``2**28``, 1 GiB in float32); pass fewer tokens or raise it.

        Returns
        -------
        DecompositionOutput
        """
        xf = self._flatten(x)
        T = xf.shape[0]
        z, values, indices = self.encode(xf)
        used, local = torch.unique(indices, return_inverse=True)
        size = used.numel() * self.d_hidden * self.d_out
        if size > max_weight_elements:
            raise ValueError(
                f"moe_form would build {used.numel()} expert matrices of {self.d_hidden} x "
                f"{self.d_out} ({size} entries > max_weight_elements={max_weight_elements}); "
                "pass fewer tokens (it is a check of the efficient forward) or raise the limit"
            )
        # nn.Linear layout of W_n^T = diag(c_n) D^T: (U, d_out, H)
        weight = self.C[used].unsqueeze(-1) * self.D.t().unsqueeze(0)
        y = self.bias.expand(T, -1).clone()
        for u in range(used.numel()):  # one materialised expert at a time
            coef = (values * (local == u)).sum(-1)
            rows = coef.nonzero().squeeze(-1)
            y[rows] += coef[rows, None] * (z[rows] @ weight[u].t())
        return self._output(x, y, values, indices, self.num_experts)

    def expert_weight(self, n: int) -> torch.Tensor:
        """The ``H x d_out`` matrix ``W_n = D diag(c_n)`` of expert ``n`` (for inspection)."""
        n = check_int("n", n)
        if not 0 <= n < self.num_experts:
            raise ValueError(f"expert index {n} out of range [0, {self.num_experts})")
        return self.D * self.C[n]

    @torch.no_grad()
    def renormalize_(self) -> None:
        """Project every ``c_n`` back to unit norm (call after the optimiser step)."""
        self.C.copy_(_unit_rows(self.C))

    @torch.no_grad()
    def remove_parallel_grad_(self) -> None:
        """Remove from ``C.grad`` its component along each ``c_n`` (before the step).

        ``g_n <- g_n - (g_n . c_n) c_n``, as the public code's
        ``remove_gradient_parallel_to_decoder_directions`` (assumes unit ``c_n``).
        """
        if self.C.grad is not None:
            parallel = (self.C.grad * self.C).sum(-1, keepdim=True)
            self.C.grad -= parallel * self.C


_REDUCTIONS = ("mean", "sum", "none", "elementwise_mean")


def normalized_mse(
    y: torch.Tensor, target: torch.Tensor, reduction: str = "mean", eps: float = 1e-12
) -> torch.Tensor:
    """Per-token squared error divided by the target's norm (the public MxD code's loss).

    .. math::

        \\ell_t = \\frac{\\sum_o (y_{to} - t_{to})^2}{\\lVert t_t \\rVert_2}

    Note the denominator is the **norm**, not the squared norm (``mse_loss`` in
    james-oldfield/MxD ``sparse_autoencoder.py``), so the loss scales like ``||t||``.

    Parameters
    ----------
    y, target : Tensor, shape (..., d_out)
        Reconstruction and the dense layer's output.
    reduction : {"mean", "sum", "none", "elementwise_mean"}
        ``"mean"`` averages ``l_t`` over tokens; ``"none"`` returns ``l_t`` with shape
        ``(...)``; ``"elementwise_mean"`` is the public code's ``mse_loss.mean()`` over
        tokens *and* features, i.e. ``"mean" / d_out`` (same minimiser, learning rate
        scaled by ``d_out``).
    eps : float
        Floor of the norm (a zero target gives a finite loss).

    Returns
    -------
    Tensor
        A scalar, or shape ``(...)`` for ``"none"``; in the promoted dtype of the inputs
        and at least float32 (the public code compares in float32).

    Examples
    --------
    >>> t = torch.tensor([[3.0, 4.0]])
    >>> float(normalized_mse(torch.zeros(1, 2), t))
    5.0
    """
    if reduction not in _REDUCTIONS:
        raise ValueError(f"reduction must be one of {_REDUCTIONS}, got {reduction!r}")
    eps = check_real("eps", eps)
    if eps < 0:
        raise ValueError(f"eps must be >= 0, got {eps}")
    if y.shape != target.shape or y.dim() == 0:
        raise ValueError(
            f"y and target must have the same shape (..., d_out); got {tuple(y.shape)} and "
            f"{tuple(target.shape)}"
        )
    dtype = torch.promote_types(torch.promote_types(y.dtype, target.dtype), torch.float32)
    y, target = y.to(dtype), target.to(dtype)
    per_token = (y - target).pow(2).sum(-1) / target.norm(dim=-1).clamp_min(eps)
    if reduction == "none":
        return per_token
    if reduction == "sum":
        return per_token.sum()
    if reduction == "mean":
        return per_token.mean()
    return per_token.mean() / y.shape[-1]
