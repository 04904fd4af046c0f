"""MoME's routed layer (MoMEAdapter, a RoutedModule) against the naive loop."""

from __future__ import annotations

import pytest
import torch

from sci_moe.moe import RoutedModule
from sci_moe.speech.mome import MoMEAdapter
from sci_moe.testing import assert_routed_module


def _randomize(module: torch.nn.Module, seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():  # the up-projections start at zero: give the experts an output
        for p in module.parameters():
            if p.requires_grad:
                p.add_(0.3 * torch.randn(p.shape, generator=g, dtype=p.dtype))


def test_mome_recognizer_routed_calls_match_the_naive_loop():
    transformers = pytest.importorskip("transformers")
    from sci_moe.speech.mome import MatryoshkaRates, MoMEConfig, RecognizerConfig, SpeechRecognizer

    torch.manual_seed(0)
    bert = transformers.BertModel(
        transformers.BertConfig(
            hidden_size=16,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=32,
            vocab_size=8,
            max_position_embeddings=64,
        )
    )
    cfg = RecognizerConfig(
        input_dims={"audio": 10},
        frame_rates={"audio": 100.0},
        compression=MatryoshkaRates({"audio": (2,)}),
        mome=MoMEConfig(d_model=16, num_experts=4, top_k=2, bottleneck=2, num_shared=1),
        upsample=2,
    )
    model = SpeechRecognizer(bert, cfg).eval()
    adapters = list(model.adapters.adapters)
    assert len(adapters) == 2 and all(isinstance(a, RoutedModule) for a in adapters)
    _randomize(model.adapters, 1)
    x = torch.randn(2, 12, 10, generator=torch.Generator().manual_seed(2))
    mask = torch.ones(2, 12, dtype=torch.bool)
    mask[1, 8:] = False  # padding: only the real tokens are routed
    # one routed call per backbone layer, on the 6 + 4 real tokens
    assert assert_routed_module(model, {"audio": (x, mask)}, {"audio": 2}) == 2
    assert [a.last_routing.num_tokens for a in adapters] == [10, 10]


def test_mome_adapter_alone_matches_the_naive_loop():
    a = MoMEAdapter(d_model=8, num_experts=5, top_k=2, bottleneck=3, num_shared=2).double()
    _randomize(a, 3)
    x = torch.randn(3, 4, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(4))
    assert assert_routed_module(a, x) == 1
    y, info = a(x, return_routing=True)
    assert y.shape == x.shape and info.routing is a.last_routing
    assert set(info.losses) == {"load_balance"}
