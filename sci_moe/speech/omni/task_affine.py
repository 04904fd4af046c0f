"""One expert with a per-subtask affine input transform, as an alternative to ``N`` experts.

From the Omni-Expert (Saha, Ojuba, Collins and Mainsah, NeurIPS 2025).

**Task-affine mixture.** Instead of ``N`` experts, one expert ``E`` sees ``N`` transformed
copies of its input, one per subtask ``n``, with feature-wise scale and shift (a FiLM
table):

.. math::
    z_n = a_n \\odot x + b_n, \\qquad
    a_n = \\phi_a(W_a e_n + c_a), \\qquad b_n = \\phi_b(W_b e_n + c_b)

with ``e_n`` the one-hot of subtask ``n`` (so ``a_n = \\phi_a(W_a[:, n] + c_a)``: the
one-layer MLPs of the paper, folded after training into the ``N x d`` lookup tables
``A``, ``B``). Two inference forms for task probabilities ``p_n(x)``:

* ``"mixture"`` (the paper's Eq. 3): :math:`y = \\sum_n p_n E(z_n)`, one expert pass per
  task with ``p_n > 0`` (one pass for a one-hot ``p``, ``N`` for a dense one);
* ``"folded"`` (one pass): :math:`y = E(\\bar a \\odot x + \\bar b)` with
  :math:`\\bar a = \\sum_n p_n a_n`, :math:`\\bar b = \\sum_n p_n b_n`. For a one-hot
  ``p`` the two forms are equal; otherwise they differ unless ``E`` is affine.

:func:`bank_macs_per_token` and :func:`task_affine_macs` count multiply-accumulates so an
``N``-expert MoE and the task-affine expert are compared on the same rules. The paper's
``N``-expert baseline mixes *activated* expert outputs (sigmoid masks): that bank is
``MLPExperts(..., output_activation="sigmoid")``.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from sci_moe._util import get_activation
from sci_moe.moe import ExpertBank

__all__ = [
    "TaskAffineTable",
    "bank_macs_per_token",
    "task_affine_forward",
    "task_affine_macs",
]

_MODES = ("mixture", "folded")


class TaskAffineTable(nn.Module):
    """Per-task feature-wise scale ``a_n`` and shift ``b_n`` of a ``dim``-vector.

    Parametrised as one-layer MLPs of the task one-hot (``a_n = act_a(W_a e_n + c_a)``,
    ``b_n = act_b(W_b e_n + c_b)``), initialised to the identity (``a_n = 1``,
    ``b_n = 0``: ``W = 0``, ``c_a = 1``, ``c_b = 0``; this needs ``act_a(1) = 1`` and
    ``act_b(0) = 0``, true for relu/leaky_relu/identity). After :meth:`fold` the tables
    ``A``, ``B`` (shape ``(num_tasks, dim)``) are stored as buffers and the MLPs dropped.

    Parameters
    ----------
    num_tasks : int
        ``N``.
    dim : int
        ``d``, the size of the transformed feature axis (the last axis of ``x``).
    scale, shift : bool
        Learn ``a`` (else ``a_n = 1``) / ``b`` (else ``b_n = 0``): the shift/scale
        ablation.
    scale_activation, shift_activation : str
        ``sci_moe._util.get_activation`` names (the paper: ``"relu"`` and
        ``"leaky_relu"``).

    Examples
    --------
    >>> t = TaskAffineTable(4, 3)
    >>> A, B = t.tables()
    >>> A.tolist()[0], B.tolist()[0]
    ([1.0, 1.0, 1.0], [0.0, 0.0, 0.0])
    """

    def __init__(
        self,
        num_tasks: int,
        dim: int,
        *,
        scale: bool = True,
        shift: bool = True,
        scale_activation: str = "relu",
        shift_activation: str = "leaky_relu",
    ) -> None:
        super().__init__()
        if num_tasks < 1 or dim < 1:
            raise ValueError(f"num_tasks and dim must be >= 1, got {num_tasks} and {dim}")
        self.num_tasks, self.dim = int(num_tasks), int(dim)
        self.use_scale, self.use_shift = bool(scale), bool(shift)
        self.scale_activation, self.shift_activation = scale_activation, shift_activation
        self._act_a = get_activation(scale_activation)
        self._act_b = get_activation(shift_activation)
        self.scale_mlp = nn.Linear(num_tasks, dim) if scale else None
        self.shift_mlp = nn.Linear(num_tasks, dim) if shift else None
        with torch.no_grad():
            for mlp, c in ((self.scale_mlp, 1.0), (self.shift_mlp, 0.0)):
                if mlp is not None:
                    mlp.weight.zero_()
                    mlp.bias.fill_(c)
        self.folded = False

    def tables(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The lookup tables ``A`` and ``B``, each of shape ``(num_tasks, dim)``.

        Computed from the MLPs (differentiable) before :meth:`fold`, read from the
        buffers after.
        """
        if self.folded:
            return self.table_scale, self.table_shift
        ref = next(self.parameters(), None)
        kw = {"dtype": torch.get_default_dtype() if ref is None else ref.dtype}
        if ref is not None:
            kw["device"] = ref.device
        eye = torch.eye(self.num_tasks, **kw)
        ones = torch.ones(self.num_tasks, self.dim, **kw)
        a = self._act_a(self.scale_mlp(eye)) if self.scale_mlp is not None else ones
        b = self._act_b(self.shift_mlp(eye)) if self.shift_mlp is not None else ones * 0
        return a, b

    @torch.no_grad()
    def fold(self) -> TaskAffineTable:
        """Replace the MLPs by the ``A``, ``B`` lookup buffers (inference form); returns self."""
        if self.folded:
            return self
        a, b = self.tables()
        self.scale_mlp = self.shift_mlp = None
        self.register_buffer("table_scale", a.detach().clone())
        self.register_buffer("table_shift", b.detach().clone())
        self.folded = True
        return self

    def num_parameters(self) -> int:
        """Trainable parameters (MLPs before folding, ``0`` after: the tables are buffers)."""
        return sum(p.numel() for p in self.parameters())

    def table_entries(self) -> int:
        """Stored numbers at inference: ``N d`` per learned table (``A`` and/or ``B``)."""
        return self.num_tasks * self.dim * (int(self.use_scale) + int(self.use_shift))

    def extra_repr(self) -> str:
        return (
            f"num_tasks={self.num_tasks}, dim={self.dim}, scale={self.use_scale}, "
            f"shift={self.use_shift}, folded={self.folded}"
        )


