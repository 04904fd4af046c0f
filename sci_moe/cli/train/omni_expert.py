"""``sci-moe train omni-expert``: the Omni-Expert chain (PI, MoE, OE, classifier), CI speech.

The data are espeak-ng sentences in simulated ShoeBox rooms
(:func:`sci_moe.data.speech.build_reverberant_speech`: disjoint train/test voices,
sentences and room responses). Four models train one after the other on the engine, each
in its own folder of ``OUT`` (``pi/``, ``moe/``, ``oe/``, ``classifier/``: checkpoints and
``metrics.jsonl``): the phoneme-independent mask (PI), the 40-expert phoneme MoE and the
Omni-Expert (both from PI, oracle phoneme labels) and the frame phoneme classifier.
``--resume`` continues the stage that was running (finished stages load their weights);
``--max-hours`` is the budget of the whole chain. With ``--until-flat --n-val N
--eval-every S`` every stage trains until its validation loss (on ``N`` held-out
utterances of the training voices) is flat (:func:`sci_moe.train.is_flat`; ``--epochs`` and
``--ft-epochs`` are then the caps) and ``results.json`` records ``converged`` per stage.

The test utterances are then dereverberated by every system: the reverberant input, PI,
MoE and OE with predicted (``^p``) or oracle (``^k``) phoneme probabilities, and the ideal
ratio mask; ``results.json`` holds the mean STOI of the CI-vocoded speech and the
log-spectral distance (dB) of each, and the classifier's frame accuracy. ``OUT/models.pt``
holds the four models' weights (CPU tensors) and the feature normaliser; without
``--cache``, ``OUT/data/`` holds the speech and room responses, which ``--resume`` reads
again.

``--device cuda`` trains the four stages and runs the test masks on a GPU: the speech,
rooms and features are built on the CPU, the training and validation frames are copied to
the GPU once per stage (:func:`sci_moe.speech.omni.fit_model`), and the masks come back to
the CPU for the vocoder and the metrics.

Examples
--------
.. code-block:: console

    $ sci-moe train omni-expert --out runs/oe --rt60 0.6
    $ sci-moe train omni-expert --out runs/oe --rt60 0.6 --max-hours 0.5 --resume
    $ sci-moe train omni-expert --out runs/flat --n-train 96 --n-val 12 --n-test 12 \
          --until-flat --eval-every 100 --flat-min-steps 3000 --epochs 40 --ft-epochs 40
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path

from ..._util import check_int_attr
from ...speech.omni.training import TrainConfig
from ._common import TrainMethod

__all__ = ["METHOD", "STAGES", "OmniRunConfig", "run"]

#: The models of the chain, in training order (each trains in ``OUT/<stage>/``).
STAGES = ("pi", "moe", "oe", "classifier")
_ENGINE_FILES = ("checkpoint.pt", "checkpoint_prev.pt", "metrics.jsonl", "flat.pt")
_SAMPLE_RATE = 16000


@dataclass
class OmniRunConfig(TrainConfig):
    """Options of ``sci-moe train omni-expert``: training, data and network sizes.

    Parameters
    ----------
    ft_epochs : int
        Epochs of the MoE and the OE (``epochs`` is PI's and the classifier's).
    n_train : int
        Training utterances.
    n_val : int
        Validation utterances (training voices, held out of training): the validation
        loss of every stage; ``until_flat`` needs at least one.
    n_test : int
        Test utterances (other voices, sentences and room responses).
    rt60 : float
        Reverberation time of the rooms in seconds.
    n_rirs : int
        Room responses per split.
    data_seed : int
        Seed of the sentences and speaker settings.
    room_seed : int
        Seed of the source and microphone positions.
    cache : str or None
        Folder of cached room responses and speech (none: OUT/data, so that a resumed
        run sees the same data without building it again; synthesis is reproducible,
        and the cache records the synthesiser).
    context : int
        Frames per input window of every network (causal).
    hidden : int
        Hidden units of the expert MLP.
    classifier_hidden : int
        Hidden units of the phoneme classifier.
    """

    epochs: int | None = 5
    ft_epochs: int = 4
    n_train: int = 16
    n_val: int = 0
    n_test: int = 4
    rt60: float = 0.6
    n_rirs: int = 2
    data_seed: int = 0
    room_seed: int = 0
    cache: str | None = None
    context: int = 5
    hidden: int = 128
    classifier_hidden: int = 128

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.epochs is None:
            raise ValueError("epochs must be an integer >= 1 (each stage trains for epochs)")
        for name in ("ft_epochs", "n_train", "n_test", "n_rirs"):
            check_int_attr(self, name, 1)
        check_int_attr(self, "n_val", 0)
        if self.until_flat and self.n_val < 1:
            raise ValueError("until_flat needs validation utterances: set n_val >= 1")
        r = self.rt60
        if isinstance(r, bool) or not isinstance(r, int | float) or not 0 < r < 10:
            raise ValueError(f"rt60 must be a number of seconds in (0, 10), got {r!r}")
        self.net()  # validates context, hidden, classifier_hidden (messages name them)

    def net(self):
        """The networks' :class:`~sci_moe.speech.omni.MaskNetConfig`."""
        from ...speech.omni import MaskNetConfig

        return MaskNetConfig(
            context=self.context, hidden=self.hidden, classifier_hidden=self.classifier_hidden
        )

    def data_config(self):
        """The :class:`~sci_moe.data.speech.ReverbSpeechConfig` of the run."""
        from ...data.speech import ReverbSpeechConfig

        return ReverbSpeechConfig(
            n_train=self.n_train + self.n_val,
            n_test=self.n_test,
            rt60=self.rt60,
            n_rirs=self.n_rirs,
            seed=self.data_seed,
            room_seed=self.room_seed,
        )


