"""``sci-moe train <method>``: every trainable method of the package on one engine.

Each method is a module of this package holding a ``METHOD``
(:class:`~sci_moe.cli.train._common.TrainMethod`); its flags come from its config class
(a :class:`sci_moe.train.TrainConfig` subclass), so every method takes ``--config FILE``
(TOML, YAML or JSON), ``--out``, ``--resume``, ``--overwrite``, ``--seed``, ``--steps``,
``--max-hours``, ``--threads`` and its own options, and refuses bad input with exit code 2.
``spice`` keeps its sectioned config (``model``/``train``/``data``).

Examples
--------
.. code-block:: console

    $ sci-moe train --help
    $ sci-moe train fame --out runs/fame --steps 2000 --max-hours 1
    $ sci-moe train fame --out runs/fame --steps 2000 --max-hours 1 --resume
    $ torchrun --standalone --nproc_per_node 2 -m sci_moe.cli.main train fame --out runs/f2
"""

from __future__ import annotations

import argparse
import importlib
from pathlib import Path

__all__ = ["METHODS", "add_parser", "available_methods"]

#: ``name -> (module of this package, one line of help)``, in the order of ``--help``.
METHODS = {
    "spice": ("spice", "SPiCE or a baseline on conformer ensembles (molecules)"),
    "diffusion": ("diffusion", "energy-based diffusion model with the Fokker-Planck regulariser"),
    "lm": ("lm", "MoE language model: Routing Mamba, Default MoE, specialisation losses"),
    "mxd": ("mxd", "Mixture of Decoders (or a transcoder) on a pretrained MLP's activations"),
    "mome": ("mome", "MoME: Matryoshka MoE adapters for speech recognition on a frozen LM"),
    "omni-expert": ("omni_expert", "Omni-Expert vs phoneme MoE for cochlear-implant speech"),
    "graph-merging": ("graph_merging", "AnyGraph-style graph experts and expert merging"),
    "mvcge": ("mvcge", "MvCGE multi-view collaborative graph experts"),
    "fame": ("fame", "FAME: function-on-function regression with MoE neural CDEs"),
    "more-brain": ("more_brain", "MoRE-Brain hierarchical expert-choice fMRI decoding"),
    "cogamid": ("cogamid", "CoGaMiD Gaussian-mixture replay, class-incremental segmentation"),
    "vrp": ("vrp", "MoSES LoRA-expert multi-task vehicle routing solver"),
    "fedlease": ("fedlease", "FedLEASE federated LoRA experts (simulated clients)"),
}


def available_methods() -> list[str]:
    """The methods whose module is present (all of :data:`METHODS` in a release)."""
    here = Path(__file__).parent
    return [n for n, (mod, _) in METHODS.items() if (here / f"{mod}.py").is_file()]


def add_parser(sub) -> argparse.ArgumentParser:
    """Add ``train`` and one subcommand per method to the ``sci-moe`` subparsers ``sub``.

    The methods' own flags are built only when that method is run (its config class is
    imported then), so ``sci-moe train --help`` stays fast.
    """
    train = sub.add_parser(
        "train",
        help="train a model (sci-moe train --help lists the methods)",
        description="Train one of the package's methods on the shared training engine.",
    )
    tsub = train.add_subparsers(dest="train_command", metavar="METHOD")
    for name in available_methods():
        module, text = METHODS[name]
        if name == "spice":
            from .spice import add_spice_parser

            add_spice_parser(tsub)
            continue
        # No prefix characters: every word after the method goes to its own parser, also
        # a first one that starts with "--" (REMAINDER alone drops a leading option).
        p = tsub.add_parser(name, help=text, add_help=False, prefix_chars="\0")
        p.add_argument("argv", nargs=argparse.REMAINDER)
        p.set_defaults(func=_dispatch(name, module))
    train.set_defaults(func=lambda args: (train.print_help(), 0)[1])
    return train


def _dispatch(name: str, module: str):
    def run(args: argparse.Namespace) -> int:
        from ._common import run_method

        method = importlib.import_module(f"{__name__}.{module}").METHOD
        return run_method(method, args.argv, prog=f"sci-moe train {name}")

    return run
