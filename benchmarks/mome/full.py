"""MoME, the decisive run: recognisers that recognise, MoME vs three adapter baselines.

Task (synthetic, not LRS2/LRS3): phrases of 2-4 words of the offline corpus spoken by
espeak-ng (:func:`sci_moe.speech.mome.build_speech_set`), split by phrase **and by
voice**: the training phrases are spoken by six voices, the validation and test phrases
only by two other voices (held-out speakers and sentences); the video stream is the
synthetic viseme stream (22 visemes at 25 frames/s from espeak's phoneme timings, 30 %
of the frames zeroed). Model (issue 43, item 1): a trainable speech encoder
(:class:`~sci_moe.speech.mome.SpeechEncoder`: convolutional subsampling of the 100 Hz
log-mels to 50 tokens/s, as Whisper's, + two transformer layers; a one-layer encoder
for the visemes), standing in for the paper's pretrained audio and video encoders,
which do not ship offline; Matryoshka compression at rates 1, 2, 4, 8, 16 (average
pooling; audio 50 to 3.1 tokens/s); a linear projector into the **frozen** pretrained
LM (default the first two layers of all-MiniLM-L6-v2, ``--backbone smollm2`` the first
``--lm-layers`` of SmolLM2-135M's decoder) with the adapters beside every attention
block; a CTC character head with 8 outputs per token (rate 16 leaves 3.1 tokens/s,
25 CTC frames/s for ~15 characters/s of speech). 1,000 phrases x 2 variants, split
80/10/10 by phrase: 1,600 training, 200 validation and 200 test utterances.
Why not the whole SmolLM2 decoder with its LM head: measured on this 2-core CPU (load
~5, 1 thread), the backward pass through its 30 frozen layers costs 13.7 s per step
(batch 8, five rates), against 1.1 s for its first two layers; a converged run of 1,500
steps would be 5.7 h per model, 200 h for the grid.

Grid: modality {audio, video, audio-visual (paired rates)} x method x seed, each trained
on every rate of its modality per step (loss = mean CTC over the rates + 0.01 Switch
balance for MoME), at equal adapter parameters:

* ``mome``: 8 routed (top-2) + 1 shared bottleneck-8 experts per layer, one router;
* ``per_rate``: one dense adapter per rate, as many parameters in all as MoME;
* ``shared``: one dense adapter for every rate, MoME's total parameters;
* ``dense_active``: one dense adapter with MoME's active parameters per token.

Training (the engine, ``sci_moe.train``): batch 8, AdamW 2e-3, 10 % warm-up then cosine,
noise augmentation (clean, 10, 5 dB), validation (held-out voices) every 100 steps at
every rate, the best mean validation CER kept, early stop after 5 evaluations without a
better one, at most ``steps`` steps. **Flat** (converged) when the validation CER is
< 1 % better over the last 20 % of the steps (:func:`sci_moe.train.is_flat`).

Measures: test CER/WER at every rate, clean and at 10, 5, 0 dB (audio noise); routing
consistency of MoME (mean JS divergence of expert usage across rates) trained vs the same
model untrained (the control of ``run.py --untrained-routing``), both also against their
shuffled-expert control; parameter counts; learning curves. The gate: a recogniser
recognises when its test CER at audio rate 1 is <= 0.30.

Verdicts (:func:`verdicts`), paired t-test over the seeds (``_common.decide_verdict``),
CER lower is better: per modality, MoME vs each baseline on the mean CER over the rates
and at rate 16; under noise (audio, audio-visual) MoME vs per-rate adapters per SNR (mean
over rates); trained vs untrained routing consistency per modality. Converged only when
every model behind it is flat in every seed and the audio models pass the gate.

Written in pieces: one unit is one (modality, method, seed); the JSON holds every finished
unit under ``runs`` and is rewritten after each; a unit cut by ``--max-hours`` leaves its
trainer checkpoint in ``WORK/<json stem>/<unit>`` (``--work``, default
``benchmarks/.mome_full``, ignored by git) and ``--resume`` continues it exactly.

Pretrained encoder (``--pretrain-encoder [PATH]``, the fix for the stall below): before
the units, the audio encoder is trained once alone with CTC, written (verified, with its
record) to PATH (default ``WORK/<json stem>/audio_encoder.pt``), resumable and cut by
``--max-hours`` like a unit, and loaded **frozen** into every audio and audio-visual unit
(or fine-tuned at peak learning rate ``--finetune-encoder LR``); its held-out test
CER/WER at rate 1 per SNR and curve go to the JSON (``pretrain``, the
``audio/pretrained_encoder`` rows, black in the audio panel of the plot);
``--pretrain-only`` stops after the stage; verdicts then also need it flat. The finished
encoder is also kept beside the JSON in ``<json stem>_files/audio_encoder.pt`` (2.57 MB
for ``mome_full_v2``), its SHA-256 in the ``pretrain`` record: **commit it with the JSON**;
``--resume`` on a fresh machine restores the encoder from it instead of pretraining again.
A piece cut inside the stage keeps the trainer's checkpoint there instead
(``<json stem>_files/pretrain_checkpoint.pt``; commit it with the partial JSON): a
``--resume`` whose work folder lacks the checkpoint continues from that copy rather than
from step 0, and the finished stage removes it.
``--pretrain-steps N`` sets the stage's step cap (default 20,000; ``mome_full_v2``'s
encoder reached it still improving, so ``converged: false``).
``--extra-train-phrases N``, ``--train-variants V``, ``--encoder-dim`` and
``--encoder-layers`` add training utterances and size the audio encoder; they enter
``machine.settings`` and the encoder file's settings, so ``--resume`` refuses a run or
file of other settings. The stage and these flags, with their measurements, the
diagnosis (generalisation, not capacity) and the probes: ``_mome.py``. ``--device cuda``
trains (and scores) the encoder and the units on a GPU; it is recorded in ``machine`` and
is not a setting, so a piece may resume on another device (the stored results are the
CPU's).
Recommended next pretraining (a new JSON; est.
20,000 steps x 0.098 s + evaluations and synthesis ~35 min, ~40 min under more load,
less if it stops early; without ``--encoder-layers 4`` ~23 min):

    nice -n 10 env OMP_NUM_THREADS=1 .venv/bin/python benchmarks/mome/full.py \\
        --threads 1 --max-hours 1 --resume --pretrain-encoder --pretrain-only \\
        --extra-train-phrases 2700 --train-variants 3 --encoder-layers 4 \\
        --plots docs/results/img --json benchmarks/mome/results/mome_full_v2.json

then the grid with the same flags minus ``--pretrain-only``, in pieces of
``--max-hours 1`` with ``--resume``. The first pretraining (without the three flags):

    nice -n 10 env OMP_NUM_THREADS=1 .venv/bin/python benchmarks/mome/full.py \\
        --threads 1 --max-hours 1 --resume --pretrain-encoder --pretrain-only \\
        --plots docs/results/img --json benchmarks/mome/results/mome_full.json

Measured before the run (2-core CPU beside other jobs, load 3-5, 1 thread, 2026-12-06):
a training step (batch 8, all five rates) takes 0.43-0.95 s for audio MoME, 0.44 s for
audio per-rate adapters, 0.37 s for video MoME and 0.62 s for audio-visual MoME; audio
MoME with this script's settings (one unit, seed 0, in 3-minute pieces) ran 0.36 s per
training step, 3,000 steps, and ended at test CER 0.42 / 0.40 / 0.39 / 0.46 / 0.57 (rates
1-16, clean; 0.63 at rate 1 and 0 dB), not flat (validation CER 0.46 at step 1,600, 0.44
at 2,900) and short of the 0.30 gate; the encoder alone (CTC at rate 1, no LM, 0.05 s per
step) stalls at validation CER ~0.40 after 2,000 steps with 6 or 36 training voices and
with 1,000 or 3,500 phrases, so the limit is most likely spelling unseen voices' words
from sound, not the LM or the adapters. The first 1,200-step schedule ended flat at test CER 0.47 /
0.45 / 0.45 / 0.49 / 0.60 (0.36 on training utterances at rate 1), against 0.87-0.99 of
``run.py`` without an encoder. A unit of up to 3,000 steps (its encoder trained with it)
is 20-45 min; the grid (3 modalities x 4 methods x 3 seeds) about 15 h, in pieces of
``--max-hours 1``; that grid, without ``--pretrain-encoder``:

    nice -n 10 env OMP_NUM_THREADS=1 .venv/bin/python benchmarks/mome/full.py \\
        --threads 1 --max-hours 1 --resume --plots docs/results/img \\
        --json benchmarks/mome/results/mome_full.json
"""

