"""A small MoE language model on real text (byte-level), for routing experiments.

:class:`MoETransformerLM` is a decoder-only transformer whose FFNs are
:class:`~sci_moe.moe.MoE` layers; :func:`train` trains it on the Wikipedia excerpt and
news articles shipped in gensim's wheel (:func:`load_corpus`), with exact resume from
checkpoints, validation perplexity and routing diagnostics.
"""

from .data import (
    VOCAB_SIZE,
    BatchSampler,
    TextCorpus,
    decode,
    encode,
    load_corpus,
    validation_windows,
)
from .model import MoELMConfig, MoETransformerLM
from .train import TrainConfig, evaluate, finetune, load_checkpoint, train

__all__ = [
    "VOCAB_SIZE",
    "BatchSampler",
    "MoELMConfig",
    "MoETransformerLM",
    "TextCorpus",
    "TrainConfig",
    "decode",
    "encode",
    "evaluate",
    "finetune",
    "load_checkpoint",
    "load_corpus",
    "train",
    "validation_windows",
]