def task_affine_forward(
    expert: Callable[[torch.Tensor], torch.Tensor],
    x: torch.Tensor,
    probs: torch.Tensor,
    table: TaskAffineTable,
    mode: str = "folded",
) -> torch.Tensor:
    """One expert on per-task affine transforms of its input, mixed by task probabilities.

    Parameters
    ----------
    expert : callable
        Maps ``(n, *S, d)`` to ``(n, d_out)``, row-wise (rows must not interact).
    x : Tensor, shape ``(T, *S, d)``
        Input rows; the transform acts on the last axis and broadcasts over ``S`` (e.g.
        the frames of a context window).
    probs : Tensor, shape (T, N)
        Task probabilities ``p_n`` per row (a one-hot for oracle task labels).
    table : TaskAffineTable
    mode : {"folded", "mixture"}
        ``"mixture"``: :math:`\\sum_n p_{tn} E(a_n \\odot x_t + b_n)`, expert passes only
        for ``p_{tn} \\ne 0``. ``"folded"``: one pass on
        :math:`(\\sum_n p_{tn} a_n) \\odot x_t + \\sum_n p_{tn} b_n`.

    Returns
    -------
    Tensor, shape (T, d_out)

    Notes
    -----
    ``"mixture"`` skips tasks with ``p_{tn} = 0``, so ``d y / d p_{tn}`` is not formed
    for them (it is zero anyway when ``p`` comes from a softmax or a one-hot).
    """
    if mode not in _MODES:
        raise ValueError(f"mode must be one of {_MODES}, got {mode!r}")
    T = x.shape[0]
    if probs.dim() != 2 or probs.shape != (T, table.num_tasks):
        raise ValueError(
            f"probs must have shape (T, N) = ({T}, {table.num_tasks}), got {tuple(probs.shape)}"
        )
    if x.shape[-1] != table.dim:
        raise ValueError(f"x's last axis has size {x.shape[-1]} but the table is for {table.dim}")
    a, b = table.tables()
    bshape = (T,) + (1,) * (x.dim() - 2) + (table.dim,)
    if mode == "folded":
        a_bar = (probs @ a).reshape(bshape)
        b_bar = (probs @ b).reshape(bshape)
        return expert(a_bar * x + b_bar)
    rows, tasks = torch.nonzero(probs, as_tuple=True)
    pshape = (rows.numel(),) + (1,) * (x.dim() - 2) + (table.dim,)
    z = a[tasks].reshape(pshape) * x[rows] + b[tasks].reshape(pshape)
    y = expert(z) * probs[rows, tasks].unsqueeze(-1)
    out = torch.zeros(T, y.shape[-1], dtype=y.dtype, device=y.device)
    return out.index_add(0, rows, y)