from __future__ import annotations

import copy
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/_common/

import numpy as np
from _common import (
    OtherLoad,
    base_parser,
    check_resume_settings,
    machine_info,
    piece_arguments,
    piece_deadline,
    previous_run,
    print_table,
    refuse,
    setup,
    verdict_entry,
    verdicts_only,
    write_json_doc,
)
from _mome import (
    HELDOUT_VOICES,
    METHODS,
    MODALITIES,
    TRAIN_VOICES,
    add_encoder_arguments,
    check_data_settings,
    check_encoder_arguments,
    committed_encoder,
    encoder_path,
    pretrain_defaults,
    pretrain_piece,
    speech_config,
    with_encoder_and_data,
)
from _mome import build_model as build_model
from _mome import compression as compression
from _mome import snr_name as snr_name
from _mome_full_report import make_rows, plot_curves
from _mome_full_train import run_unit, unit_key
from _mome_full_verdicts import GATE, gate_passed, verdicts

from sci_moe.speech.mome import (
    build_speech_set,
    load_minilm,
    load_smollm2_decoder,
)

BENCHMARK = "mome_full"


def settings(quick: bool, backbone: str = "minilm", lm_layers: int = 2,
             pretrain: bool = False, encoder_lr: float | None = None,
             encoder_dim: int | None = None, encoder_layers: int | None = None,
             extra_train_phrases: int = 0, train_variants: int | None = None) -> dict:  # fmt: skip
    """Data, model, cap and flatness settings of the full run (or the ``--quick`` toy).

    ``pretrain``: the audio encoder is pretrained alone with CTC first (``s["pretrain"]``,
    else ``None``) and the units load it, frozen, or fine-tuned at peak learning rate
    ``encoder_lr``. ``encoder_dim``, ``encoder_layers``: the audio encoder's width and
    transformer layers (default 128 and 2; the toy's 16 and 1). ``extra_train_phrases``,
    ``train_variants``: more training utterances
    (:class:`~sci_moe.speech.mome.SpeechSetConfig`; the validation and test utterances
    stay), kept in the settings only when given, so the settings of the runs before
    them are unchanged."""
    s = _settings(quick, backbone, lm_layers, pretrain, encoder_lr)
    return with_encoder_and_data(s, encoder_dim, encoder_layers, extra_train_phrases,
                                 train_variants)  # fmt: skip


