"""ParallelAdapters' hooks: packing through RealTokens (bitwise the boolean-mask
formulation), one RealTokens shared with the packed backbone, independent deep copies."""

import copy

import pytest
import torch
from torch import nn

from sci_moe.moe import RoutedModule
from sci_moe.speech.mome import (
    MatryoshkaRates,
    MoMEAdapter,
    MoMEConfig,
    ParallelAdapters,
    RealTokens,
    RecognizerConfig,
    SpeechRecognizer,
)


def _randomize(module: nn.Module) -> nn.Module:
    with torch.no_grad():
        for p in module.parameters():
            p.add_(0.3 * torch.randn_like(p))
    return module


def _old_hook(adapter: nn.Module, mask: torch.Tensor):
    """The former hook: ``h[mask]`` into the adapter, ``full[mask] = delta`` back."""

    def hook(module, args, kwargs, output):
        h = args[0] if args else kwargs.get("hidden_states")
        m = mask.bool() if mask.shape == h.shape[:-1] else None
        tokens = h if m is None else h[m]
        if isinstance(adapter, RoutedModule):
            delta, _ = adapter(tokens, return_routing=True)
        else:
            delta = adapter(tokens)
        if m is not None:
            full = delta.new_zeros(h.shape[:-1] + delta.shape[-1:])
            full[m] = delta
            delta = full
        if isinstance(output, tuple):
            return (output[0] + delta, *output[1:])
        return output + delta

    return hook


def _padded_mask() -> torch.Tensor:
    mask = torch.zeros(3, 7, dtype=torch.bool)
    for b, n in enumerate((7, 4, 1)):
        mask[b, :n] = True
    return mask


def test_pack_unpack_are_boolean_indexing():
    tokens = RealTokens()
    x = torch.randn(3, 7, 5)
    mask = _padded_mask()
    with pytest.raises(ValueError, match="no real tokens"):
        tokens.pack(x)
    with tokens.active(mask):
        assert tokens.covers(x) and not tokens.covers(x[:, 0])
        packed = tokens.pack(x)
        assert torch.equal(packed, x[mask])
        y = torch.randn(int(mask.sum()), 2)
        full = y.new_zeros(3, 7, 2)
        full[mask] = y
        assert torch.equal(tokens.unpack(y), full)
        with pytest.raises(ValueError, match="match the mask"):
            tokens.pack(x[:, :3])
        with pytest.raises(ValueError, match="one row per real token"):
            tokens.unpack(y[:-1])


@pytest.mark.parametrize("kwarg", [False, True])
def test_hook_equals_boolean_mask_formulation(kwarg):
    """Outputs and gradients bitwise those of ``h[mask]`` / ``full[mask] = delta``."""
    torch.manual_seed(0)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(8, 8)

        def forward(self, hidden_states):
            return (self.lin(hidden_states), None)

    adapter = _randomize(MoMEAdapter(d_model=8, num_experts=4, top_k=2, bottleneck=3))
    block, old_block = Block(), Block()
    old_block.load_state_dict(block.state_dict())
    pa = ParallelAdapters([block], lambda i: adapter)
    old_block.register_forward_hook(_old_hook(adapter, _padded_mask()), with_kwargs=True)
    for p in (*block.parameters(), *old_block.parameters()):
        p.requires_grad_(True)
    x = torch.randn(3, 7, 8)
    outs, grads = [], []
    for run in ("new", "old"):
        xr = x.clone().requires_grad_(True)
        adapter.zero_grad()
        if run == "new":
            with pa.context("r", _padded_mask()):
                y = block(hidden_states=xr)[0] if kwarg else block(xr)[0]
        else:
            y = old_block(hidden_states=xr)[0] if kwarg else old_block(xr)[0]
        (y * torch.linspace(-1, 1, y.numel()).view_as(y)).sum().backward()
        outs.append(y.detach())
        grads.append([xr.grad, *(p.grad.clone() for p in adapter.parameters())])
    assert torch.equal(outs[0], outs[1])
    assert torch.equal(outs[0][~_padded_mask()], old_block.lin(x)[~_padded_mask()].detach())
    for g_new, g_old in zip(*grads, strict=True):
        assert torch.equal(g_new, g_old)