def bank_macs_per_token(bank: ExpertBank | nn.Module) -> int:
    """Multiply-accumulates of ONE expert of a bank (or of a plain module) for one token.

    Counts every stacked weight matrix ``(E, d_out, d_in)`` of a bank as ``d_out d_in``
    MACs (one matrix-vector product per expert and token), and every ``nn.Linear`` of a
    plain module as ``out_features in_features``. Bias additions, activations and
    element-wise products are not MACs (the ``ptflops`` convention for linear layers).

    Parameters
    ----------
    bank : ExpertBank or nn.Module

    Returns
    -------
    int
    """
    if isinstance(bank, ExpertBank):
        return sum(
            int(p.shape[1] * p.shape[2])
            for name, p in bank.named_parameters(recurse=False)
            if p.dim() == 3 and not name.endswith("bias")
        )
    return sum(m.in_features * m.out_features for m in bank.modules() if isinstance(m, nn.Linear))


def task_affine_macs(
    expert_macs: int,
    dim: int,
    positions: int = 1,
    *,
    num_tasks: int,
    active_tasks: int = 1,
    mode: str = "folded",
    d_out: int = 0,
) -> int:
    """MACs per token of :func:`task_affine_forward` (and, with ``dim = 0``, of an MoE).

    * transform: ``positions * dim`` per expert pass (``a x + b`` is one MAC per element);
    * ``"folded"`` with ``active_tasks > 1``: ``2 N dim`` to mix the tables (a one-hot
      ``p`` is a table lookup, no MACs); then one expert pass;
    * ``"mixture"``: ``active_tasks`` passes, plus ``active_tasks * d_out`` to weight and
      sum their outputs when ``active_tasks > 1``.

    An ``N``-expert MoE with ``k`` active experts is ``dim=0, mode="mixture",
    active_tasks=k``: ``k * expert_macs (+ k d_out)``.

    Parameters
    ----------
    expert_macs : int
        One expert pass (:func:`bank_macs_per_token`).
    dim, positions : int
        Transformed feature size and how many positions of it the input holds.
    num_tasks, active_tasks : int
        ``N`` and the number of tasks with ``p_n > 0`` per token.
    mode : {"folded", "mixture"}
    d_out : int
        Expert output size (for the weighted sum).

    Returns
    -------
    int

    Examples
    --------
    >>> task_affine_macs(1000, 4, 2, num_tasks=10, active_tasks=10, mode="folded")
    1088
    >>> task_affine_macs(1000, 0, num_tasks=10, active_tasks=10, mode="mixture", d_out=3)
    10030
    """
    if mode not in _MODES:
        raise ValueError(f"mode must be one of {_MODES}, got {mode!r}")
    if not 1 <= active_tasks <= num_tasks:
        raise ValueError(f"active_tasks must be in [1, {num_tasks}], got {active_tasks}")
    transform = positions * dim
    if mode == "folded":
        mix = 2 * num_tasks * dim if (active_tasks > 1 and dim) else 0
        return mix + transform + expert_macs
    combine = active_tasks * d_out if active_tasks > 1 else 0
    return active_tasks * (transform + expert_macs) + combine
