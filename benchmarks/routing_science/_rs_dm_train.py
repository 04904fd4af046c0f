"""The trainings of ``default_moe.py``: the plan, the generated corpus, one training.

:data:`SOURCES` is the generator of the corpus (:func:`sources`, :func:`corpus_of`),
:func:`plan` the full or quick plan, :func:`train_keys` one training's ``sci-moe train lm``
keys (:func:`write_configs` writes them as configurations, the corpus beside the JSON in
:func:`files_dir`), :func:`one_run` trains one method on one configuration and seed until
flat and records its curve and router gradient, :func:`run_key` names it in the state. A
helper module: ``default_moe.py`` imports it.
"""

from __future__ import annotations

import time
from pathlib import Path

from _routing_science import (
    BETA,
    GRAD_WINDOWS,
    MODEL,
    SWITCH_COEF,
    flat,
    log,
    router_gradient,
    slim,
)

from sci_moe.language import (
    LMConfig,
    MarkovSources,
    TextCorpus,
    markov_corpus,
    run_training,
    validation_windows,
)

__all__ = [
    "BENCHMARK",
    "CONFIGS",
    "CORPUS_FILE",
    "LOWER_BETTER",
    "METHODS",
    "SOURCES",
    "corpus_of",
    "files_dir",
    "one_run",
    "plan",
    "run_key",
    "sources",
    "train_keys",
    "write_configs",
]


BENCHMARK = "routing_science_default_moe"
CONFIGS = Path("benchmarks/routing_science/configs")  # where the shipped ones live
CORPUS_FILE = "markov_sources.txt"  # in <json stem>_files/, read by the configurations
# the generator (MarkovSources.random's arguments) and the corpus drawn from it
SOURCES = dict(num_sources=4, alphabet_size=8, concentration=0.1, mean_length=128.0, seed=0)
METHODS = ("top-k", "default")
LOWER_BETTER = ("val_loss", "excess", "tokens_to_target")


def plan(quick: bool) -> dict:
    if quick:
        return dict(
            seeds=2,
            steps=60,
            eval_interval=20,
            eval_batches=2,
            corpus_bytes=100_000,
            configs=[[8, 2]],
        )
    return dict(
        seeds=12,
        steps=5000,
        eval_interval=125,
        eval_batches=8,
        corpus_bytes=1_000_000,
        configs=[[8, 2], [32, 2]],
    )


def sources() -> MarkovSources:
    return MarkovSources.random(**SOURCES)


def corpus_of(p: dict) -> TextCorpus:
    """The plan's corpus (its sample seed is ``SOURCES["seed"]``, not the model's)."""
    return markov_corpus(sources(), p["corpus_bytes"], seed=SOURCES["seed"])


def train_keys(p: dict, E: int, k: int, method: str, text_file: str | None = None) -> dict:
    """``sci-moe train lm`` keys of one training (the seed is ``--seed``): part (a)'s
    model, batches, optimiser and schedule (``_routing_science.tcfg``: 30 warm-up steps)."""
    keys = dict(
        MODEL,
        num_experts=E,
        top_k=k,
        load_balance_coef=SWITCH_COEF,
        batch_size=16,
        lr=3e-3,
        weight_decay=0.1,
        warmup=min(30, p["steps"] // 10) / p["steps"],  # 30 steps (a tenth of tiny runs)
        steps=p["steps"],
        eval_every=p["eval_interval"],
        eval_batches=p["eval_batches"],
    )
    if method == "default":
        keys.update(default_moe=True, default_beta=BETA[(E, k)])
    if text_file is not None:
        keys["text_file"] = text_file
    return keys


def files_dir(json_path: Path) -> Path:
    return json_path.with_name(json_path.stem + "_files")


def write_configs(p: dict, folder: Path, files: Path) -> list[Path]:
    """One TOML per configuration and method, reading the corpus text
    ``files / CORPUS_FILE`` (a path relative to where ``sci-moe`` runs)."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for E, k in p["configs"]:
        for method in METHODS:
            keys = train_keys(p, E, k, method, str(files / CORPUS_FILE))
            path = folder / f"default_moe_{E}c{k}_{method}.toml"
            lines = [
                f"# {E}c{k} {method}: sci-moe train lm --config {CONFIGS / path.name} "
                "--seed S --out DIR",
                "# from the repository root; the text file comes from python "
                f"benchmarks/routing_science/default_moe.py --write-configs {CONFIGS}",
            ]
            for key, val in keys.items():
                text = str(val).lower() if isinstance(val, bool) else repr(val)
                lines.append(f"{key} = {text}".replace("'", '"'))
            path.write_text("\n".join(lines) + "\n")
            paths.append(path)
    return paths


# ------------------------------------------------------------------------ training


def one_run(p: dict, E: int, k: int, method: str, seed: int, corpus: TextCorpus) -> dict:
    """One training with its router-gradient measurements, flatness and wall time."""
    cfg = LMConfig(**train_keys(p, E, k, method), seed=seed, progress=False)
    gx, gy = validation_windows(corpus.val, MODEL["seq_len"], GRAD_WINDOWS)
    early = {}
    at = max(1, p["steps"] // 10)

    def callback(step, model, _hist):
        if step == at:
            early.update(router_gradient(model, gx, gy))

    t0 = time.perf_counter()
    run = run_training(cfg.model_config(), cfg, corpus=corpus, callback=callback)
    h = run.history
    out = slim(h, full_diagnostics=False)
    out["grad_early"] = early
    out["grad_end"] = router_gradient(run.model, gx, gy)
    out["converged"] = flat(h["step"], h["val_loss"])
    out["wall_s"] = time.perf_counter() - t0
    log(
        f"{E}c{k} {method:7s} seed {seed}: val loss {h['val_loss'][-1]:.4f} flat "
        f"{out['converged']} router-grad density {out['grad_end']['density']:.3f} "
        f"({out['wall_s']:.0f} s)"
    )
    return out


def run_key(E: int, k: int, method: str, seed: int) -> str:
    return f"{E}c{k}/{method}/s{seed}"
