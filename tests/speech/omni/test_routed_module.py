"""Omni-Expert's routed layer (the phoneme MoE's PhonemeMixture, a RoutedModule) against
the naive loop. The OE itself has no routed layer (one expert on per-phoneme affine
inputs, see sci_moe.speech.omni.task_affine)."""

from __future__ import annotations

import pytest
import torch

from sci_moe.moe import RoutedModule
from sci_moe.speech.omni import (
    MaskNetConfig,
    PhonemeIndependentMask,
    PhonemeMixture,
    PhonemeMoEMask,
    oracle_probs,
)
from sci_moe.testing import assert_routed_module

NET = MaskNetConfig(n_bins=5, context=3, hidden=7, n_classes=6, classifier_hidden=4)


@pytest.mark.parametrize("oracle", [True, False])
def test_phoneme_moe_routed_calls_match_the_naive_loop(oracle):
    torch.manual_seed(0)
    moe = PhonemeMoEMask.from_pi(PhonemeIndependentMask(NET)).double()
    assert isinstance(moe.mixture, RoutedModule)
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():  # upcycled experts are equal: make them differ
        for p in moe.parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=g, dtype=p.dtype))
    x = torch.randn(9, 3, 5, generator=g, dtype=torch.float64)
    if oracle:  # one expert pass per frame
        probs = oracle_probs(torch.arange(9) % 6, 6).double()
    else:  # predicted: every expert, weighted
        probs = torch.softmax(torch.randn(9, 6, generator=g, dtype=torch.float64), -1)
    assert assert_routed_module(moe, x, probs) == 1
    y, info = moe.mixture(x.reshape(9, -1), probs=probs, return_routing=True)
    assert info.routing.top_k == (1 if oracle else 6)
    assert torch.equal(y, moe(x, probs))


def test_mixture_rejects_probabilities_of_the_wrong_shape():
    layer = PhonemeMixture(NET)
    with pytest.raises(ValueError, match="probs must have shape"):
        layer(torch.randn(4, NET.d_in), probs=torch.ones(3, 6) / 6)
