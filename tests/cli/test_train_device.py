"""``sci-moe train <method> --device``: every method takes it; a missing GPU is refused
before anything is written."""

from __future__ import annotations

import argparse

import pytest
import torch

from sci_moe.cli import train as train_cli

METHODS = train_cli.available_methods()


def _run(argv):
    p = argparse.ArgumentParser(prog="sci-moe")
    train_cli.add_parser(p.add_subparsers(dest="command"))
    args = p.parse_args(argv)
    return args.func(args)


def test_every_method_is_covered():
    assert len(METHODS) == len(train_cli.METHODS)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only refusal")
@pytest.mark.parametrize("method", METHODS)
def test_cuda_without_a_gpu_is_refused_before_anything_is_written(tmp_path, method):
    out = tmp_path / "run"
    with pytest.raises(ValueError, match=r"--device='cuda'.*no CUDA device.*--device=cpu"):
        _run(["train", method, "--out", str(out), "--device", "cuda"])
    assert not out.exists()


@pytest.mark.parametrize("method", METHODS)
def test_a_misspelt_device_names_the_flag_and_the_valid_names(tmp_path, method):
    out = tmp_path / "run"
    with pytest.raises(ValueError, match=r"--device.*'cpu', 'cuda' or 'cuda:N'"):
        _run(["train", method, "--out", str(out), "--device", "gpu0"])
    assert not out.exists()
