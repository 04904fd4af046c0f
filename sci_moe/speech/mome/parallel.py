r"""Attach adapters *in parallel* to frozen sub-modules with forward hooks.

For every target sub-module ``B`` (an attention block, an FFN or a whole transformer
layer) and its adapter ``A``, the hooked forward returns

.. math:: h_{out} = B(h) + A(h),

where ``h`` is the first positional (or the ``hidden_states`` keyword) input of ``B``.
Under a token mask (:meth:`ParallelAdapters.context`, or :meth:`RealTokens.active` of
its ``tokens``) the adapter sees only the real tokens and adds nothing to padding. The
backbone's parameters are frozen (``requires_grad=False``) and its code is not changed;
removing the hooks (:meth:`ParallelAdapters.remove`) restores the original model exactly.
The hooks find their adapters through the :class:`ParallelAdapters` at call time, so a
``copy.deepcopy`` of a model holding the backbone and its adapters is independent.

:func:`pack_linears` makes the frozen backbone's ``nn.Linear`` layers skip padding:
inside :meth:`RealTokens.active` they multiply only the real tokens of a ``(B, L, d)``
input and leave zeros at the padded positions, whose values the backbone's attention
masks out anyway (the real tokens' outputs and gradients are those of the padded
computation, equal to rounding; bitwise with row-independent GEMMs).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from sci_moe.moe import MoEInfo, RoutedModule

__all__ = ["PackedLinear", "ParallelAdapters", "RealTokens", "freeze", "pack_linears"]


def freeze(module: nn.Module) -> nn.Module:
    """Set ``requires_grad=False`` on every parameter of ``module`` and return it."""
    for p in module.parameters():
        p.requires_grad_(False)
    return module


class RealTokens:
    """The real tokens of the sequences a backbone runs on, shared by its
    :class:`PackedLinear` layers (:func:`pack_linears`) and the hooks of
    :class:`ParallelAdapters`: one index per forward, computed by :meth:`active`.

    Attributes
    ----------
    mask : Tensor, shape (B, L), bool, or None
        Real tokens of the current forward (``None``: outside :meth:`active`, every
        layer computes every position).
    index : Tensor, shape (N,), int64, or None
        Flat positions ``b * L + l`` of the ``N`` real tokens, row-major (the order of
        ``x[mask]``).
    """

    def __init__(self) -> None:
        self.mask: torch.Tensor | None = None
        self.index: torch.Tensor | None = None

    @contextlib.contextmanager
    def active(self, mask: torch.Tensor) -> Iterator[None]:
        """Let the packed layers see only the real tokens ``mask`` (``(B, L)``, bool)
        during the backbone forward inside the block (and its backward)."""
        old = self.mask, self.index
        self.mask = mask.bool()
        self.index = self.mask.reshape(-1).nonzero().squeeze(1)
        try:
            yield
        finally:
            self.mask, self.index = old

    def covers(self, x: torch.Tensor) -> bool:
        """Whether ``x`` is packable: real tokens are set and ``x`` has shape
        ``(B, L, d)`` with ``(B, L)`` the mask's shape."""
        return self.mask is not None and x.shape[:-1] == self.mask.shape

    def pack(self, x: torch.Tensor) -> torch.Tensor:
        """The real tokens of ``x``, row-major (equal to ``x[mask]``).

        Parameters
        ----------
        x : Tensor, shape (B, L, d)
            ``(B, L)`` the shape of :attr:`mask` (:meth:`covers`).

        Returns
        -------
        Tensor, shape (N, d)
            ``N`` the number of real tokens.
        """
        if self.mask is None:
            raise ValueError("no real tokens set: call pack inside RealTokens.active")
        if not self.covers(x):
            raise ValueError(
                f"x must have shape (*{tuple(self.mask.shape)}, d) to match the mask; "
                f"got {tuple(x.shape)}"
            )
        return x.reshape(-1, x.shape[-1]).index_select(0, self.index)

    def unpack(self, y: torch.Tensor) -> torch.Tensor:
        """Scatter packed tokens back to their positions, zeros at the padding (equal to
        ``full = zeros; full[mask] = y``).

        Parameters
        ----------
        y : Tensor, shape (N, d_out)
            One row per real token, in the order of :meth:`pack`.

        Returns
        -------
        Tensor, shape (B, L, d_out)
        """
        if self.mask is None:
            raise ValueError("no real tokens set: call unpack inside RealTokens.active")
        if y.dim() != 2 or y.shape[0] != self.index.numel():
            raise ValueError(
                f"y must have shape ({self.index.numel()}, d_out), one row per real token; "
                f"got {tuple(y.shape)}"
            )
        out = y.new_zeros(self.mask.numel(), y.shape[1]).index_copy(0, self.index, y)
        return out.view(*self.mask.shape, y.shape[1])


