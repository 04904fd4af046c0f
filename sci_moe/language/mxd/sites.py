"""Where a transformer's MLP sits: hooks on its input and output, and splicing.

A decomposition (MxD, transcoder, skip-transcoder) is trained to map the **input of one
MLP** to **its output**, and judged by running the model with the MLP replaced. This
module knows where that input and output are in the two architectures used here:

* ``"llama"`` (pre-RMSNorm decoders such as SmolLM2, ``LlamaForCausalLM`` /
  ``LlamaModel``): block ``L`` computes ``h + mlp(post_attention_layernorm(h))``. The
  input is the argument of ``layers[L].mlp`` (after the norm), the output its return
  value (before the residual add).
* ``"bert"`` (post-LN encoders such as all-MiniLM-L6-v2, ``BertModel``): block ``L``
  computes ``LayerNorm(h + output.dense(intermediate(h)))``. The input is the argument
  of ``layer[L].intermediate`` (the attention block's normalised output), the output the
  return value of ``layer[L].output.dense`` (before dropout, residual and LayerNorm).

:func:`mlp_site` finds the modules, :func:`capture` records input and output through
forward hooks, :func:`splice` swaps in any ``[..., d] -> [..., d]`` map for the duration
of a ``with`` block.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch
from torch import nn

__all__ = ["ARCHITECTURES", "MLPSite", "capture", "mlp_site", "run_until_captured", "splice"]

#: Architectures :func:`mlp_site` understands.
ARCHITECTURES = ("llama", "bert")


class _StopForward(Exception):
    """Raised by a hook to end a forward pass once the wanted activations are recorded."""


@dataclass(frozen=True)
class MLPSite:
    """The MLP of one transformer block.

    Attributes
    ----------
    architecture : {"llama", "bert"}
    layer : int
        Block index, ``0 <= layer < num_layers``.
    num_layers : int
    d_model : int
        Width of the MLP's input and output.
    input_module : nn.Module
        The module whose *input* is the MLP input (``mlp`` / ``intermediate``).
    output_module : nn.Module
        The module whose *output* is the MLP output (``mlp`` / ``output.dense``).
    block : nn.Module
        The transformer block holding the MLP.
    """

    architecture: str
    layer: int
    num_layers: int
    d_model: int
    input_module: nn.Module
    output_module: nn.Module
    block: nn.Module

    def mlp(self, x: torch.Tensor) -> torch.Tensor:
        """The original MLP applied to ``x`` (shape ``(..., d_model)``)."""
        if self.architecture == "llama":
            return self.input_module(x)
        return self.output_module(self.input_module(x))


def _layers(model: nn.Module) -> tuple[str, nn.ModuleList]:
    for arch, path in (
        ("llama", ("model", "layers")),
        ("llama", ("layers",)),
        ("bert", ("encoder", "layer")),
        ("bert", ("bert", "encoder", "layer")),
        ("bert", ("0", "auto_model", "encoder", "layer")),  # SentenceTransformer
    ):
        obj = model
        for name in path:
            obj = getattr(obj, name, None) if not name.isdigit() else _index(obj, int(name))
            if obj is None:
                break
        if isinstance(obj, nn.ModuleList):
            return arch, obj
    raise ValueError(
        f"{type(model).__name__} has no transformer blocks where a Llama-style decoder "
        "(model.layers) or a BERT encoder (encoder.layer) keeps them; pass a "
        "LlamaForCausalLM/LlamaModel or a BertModel"
    )


def _index(obj, i):
    try:
        return obj[i]
    except (TypeError, IndexError, KeyError):
        return None


def mlp_site(model: nn.Module, layer: int) -> MLPSite:
    """Locate the MLP of block ``layer``.

    Parameters
    ----------
    model : nn.Module
        A transformers ``LlamaForCausalLM`` / ``LlamaModel`` or ``BertModel`` (or a
        ``SentenceTransformer`` wrapping one).
    layer : int
        Block index; negative values count from the end.

    Returns
    -------
    MLPSite

    Raises
    ------
    ValueError
        If ``layer`` is out of range or the block lacks the expected MLP modules.
    """
    if isinstance(layer, bool) or not isinstance(layer, int):
        raise ValueError(f"layer must be an integer block index, got {layer!r}")
    arch, layers = _layers(model)
    n = len(layers)
    if not -n <= layer < n:
        raise ValueError(f"layer {layer} is out of range: this model has {n} blocks (0..{n - 1})")
    layer = layer % n
    block = layers[layer]
    if arch == "llama":
        mlp = getattr(block, "mlp", None)
        proj = getattr(mlp, "down_proj", None)
        if not isinstance(mlp, nn.Module) or not isinstance(proj, nn.Linear):
            raise ValueError(
                f"block {layer} ({type(block).__name__}) has no 'mlp' module with a "
                "'down_proj' Linear (a Llama-style MLP); this model is not supported"
            )
        return MLPSite(arch, layer, n, proj.out_features, mlp, mlp, block)
    inter = getattr(block, "intermediate", None)
    dense = getattr(getattr(block, "output", None), "dense", None)
    if not isinstance(inter, nn.Module) or not isinstance(dense, nn.Linear):
        raise ValueError(
            f"block {layer} ({type(block).__name__}) has no 'intermediate' module and "
            "'output.dense' Linear (a BERT-style MLP); this model is not supported"
        )
    return MLPSite(arch, layer, n, dense.out_features, inter, dense, block)


@contextlib.contextmanager
def capture(site: MLPSite, stop: bool = False) -> Iterator[dict]:
    """Record the MLP's input and output during forward passes in the block.

    Parameters
    ----------
    site : MLPSite
    stop : bool
        End the forward pass (by an exception caught in :func:`run_until_captured`) as
        soon as the output is recorded, so later blocks are not computed.

    Yields
    ------
    dict
        After each forward: ``"input"`` and ``"output"``, detached tensors of shape
        ``(batch, seq, d_model)``.
    """
    store: dict = {}

    def pre_hook(_module, args, kwargs):
        x = args[0] if args else next(iter(kwargs.values()))
        store["input"] = x.detach()

    def hook(_module, _args, out):
        store["output"] = (out[0] if isinstance(out, tuple) else out).detach()
        if stop:
            raise _StopForward

    handles = [
        site.input_module.register_forward_pre_hook(pre_hook, with_kwargs=True),
        site.output_module.register_forward_hook(hook),
    ]
    try:
        yield store
    finally:
        for h in handles:
            h.remove()


def run_until_captured(model: nn.Module, store: dict, **inputs) -> None:
    """Run ``model(**inputs)``, tolerating the early stop of ``capture(..., stop=True)``."""
    try:
        model(**inputs)
    except _StopForward:
        pass
    if "output" not in store:
        raise ValueError("the forward pass never reached the hooked MLP; check the model/layer")


class _Replacement(nn.Module):
    def __init__(self, fn: Callable[[torch.Tensor], torch.Tensor], d_model: int) -> None:
        super().__init__()
        self.fn = fn
        self.d_model = d_model
        if isinstance(fn, nn.Module):
            self.inner = fn

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        y = self.fn(x.reshape(-1, shape[-1]))
        y = getattr(y, "y", y)
        if y.shape != (shape[:-1].numel(), self.d_model):
            raise ValueError(
                f"the spliced map returned shape {tuple(y.shape)} for {shape[:-1].numel()} "
                f"tokens; it must return (tokens, {self.d_model})"
            )
        return y.reshape(*shape[:-1], self.d_model)


@contextlib.contextmanager
def splice(site: MLPSite, replacement: Callable[[torch.Tensor], torch.Tensor]) -> Iterator[None]:
    """Replace the MLP by ``replacement`` inside a ``with`` block.

    Parameters
    ----------
    site : MLPSite
    replacement : callable
        Maps the MLP input, shape ``(tokens, d_model)``, to the output, shape
        ``(tokens, d_model)``; an object with a ``.y`` attribute (a decomposition's output)
        is accepted. ``site.mlp`` puts the original MLP back (a no-op splice).

    Notes
    -----
    Llama: ``block.mlp`` is swapped. BERT: ``block.intermediate`` is swapped and
    ``block.output.dense`` made the identity, so the residual add and LayerNorm still
    follow. The modules are restored on exit, also after an exception.
    """
    rep = _Replacement(replacement, site.d_model)
    block = site.block
    if site.architecture == "llama":
        old = block.mlp
        block.mlp = rep
        try:
            yield
        finally:
            block.mlp = old
        return
    old_inter, old_dense = block.intermediate, block.output.dense
    block.intermediate, block.output.dense = rep, nn.Identity()
    try:
        yield
    finally:
        block.intermediate, block.output.dense = old_inter, old_dense
