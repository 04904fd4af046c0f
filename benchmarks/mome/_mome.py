"""Shared by the MoME scripts (run.py, full.py): SNR names, the grid's models and the
evaluation of one trained recogniser at every rate combination and SNR; for ``full.py``
also the speech data flags and their settings (voices, ``--extra-train-phrases``,
``--train-variants``, ``--encoder-dim``, ``--encoder-layers`` ->
:class:`~sci_moe.speech.mome.SpeechSetConfig`) and the encoder pretraining stage
(``--pretrain-encoder``: CTC pretraining of the audio encoder, its file and record, the
settings check on ``--resume``).

Pretrained encoder (``--pretrain-encoder [PATH]``, the fix for the stall described in
``full.py``): before
the units, the audio encoder is trained once alone with CTC at its own token rate
(:func:`sci_moe.speech.mome.pretrain_encoder`; encoder -> linear head, 2 characters per
token) on the training voices, with the units' noise augmentation and SpecAugment masking
(2 time masks of up to 20 frames and at most 20 % of the utterance, 2 bands of up to 8 of
the 40 mel bins; :func:`sci_moe.speech.mome.spec_mask`), batch 8, AdamW 2e-3, 5 % warm-up
then cosine over at most 20,000 steps, validation CER (held-out voices) every 500 steps,
the best kept, early stop after 8 evaluations without a better one; flat by the same
rule. It is written (verified, with its record) to PATH (default
``WORK/<json stem>/audio_encoder.pt``; the trainer checkpoints to ``<PATH stem>_run/``
beside it, resumed by ``--resume`` and cut by ``--max-hours`` like a unit), its held-out
test CER/WER at rate 1 per SNR and learning curve go to the JSON (``pretrain`` and the
``audio/pretrained_encoder`` rows; the curve in black in the audio panel of the plot),
and every audio and audio-visual unit loads it (shape and config checked) **frozen**
(eval mode, out of the optimiser; the units train projector, adapters, router, norm and
head), or fine-tuned at peak learning rate ``--finetune-encoder LR``; ``--pretrain-only``
stops after the stage. Verdicts then also need the pretrained encoder flat. The video
encoder still trains with the units.

The finished stage's file (only then, never a cut one) is also copied, byte for byte and
atomically, beside the JSON to ``<json stem>_files/audio_encoder.pt``
(:func:`committed_encoder`, :func:`publish_encoder`; the encoder's float32 state dict,
config and record, no CTC head or optimiser: 2.57 MB for ``mome_full_v2``'s 4 layers of
width 128, 637,952 parameters), to be **committed with the JSON**, whose ``pretrain``
record keeps it as ``file`` (``path`` relative to the JSON's folder, ``sha256``,
``bytes``). The work folder is lost on a fresh machine; ``--resume`` then restores the
encoder from that copy when its SHA-256 is the record's, without pretraining again (it
says which it used), and stops with what to do when the copy is missing or differs.
A record without ``file`` (runs before it) needs the work-folder file as before; a
resume that finds the work-folder file copies it beside the JSON and records it. Not
float16: the units must load the very weights of the record's digest.

Measured (2-core CPU, the other core busy with another long run, 1 thread, nice 10,
2026-12-06), pretraining with these settings: 0.063 s per step over 60 steps (0.078 s
when the CTC loss averages rates 1-16; batch 16 costs 0.16 s per step), 0.071 s per step
over 1,500 steps with the evaluations; a short run of 1,500 steps (its own cosine
schedule, 1.8 min) reached validation CER 0.60 / 0.49 / 0.44 at steps 500 / 1,000 /
1,500 and held-out test CER 0.447 at rate 1 (clean), and 2,000 steps reached validation
CER 0.42 (2.9 min), about where the unmasked encoder stalled at that step (the masks
are a regulariser: their gain, if any, comes later in training); so the full 20,000
steps take about 24 min (30 min under more load), less if it stops early. The run
(``mome_full.json``, 2026-12-06): 20,000 steps in 1,312 s, flat, best validation CER
0.329 at step 16,000, held-out test CER 0.331 at rate 1, just above the gate, so the
grid was not started.

**What limits it: generalisation, not capacity** (issue 43; the stored best encoder of
that run, greedy CTC, clean, rate 1): CER 0.154 on its own training utterances, 0.209
on new draws (voice, rate, pitch) of 100 training phrases by the training voices, 0.281
on 100 training phrases by the held-out voices, 0.280 on the validation phrases by the
training voices and 0.329 on the validation set (held-out phrases and voices): new
voices and new phrases each cost about 0.07. Its training loss still fell (1.06 to 1.02
per character over steps 16,000-20,000) while the validation CTC loss was flat from step
~13,000; the errors are phonetic spellings of words it never saw ("prapalontsin" for
"propellants in"): 44 % of the validation words (40 % of the test words) are not in the
1,206-word vocabulary of the 800 training phrases. Hence ``--extra-train-phrases N``
and ``--train-variants V`` (:class:`~sci_moe.speech.mome.SpeechSetConfig`): N more
corpus phrases (the corpus has 3,730 distinct 2-4-word phrases, so at most 2,700), in
the training split only and spoken by the training voices, and V variants of every
training phrase; they are synthesised after the other utterances (about 40 s for 8,900
more), so the validation and test utterances are those of the run above. With 2,700
and 3 the training split grows from 1,600 to 10,500 utterances (vocabulary 3,658 words:
72 % of the validation and 75 % of the test words seen); the units train on the same
set. ``--encoder-dim`` and ``--encoder-layers`` set the audio encoder's size (also the
units'). These flags enter ``machine.settings`` (the extra data only when given) and the
encoder file's settings, so ``--resume`` refuses a run or file of other settings.

Probes (short pretraining runs, each with its own cosine schedule over its steps,
otherwise the settings above; seed 0 unless said; validation CER at the last step;
s/step with the evaluations, 1 thread, nice 10, the other core busy; 2026-12-06):

===================================================  =====  =========  ======  =============
probe                                                steps  val CER    s/step  train CER (*)
===================================================  =====  =========  ======  =============
baseline (dim 128, 2 layers, 1,600 utterances)       2,000  0.424      0.064   0.346
baseline, seed 1                                     2,000  0.415      0.061   0.342
baseline on 1/6 of the training phrases (266 utt.)   2,000  0.488      0.056   0.155
same, 4 time and 4 frequency masks (2x)              2,000  0.482      0.080   0.284
+2,700 phrases, 3 variants (10,500 utterances)       2,000  0.412      0.065   0.365
same, seed 1                                         2,000  0.417      0.057   0.373
same, lr 3e-3                                        2,000  0.417      0.059   0.370
same, dim 192                                        2,000  0.426      0.086   0.371
same, 4 layers                                       2,000  0.405      0.098   0.360
same, 4 layers, seed 1                               2,000  0.414      0.096   0.368
baseline                                             3,000  0.384      0.063   0.303
+2,700 phrases, 3 variants                           3,000  0.389      0.065   0.325
===================================================  =====  =========  ======  =============

(*) CER on 400 of the utterances it trained on (the first 400 of the training split).
At 2,000-3,000 steps (10-15 passes over 1,600 utterances) no lever is resolved: the
differences are within the seed spread (~0.01). The data lever acts in the regime the
full run ends in (100 passes, training CER 0.15): there, at equal passes, 6 times the
data made the difference (266 utterances: 60 passes, training CER 0.155, val 0.488;
1,600: 0.424), while twice the masks there cut the memorising (training CER 0.284) but
not the held-out CER (0.482; that probe ran under more load). The 4 layers were ahead
in both seeds but within the spread; they are recommended as cheap capacity for 6.5
times the data, not as a measured gain.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import tempfile
import time
from pathlib import Path

import torch
from _common import check_resume_settings, refuse

from sci_moe.speech.mome import (
    EncoderConfig,
    MatryoshkaRates,
    MoMEConfig,
    PretrainConfig,
    RecognizerConfig,
    SpeechRecognizer,
    SpeechSetConfig,
    evaluate,
    evaluate_encoder,
    matched_bottleneck,
    pretrain_encoder,
    read_encoder,
    save_encoder,
)
from sci_moe.train import is_flat

__all__ = [
    "ENCODER_FILE",
    "HELDOUT_VOICES",
    "MAX_EXTRA_PHRASES",
    "METHODS",
    "MODALITIES",
    "TRAIN_VOICES",
    "add_encoder_arguments",
    "build_model",
    "check_data_settings",
    "check_encoder_arguments",
    "committed_encoder",
    "compression",
    "data_extras",
    "encoder_path",
    "evaluate_grid",
    "flat",
    "pretrain_defaults",
    "pretrain_piece",
    "pretrain_settings",
    "pretrain_stage",
    "publish_encoder",
    "sha256",
    "snr_name",
    "speech_config",
    "with_encoder_and_data",
]

#: The adapters compared, each at MoME's total or active adapter parameters.
METHODS = ("mome", "per_rate", "shared", "dense_active")
#: What the recogniser hears or sees: audio, the synthetic viseme stream, both.
MODALITIES = ("audio", "video", "av")


def snr_name(snr: float | None) -> str:
    """``"clean"`` or ``"10dB"``."""
    return "clean" if snr is None else f"{snr:g}dB"


def compression(modality: str, rates) -> MatryoshkaRates:
    """The rates of one modality setting; audio-visual pairs the audio and video rates."""
    if modality == "av":
        return MatryoshkaRates({"audio": tuple(rates), "video": tuple(rates)}, paired=True)
    if modality not in ("audio", "video"):
        raise ValueError(f"modality must be one of {MODALITIES}, got {modality!r}")
    return MatryoshkaRates({modality: tuple(rates)})


def build_model(method: str, modality: str, s: dict, backbone, seed: int) -> SpeechRecognizer:
    """A fresh recogniser of the grid (seeded), on ``backbone`` (frozen).

    ``mome``: ``s["num_experts"]`` routed (top ``s["top_k"]``) + ``s["num_shared"]``
    shared experts of width ``s["bottleneck"]`` per layer; ``per_rate``: one dense adapter
    per rate combination, together as many parameters as MoME; ``shared``: one dense
    adapter for every rate with MoME's total parameters; ``dense_active``: one dense
    adapter with MoME's active parameters (router, shared and ``top_k`` experts).
    Encoders: ``s["audio_encoder"]`` and ``s["video_encoder"]`` (:class:`EncoderConfig`
    keyword dicts).
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    d = int(backbone.config.hidden_size)
    comp = compression(modality, s["rates"])
    mc = MoMEConfig(
        d_model=d,
        num_experts=s["num_experts"],
        top_k=s["top_k"],
        num_shared=s["num_shared"],
        bottleneck=s["bottleneck"],
    )
    n = len(comp.combinations())
    bottleneck = {
        "mome": mc.bottleneck,
        "per_rate": matched_bottleneck(mc, n),
        "shared": matched_bottleneck(mc, 1),
        "dense_active": matched_bottleneck(mc, 1, active=True),
    }[method]
    encoders = {"audio": EncoderConfig(**s["audio_encoder"])}
    encoders["video"] = EncoderConfig(**s["video_encoder"])
    cfg = RecognizerConfig(
        input_dims={"audio": 40, "video": 22},
        frame_rates={"audio": 100.0, "video": 25.0},
        compression=comp,
        adapter={"mome": "mome", "per_rate": "per_rate"}.get(method, "single"),
        mome=mc,
        bottleneck=bottleneck,
        upsample=s["upsample"],
        encoders={m: encoders[m] for m in comp.modalities},
    )
    torch.manual_seed(seed)
    return SpeechRecognizer(backbone, cfg)


