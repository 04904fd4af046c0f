"""Tiny randomly initialised transformers models (built in seconds, never the real weights)."""

from __future__ import annotations

import pytest
import torch

transformers = pytest.importorskip("transformers")

from sci_moe.language.mxd import TokenWindows  # noqa: E402

VOCAB = 50


@pytest.fixture
def tiny_llama():
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=3,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=64,
    )
    return transformers.LlamaForCausalLM(cfg).eval()


@pytest.fixture
def tiny_bert():
    torch.manual_seed(0)
    cfg = transformers.BertConfig(
        vocab_size=VOCAB,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        max_position_embeddings=64,
    )
    return transformers.BertModel(cfg, add_pooling_layer=False).eval()


@pytest.fixture
def windows():
    g = torch.Generator().manual_seed(1)
    n, ctx = 10, 8
    return TokenWindows(
        torch.randint(0, VOCAB, (n, ctx), generator=g),
        torch.arange(n) % 2,
        torch.arange(n),
    )
