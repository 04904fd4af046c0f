"""The backbone's packed linear layers (padding skipped) against the padded computation:
outputs at the real frames, gradients of the trainable parts, the balance loss."""

import copy

import pytest
import torch
from torch import nn

transformers = pytest.importorskip("transformers")

from sci_moe.speech.mome import (  # noqa: E402
    MatryoshkaRates,
    MoMEConfig,
    PackedLinear,
    RecognizerConfig,
    SpeechRecognizer,
    pack_linears,
)
from tests.speech.mome.backbones import tiny_bert, tiny_llama  # noqa: E402


def _model(backbone, adapter):
    torch.manual_seed(0)
    cfg = RecognizerConfig(
        input_dims={"audio": 40},
        frame_rates={"audio": 100.0},
        compression=MatryoshkaRates({"audio": (1, 2, 4)}),
        adapter=adapter,
        mome=MoMEConfig(d_model=16, num_experts=4, top_k=2, bottleneck=2),
        bottleneck=3,
        upsample=4,
        encoder_dim=6,
    )
    model = SpeechRecognizer(backbone, cfg)
    with torch.no_grad():  # non-zero adapters (their up-projections start at zero)
        for p in model.parameters():
            if p.requires_grad:
                p.add_(0.1 * torch.randn_like(p))
    return model


def _pair(make, adapter):
    """The recogniser and an equal one whose backbone's linears compute every position
    (built twice, from copies of one backbone taken before any adapter hooks into it)."""
    torch.manual_seed(5)
    backbone = make()
    plain = copy.deepcopy(backbone)  # before any adapter hooks into it
    model, ref = _model(backbone, adapter), _model(plain, adapter)
    for m in ref.backbone.modules():
        if isinstance(m, PackedLinear):
            m.__class__ = nn.Linear
    return model, ref


def _run(model, x, mask, rate):
    model.zero_grad()
    out = model({"audio": (x, mask)}, {"audio": rate})
    loss = (
        sum((out.log_probs[b, : out.lengths[b]] ** 2).sum() for b in range(x.shape[0]))
        + out.aux_loss
    )
    loss.backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    return out, grads


@pytest.mark.parametrize("make", [tiny_bert, tiny_llama])
@pytest.mark.parametrize("adapter", ["mome", "per_rate", "none"])
def test_packed_backbone_equals_padded(make, adapter):
    model, ref = _pair(make, adapter)
    assert any(isinstance(m, PackedLinear) for m in model.backbone.modules())
    assert not any(isinstance(m, PackedLinear) for m in ref.backbone.modules())
    want_state = ref.state_dict()
    assert model.state_dict().keys() == want_state.keys()
    assert all(torch.equal(v, want_state[k]) for k, v in model.state_dict().items())
    g = torch.Generator().manual_seed(1)
    x = torch.randn(3, 32, 40, generator=g)
    mask = torch.zeros(3, 32, dtype=torch.bool)
    for b, n in enumerate((32, 13, 5)):  # padding of every amount, one row without
        mask[b, :n] = True
    model.train()
    ref.train()
    for rate in (1, 2, 4):
        out, grads = _run(model, x, mask, rate)
        want, want_grads = _run(ref, x, mask, rate)
        assert torch.equal(out.lengths, want.lengths)
        for b in range(3):
            n = int(out.lengths[b])
            torch.testing.assert_close(out.log_probs[b, :n], want.log_probs[b, :n])
        torch.testing.assert_close(out.aux_loss, want.aux_loss)
        assert grads.keys() == want_grads.keys() and any(".adapters." in n for n in grads) == (
            adapter != "none"
        )
        for name, grad in want_grads.items():
            torch.testing.assert_close(grads[name], grad, msg=name)


def test_pack_linears_in_place_and_outside_the_context():
    lin = nn.Linear(4, 3)
    seq = nn.Sequential(lin)
    tokens = pack_linears(seq)
    assert seq[0] is lin and isinstance(lin, PackedLinear) and lin.tokens is tokens
    x = torch.randn(2, 5, 4)
    want = nn.functional.linear(x, lin.weight, lin.bias)
    assert torch.equal(lin(x), want)  # no mask set: every position
    mask = torch.tensor([[True] * 5, [True, True, False, False, False]])
    with tokens.active(mask):
        y = lin(x)
        assert torch.equal(lin(x[:, 0]), want[:, 0])  # another shape: every position
    assert tokens.mask is None and tokens.index is None
    torch.testing.assert_close(y[mask], want[mask])
    assert torch.equal(y[~mask], torch.zeros(3, 3))
    assert pack_linears(seq) is not tokens and lin.tokens is not tokens  # repackable