def evaluate_grid(model: SpeechRecognizer, data, snrs, video_dropout: float) -> dict:
    """Test CER and WER of every rate combination of ``model`` at every SNR.

    The noise is added to the audio (noise seed 0: the same noisy test set for every
    model); a video-only model is scored clean only. Returns ``{"<label>/<snr>": [cer,
    wer]}``.
    """
    combos = model.config.compression.combinations()
    has_audio = "audio" in model.config.compression.modalities
    out = {}
    for combo in combos:
        label = ",".join(f"{m}={r}" for m, r in combo.items())
        for snr in snrs if has_audio else (None,):
            drop = video_dropout if "video" in combo else 0.0
            ev = evaluate(model, data, combo, "test", snr_db=snr, video_dropout=drop, seed=0)
            out[f"{label}/{snr_name(snr)}"] = [float(ev["cer"]), float(ev["wer"])]
    return out


# --- speech data: voices, the extra training data flags, SpeechSetConfig -------------------

#: The voices of the training split.
TRAIN_VOICES = ("en-us", "en-gb-x-rp", "en-us+f3", "en-us+m3", "en-gb-scotland+f1", "en-029+m2")
#: The held-out voices: they speak only the validation and test phrases.
HELDOUT_VOICES = ("en-us-nyc+f4", "en-gb-x-gbclan+m1")
#: The corpus has 3,730 distinct 2-4-word phrases; the full set uses the first 1,000.
MAX_EXTRA_PHRASES = 2700