def _settings(quick, backbone, lm_layers, pretrain, encoder_lr) -> dict:
    common = dict(backbone=backbone, lm_layers=lm_layers, num_experts=8, top_k=2,
                  num_shared=1, bottleneck=8, upsample=8, lr=2e-3,
                  train_snr=[None, 10.0, 5.0], test_snr=[None, 10.0, 5.0, 0.0],
                  video_dropout=0.3, flat_tail=0.2, flat_tol=0.01,
                  encoder_lr=encoder_lr if pretrain else None,
                  pretrain=pretrain_defaults(quick) if pretrain else None)  # fmt: skip
    if quick:
        return dict(common, num_phrases=12, variants=1, split=[0.7, 0.15, 0.15], rates=[1, 2],
                    steps=4, batch_size=4, eval_every=2, patience=0, num_experts=4, bottleneck=2,
                    lm_layers=1, upsample=4,
                    audio_encoder=dict(dim=16, layers=1, heads=2, subsample=2),
                    video_encoder=dict(dim=8, layers=0, heads=2, subsample=1))  # fmt: skip
    return dict(common, num_phrases=1000, variants=2, split=[0.8, 0.1, 0.1],
                rates=[1, 2, 4, 8, 16], steps=3000, batch_size=8, eval_every=100, patience=5,
                audio_encoder=dict(dim=128, layers=2, heads=4, subsample=2),
                video_encoder=dict(dim=64, layers=1, heads=4, subsample=1))  # fmt: skip


