"""Shared by the MoME scripts (run.py, full.py): SNR names, the grid's models and the
evaluation of one trained recogniser at every rate combination and SNR; for ``full.py``
also the speech data flags and their settings (voices, ``--extra-train-phrases``,
``--train-variants``, ``--encoder-dim``, ``--encoder-layers`` ->
:class:`~sci_moe.speech.mome.SpeechSetConfig`) and the encoder pretraining stage
(``--pretrain-encoder``: CTC pretraining of the audio encoder, its file and record, the
settings check on ``--resume``). Those two live in ``_mome_data.py`` and
``_mome_pretrain.py``; this module re-exports them.

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

import torch
from _mome_data import HELDOUT_VOICES as HELDOUT_VOICES
from _mome_data import MAX_EXTRA_PHRASES as MAX_EXTRA_PHRASES
from _mome_data import TRAIN_VOICES as TRAIN_VOICES
from _mome_data import add_encoder_arguments as add_encoder_arguments
from _mome_data import check_data_settings as check_data_settings
from _mome_data import check_encoder_arguments as check_encoder_arguments
from _mome_data import data_extras as data_extras
from _mome_data import flat as flat
from _mome_data import snr_name
from _mome_data import speech_config as speech_config
from _mome_data import with_encoder_and_data as with_encoder_and_data
from _mome_pretrain import ENCODER_FILE as ENCODER_FILE
from _mome_pretrain import committed_encoder as committed_encoder
from _mome_pretrain import encoder_path as encoder_path
from _mome_pretrain import pretrain_defaults as pretrain_defaults
from _mome_pretrain import pretrain_piece as pretrain_piece
from _mome_pretrain import pretrain_settings as pretrain_settings
from _mome_pretrain import pretrain_stage as pretrain_stage
from _mome_pretrain import publish_encoder as publish_encoder
from _mome_pretrain import sha256 as sha256

from sci_moe.speech.mome import (
    EncoderConfig,
    MatryoshkaRates,
    MoMEConfig,
    RecognizerConfig,
    SpeechRecognizer,
    evaluate,
    matched_bottleneck,
)

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