def add_encoder_arguments(p: argparse.ArgumentParser) -> None:
    """Add the encoder pretraining, encoder size and extra training data flags to ``p``.

    Parameters
    ----------
    p : argparse.ArgumentParser
        The script's parser; gets ``--pretrain-encoder [PATH]``, ``--finetune-encoder LR``,
        ``--pretrain-only``, ``--encoder-dim``, ``--encoder-layers``,
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
        ``--finetune-encoder`` or ``--pretrain-only`` without ``--pretrain-encoder``, a
        learning rate <= 0, an encoder width, layer count or variant count < 1, a width not
        a multiple of the 4 heads, or extra phrases outside ``0..MAX_EXTRA_PHRASES``.
    """
    pretrain = args.pretrain_encoder is not None
    if not pretrain and (args.finetune_encoder is not None or args.pretrain_only):
        raise SystemExit("--finetune-encoder and --pretrain-only need --pretrain-encoder")
    if args.finetune_encoder is not None and not args.finetune_encoder > 0:
        raise SystemExit(f"--finetune-encoder must be > 0, got {args.finetune_encoder}")
    for name, low in (("encoder_dim", 1), ("encoder_layers", 1), ("train_variants", 1)):
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


# --- the encoder pretraining stage -----------------------------------------------------------


def pretrain_defaults(quick: bool) -> dict:
    """The stage's settings (``s["pretrain"]``): the full run's or the ``--quick`` toy's.

    Parameters
    ----------
    quick : bool
        The toy: 4 steps of batch 4, evaluated every 2 steps.

    Returns
    -------
    dict
        Steps, batch size, peak learning rate, evaluation interval (steps), patience
        (evaluations), CTC rates, characters per token and the SpecAugment masks (frames
        and mel bins).
    """
    masks = dict(time_masks=2, time_mask_width=20, time_mask_ratio=0.2, freq_masks=2,
                 freq_mask_width=8)  # fmt: skip
    if quick:
        return dict(steps=4, batch_size=4, lr=2e-3, eval_every=2, patience=0, rates=[1],
                    upsample=2, spec_mask=masks)  # fmt: skip
    return dict(steps=20000, batch_size=8, lr=2e-3, eval_every=500, patience=8, rates=[1],
                upsample=2, spec_mask=masks)  # fmt: skip


