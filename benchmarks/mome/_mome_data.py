"""The speech data of ``full.py``: the voices, the data and encoder flags, the speech set.

:func:`add_encoder_arguments` adds the encoder pretraining, encoder size and extra
training data flags, :func:`check_encoder_arguments` checks them and
:func:`with_encoder_and_data` puts them in the settings; :func:`speech_config` is the
speech set of the settings (:data:`TRAIN_VOICES`, :data:`HELDOUT_VOICES`), :func:`flat`
the flatness rule of a validation curve, :func:`snr_name` the name of a noise level. The
flags are described in ``_mome.py``'s docstring. A helper module: ``_mome.py`` imports and
re-exports it.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from sci_moe.speech.mome import (
    HELDOUT_VOICES,
    TRAIN_VOICES,
    SpeechSetConfig,
)
from sci_moe.train import is_flat

__all__ = [
    "HELDOUT_VOICES",
    "MAX_EXTRA_PHRASES",
    "TRAIN_VOICES",
    "add_encoder_arguments",
    "check_data_settings",
    "check_encoder_arguments",
    "data_extras",
    "flat",
    "snr_name",
    "speech_config",
    "with_encoder_and_data",
]


def snr_name(snr: float | None) -> str:
    """``"clean"`` or ``"10dB"``."""
    return "clean" if snr is None else f"{snr:g}dB"


# --- speech data: voices, the extra training data flags, SpeechSetConfig -------------------

# TRAIN_VOICES, HELDOUT_VOICES: the package's (sci_moe.speech.mome), re-exported here.
#: The corpus has 3,730 distinct 2-4-word phrases; the full set uses the first 1,000.
MAX_EXTRA_PHRASES = 2700


def add_encoder_arguments(p: argparse.ArgumentParser) -> None:
    """Add the encoder pretraining, encoder size and extra training data flags to ``p``.

    Parameters
    ----------
    p : argparse.ArgumentParser
        The script's parser; gets ``--pretrain-encoder [PATH]``, ``--finetune-encoder LR``,
        ``--pretrain-only``, ``--pretrain-steps N``, ``--encoder-dim``, ``--encoder-layers``,
        ``--extra-train-phrases N`` and ``--train-variants V``, in that order.
    """
    p.add_argument("--pretrain-encoder", type=Path, nargs="?", const=Path(""), default=None,
                   metavar="PATH",
                   help="first pretrain the audio encoder alone with CTC (resumable) into PATH "
                   "(default WORK/<json stem>/audio_encoder.pt) and load it, frozen, into "
                   "every audio and audio-visual unit")  # fmt: skip
    p.add_argument("--finetune-encoder", type=float, default=None, metavar="LR",
                   help="with --pretrain-encoder: fine-tune the loaded encoder at peak "
                   "learning rate LR instead of freezing it")  # fmt: skip
    p.add_argument("--pretrain-only", action="store_true",
                   help="stop after the encoder pretraining stage")  # fmt: skip
    p.add_argument("--pretrain-steps", type=int, default=None, metavar="N",
                   help="with --pretrain-encoder: the stage's step cap (default 20,000; it "
                   "stops earlier after 8 evaluations without a better one)")  # fmt: skip
    p.add_argument("--encoder-dim", type=int, default=None,
                   help="audio encoder width, a multiple of its 4 heads (default 128)")  # fmt: skip
    p.add_argument("--encoder-layers", type=int, default=None,
                   help="audio encoder transformer layers (default 2)")  # fmt: skip
    p.add_argument("--extra-train-phrases", type=int, default=0, metavar="N",
                   help="N more corpus phrases, training split only, spoken by the training "
                   "voices (the validation and test utterances stay; default 0, at most "
                   f"{MAX_EXTRA_PHRASES})")  # fmt: skip
    p.add_argument("--train-variants", type=int, default=None, metavar="V",
                   help="spoken variants of every training phrase (default 2)")  # fmt: skip


def check_encoder_arguments(args: argparse.Namespace) -> bool:
    """Check the flags of :func:`add_encoder_arguments`; whether the stage runs.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed arguments.

    Returns
    -------
    bool
        ``True`` when ``--pretrain-encoder`` was given.

    Raises
    ------
    SystemExit
        ``--finetune-encoder``, ``--pretrain-only`` or ``--pretrain-steps`` without
        ``--pretrain-encoder``, a learning rate <= 0, an encoder width, layer count, variant
        count or pretraining step cap < 1, a width not
        a multiple of the 4 heads, or extra phrases outside ``0..MAX_EXTRA_PHRASES``.
    """
    pretrain = args.pretrain_encoder is not None
    if not pretrain and (
        args.finetune_encoder is not None or args.pretrain_only or args.pretrain_steps is not None
    ):
        raise SystemExit(
            "--finetune-encoder, --pretrain-only and --pretrain-steps need --pretrain-encoder"
        )
    if args.finetune_encoder is not None and not args.finetune_encoder > 0:
        raise SystemExit(f"--finetune-encoder must be > 0, got {args.finetune_encoder}")
    lows = (("encoder_dim", 1), ("encoder_layers", 1), ("train_variants", 1), ("pretrain_steps", 1))
    for name, low in lows:
        v = getattr(args, name)
        if v is not None and v < low:
            raise SystemExit(f"--{name.replace('_', '-')} must be >= {low}, got {v}")
    if args.encoder_dim is not None and args.encoder_dim % 4:
        raise SystemExit(f"--encoder-dim must be a multiple of 4 (the heads), got "
                         f"{args.encoder_dim}")  # fmt: skip
    if not 0 <= args.extra_train_phrases <= MAX_EXTRA_PHRASES:
        raise SystemExit(f"--extra-train-phrases must be in 0..{MAX_EXTRA_PHRASES}, got "
                         f"{args.extra_train_phrases}")  # fmt: skip
    return pretrain


def with_encoder_and_data(s: dict, encoder_dim: int | None = None,
                          encoder_layers: int | None = None, extra_train_phrases: int = 0,
                          train_variants: int | None = None) -> dict:  # fmt: skip
    """The settings ``s`` with the audio encoder's size and the extra training data set.

    Parameters
    ----------
    s : dict
        The run's settings (``s["audio_encoder"]``, ``s["variants"]``); not changed.
    encoder_dim, encoder_layers : int or None
        The audio encoder's width and transformer layers (``None``: those of ``s``).
    extra_train_phrases : int
        More training phrases (:class:`~sci_moe.speech.mome.SpeechSetConfig`); kept as
        ``"extra_train_phrases"`` only when > 0.
    train_variants : int or None
        Spoken variants of every training phrase; kept as ``"train_variants"`` only when
        given and not ``s["variants"]``, so the settings of the runs before these flags are
        unchanged.

    Returns
    -------
    dict
        A new settings dict.
    """
    s = dict(s)
    enc = s["audio_encoder"]
    s["audio_encoder"] = dict(enc, dim=encoder_dim or enc["dim"],
                              layers=encoder_layers or enc["layers"])  # fmt: skip
    if extra_train_phrases:
        s["extra_train_phrases"] = int(extra_train_phrases)
    if train_variants is not None and train_variants != s["variants"]:
        s["train_variants"] = int(train_variants)
    return s


def check_data_settings(s: dict) -> None:
    """Raise ``SystemExit`` when ``s["train_variants"]`` is below the set's variants."""
    if s.get("train_variants", s["variants"]) < s["variants"]:
        raise SystemExit(f"--train-variants must be >= the set's {s['variants']} variants")


def data_extras(s: dict) -> dict:
    """The settings' extra training data (empty: none)."""
    return {k: s[k] for k in ("extra_train_phrases", "train_variants") if k in s}


def speech_config(s: dict) -> SpeechSetConfig:
    """The speech set of the settings ``s``: training and held-out voices, seed 0.

    Parameters
    ----------
    s : dict
        ``num_phrases``, ``variants``, ``split`` and the optional extra training data.

    Returns
    -------
    SpeechSetConfig
    """
    return SpeechSetConfig(num_phrases=s["num_phrases"], variants=s["variants"],
                           voices=TRAIN_VOICES, heldout_voices=HELDOUT_VOICES,
                           split=tuple(s["split"]), seed=0, **data_extras(s))  # fmt: skip


def flat(curve: list, s: dict) -> bool:
    """Whether a ``[[step, val_cer], ...]`` curve is flat (:func:`sci_moe.train.is_flat`)."""
    if not curve:
        return False
    st, v = zip(*curve, strict=True)
    return is_flat(st, v, tail=s["flat_tail"], tol=s["flat_tol"])
