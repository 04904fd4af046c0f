"""Tiny random frozen backbones for the MoME tests: a BERT encoder and a Llama decoder."""

import transformers

__all__ = ["tiny_bert", "tiny_llama"]


def tiny_bert() -> "transformers.BertModel":
    """A 2-layer BERT of width 16 (random weights)."""
    cfg = transformers.BertConfig(
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=32,
        vocab_size=8,
        max_position_embeddings=256,
    )
    return transformers.BertModel(cfg)


def tiny_llama() -> "transformers.LlamaModel":
    """A 2-layer Llama of width 16 with grouped-query attention (random weights)."""
    cfg = transformers.LlamaConfig(
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        intermediate_size=32,
        vocab_size=8,
        max_position_embeddings=256,
    )
    return transformers.LlamaModel(cfg)
