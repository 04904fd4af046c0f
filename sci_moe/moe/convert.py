"""Convert Hugging Face transformers MoE blocks to and from :class:`~sci_moe.moe.MoE`.

Supported blocks (transformers 5.x, fused 3-D expert weights ``gate_up_proj (E, 2I, H)`` with
rows ``[gate; up]`` and ``down_proj (E, H, I)``, the layout of :class:`~sci_moe.moe.GLUExperts`):

======================== ======== ============================ ===========================
block                    scores   top-k weights                shared experts
======================== ======== ============================ ===========================
MixtralSparseMoeBlock    softmax  always renormalised          --
Qwen2MoeSparseMoeBlock   softmax  renormalised iff norm_topk   ``sigmoid(x w_g) MLP(x)``
Qwen3MoeSparseMoeBlock   softmax  renormalised iff norm_topk   --
OlmoeSparseMoeBlock      softmax  renormalised iff norm_topk   --
DeepseekV3MoE            sigmoid  group-limited, bias for      ungated ``MLP(x)``
                                  selection, renorm (+1e-20),  (``n_shared_experts``
                                  x ``routed_scaling_factor``  fused in one MLP)
======================== ======== ============================ ===========================

Notes
-----
* Outputs agree to float32 rounding for float32 blocks. In half precision transformers
  computes the router logits in the input dtype (sci-moe: at least float32) and the
  Qwen/OLMoE routers round the weights to the input dtype, so results differ slightly.
* Mixtral's ``router_jitter_noise`` multiplies the hidden states fed to the router
  **and** to the experts (in place), in training mode only; ``RouterConfig.jitter``
  jitters the router input only. It is therefore not carried over (a warning is
  issued when it is non-zero); eval-mode outputs are unaffected.
* DeepSeek-V3's ``e_score_correction_bias`` becomes ``Router.expert_bias``
  (``selection_bias=True``); transformers has no update rule, sci-moe updates it only
  when you call :meth:`~sci_moe.moe.MoE.update_router_bias` (rate ``bias_update_rate``,
  default 1e-3).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import torch
from torch import nn

from .._util.activations import get_activation
from .experts import GLUExperts
from .layer import MoE, SharedExperts
from .router import Router, RouterConfig

__all__ = ["from_transformers", "to_transformers"]


@dataclass(frozen=True)
class _Spec:
    """How one transformers block maps to sci-moe (attribute names and routing)."""

    score: str = "softmax"
    normalize: bool | None = None  # None: read ``gate.norm_topk_prob``
    shared: str | None = None  # attribute of the shared GLU MLP
    shared_gate: str | None = None  # attribute of the shared expert's sigmoid gate
    deepseek: bool = False  # sigmoid + selection bias + groups + scaling


_SPECS = {
    "MixtralSparseMoeBlock": _Spec(normalize=True),
    "Qwen2MoeSparseMoeBlock": _Spec(shared="shared_expert", shared_gate="shared_expert_gate"),
    "Qwen3MoeSparseMoeBlock": _Spec(),
    "OlmoeSparseMoeBlock": _Spec(),
    "DeepseekV3MoE": _Spec(score="sigmoid", shared="shared_experts", deepseek=True),
}
_ACT_NAMES = ("silu", "gelu", "gelu_pytorch_tanh", "relu", "tanh", "sigmoid", "identity")


def _spec(block: nn.Module) -> _Spec:
    for cls in type(block).__mro__:
        if cls.__name__ in _SPECS:
            spec = _SPECS[cls.__name__]
            break
    else:
        raise TypeError(
            f"unsupported MoE block {type(block).__name__}; supported transformers blocks "
            f"(or subclasses): {', '.join(_SPECS)}"
        )
    ex = block.experts
    if getattr(ex, "has_bias", False) or getattr(ex, "is_transposed", False):
        raise TypeError(f"{type(block).__name__}: expert biases / transposed weights unsupported")
    if not getattr(ex, "is_concatenated", True) or not getattr(ex, "has_gate", True):
        raise TypeError(f"{type(block).__name__}: experts must use the fused [gate; up] layout")
    return spec


def _activation(mlp: nn.Module) -> str:
    """sci-moe name of ``mlp.act_fn``: ``config.hidden_act`` if it matches, else probed."""
    probe = torch.linspace(-6.0, 6.0, 481)
    ref = mlp.act_fn(probe)
    hint = getattr(getattr(mlp, "config", None), "hidden_act", None)
    for name in (hint, *_ACT_NAMES):
        try:
            fn = get_activation(name) if isinstance(name, str) else None
        except ValueError:
            continue
        if fn is not None and torch.allclose(fn(probe), ref, rtol=0.0, atol=1e-5):
            return name
    raise TypeError(f"activation {hint or type(mlp.act_fn).__name__!r} has no sci-moe equivalent")


def _router_config(block: nn.Module, spec: _Spec) -> RouterConfig:
    gate = block.gate
    E, H = gate.weight.shape
    normalize = gate.norm_topk_prob if spec.normalize is None else spec.normalize
    kw = {}
    if spec.deepseek:
        kw = dict(
            norm_eps=1e-20,
            scaling=float(gate.routed_scaling_factor),
            selection_bias=True,
            num_groups=int(gate.num_group),
            topk_groups=int(gate.topk_group),
        )
    return RouterConfig(H, E, int(gate.top_k), spec.score, normalize=bool(normalize), **kw)


def _param(t: torch.Tensor, like: torch.Tensor) -> nn.Parameter:
    return nn.Parameter(t.detach().clone(), requires_grad=like.requires_grad)


def _shared_glu(mlp: nn.Module) -> torch.Tensor:
    """Fused ``(1, 2 I, H)`` gate/up weight of a transformers GLU MLP."""
    return torch.cat([mlp.gate_proj.weight, mlp.up_proj.weight], 0).unsqueeze(0)


def _source_tensors(block: nn.Module, spec: _Spec) -> list[tuple[str, torch.Tensor]]:
    """``(name in the block, tensor)`` of every weight :func:`from_transformers` copies."""
    named = [
        ("gate.weight", block.gate.weight),
        ("experts.gate_up_proj", block.experts.gate_up_proj),
        ("experts.down_proj", block.experts.down_proj),
    ]
    if spec.deepseek:
        named.append(("gate.e_score_correction_bias", block.gate.e_score_correction_bias))
    if spec.shared is not None:
        mlp = getattr(block, spec.shared)
        named += [
            (f"{spec.shared}.{n}.weight", getattr(mlp, n).weight)
            for n in ("gate_proj", "up_proj", "down_proj")
        ]
    if spec.shared_gate is not None:
        named.append((f"{spec.shared_gate}.weight", getattr(block, spec.shared_gate).weight))
    return named


def _check_finite_weights(block: nn.Module, spec: _Spec) -> None:
    for name, t in _source_tensors(block, spec):
        if t.is_meta:  # no values yet: nothing to copy wrong
            continue
        bad = int((~torch.isfinite(t.detach())).sum())
        if bad:
            raise ValueError(
                f"{type(block).__name__}.{name} holds {bad} non-finite value(s) (NaN/Inf) "
                f"of {t.numel()}: the block's weights are uninitialised or corrupt; "
                "initialise them (e.g. the model's post_init()) or load a checkpoint "
                "before calling from_transformers"
            )


def from_transformers(block: nn.Module) -> MoE:
    """Build a sci-moe :class:`MoE` equal to a transformers MoE block.

    Parameters
    ----------
    block : nn.Module
        One of the blocks listed in the module docstring (or a subclass). Its weights are
        cloned (same dtype, device and ``requires_grad``); the block is not modified.

    Returns
    -------
    MoE
        ``MoE.from_modules(Router, GLUExperts, SharedExperts or None)`` in the block's
        train/eval mode: router ``weight (E, H)`` (and ``expert_bias (E,)``),
        ``experts.gate_up (E, 2 I, H)``, ``experts.down (E, H, I)``, and for shared
        experts ``shared.mlp.gate_up (1, 2 I_s, H)``, ``shared.mlp.down (1, H, I_s)``,
        ``shared.gate.weight (1, H)`` (Qwen2-MoE). ``moe(x)`` for ``x`` of shape
        ``(..., H)`` equals the block's hidden-state output.

    Raises
    ------
    TypeError
        For an unsupported block or activation.
    ValueError
        When a weight of the block holds NaN or Inf (the message names the tensor): a
        freshly built transformers block can hold uninitialised memory (``torch.empty``),
        and a layer converted from it would silently output NaN.
    """
    spec = _spec(block)
    _check_finite_weights(block, spec)
    cfg = _router_config(block, spec)
    ex = block.experts
    E, I2, H = ex.gate_up_proj.shape
    if getattr(block, "jitter_noise", 0.0):
        warnings.warn(
            f"Mixtral router_jitter_noise={block.jitter_noise} jitters the expert inputs too; "
            "not carried over (RouterConfig.jitter jitters the router input only)",
            stacklevel=2,
        )
    act = _activation(ex)
    mlp = getattr(block, spec.shared) if spec.shared is not None else None
    shared_act = _activation(mlp) if mlp is not None else act
    with torch.device("meta"):  # no throw-away random init of large weights
        router = Router(cfg)
        experts = GLUExperts(E, H, I2 // 2, act)
        shared = None
        if mlp is not None:
            I_s = mlp.gate_proj.weight.shape[0]
            shared = SharedExperts(H, I_s, 1, "glu", shared_act, spec.shared_gate is not None)
    router.weight = _param(block.gate.weight, block.gate.weight)
    bias = block.gate.e_score_correction_bias if spec.deepseek else None
    router.expert_bias = (
        bias.detach().clone().float()
        if bias is not None
        else torch.zeros(E, dtype=torch.float32, device=block.gate.weight.device)
    )
    experts.gate_up = _param(ex.gate_up_proj, ex.gate_up_proj)
    experts.down = _param(ex.down_proj, ex.down_proj)
    if shared is not None:
        shared.mlp.gate_up = _param(_shared_glu(mlp), mlp.gate_proj.weight)
        shared.mlp.down = _param(mlp.down_proj.weight.unsqueeze(0), mlp.down_proj.weight)
        if spec.shared_gate is not None:
            g = getattr(block, spec.shared_gate).weight
            shared.gate.weight = _param(g, g)
    moe = MoE.from_modules(router, experts, shared)
    return moe.train(block.training)


def _check_same(name: str, ours, theirs) -> None:
    if ours != theirs:
        raise ValueError(f"{name}: MoE has {ours} but the transformers block has {theirs}")


@torch.no_grad()
def to_transformers(moe: MoE, block: nn.Module) -> nn.Module:
    """Write the weights of ``moe`` into an existing transformers block, in place.

    The block must have the same architecture (routing options, shared experts) and
    sizes, e.g. the block ``moe`` was converted from or a freshly built one from the same
    config. Values are cast to the block's dtype and device.

    Parameters
    ----------
    moe : MoE
        With a :class:`Router`, :class:`~sci_moe.moe.GLUExperts` ``(E, 2 I, H)`` /
        ``(E, H, I)`` and, for Qwen2-MoE / DeepSeek-V3, GLU :class:`SharedExperts`.
    block : nn.Module
        A supported transformers block (see :func:`from_transformers`).

    Returns
    -------
    nn.Module
        ``block`` itself.

    Raises
    ------
    TypeError
        For an unsupported block or non-GLU experts.
    ValueError
        When routing options, activations or a tensor's shape differ (the message names
        the tensor).
    """
    spec = _spec(block)
    if not isinstance(moe.experts, GLUExperts):
        raise TypeError(f"moe.experts must be GLUExperts, got {type(moe.experts).__name__}")
    want, have = _router_config(block, spec), moe.router.config
    for f in ("d_model", "num_experts", "top_k", "score", "mode", "normalize", "scaling"):
        _check_same(f"router.config.{f}", getattr(have, f), getattr(want, f))
    for f in ("selection_bias", "num_groups", "topk_groups", "capacity_factor"):
        _check_same(f"router.config.{f}", getattr(have, f), getattr(want, f))
    _check_same("experts.activation", moe.experts.activation, _activation(block.experts))
    pairs = [
        ("gate.weight", block.gate.weight, moe.router.weight),
        ("experts.gate_up_proj", block.experts.gate_up_proj, moe.experts.gate_up),
        ("experts.down_proj", block.experts.down_proj, moe.experts.down),
    ]
    if spec.deepseek:
        pairs.append(
            (
                "gate.e_score_correction_bias",
                block.gate.e_score_correction_bias,
                moe.router.expert_bias,
            )
        )
    shared = moe.shared
    if (spec.shared is None) != (shared is None):
        raise ValueError(
            f"shared experts: MoE has {shared is not None}, block has {spec.shared is not None}"
        )
    if spec.shared is not None:
        if not isinstance(shared, SharedExperts) or not isinstance(shared.mlp, GLUExperts):
            raise TypeError("moe.shared must be SharedExperts with GLU experts")
        _check_same("shared.gate", shared.gate is not None, spec.shared_gate is not None)
        mlp = getattr(block, spec.shared)
        _check_same("shared.mlp.activation", shared.mlp.activation, _activation(mlp))
        name = spec.shared
        gate_up = shared.mlp.gate_up[0]
        I_s = mlp.gate_proj.weight.shape[0]
        _check_same(f"{name}.gate_proj/up_proj rows", gate_up.shape[0], 2 * I_s)
        pairs += [
            (f"{name}.gate_proj.weight", mlp.gate_proj.weight, gate_up[:I_s]),
            (f"{name}.up_proj.weight", mlp.up_proj.weight, gate_up[I_s:]),
            (f"{name}.down_proj.weight", mlp.down_proj.weight, shared.mlp.down[0]),
        ]
        if spec.shared_gate is not None:
            pairs.append(
                (
                    f"{spec.shared_gate}.weight",
                    getattr(block, spec.shared_gate).weight,
                    shared.gate.weight,
                )
            )
    for name, dst, src in pairs:  # check every shape before writing anything
        _check_same(f"{name} shape", tuple(src.shape), tuple(dst.shape))
    for _, dst, src in pairs:
        dst.copy_(src)
    return block