def pretrain_settings(s: dict) -> dict:
    """What an encoder file must have been pretrained with: the stage's settings, the
    encoder's and the extra training data (only when there is some, as before it existed)."""
    out = {"pretrain": s["pretrain"], "audio_encoder": s["audio_encoder"]}
    if extra := data_extras(s):
        out["data"] = extra
    return out


#: The committed copy of the finished pretrained encoder: ``<json stem>_files/<this>``.
ENCODER_FILE = "audio_encoder.pt"


def committed_encoder(json_path: Path | None) -> Path | None:
    """Where the finished encoder of the run of ``json_path`` is kept beside its JSON.

    Parameters
    ----------
    json_path : Path or None
        The results JSON (``--json``).

    Returns
    -------
    Path or None
        ``<json folder>/<json stem>_files/audio_encoder.pt``; ``None`` without a JSON.
    """
    if json_path is None:
        return None
    return json_path.with_name(f"{json_path.stem}_files") / ENCODER_FILE


def sha256(path: Path) -> str:
    """The SHA-256 of a file's bytes (hex)."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _copy_atomic(src: Path, dest: Path) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(Path(src).read_bytes())
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, dest)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def publish_encoder(path: Path, dest: Path) -> dict:
    """Copy the finished encoder file ``path`` atomically to ``dest`` (to commit).

    The copy is byte for byte (the :func:`~sci_moe.speech.mome.save_encoder` file: the
    encoder's float32 state dict, its config and record, with its own checksum; no CTC
    head, no optimiser), so a unit loading it gets the very weights of the run.

    Parameters
    ----------
    path : Path
        The encoder file in the work folder (:func:`encoder_path`).
    dest : Path
        :func:`committed_encoder`; not rewritten when it already holds these bytes.

    Returns
    -------
    dict
        The pretrain record's ``file`` entry: ``path`` (relative to the JSON's folder),
        ``sha256`` (of the bytes) and ``bytes``.
    """
    digest = sha256(path)
    if Path(path).resolve() != Path(dest).resolve() and not (
        dest.is_file() and sha256(dest) == digest
    ):
        _copy_atomic(path, dest)
    return {"path": f"{dest.parent.name}/{dest.name}", "sha256": digest,
            "bytes": dest.stat().st_size}  # fmt: skip


def encoder_path(arg: Path | None, root: Path, pre: dict | None,
                 committed: Path | None = None) -> Path | None:  # fmt: skip
    """The pretrained encoder's file of a run; on ``--resume`` restored from its committed
    copy when the work folder lost it.

    Parameters
    ----------
    arg : Path or None
        ``--pretrain-encoder``: ``None`` without the stage, ``Path("")`` for the default.
    root : Path
        The run's checkpoint folder (``WORK/<json stem>``, or ``WORK`` without a JSON);
        the default file is ``root / "audio_encoder.pt"``.
    pre : dict or None
        The stored run's pretrain record (``--resume``), if any.
    committed : Path or None
        The committed copy (:func:`committed_encoder`); used when the file is missing and
        ``pre`` records its SHA-256 (``pre["file"]``), after checking it.

    Returns
    -------
    Path or None
        ``None`` without the stage.

    Raises
    ------
    SystemExit
        A stored run's record whose encoder file is missing and cannot be restored: a
        record without a committed copy (runs before it), a committed copy missing, or
        one whose SHA-256 is not the record's.
    """
    if arg is None:
        return None
    path = root / "audio_encoder.pt" if arg == Path("") else arg
    if pre is None:
        return path
    if path.is_file():
        print(f"encoder: the work-folder file {path}", flush=True)
        return path
    rec = pre.get("file")
    if rec is None or committed is None:
        raise SystemExit(f"--resume: the pretrained encoder {path} of this run is "
                         "missing; restore it or start the run afresh")  # fmt: skip
    if not committed.is_file():
        raise SystemExit(f"--resume: the pretrained encoder {path} of this run is missing "
                         f"and so is its committed copy {committed}; restore it (git "
                         f"checkout -- {committed}) or start the run afresh")  # fmt: skip
    got = sha256(committed)
    if got != rec["sha256"]:
        raise SystemExit(f"--resume: {committed} is not the encoder of this run (SHA-256 "
                         f"{got} != {rec['sha256']} in the JSON's pretrain.file): restore "
                         f"the committed version (git checkout -- {committed}) or start "
                         "the run afresh without --resume")  # fmt: skip
    _copy_atomic(committed, path)
    print(f"encoder: {path} missing; restored from the committed copy {committed} "
          "(SHA-256 matches the JSON), no pretraining", flush=True)  # fmt: skip
    return path


def pretrain_stage(s: dict, data, path: Path, max_hours: float | None = None,
                   progress: bool = False) -> dict | None:  # fmt: skip
    """Pretrain the audio encoder alone with CTC (:func:`sci_moe.speech.mome.pretrain_encoder`)
    and write it to ``path``; its trainer checkpoints go to ``<path stem>_run/`` beside it
    (resumed when there). Returns the record (curve, flatness, test CER/WER at rate 1 per
    test SNR), also kept in the file; ``None`` when ``max_hours`` ran out first.

    A ``path`` that exists already is read instead (verified); it must have been
    pretrained with these settings."""
    p = s["pretrain"]
    want = pretrain_settings(s)
    if path.is_file():
        _, info = read_encoder(path)
        try:
            check_resume_settings(info.get("settings"), want, path, flag=None,
                                  before="not an encoder this script pretrained",
                                  fix="remove it (and its _run folder) or give another "
                                  "--pretrain-encoder PATH")  # fmt: skip
        except ValueError as err:
            refuse(str(err))
        return info
    if max_hours is not None and max_hours <= 0:
        return None
    t0 = time.perf_counter()
    enc = EncoderConfig(**s["audio_encoder"], **p["spec_mask"])
    cfg = PretrainConfig(steps=p["steps"], batch_size=p["batch_size"], lr=p["lr"],
                         eval_every=p["eval_every"], monitor="val_cer", patience=p["patience"],
                         rates=tuple(p["rates"]), upsample=p["upsample"],
                         snr_db=tuple(s["train_snr"]), seed=0, max_hours=max_hours,
                         progress=progress, checkpoint_minutes=5.0)  # fmt: skip
    run_dir = path.parent / f"{path.stem}_run"
    resume = (run_dir / "checkpoint.pt").is_file()
    run = pretrain_encoder(data, enc, cfg, out_dir=run_dir, resume=resume)
    r = run.result
    if r.reason == "budget":
        return None
    curve = [[e["step"], e["val_cer"]] for e in r.evals if "val_cer" in e]
    test = {}
    for snr in s["test_snr"]:
        ev = evaluate_encoder(run.model, data, "test", rate=1, snr_db=snr, seed=0)
        test[f"audio=1/{snr_name(snr)}"] = [float(ev["cer"]), float(ev["wer"])]
    info = dict(settings=want,
                steps=r.step, cap=r.steps, reason=r.reason, best_step=r.best_step,
                best_val_cer=r.best_metric, converged=flat(curve, s), curve=curve, test=test,
                train_s=r.train_time_s, stage_s=time.perf_counter() - t0)  # fmt: skip
    save_encoder(path, run.model.encoder, "audio", info)
    _, info = read_encoder(path)  # as the units will see it (with its digest)
    return info


def pretrain_piece(s: dict, data, path: Path, pre: dict | None, max_hours: float | None = None,
                   progress: bool = False,
                   committed: Path | None = None) -> tuple[dict | None, bool]:  # fmt: skip
    """One piece of the stage (:func:`pretrain_stage`), checked against the stored record.

    Parameters
    ----------
    s : dict
        The run's settings.
    data : SpeechSet
        The speech set.
    path : Path
        The encoder file (:func:`encoder_path`).
    pre : dict or None
        The stored run's pretrain record (``--resume``), if any.
    max_hours : float or None
        The piece's time left (hours; ``None``: no limit).
    progress : bool
        Show the trainer's progress.
    committed : Path or None
        Where to keep the finished encoder for commit (:func:`committed_encoder`); it is
        copied there (:func:`publish_encoder`) and its SHA-256 recorded as the record's
        ``file``. Nothing is copied while the stage is unfinished.

    Returns
    -------
    record : dict or None
        The stage's record (with ``file`` when ``committed`` is given), or ``pre`` when
        the piece's time ran out first.
    cut : bool
        Whether the piece's time ran out first (continue with ``--resume``).

    Raises
    ------
    SystemExit
        The file's encoder is not the one of the stored record (another digest).
    """
    info = pretrain_stage(s, data, path, max_hours, progress)
    if info is None:
        print("encoder pretraining: piece time spent; continue with --resume", flush=True)
        return pre, True
    if pre is not None and pre.get("digest") != info["digest"]:
        raise SystemExit(f"--resume: {path} is not the encoder this run used "
                         f"(digest {info['digest']} != {pre.get('digest')})")  # fmt: skip
    if committed is not None:
        info = dict(info, file=publish_encoder(path, committed))
        print(f"encoder: kept for commit in {committed} ({info['file']['bytes']} bytes, "
              f"SHA-256 {info['file']['sha256'][:16]}...)", flush=True)  # fmt: skip
    print(f"encoder pretraining: {info['steps']} steps ({info['reason']}, flat "
          f"{info['converged']}); test CER at rate 1 "
          f"{info['test']['audio=1/clean'][0]:.3f}", flush=True)  # fmt: skip
    return info, False
