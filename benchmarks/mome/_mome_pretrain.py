"""The encoder pretraining stage of ``full.py`` (``--pretrain-encoder``).

:func:`pretrain_defaults` and :func:`pretrain_settings` are the stage's settings,
:func:`encoder_path` finds or restores the encoder file (:func:`committed_encoder`,
:func:`publish_encoder`: the copy committed beside the JSON), :func:`pretrain_stage`
trains it and :func:`pretrain_piece` runs the stage as a piece of a resumable run. The
stage is described in ``_mome.py``'s docstring. A helper module: ``_mome.py`` imports and
re-exports it.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import time
from pathlib import Path

from _common import check_resume_settings, refuse
from _mome_data import data_extras, flat, snr_name

from sci_moe.speech.mome import (
    PRETRAIN_SPEC_MASK,
    EncoderConfig,
    PretrainConfig,
    evaluate_encoder,
    pretrain_encoder,
    read_encoder,
    save_encoder,
)

__all__ = [
    "ENCODER_FILE",
    "committed_encoder",
    "encoder_path",
    "pretrain_defaults",
    "pretrain_piece",
    "pretrain_settings",
    "pretrain_stage",
    "publish_encoder",
    "sha256",
]


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
    masks = dict(PRETRAIN_SPEC_MASK)
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
#: The committed copy of an unfinished pretraining's trainer checkpoint, beside it: a
#: piece cut by ``--max-hours`` keeps it there, so that ``--resume`` on a fresh machine
#: (without the git-ignored work folder) continues the stage instead of starting it again.
CHECKPOINT_FILE = "pretrain_checkpoint.pt"


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
                   progress: bool = False, device: str = "cpu",
                   keep: Path | None = None) -> dict | None:  # fmt: skip
    """Pretrain the audio encoder alone with CTC (:func:`sci_moe.speech.mome.pretrain_encoder`)
    and write it to ``path``; its trainer checkpoints go to ``<path stem>_run/`` beside it
    (resumed when there). Returns the record (curve, flatness, test CER/WER at rate 1 per
    test SNR), also kept in the file; ``None`` when ``max_hours`` ran out first.

    A ``path`` that exists already is read instead (verified); it must have been
    pretrained with these settings. ``device``: where it trains (not a setting).

    ``keep`` (``<json stem>_files/pretrain_checkpoint.pt``, :data:`CHECKPOINT_FILE`): when
    the time runs out, the trainer's checkpoint is copied there (atomically) to be
    committed with the partial JSON; a stage without a checkpoint in its work folder
    starts from that copy instead of from step 0 (the trainer verifies its checksum and
    refuses one of other settings or another model); once the stage finishes the copy is
    removed (the finished encoder is kept instead)."""
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
                         progress=progress, checkpoint_minutes=5.0, device=device)  # fmt: skip
    run_dir = path.parent / f"{path.stem}_run"
    ckpt = run_dir / "checkpoint.pt"
    if keep is not None and keep.is_file() and not ckpt.is_file():
        _copy_atomic(keep, ckpt)
        print(f"encoder pretraining: {ckpt} missing; continuing from the committed "
              f"checkpoint {keep}", flush=True)  # fmt: skip
    run = pretrain_encoder(data, enc, cfg, out_dir=run_dir, resume=ckpt.is_file())
    r = run.result
    if r.reason == "budget":
        if keep is not None and ckpt.is_file():
            _copy_atomic(ckpt, keep)
            print(f"encoder pretraining: step {r.step} of {r.steps}; its checkpoint is kept "
                  f"for commit in {keep} ({keep.stat().st_size} bytes)", flush=True)  # fmt: skip
        return None
    if keep is not None:
        keep.unlink(missing_ok=True)
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
                   progress: bool = False, committed: Path | None = None,
                   device: str = "cpu") -> tuple[dict | None, bool]:  # fmt: skip
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
        ``file``. While the stage is unfinished, its trainer checkpoint is kept beside it
        instead (:data:`CHECKPOINT_FILE`, see :func:`pretrain_stage`).
    device : str
        Where the encoder trains (``--device``; not a setting).

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
    keep = None if committed is None else committed.with_name(CHECKPOINT_FILE)
    info = pretrain_stage(s, data, path, max_hours, progress, device, keep=keep)
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
