"""Atomic checkpoints: round trip, previous copy kept, weights-only loading, bad files."""

from __future__ import annotations

import pickle

import pytest
import torch

from sci_moe.sampling.md.checkpoint import (
    CHECKPOINT_FORMAT,
    load_checkpoint,
    load_latest_checkpoint,
    previous_checkpoint_path,
    save_checkpoint,
)


def test_round_trip_and_previous(tmp_path):
    path = tmp_path / "run" / "checkpoint.pt"
    g = torch.Generator().manual_seed(5)
    state = {"step": 10, "x": torch.randn(2, 3, generator=g), "gen": g.get_state(), "b": b"\x00"}
    save_checkpoint(path, state)
    assert not previous_checkpoint_path(path).exists()
    save_checkpoint(path, {**state, "step": 20})
    loaded = load_checkpoint(path)
    assert loaded["step"] == 20 and loaded["format"] == CHECKPOINT_FORMAT
    assert torch.equal(loaded["x"], state["x"]) and loaded["b"] == b"\x00"
    assert torch.equal(loaded["gen"], g.get_state())
    assert load_checkpoint(previous_checkpoint_path(path))["step"] == 10
    assert sorted(p.name for p in path.parent.iterdir()) == ["checkpoint.pt", "checkpoint_prev.pt"]


class _Evil:
    def __reduce__(self):  # would run code if unpickled
        return (print, ("unpickled!",))


def test_refuses_pickles_and_foreign_files(tmp_path):
    evil = tmp_path / "evil.pt"
    torch.save({"format": CHECKPOINT_FORMAT, "obj": _Evil()}, evil)
    with pytest.raises(ValueError, match=r"MD checkpoint .* is not readable"):
        load_checkpoint(evil)
    raw = tmp_path / "raw.pt"
    raw.write_bytes(pickle.dumps({"step": 1}, protocol=2) + b"junk")
    with pytest.raises(ValueError, match="not readable"):
        load_checkpoint(raw)
    other = tmp_path / "other.pt"
    torch.save({"step": 1}, other)
    with pytest.raises(ValueError, match="format"):
        load_checkpoint(other)
    with pytest.raises(ValueError, match="does not exist"):
        load_checkpoint(tmp_path / "missing.pt")


def _damage_middle(path):
    data = bytearray(path.read_bytes())
    mid = len(data) // 2
    data[mid : mid + 8] = bytes(b ^ 0xFF for b in data[mid : mid + 8])  # same size
    path.write_bytes(bytes(data))


def test_damaged_bytes_are_refused_and_the_previous_checkpoint_used(tmp_path):
    """Issue 40: torch's zip reader does not check CRCs; the stored SHA-256 does."""
    path = tmp_path / "checkpoint.pt"
    x = torch.arange(4096, dtype=torch.float64)
    save_checkpoint(path, {"step": 10, "x": x})
    save_checkpoint(path, {"step": 20, "x": x + 1})
    _damage_middle(path)
    with pytest.raises(ValueError, match=r"damaged.*SHA-256.*checkpoint_prev\.pt"):
        load_checkpoint(path)
    state, used, note = load_latest_checkpoint(path)
    assert state["step"] == 10 and torch.equal(state["x"], x)
    assert used == previous_checkpoint_path(path)
    assert "damaged" in note and "checkpoint_prev.pt" in note
    _damage_middle(previous_checkpoint_path(path))
    with pytest.raises(ValueError, match="no usable MD checkpoint"):
        load_latest_checkpoint(path)


def test_missing_latest_falls_back_to_previous(tmp_path):
    path = tmp_path / "checkpoint.pt"
    save_checkpoint(path, {"step": 10})
    save_checkpoint(path, {"step": 20})
    path.unlink()
    state, used, note = load_latest_checkpoint(path)
    assert state["step"] == 10 and used.name == "checkpoint_prev.pt" and "does not exist" in note
