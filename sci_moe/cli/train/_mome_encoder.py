"""The audio-encoder stage of ``sci-moe train mome``: checking an encoder file and
pretraining one (``--encoder``, ``--pretrain-encoder-steps``).

The encoder is pretrained alone with CTC on the training split
(:func:`sci_moe.speech.mome.pretrain_encoder`), written with
:func:`sci_moe.speech.mome.save_encoder` to ``OUT/audio_encoder.pt`` and loaded into the
recogniser by :func:`~sci_moe.cli.train.mome.run`.
"""

from __future__ import annotations

import shutil
from pathlib import Path

__all__ = ["ENCODER_FILE", "ENCODER_HEADS", "check_encoder_file", "pretrain_stage"]

#: The pretrained audio encoder of ``--pretrain-encoder-steps``, in ``OUT``.
ENCODER_FILE = "audio_encoder.pt"
#: Its pretraining run (checkpoints, metrics), in ``OUT``.
_ENCODER_RUN = "audio_encoder_run"
#: The pretrained encoder's attention heads and subsampling (the benchmark's).
ENCODER_HEADS, _ENCODER_SUBSAMPLE = 4, 2
_PRETRAIN_LR = 2e-3


def check_encoder_file(path: Path) -> dict:
    """``read_encoder``'s info of an audio encoder file for the recogniser (ValueError:
    damaged, not an encoder file, another modality or input size)."""
    from ...speech.mome import read_encoder

    _, info = read_encoder(path)
    if info["modality"] != "audio" or info["d_in"] != 40:
        raise ValueError(
            f"{path} holds a {info['modality']!r} encoder of {info['d_in']} input features, "
            "not an audio encoder of the 40 log-mel features: give an audio encoder file "
            f"(OUT/{ENCODER_FILE} of --pretrain-encoder-steps)"
        )
    return info


def pretrain_stage(cfg, data, out: Path, resume: bool) -> dict:
    """Pretrain the audio encoder into ``OUT/audio_encoder.pt`` (or, on ``--resume``, reuse
    a finished one / continue the run in ``OUT/audio_encoder_run``); its record.

    ``cfg`` is the command's :class:`~sci_moe.cli.train.mome.MoMERunConfig`, ``data`` its
    :class:`~sci_moe.speech.mome.SpeechSet`."""
    from ...speech.mome import (
        PRETRAIN_SPEC_MASK,
        EncoderConfig,
        PretrainConfig,
        evaluate_encoder,
        pretrain_encoder,
        read_encoder,
        save_encoder,
    )
    from ...train import barrier, current_context

    path, run_dir = out / ENCODER_FILE, out / _ENCODER_RUN
    if resume and path.is_file():
        return read_encoder(path)[1]
    enc = EncoderConfig(dim=cfg.pretrain_encoder_dim, layers=cfg.pretrain_encoder_layers,
                        heads=ENCODER_HEADS, subsample=_ENCODER_SUBSAMPLE,
                        **PRETRAIN_SPEC_MASK)  # fmt: skip
    pcfg = PretrainConfig(steps=cfg.pretrain_encoder_steps, batch_size=cfg.batch_size,
                          lr=_PRETRAIN_LR, eval_every=cfg.eval_every, patience=cfg.patience,
                          snr_db=cfg.snr_db, seed=cfg.seed, max_hours=cfg.max_hours,
                          progress=cfg.progress, threads=cfg.threads,
                          device=cfg.device)  # fmt: skip
    again = resume and (run_dir / "checkpoint.pt").is_file()
    if not resume and run_dir.exists() and current_context().is_main:
        shutil.rmtree(run_dir)  # only with --overwrite (the CLI refuses otherwise)
    barrier(current_context())
    run = pretrain_encoder(data, enc, pcfg, out_dir=run_dir, resume=again)
    r = run.result
    rec: dict = {"train": r.to_dict()}
    if r.reason == "budget":
        print("encoder pretraining: the --max-hours budget ran out first; continue with --resume")
        return rec
    test = evaluate_encoder(run.model, data, "test", rate=1, snr_db=None, seed=0)
    info = {"train": r.to_dict(), "test_cer": float(test["cer"]),
            "test_wer": float(test["wer"])}  # fmt: skip
    ctx = current_context()
    if ctx.is_main:  # one writer under torchrun; the other ranks read it after the barrier
        save_encoder(path, run.model.encoder, "audio", info)
        print(f"encoder pretraining: {r.step} steps ({r.reason}); test CER at rate 1 "
              f"{test['cer']:.3f}; {path}", flush=True)  # fmt: skip
    barrier(ctx)
    return read_encoder(path)[1]
