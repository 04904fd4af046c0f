"""A small MoE language model on real text (byte-level), for routing experiments.

:class:`MoETransformerLM` is a decoder-only transformer whose FFNs are
:class:`~sci_moe.moe.MoE` layers; :func:`train` trains it on the Wikipedia excerpt and
news articles shipped in gensim's wheel (:func:`load_corpus`) on the shared engine
(:mod:`sci_moe.train`), with exact resume from checkpoints, validation perplexity and
routing diagnostics; ``sci-moe train lm`` runs it from the command line.
:class:`MarkovSources` generates text with an exact loss floor (documents from one of
several Markov chains) for experiments that must train until flat.
"""

from .checkpoint import load_checkpoint, save_model
from .data import (
    VOCAB_SIZE,
    TextCorpus,
    decode,
    encode,
    load_corpus,
    random_windows,
    text_corpus,
    validation_windows,
)
from .markov import MarkovSources, markov_corpus
from .model import MoELMConfig, MoETransformerLM
from .train import (
    LMConfig,
    LMRun,
    TrainConfig,
    evaluate,
    finetune,
    run_training,
    train,
)

__all__ = [
    "VOCAB_SIZE",
    "LMConfig",
    "LMRun",
    "MarkovSources",
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
    "markov_corpus",
    "random_windows",
    "run_training",
    "save_model",
    "text_corpus",
    "train",
    "validation_windows",
]
