"""Dataset fingerprints: which corpus (which processing pipeline) did a text come from?

After Mansour & Heckel, "Measuring Fingerprints of Web-filtered Text Datasets and
Fingerprint Propagation Through Training" (NeurIPS 2025 Datasets & Benchmarks,
arXiv 2412.02857). Given K corpora (one label each, :func:`read_corpora`), cut them into
fixed-length sequences (:func:`make_sequences`), split by document
(:func:`document_split`), and train a K-way classifier:

* :class:`BagOfWordsClassifier` — bag-of-n-grams logistic regression;
* :class:`EmbeddingMoEClassifier` — frozen sentence embeddings (e.g. MiniLM) with a
  :class:`sci_moe.moe.MoE` head;
* :class:`ByteTransformerClassifier` — the byte-level MoE LM of :mod:`sci_moe.language`
  fine-tuned as a classifier, for a fixed number of steps or in cycles until its validation
  accuracy is flat (:func:`fit_until_flat`);
* :class:`EncoderFinetuneClassifier` — a pretrained BERT-like encoder (all-MiniLM-L6-v2 in
  the benchmark) with its top ``k`` layers fine-tuned and a linear head, the frozen lower
  layers' states cached (also trainable by :func:`fit_until_flat`).

Ablations re-classify transformed text (:func:`remove_formatting`,
:func:`restrict_vocabulary`); :mod:`~sci_moe.language.provenance.filters` holds the
published web-filtering rules (C4, Gopher, normalisation, MinHash deduplication) used to
build corpora with a known processing difference; :func:`generate` and
:func:`estimate_mixture` measure fingerprint propagation through LM training
(:class:`PieceTokenizer` for word-piece LMs).
"""

from .bow import BagOfWordsClassifier, BoWConfig, bow_tokens
from .byte_classifier import (
    ByteClassifierConfig,
    ByteTransformerClassifier,
    LMSequenceClassifier,
    fit_until_flat,
)
from .corpora import read_corpora, read_corpus
from .embedding_head import EmbeddingHeadConfig, EmbeddingMoEClassifier, MoEClassifierHead
from .encoder_finetune import (
    EncoderFinetuneClassifier,
    EncoderFinetuneConfig,
    TopLayersClassifier,
)
from .filters import (
    c4_filter,
    english_score,
    gopher_filter,
    language_id_filter,
    minhash_dedup,
    normalize_text,
    shingles,
)
from .metrics import accuracy_interval, confusion_matrix, estimate_mixture, wilson_interval
from .persistence import CLASSIFIERS, load_classifier, save_classifier
from .propagation import PieceTokenizer, generate, mixture_documents, train_lm_on_texts
from .splits import SequenceSet, balance, document_split, make_sequences
from .transforms import remove_formatting, restrict_vocabulary, top_words, words

__all__ = [
    "CLASSIFIERS",
    "BagOfWordsClassifier",
    "BoWConfig",
    "ByteClassifierConfig",
    "ByteTransformerClassifier",
    "EmbeddingHeadConfig",
    "EmbeddingMoEClassifier",
    "EncoderFinetuneClassifier",
    "EncoderFinetuneConfig",
    "LMSequenceClassifier",
    "MoEClassifierHead",
    "PieceTokenizer",
    "SequenceSet",
    "TopLayersClassifier",
    "accuracy_interval",
    "balance",
    "bow_tokens",
    "c4_filter",
    "confusion_matrix",
    "document_split",
    "english_score",
    "estimate_mixture",
    "fit_until_flat",
    "generate",
    "gopher_filter",
    "language_id_filter",
    "load_classifier",
    "make_sequences",
    "minhash_dedup",
    "mixture_documents",
    "normalize_text",
    "read_corpora",
    "read_corpus",
    "remove_formatting",
    "restrict_vocabulary",
    "save_classifier",
    "shingles",
    "top_words",
    "train_lm_on_texts",
    "wilson_interval",
    "words",
]
