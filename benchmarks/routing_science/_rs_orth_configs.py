"""The trainings of ``orthogonality.py`` as ``sci-moe train lm`` configurations.

:func:`train_keys` gives one training's keys (pre-training, or fine-tuning with the
orthogonality and variance coefficients), :func:`lm_config` builds its configuration and
:func:`write_configs` writes one per training row (``--write-configs DIR``) into
:data:`CONFIGS`; :func:`files_dir` is the folder beside the JSON that holds the
pre-trained weights and the news text. A helper module: ``orthogonality.py`` imports it.
"""

from __future__ import annotations

from pathlib import Path

from _orthogonality import (
    grid,
)
from _routing_science import SWITCH_COEF

__all__ = [
    "CONFIGS",
    "FILES",
    "files_dir",
    "lm_config",
    "train_keys",
    "write_configs",
]


CONFIGS = Path("benchmarks/routing_science/configs")  # where the shipped ones live
FILES = "_files"  # <json stem>_files/: pretrained.pt, lee_news.txt


def files_dir(json_path: Path | None) -> Path | None:
    return None if json_path is None else json_path.with_name(json_path.stem + FILES)


# ------------------------------------------------------------------ configurations


def train_keys(p: dict, stage: str, ortho: float = 0.0, var: float = 0.0) -> dict:
    """``sci-moe train lm`` keys of the pretraining (``stage="pretrain"``) or of one
    fine-tuning cycle of grid point ``(ortho, var)`` (the seed is ``--seed``)."""
    keys = dict(
        p["model"],
        num_experts=p["experts"],
        top_k=p["top_k"],
        load_balance_coef=SWITCH_COEF,
        batch_size=p["batch_size"],
        weight_decay=0.1,
        eval_batches=p["eval_batches"],
    )
    if stage == "pretrain":
        keys.update(
            steps=p["pretrain_steps"],
            lr=p["pretrain_lr"],
            warmup=0.02,
            eval_every=p["pretrain_eval"],
        )
    else:
        keys.update(steps=p["ft_steps"], lr=p["ft_lr"], warmup=0.05, eval_every=p["ft_eval"])
        if ortho:
            keys["orthogonality_coef"] = ortho
        if var:
            keys["variance_coef"] = var
    return keys


def lm_config(keys: dict, seed: int, env: dict):
    """The :class:`~sci_moe.language.LMConfig` of ``keys`` with the run's ``env``
    (``threads``, ``device``: they do not go into the configuration files)."""
    from sci_moe.language import LMConfig

    return LMConfig(**keys, seed=seed, progress=False, **env)


def write_configs(p: dict, folder: Path, files: Path) -> list[Path]:
    """One TOML per training row: the pretraining cycle and each grid point's fine-tune
    cycle, reading the pretrained weights and news text from ``files`` (a path relative
    to where ``sci-moe`` runs, the repository root for ``configs/``)."""
    folder.mkdir(parents=True, exist_ok=True)
    cycle = "cycle c > 1 adds --init-from <cycle c-1's DIR>/model.pt"
    rows = {
        "pretrain": (
            train_keys(p, "pretrain"),
            f"pretraining cycle c: --seed 100(c-1) ({cycle})",
        )
    }
    for name, o, v in grid(p):
        keys = dict(
            train_keys(p, "ft", o, v),
            init_from=str(files / "pretrained.pt"),
            text_file=str(files / "lee_news.txt"),
        )
        rows[name] = (keys, f"fine-tune seed s, cycle c: --seed s+100(c-1) ({cycle})")
    paths = []
    for name, (keys, note) in rows.items():
        path = folder / f"orthogonality_{name}.toml"
        lines = [
            f"# {name}: sci-moe train lm --config {CONFIGS / path.name} --seed S --out DIR",
            f"# from the repository root; {note}",
        ]
        for k, val in keys.items():
            text = str(val).lower() if isinstance(val, bool) else repr(val)
            lines.append(f"{k} = {text}".replace("'", '"'))
        path.write_text("\n".join(lines) + "\n")
        paths.append(path)
    return paths