class PackedLinear(nn.Linear):
    """An ``nn.Linear`` that, on a ``(B, L, d_in)`` input under :meth:`RealTokens.active`,
    multiplies only the real tokens and returns zeros at the padded positions.

    Made from a backbone's ``nn.Linear`` in place by :func:`pack_linears` (same
    parameters, same state-dict keys). Other inputs, and every input outside
    :meth:`RealTokens.active`, get the plain ``F.linear``.

    Attributes
    ----------
    tokens : RealTokens
    """

    tokens: RealTokens

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` of shape ``(..., in_features)`` -> ``(..., out_features)``."""
        tokens = self.tokens
        if not tokens.covers(x):
            return F.linear(x, self.weight, self.bias)
        return tokens.unpack(F.linear(tokens.pack(x), self.weight, self.bias))


def pack_linears(module: nn.Module) -> RealTokens:
    """Turn every ``nn.Linear`` of ``module`` into a :class:`PackedLinear` sharing one
    :class:`RealTokens`, in place.

    Only for a backbone whose linear layers act on each token alone and whose attention
    masks the padded keys (BERT-like encoders, Llama-like decoders with right padding):
    then the padded positions' values never reach a real token, and skipping them
    leaves the real tokens' outputs and gradients as they were (to rounding).

    Parameters
    ----------
    module : nn.Module

    Returns
    -------
    RealTokens
        Set the real tokens with :meth:`RealTokens.active` around the forward.
    """
    tokens = RealTokens()
    for m in module.modules():
        if isinstance(m, nn.Linear):
            if type(m) is nn.Linear:
                m.__class__ = PackedLinear
            if isinstance(m, PackedLinear):
                m.tokens = tokens
    return tokens


class _AdapterHook:
    """Forward hook adding adapter ``index`` of ``owner`` to its target's output.

    It looks the adapter and the real tokens up through ``owner`` at call time, so a
    ``copy.deepcopy`` of a model holding both the targets and ``owner`` gets hooks that
    use the copy's adapters (the copied hook's ``owner`` is the copied
    :class:`ParallelAdapters`).
    """

    def __init__(self, owner: ParallelAdapters, index: int) -> None:
        self.owner = owner
        self.index = index

    def __call__(self, module: nn.Module, args: tuple, kwargs: dict, output):
        h = args[0] if args else kwargs.get("hidden_states")
        if not isinstance(h, torch.Tensor):
            raise TypeError(
                f"{type(module).__name__} got no hidden-state tensor as its first argument; "
                "hook a module whose first input is (B, L, d)"
            )
        owner = self.owner
        adapter = owner.adapters[self.index]
        tokens = owner.tokens
        packed = tokens.covers(h)
        x = tokens.pack(h) if packed else h
        if isinstance(adapter, RoutedModule):
            delta, info = adapter(x, return_routing=True)
            if owner._infos is not None:
                owner._infos[self.index] = info
        else:
            delta = adapter(x)
        if packed:
            delta = tokens.unpack(delta)
        if isinstance(output, tuple):
            return (output[0] + delta, *output[1:])
        return output + delta


class ParallelAdapters(nn.Module):
    """Adapters added in parallel to a list of frozen target modules.

    Parameters
    ----------
    targets : sequence of nn.Module
        Sub-modules of a (frozen) backbone, e.g. ``[layer.attention for layer in
        bert.encoder.layer]``. Each must take the hidden states ``(B, L, d)`` as its first
        argument (or as ``hidden_states=``) and return a tensor of that shape or a tuple
        whose first element is one.
    make_adapter : callable
        ``make_adapter(i) -> nn.Module`` builds the adapter of target ``i``, a module
        mapping tokens ``(..., d)`` to ``(..., d)``. It is called on the real tokens
        ``h[mask]`` of shape ``(n, d)`` (:meth:`RealTokens.pack`) while ``tokens`` has a
        mask of ``h``'s ``(B, L)`` (set by :meth:`context` or :meth:`RealTokens.active`),
        else on all of ``h``; a :class:`~sci_moe.moe.RoutedModule` adapter is called with
        ``return_routing=True`` and its :class:`~sci_moe.moe.MoEInfo` is kept for
        :meth:`context`.
    freeze_targets : bool
        Freeze the targets' parameters (default).
    tokens : RealTokens, optional
        The real tokens the hooks read, e.g. the one :func:`pack_linears` returned for
        the backbone, so that one index per forward serves its linear layers and the
        adapters (a new one by default).

    Attributes
    ----------
    adapters : nn.ModuleList
        The adapters, in target order (they are this module's only parameters).
    tokens : RealTokens

    Examples
    --------
    >>> from sci_moe.speech.mome import MoMEAdapter
    >>> block = nn.Linear(8, 8)
    >>> pa = ParallelAdapters([block], lambda i: MoMEAdapter(d_model=8, num_experts=2, top_k=1))
    >>> x = torch.randn(2, 3, 8)
    >>> torch.equal(block(x), nn.functional.linear(x, block.weight, block.bias))
    True
    """

    def __init__(
        self,
        targets: Sequence[nn.Module],
        make_adapter: Callable[[int], nn.Module],
        freeze_targets: bool = True,
        tokens: RealTokens | None = None,
    ) -> None:
        super().__init__()
        targets = list(targets)
        if not targets:
            raise ValueError("targets is empty: give the sub-modules to add adapters beside")
        self.adapters = nn.ModuleList([make_adapter(i) for i in range(len(targets))])
        self.tokens = RealTokens() if tokens is None else tokens
        self._infos: list[MoEInfo | None] | None = None
        self._handles = []
        for i, target in enumerate(targets):
            if freeze_targets:
                freeze(target)
            self._handles.append(
                target.register_forward_hook(_AdapterHook(self, i), with_kwargs=True)
            )

    @contextlib.contextmanager
    def context(
        self, rate: str = "", mask: torch.Tensor | None = None
    ) -> Iterator[list[MoEInfo | None]]:
        """Run forwards at one rate label with one token mask.

        Parameters
        ----------
        rate : str
            Label stored in every adapter's ``rate`` (per-rate adapters pick theirs by
            it; MoME records usage under it).
        mask : Tensor, shape (B, L), bool, optional
            Real tokens of the sequences the backbone will see, set on :attr:`tokens`
            (:meth:`RealTokens.active`) inside the block; a target whose input has
            another shape gets no mask. Omitted: the real tokens already set on
            :attr:`tokens`, if any (e.g. by the caller's ``tokens.active(mask)``), else
            every token.

        Yields
        ------
        list of MoEInfo or None
            Per adapter, the :class:`~sci_moe.moe.MoEInfo` (routing and auxiliary
            losses) of its last call inside the context; ``None`` for dense adapters and
            adapters not called. Pass it to :meth:`aux_loss`.
        """
        infos: list[MoEInfo | None] = [None] * len(self.adapters)
        old = self._infos, [getattr(a, "rate", "") for a in self.adapters]
        self._infos = infos
        for a in self.adapters:
            a.rate = str(rate)
        try:
            with contextlib.nullcontext() if mask is None else self.tokens.active(mask):
                yield infos
        finally:
            self._infos = old[0]
            for a, r in zip(self.adapters, old[1], strict=True):
                a.rate = r

    def aux_loss(self, infos: list[MoEInfo | None]) -> torch.Tensor:
        """Mean over the routed adapters of their auxiliary loss (0 without any).

        Parameters
        ----------
        infos : list of MoEInfo or None
            What :meth:`context` yielded.

        Returns
        -------
        Tensor
            A scalar: the mean of ``info.aux_loss`` (MoME: the Switch balance loss) over
            the adapters with an info.
        """
        losses = [info.aux_loss for info in infos if info is not None]
        if not losses:
            return next(self.adapters.parameters()).new_zeros(())
        return torch.stack(losses).mean()

    def record(self, on: bool = True) -> None:
        """Switch per-rate usage recording on or off in every adapter."""
        for a in self.adapters:
            a.record = on

    def usage(self) -> list[dict[str, torch.Tensor]]:
        """Per-layer, per-rate expert-usage histograms (see ``MoMEAdapter.usage``)."""
        return [a.usage() for a in self.adapters]

    def reset_usage(self) -> None:
        """Forget recorded usage in every adapter."""
        for a in self.adapters:
            a.reset_usage()

    def remove(self) -> None:
        """Remove the hooks: the backbone computes exactly what it did before."""
        for h in self._handles:
            h.remove()
        self._handles = []
