"""Issue 40: every ``sci-moe`` command that runs torch takes ``--threads`` (default chosen
for its work, 0 = every core), applies it while it runs and restores the previous count.
(``md run``: tests/cli/test_md_startup.py; ``sci-moe train``: the trainer's tests.)"""

from __future__ import annotations

import pytest
import torch

from sci_moe._util import available_cores
from sci_moe.cli import cap, demo_moe, provenance, vrp
from sci_moe.cli.main import main

# (argv, module, attribute replaced by a recorder, the command's default)
COMMANDS = {
    "demo": (["demo", "--out", "unused"], demo_moe, "run_demo", 1),
    "vrp train": (["vrp", "train", "--out", "m.pt"], vrp, "_train", 1),
    "vrp solve": (["vrp", "solve", "x.vrp", "--model", "m.pt"], vrp, "_solve", 1),
    "provenance train": (
        ["provenance", "train", "a.txt", "b.txt", "--out", "o"],
        provenance,
        "_train",
        1,
    ),
    "provenance predict": (["provenance", "predict", "o", "x.txt"], provenance, "_predict", 1),
    "cap": (["cap", "--model", "mixtral-8x7b", "--tpot-ms", "40"], cap, "_run", 0),
}


@pytest.fixture
def record(monkeypatch):
    """Replace a command's body by one that records the torch threads it ran on."""
    seen = []

    def install(module, attribute):
        def body(*args, **kwargs):
            seen.append(torch.get_num_threads())
            return 0 if attribute != "run_demo" else {}

        monkeypatch.setattr(module, attribute, body)
        return seen

    return install


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_threads_parsed_applied_and_restored(name, record, capsys):
    argv, module, attribute, default = COMMANDS[name]
    seen = record(module, attribute)
    before = torch.get_num_threads()
    assert main(argv) == 0
    assert main([*argv, "--threads", "2"]) == 0
    assert main([*argv, "--threads", "0"]) == 0
    assert seen == [default or available_cores(), 2, available_cores()]
    assert torch.get_num_threads() == before
    assert main([*argv, "--threads", "-1"]) == 2
    assert "threads must be an integer >= 0" in capsys.readouterr().err
    assert len(seen) == 3  # refused before the command ran


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_threads_in_help(name, capsys):
    argv = COMMANDS[name][0]
    words = argv[: 2 if argv[0] in ("vrp", "provenance") else 1]
    with pytest.raises(SystemExit):
        main([*words, "--help"])
    assert "--threads N" in capsys.readouterr().out
