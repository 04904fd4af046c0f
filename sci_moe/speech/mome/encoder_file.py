"""Files of pretrained speech encoders: :func:`save_encoder` writes one (weights, config,
a digest and ``info``, verified), :func:`read_encoder` reads it back as a fresh
:class:`~sci_moe.speech.mome.SpeechEncoder`, and :func:`load_encoder` loads it into a
:class:`~sci_moe.speech.mome.SpeechRecognizer` after checking that the architecture
matches, frozen by default (then it stays in eval mode and out of the optimiser, and its
digest enters the training run's ``meta``).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from sci_moe._util import CheckpointError, load_verified, save_verified

from .encoder import ARCHITECTURE_FIELDS, EncoderConfig, SpeechEncoder
from .model import SpeechRecognizer
from .parallel import freeze as freeze_module
from .train import _tensor_digest

__all__ = ["load_encoder", "read_encoder", "save_encoder"]

#: The ``format`` tag of the files :func:`save_encoder` writes.
_ENCODER_FORMAT = "sci-moe-mome-encoder/1"
_MODALITIES = ("audio", "video")


def save_encoder(
    path: str | Path, encoder: SpeechEncoder, modality: str = "audio", info: dict | None = None
) -> Path:
    """Write a (pretrained) encoder, its config and ``info`` to a verified file.

    Parameters
    ----------
    path : path-like
        Destination (its folder is created); written atomically with a SHA-256.
    encoder : SpeechEncoder
        E.g. ``PretrainRun.model.encoder``.
    modality : {"audio", "video"}
        The stream it encodes.
    info : dict, optional
        Plain JSON data to keep with it (how it was trained, its held-out CER);
        :func:`load_encoder` returns it.

    Returns
    -------
    Path
    """
    if not isinstance(encoder, SpeechEncoder):
        raise TypeError(f"encoder must be a SpeechEncoder, got {type(encoder).__name__}")
    if modality not in _MODALITIES:
        raise ValueError(f"modality must be one of {_MODALITIES}, got {modality!r}")
    state = {k: v.detach().cpu().clone() for k, v in encoder.state_dict().items()}
    obj = {
        "format": _ENCODER_FORMAT,
        "modality": modality,
        "d_in": int(encoder.conv[0].in_channels),
        "config": dataclasses.asdict(encoder.config),
        "state": state,
        "digest": _tensor_digest(encoder),
        "info": dict(info or {}),
    }
    return save_verified(Path(path), obj, keep_previous=False)


def read_encoder(path: str | Path) -> tuple[SpeechEncoder, dict]:
    """A :func:`save_encoder` file as a fresh :class:`~sci_moe.speech.mome.SpeechEncoder`.

    Parameters
    ----------
    path : path-like

    Returns
    -------
    encoder : SpeechEncoder
        In eval mode, trainable (freeze it as needed).
    info : dict
        The file's ``info`` plus ``digest`` (of the weights), ``modality``, ``d_in`` and
        ``config`` (the :class:`~sci_moe.speech.mome.EncoderConfig` fields).

    Raises
    ------
    ValueError
        The file is missing, damaged (checksum) or not an encoder file.
    """
    path = Path(path)
    try:
        obj = load_verified(path, what="pretrained encoder")
    except CheckpointError as err:
        raise ValueError(
            f"{err}; pretrain the encoder again (pretrain_encoder, then save_encoder) or "
            "give the path of an intact file"
        ) from err
    if not isinstance(obj, dict) or obj.get("format") != _ENCODER_FORMAT:
        raise ValueError(
            f"{path} is not a pretrained-encoder file of save_encoder (format "
            f"{_ENCODER_FORMAT!r}); pretrain the encoder again or give the right path"
        )
    enc = SpeechEncoder(int(obj["d_in"]), EncoderConfig(**obj["config"]))
    own = enc.state_dict()
    state = obj["state"]
    bad = sorted(set(own) ^ set(state)) + [
        k for k in own if k in state and tuple(own[k].shape) != tuple(state[k].shape)
    ]
    if bad:
        raise ValueError(
            f"the tensors in {path} do not match its own EncoderConfig ({bad[:5]}); the file "
            "is not a save_encoder file of this version: pretrain the encoder again"
        )
    enc.load_state_dict(state)
    enc.eval()
    info = {**obj["info"], "digest": _tensor_digest(enc), "modality": obj["modality"],
            "d_in": int(obj["d_in"]), "config": dict(obj["config"])}  # fmt: skip
    return enc, info


def load_encoder(
    model: SpeechRecognizer,
    path: str | Path,
    modality: str | None = None,
    freeze: bool = True,
) -> dict:
    """Load a :func:`save_encoder` file into ``model``'s encoder of that modality.

    The file is verified (checksum), and the recogniser's encoder must have the same
    input size and architecture (:data:`~sci_moe.speech.mome.ARCHITECTURE_FIELDS` of its
    :class:`~sci_moe.speech.mome.EncoderConfig`; dropout and masking may differ) and the
    same tensor shapes.

    Parameters
    ----------
    model : SpeechRecognizer
        With ``RecognizerConfig.encoders[modality]``.
    path : path-like
    modality : str, optional
        Default: the file's.
    freeze : bool
        Freeze the loaded encoder (no gradients, not in the optimiser, kept in eval mode
        by :meth:`SpeechRecognizer.train`); ``False`` fine-tunes it (see
        ``TrainConfig.encoder_lr``).

    Returns
    -------
    dict
        :func:`read_encoder`'s ``info`` plus ``frozen``.

    Raises
    ------
    ValueError
        The file is missing, damaged or not an encoder file, or it does not fit the
        recogniser (the message says what differs and what to do).
    """
    path = Path(path)
    saved_enc, info = read_encoder(path)
    obj = {"modality": info["modality"], "config": info["config"], "d_in": info["d_in"]}
    m = obj["modality"] if modality is None else modality
    if m != obj["modality"]:
        raise ValueError(
            f"{path} holds a {obj['modality']!r} encoder, not a {m!r} one; give the file "
            f"pretrained on {m!r}"
        )
    if m not in model.config.encoders:
        raise ValueError(
            f"the recogniser has no SpeechEncoder for {m!r}; build it with "
            f"RecognizerConfig.encoders={{{m!r}: EncoderConfig(**{obj['config']})}}"
        )
    want = model.config.encoders[m]
    saved = EncoderConfig(**obj["config"])
    diff = {
        k: (getattr(saved, k), getattr(want, k))
        for k in ARCHITECTURE_FIELDS
        if getattr(saved, k) != getattr(want, k)
    }
    d_in = int(model.config.input_dims[m])
    if int(obj["d_in"]) != d_in:
        diff["d_in"] = (int(obj["d_in"]), d_in)
    if diff:
        shown = ", ".join(f"{k}: file {a!r}, model {b!r}" for k, (a, b) in diff.items())
        raise ValueError(
            f"the encoder in {path} does not fit the recogniser's {m!r} encoder ({shown}); "
            "pretrain it again with the recogniser's EncoderConfig (or another file path), "
            "or build the recogniser with the file's"
        )
    enc = model.encoders[m]
    enc.load_state_dict(saved_enc.state_dict())  # same architecture: same tensors
    if freeze:
        freeze_module(enc).eval()
    else:
        for p in enc.parameters():
            p.requires_grad_(True)
    return {**info, "digest": _tensor_digest(enc), "frozen": bool(freeze)}