transformers = pytest.importorskip("transformers")

from sci_moe.speech.mome.model import _layers  # noqa: E402
from tests.speech.mome.backbones import tiny_bert, tiny_llama  # noqa: E402


def _model(make, adapter: str = "mome") -> SpeechRecognizer:
    torch.manual_seed(0)
    cfg = RecognizerConfig(
        input_dims={"audio": 40},
        frame_rates={"audio": 100.0},
        compression=MatryoshkaRates({"audio": (1, 2)}),
        adapter=adapter,
        mome=MoMEConfig(d_model=16, num_experts=4, top_k=2, bottleneck=2),
        bottleneck=3,
        upsample=2,
        encoder_dim=6,
    )
    model = SpeechRecognizer(make(), cfg)
    with torch.no_grad():  # non-zero adapters (their up-projections start at zero)
        for p in model.parameters():
            if p.requires_grad:
                p.add_(0.1 * torch.randn_like(p))
    return model.eval()


def _batch():
    g = torch.Generator().manual_seed(1)
    x = torch.randn(3, 16, 40, generator=g)
    mask = torch.zeros(3, 16, dtype=torch.bool)
    for b, n in enumerate((16, 9, 3)):
        mask[b, :n] = True
    return {"audio": (x, mask)}


@torch.no_grad()
def _logp(model, streams, rate=2):
    return model(streams, {"audio": rate}).log_probs


@pytest.mark.parametrize("make", [tiny_bert, tiny_llama])
@pytest.mark.parametrize("adapter", ["mome", "per_rate"])
def test_recognizer_hooks_equal_boolean_mask_formulation(make, adapter):
    model = _model(make, adapter)
    assert model.adapters.tokens is model._real_tokens  # one index per forward
    streams = _batch()
    new = {rate: _logp(model, streams, rate) for rate in (1, 2)}
    layers, attention = _layers(model.backbone)
    targets = [getattr(x, attention) for x in layers]
    model.adapters.remove()
    for rate in (1, 2):
        hmask = model._project("audio", *model.encode(streams)["audio"], rate)[1]
        handles = [
            t.register_forward_hook(_old_hook(a, hmask), with_kwargs=True)
            for t, a in zip(targets, model.adapters.adapters, strict=True)
        ]
        old = _logp(model, streams, rate)
        for h in handles:
            h.remove()
        assert torch.equal(new[rate], old)


@pytest.mark.parametrize("make", [tiny_bert, tiny_llama])
def test_deepcopy_has_its_own_adapter_hooks(make):
    model = _model(make)
    streams = _batch()
    twin = copy.deepcopy(model)
    base = _logp(model, streams)
    assert torch.equal(_logp(twin, streams), base)
    with torch.no_grad():  # the copy's hooks fill the copy's routing infos
        aux = model(streams, {"audio": 2}).aux_loss
        assert aux > 0 and torch.equal(twin(streams, {"audio": 2}).aux_loss, aux)
    assert twin._real_tokens is twin.adapters.tokens is not model._real_tokens
    # the copy's adapters change the copy only
    _randomize(twin.adapters)
    twin_out = _logp(twin, streams)
    assert not torch.equal(twin_out, base)
    assert torch.equal(_logp(model, streams), base)
    # and the original's the original only
    _randomize(model.adapters)
    assert not torch.equal(_logp(model, streams), base)
    assert torch.equal(_logp(twin, streams), twin_out)
    # removing the copy's hooks leaves the original's
    changed = _logp(model, streams)
    twin.adapters.remove()
    assert torch.equal(_logp(model, streams), changed)
    assert not torch.equal(_logp(twin, streams), twin_out)