def _stage_config(cfg: OmniRunConfig, stage: str, t_start: float) -> OmniRunConfig:
    """The stage's config: its epochs, and what is left of the chain's ``max_hours``."""
    changes: dict = {"epochs": cfg.ft_epochs if stage in ("moe", "oe") else cfg.epochs}
    if cfg.max_hours is not None:
        left = cfg.max_hours - (time.perf_counter() - t_start) / 3600
        changes["max_hours"] = max(left, 1e-9)
    return dataclasses.replace(cfg, **changes)


def _test(models: dict, test, norm, net) -> dict:
    """Mean vocoded STOI and LSD per system on ``test``, and the classifier's accuracy."""
    import numpy as np
    import torch

    from ..._util import module_device, to_device
    from ...speech.omni import (
        apply_mask,
        frame_tensors,
        log_spectral_distance,
        oracle_probs,
        utterance_frames,
        vocoded_stoi,
    )

    stoi: dict[str, list] = {}
    lsd: dict[str, list] = {}
    acc = []
    pi, moe, oe, clf = (models[s] for s in STAGES)
    device = module_device(pi)  # where the chain trained; the masks come back to the CPU
    for u in test:
        fr = utterance_frames(u.reverberant, u.direct, u.phonemes)
        t = to_device(frame_tensors(fr, norm, net.context), device)
        with torch.no_grad():
            p, k = clf.probs(t.features), oracle_probs(t.labels, net.n_classes)
            masks = {
                "reverberant": np.ones_like(fr.irm),
                "PI": pi(t.features).cpu(),
                "MoE^p": moe(t.features, p).cpu(),
                "MoE^k": moe(t.features, k).cpu(),
                "OE^p": oe(t.features, p, "folded").cpu(),
                "OE^k": oe(t.features, k, "folded").cpu(),
                "IRM": fr.irm,
            }
            acc.append(float((p.argmax(1) == t.labels).double().mean()))
        for name, m in masks.items():
            est = apply_mask(u.reverberant, np.asarray(m, dtype=np.float64))
            stoi.setdefault(name, []).append(vocoded_stoi(u.direct, est, _SAMPLE_RATE))
            lsd.setdefault(name, []).append(log_spectral_distance(u.direct, est))
    return {
        "stoi_vocoded": {k: float(np.mean(v)) for k, v in stoi.items()},
        "lsd_db": {k: float(np.mean(v)) for k, v in lsd.items()},
        "classifier_accuracy": float(np.mean(acc)),
    }


