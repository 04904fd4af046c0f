"""Activations stored in float16 (a million-token collection) train and evaluate exactly as
their float32 values: each batch is cast to the layer's dtype."""

import copy

import pytest
import torch

from sci_moe.language.mxd import (
    DecompositionTrainConfig,
    MixtureOfDecoders,
    Transcoder,
    evaluate_decomposition,
    train_decomposition,
)


def _data(n=400, d=6):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, d, generator=g)
    y = torch.tanh(x @ torch.randn(d, d, generator=g)) * 3.0
    return x.half(), y.half()


@pytest.mark.parametrize(
    "make",
    [
        lambda: MixtureOfDecoders(6, 6, num_experts=20, top_k=3, d_hidden=12),
        lambda: Transcoder(6, 6, d_latent=24, top_k=3),
    ],
)
def test_float16_storage_trains_like_its_float32_values(make):
    xh, yh = _data()
    torch.manual_seed(0)
    a = make()
    b = copy.deepcopy(a)
    cfg = DecompositionTrainConfig(
        steps=30, batch_size=32, lr=1e-2, progress=False, eval_every=10, dead_window=320
    )
    ra = train_decomposition(a, xh, yh, cfg, x_val=xh[:64], y_val=yh[:64])
    rb = train_decomposition(
        b, xh.float(), yh.float(), cfg, x_val=xh[:64].float(), y_val=yh[:64].float()
    )
    for pa, pb in zip(a.parameters(), b.parameters(), strict=True):
        assert pa.dtype == torch.float32 and torch.equal(pa, pb)
    assert ra.history == rb.history
    assert ra.summary.evals == rb.summary.evals
    assert evaluate_decomposition(a, xh, yh) == evaluate_decomposition(b, xh.float(), yh.float())
