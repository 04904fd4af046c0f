"""Issue 27: every command's error starts with the same prefix argparse uses
(``sci-moe md run: error:``) and names flags, not config fields; OS errors are messages."""

from __future__ import annotations

import subprocess
import sys

import pytest

from sci_moe.cli.main import build_parser, command_prog, main


@pytest.mark.parametrize(
    "argv, prog",
    [
        (["md", "run", "--out", "x"], "sci-moe md run"),
        (["md", "analyse", "x"], "sci-moe md analyse"),
        (["train", "spice", "--out", "x"], "sci-moe train spice"),
        (["data", "molecules", "--out", "x"], "sci-moe data molecules"),
        (["cap", "--list"], "sci-moe cap"),
        (["demo"], "sci-moe demo"),
    ],
)
def test_prefix_is_the_full_command(argv, prog):
    assert command_prog(build_parser().parse_args(argv)) == prog


def test_config_errors_name_the_flag(tmp_path, capsys):
    out = str(tmp_path / "o")
    rc = main(["train", "spice", "--data", str(tmp_path), "--out", out, "--batch-size", "0"])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.startswith("sci-moe train spice: error: --batch-size (train.batch_size")


def test_missing_file_is_a_message_not_a_traceback(tmp_path, capsys, monkeypatch):
    def missing(args):
        open(tmp_path / "nope.txt")

    monkeypatch.setattr("sci_moe.cli.main._demo", missing)
    assert main(["demo"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("sci-moe demo: error: ") and "nope.txt" in err
    assert "Traceback" not in err


def test_the_real_entry_point_uses_the_same_prefix(tmp_path):
    cmd = [sys.executable, "-m", "sci_moe.cli.main", "md", "run", "--system", "nope"]
    proc = subprocess.run([*cmd, "--out", str(tmp_path / "o")], capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.startswith("sci-moe md run: error: unknown system 'nope'")