def load_backbone(s: dict):
    if s["backbone"] == "smollm2":
        return load_smollm2_decoder(s["lm_layers"])
    return load_minilm(s["lm_layers"])


def main(argv=None) -> int:
    p = base_parser(__doc__.splitlines()[0], verdicts=verdicts, device=True)
    piece_arguments(p, unit="(modality, method, seed) unit")
    p.add_argument("--seeds", type=int, default=3, help="paired seeds (default 3)")
    p.add_argument("--backbone", choices=("minilm", "smollm2"), default="minilm",
                   help="the frozen LM (default minilm)")  # fmt: skip
    p.add_argument("--lm-layers", type=int, default=2, help="its first layers kept (default 2)")
    p.add_argument("--modalities", default=",".join(MODALITIES),
                   help="comma-separated subset of audio,video,av (default all)")  # fmt: skip
    p.add_argument("--methods", default=",".join(METHODS), help="comma-separated subset")
    p.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "sci-moe" / "mome",
                   help="speech data cache")  # fmt: skip
    p.add_argument("--plots", type=Path, default=None,
                   help="write the learning curves here (<json stem>_curves.png)")  # fmt: skip
    p.add_argument("--work", type=Path, default=Path(__file__).resolve().parents[1] / ".mome_full",
                   help="trainer checkpoints (default benchmarks/.mome_full)")  # fmt: skip
    add_encoder_arguments(p)
    p.add_argument("--progress", action="store_true")
    args = p.parse_args(argv)
    if verdicts_only(args) is not None:
        return 0
    pretrain = check_encoder_arguments(args)
    setup(args)
    s = settings(args.quick, args.backbone, args.lm_layers, pretrain, args.finetune_encoder,
                 args.encoder_dim, args.encoder_layers, args.extra_train_phrases,
                 args.train_variants)  # fmt: skip
    if args.pretrain_steps is not None:  # a larger cap for an encoder still improving at 20,000
        s["pretrain"] = dict(s["pretrain"], steps=args.pretrain_steps)
    check_data_settings(s)
    mods = [m for m in args.modalities.split(",") if m]
    methods = [m for m in args.methods.split(",") if m]
    bad = sorted(set(mods) - set(MODALITIES)) + sorted(set(methods) - set(METHODS))
    if bad:
        raise SystemExit(f"unknown modalities/methods {bad}; choose from {MODALITIES}, {METHODS}")
    seeds = list(range(args.seed, args.seed + args.seeds))
    machine = machine_info(seed=args.seed, seeds=seeds, quick=args.quick, settings=s, gate=GATE,
                           train_voices=list(TRAIN_VOICES), heldout_voices=list(HELDOUT_VOICES),
                           flat_rule="validation CER < 1 % better over the last 20 % of the "
                           "steps (sci_moe.train.is_flat)", device=args.device)  # fmt: skip
    runs: dict = {}
    pre: dict | None = None  # the pretrained encoder's record
    if (old := previous_run(args)) is not None:
        try:
            check_resume_settings(old["machine"].get("settings"), s, args.json)
        except ValueError as err:
            refuse(str(err))
        runs = old.get("runs", {})
        pre = old.get("pretrain")
        machine["pieces"] = list(old["machine"].get("pieces", []))
    machine.setdefault("pieces", []).append({"units": 0, "load": None})
    other, t0, deadline = OtherLoad(), time.perf_counter(), piece_deadline(args)
    ckpt_root = None if args.json is None else args.work / args.json.stem
    root = ckpt_root if ckpt_root is not None else args.work
    committed = committed_encoder(args.json)  # the finished encoder, kept to commit
    enc_path = encoder_path(args.pretrain_encoder, root, pre, committed)  # before the data
    if enc_path is not None:
        machine["encoder_file"] = str(enc_path)
    data = build_speech_set(speech_config(s), args.cache, progress=args.progress)
    machine["n_utterances"] = {k: len(v) for k, v in data.splits.items()}
    units = [(m, meth, sd) for sd in seeds for m in mods for meth in methods]  # seed-major

    def write() -> dict:
        rows = make_rows(runs, s, seeds, pre)
        doc = {"benchmark": BENCHMARK, "machine": machine, "rows": [vars(r) for r in rows]}
        if pre is not None:
            doc["pretrain"] = pre
        doc["verdicts"] = [verdict_entry(**v) for v in verdicts(doc)] if rows else []
        doc["recognises"] = gate_passed(doc, seeds) if rows else False
        doc["complete"] = all(unit_key(*u) in runs for u in units)
        doc["runs"] = runs
        if args.json is not None:
            write_json_doc(args.json, doc)
        return doc

    stop = False
    if pretrain:
        left = deadline - time.perf_counter()
        pre, stop = pretrain_piece(s, data, enc_path, pre, None if np.isinf(left) else left / 3600,
                                   args.progress, committed, args.device)  # fmt: skip
        write()
        stop = stop or args.pretrain_only
    pristine = None  # loaded once; each unit hooks its adapters into a fresh copy
    for mod, method, sd in units:
        if stop:
            break
        key = unit_key(mod, method, sd)
        if key in runs:
            continue
        if time.perf_counter() > deadline:
            break
        pristine = pristine if pristine is not None else load_backbone(s)
        backbone = copy.deepcopy(pristine)
        ckpt = None if ckpt_root is None else ckpt_root / key.replace("/", "_")
        left = deadline - time.perf_counter()
        hours = None if np.isinf(left) else left / 3600
        rec = run_unit(mod, method, sd, s, data, backbone, ckpt, hours, args.progress, enc_path,
                       args.device)  # fmt: skip
        if rec is None:
            print(f"{key}: piece time spent; continue with --resume", flush=True)
            break
        runs[key] = rec
        piece = machine["pieces"][-1]
        piece.update(units=piece["units"] + 1, load=other.report())
        ev = rec["eval"]
        first = next(iter(ev))
        print(f"{key}: {rec['seconds']:.0f} s, {rec['train']['steps']} steps "
              f"({rec['train']['reason']}, flat {rec['train']['converged']}); test CER "
              f"{first} {ev[first][0]:.3f}", flush=True)  # fmt: skip
        write()
    doc = write()
    table = [
        [r["case"], r["metric"], r["value"]]
        for r in doc["rows"]
        if "seed=" not in r["case"] and r["metric"] == "cer" and r["case"].endswith("clean")
    ]
    print_table(["case", "metric", "value"], table, BENCHMARK)
    for v in doc["verdicts"]:
        print(f"{v['verdict']:>12}  decisive={v['decisive']!s:5}  p={v['p_value']:.2g}  "
              f"{v['claim']}")  # fmt: skip
    if args.plots is not None and (runs or pre is not None):
        tag = "_quick" if args.quick else ""
        stem = BENCHMARK if args.json is None else args.json.stem  # mome_full.json: as before
        plot_curves(runs, args.plots / f"{stem}{tag}_curves.png", pre)
    print(f"piece {time.perf_counter() - t0:.0f} s; recognises: {doc['recognises']}; "
          f"complete: {doc['complete']}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
