"""Every training loop of the package runs on the engine, and every method has a command.

The first test reads every module of ``sci_moe`` (with :mod:`ast`) and fails on an
``<optimizer>.step()`` call outside ``sci_moe/train/``: a training loop written by hand.
Methods that optimise without SGD steps (EM, closed forms, bias balancers' own ``step``)
do not call an optimiser; the names below are the non-optimiser ``step`` methods.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

from sci_moe.cli.main import main
from sci_moe.cli.train import METHODS, available_methods

ROOT = pathlib.Path(__file__).resolve().parents[2] / "sci_moe"

#: ``x.step()`` receivers that are not optimisers (integrators, balancers, schedulers...).
NOT_OPTIMIZERS = {"balancer", "integrator", "simulation", "sim", "engine", "sampler", "self"}


def _optimizer_steps() -> list[str]:
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT.parent)
        if rel.parts[1] == "train":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "step"
                and not node.args
                and isinstance(node.func.value, ast.Name | ast.Attribute)
            ):
                recv = node.func.value
                name = recv.id if isinstance(recv, ast.Name) else recv.attr
                if name.lower() in NOT_OPTIMIZERS or "balancer" in name.lower():
                    continue
                if any(k in name.lower() for k in ("opt", "optim")):
                    found.append(f"{rel}:{node.lineno}: {name}.step()")
    return found


def test_no_optimizer_step_outside_the_engine():
    assert _optimizer_steps() == []


def test_every_method_has_a_train_command():
    assert available_methods() == list(METHODS)


@pytest.mark.parametrize("method", [m for m in METHODS if m != "spice"])
def test_method_help_and_bad_input(method, capsys, tmp_path):
    with pytest.raises(SystemExit) as exc:
        main(["train", method, "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    for flag in ("--config", "--out", "--resume", "--seed", "--steps", "--max-hours", "--threads"):
        assert flag in out
    assert main(["train", method, "--out", str(tmp_path / "r"), "--steps", "0"]) == 2
    assert "--steps" in capsys.readouterr().err
    cfg = tmp_path / "c.toml"
    cfg.write_text("no_such_key = 1\n")
    assert main(["train", method, "--out", str(tmp_path / "r"), "--config", str(cfg)]) == 2
    assert "no_such_key" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()  # nothing written on bad input
