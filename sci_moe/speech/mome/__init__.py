"""MoME: Mixture of Matryoshka Experts on a frozen transformer, for speech recognition.

Cappellazzo et al., "MoME: Mixture of Matryoshka Experts for Audio-Visual Speech
Recognition" (NeurIPS 2025, arXiv 2510.04136): shared and top-k routed bottleneck
experts added in parallel to the blocks of a frozen pretrained transformer, one router
for every Matryoshka compression rate of the audio (and video) token sequences.

* Adapters: :class:`MoMEAdapter` (:class:`MoMEConfig`) and the baselines
  :class:`PerRateAdapter`, :class:`SingleAdapter` (same API), attached beside frozen
  sub-modules by :class:`ParallelAdapters`.
* Matryoshka compression: :func:`compress` (average pooling / stacking),
  :class:`MatryoshkaRates` (rates per modality, all combinations).
* The recogniser: :class:`SpeechRecognizer` (encoder -> projector -> frozen MiniLM with
  adapters -> CTC character head), :func:`load_minilm`, :func:`matched_bottleneck`;
  the trainable stand-in for the paper's pretrained audio encoder,
  :class:`SpeechEncoder` (:class:`EncoderConfig`, SpecAugment masking :func:`spec_mask`).
* Encoder pretraining: :func:`pretrain_encoder` (CTC alone, :class:`PretrainConfig`,
  :class:`EncoderCTC`, :class:`PretrainRun`, :func:`evaluate_encoder`), then
  :func:`save_encoder`, :func:`read_encoder` and :func:`load_encoder` (verified, into a
  recogniser, frozen by default).
* Data: :func:`build_speech_set` (corpus phrases spoken by espeak-ng, a synthetic
  viseme stream, seeded split by phrase, cache), :class:`SpeechSet`.
* Training: :func:`train_recognizer` (every rate combination per step, on the
  engine :class:`sci_moe.train.Trainer`; :class:`TrainConfig` extends its config),
  :func:`evaluate` (CER/WER at one rate), :func:`routing_consistency` (cross-rate JS).
* Front end and metrics: :func:`log_mel`, :func:`add_noise`, :func:`ctc_greedy_decode`,
  :func:`char_error_rate`, :func:`word_error_rate`.
"""

from .adapter import (
    DenseAdapter,
    MoMEAdapter,
    MoMEConfig,
    PerRateAdapter,
    SingleAdapter,
    adapter_parameter_count,
)
from .dataset import (
    HELDOUT_VOICES,
    TRAIN_VOICES,
    VIDEO_FPS,
    SpeechBatch,
    SpeechSet,
    SpeechSetConfig,
    build_speech_set,
    check_voices_known,
    corpus_phrases,
    viseme_frames,
)
from .encoder import ARCHITECTURE_FIELDS, EncoderConfig, SpeechEncoder, spec_mask
from .encoder_file import load_encoder, read_encoder, save_encoder
from .evaluation import evaluate, routing_consistency
from .features import FRAME_RATE, add_noise, log_mel, mel_filterbank
from .matryoshka import COMPRESSION_MODES, MatryoshkaRates, compress, compress_mask, rate_label
from .model import (
    ADAPTER_KINDS,
    RecognizerConfig,
    RecognizerOutput,
    SpeechRecognizer,
    load_minilm,
    load_smollm2_decoder,
    matched_bottleneck,
)
from .parallel import PackedLinear, ParallelAdapters, RealTokens, freeze, pack_linears
from .pretrain import (
    PRETRAIN_SPEC_MASK,
    EncoderCTC,
    PretrainConfig,
    PretrainRun,
    evaluate_encoder,
    pretrain_encoder,
)
from .text import (
    BLANK,
    VOCAB,
    char_error_rate,
    ctc_greedy_decode,
    decode_ids,
    edit_distance,
    encode_text,
    normalize_text,
    word_error_rate,
)
from .train import (
    RecognizerRun,
    TrainableParts,
    TrainConfig,
    recognizer_meta,
    train_recognizer,
)

__all__ = [
    "ADAPTER_KINDS",
    "ARCHITECTURE_FIELDS",
    "BLANK",
    "COMPRESSION_MODES",
    "FRAME_RATE",
    "HELDOUT_VOICES",
    "PRETRAIN_SPEC_MASK",
    "TRAIN_VOICES",
    "VIDEO_FPS",
    "VOCAB",
    "DenseAdapter",
    "EncoderCTC",
    "EncoderConfig",
    "MatryoshkaRates",
    "MoMEAdapter",
    "MoMEConfig",
    "PackedLinear",
    "ParallelAdapters",
    "PerRateAdapter",
    "PretrainConfig",
    "PretrainRun",
    "RealTokens",
    "RecognizerConfig",
    "RecognizerOutput",
    "RecognizerRun",
    "SingleAdapter",
    "SpeechBatch",
    "SpeechEncoder",
    "SpeechRecognizer",
    "SpeechSet",
    "SpeechSetConfig",
    "TrainConfig",
    "TrainableParts",
    "adapter_parameter_count",
    "add_noise",
    "build_speech_set",
    "char_error_rate",
    "check_voices_known",
    "compress",
    "compress_mask",
    "corpus_phrases",
    "ctc_greedy_decode",
    "decode_ids",
    "edit_distance",
    "encode_text",
    "evaluate",
    "evaluate_encoder",
    "freeze",
    "load_encoder",
    "load_minilm",
    "load_smollm2_decoder",
    "log_mel",
    "matched_bottleneck",
    "mel_filterbank",
    "normalize_text",
    "pack_linears",
    "pretrain_encoder",
    "rate_label",
    "read_encoder",
    "recognizer_meta",
    "routing_consistency",
    "save_encoder",
    "spec_mask",
    "train_recognizer",
    "viseme_frames",
    "word_error_rate",
]