def run(cfg: OmniRunConfig, out: Path, resume: bool) -> dict:
    """Build the data, train the four stages on the engine, test every system."""
    import copy

    import torch

    from ..._util import atomic_torch_save
    from ...data.speech import build_reverberant_speech
    from ...speech.omni import (
        FeatureNormalizer,
        FrameSet,
        OmniExpertMask,
        PhonemeClassifier,
        PhonemeIndependentMask,
        PhonemeMoEMask,
        converged,
        fit_model,
        frame_tensors,
        model_costs,
        utterance_frames,
    )
    from ...train import current_context, seed_everything

    t_start = time.perf_counter()
    net = cfg.net()
    data_cfg = cfg.data_config()  # a room that cannot have this RT60 is refused here
    cache = Path(cfg.cache) if cfg.cache is not None else out / "data"
    train, test = build_reverberant_speech(data_cfg, cache, progress=cfg.progress)
    train, val = train[: cfg.n_train], train[cfg.n_train :]

    def frame_set(utts):
        return FrameSet.concat(
            [utterance_frames(u.reverberant, u.direct, u.phonemes) for u in utts]
        )

    frames = frame_set(train)
    norm = FeatureNormalizer.fit(frames.log_mag)
    data = frame_tensors(frames, norm, net.context)
    validation = frame_tensors(frame_set(val), norm, net.context) if val else None

    def build(stage: str, models: dict):
        seed_everything(cfg.seed + (1 if stage == "classifier" else 0))
        if stage == "pi":
            return PhonemeIndependentMask(net)
        if stage == "moe":
            return PhonemeMoEMask.from_pi(copy.deepcopy(models["pi"]))
        if stage == "oe":
            return OmniExpertMask.from_pi(models["pi"])
        return PhonemeClassifier(net)

    models: dict = {}
    stages: dict = {}
    last = None
    for stage in STAGES:
        model = build(stage, models)
        stage_cfg = _stage_config(cfg, stage, t_start)
        last = fit_model(
            model,
            data,
            stage_cfg,
            validation=validation,
            name=f"omni-expert/{stage}",
            out_dir=out / stage,
            resume=resume,
        )
        models[stage], stages[stage] = model, last.to_dict()
        stages[stage]["converged"] = converged(last, stage_cfg)
        if not last.finished:
            break
    results: dict = {"train": last.to_dict(), "stages": stages, "n_train_frames": len(data)}
    if not last.finished or not current_context().is_main:
        return results
    atomic_torch_save(
        out / "models.pt",
        {
            "net": dataclasses.asdict(net),
            "normalizer": {"mean": torch.as_tensor(norm.mean), "std": torch.as_tensor(norm.std)},
            **{
                s: {k: v.detach().cpu() for k, v in m.state_dict().items()}
                for s, m in models.items()
            },
        },
    )
    results["test"] = _test(models, test, norm, net)
    costs = model_costs(models["pi"], models["moe"], models["oe"], models["classifier"])
    results["costs"] = {k: dataclasses.asdict(v) for k, v in costs.items()}
    return results


METHOD = TrainMethod(
    name="omni-expert",
    help="Omni-Expert vs phoneme MoE for cochlear-implant speech",
    config=lambda: OmniRunConfig,
    run=run,
    outputs=("models.pt", *(f"{s}/{f}" for s in STAGES for f in _ENGINE_FILES)),
    description=(
        "Train the Omni-Expert dereverberation chain for cochlear-implant speech (the "
        "phoneme-independent mask, the 40-expert phoneme MoE, the Omni-Expert and the "
        "phoneme classifier) on reverberant espeak-ng speech, on the shared training "
        "engine; test STOI of CI-vocoded speech and the log-spectral distance."
    ),
)
