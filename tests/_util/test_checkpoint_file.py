"""Verified checkpoint files: damaged bytes are refused, the previous file is the fallback."""

from __future__ import annotations

import pytest
import torch

from sci_moe._util import (
    CHECKPOINT_MAGIC,
    CheckpointError,
    load_latest,
    load_verified,
    remove_stale_temps,
    save_verified,
)


def _damage_middle(path):
    data = bytearray(path.read_bytes())
    mid = len(data) // 2
    data[mid] ^= 0xFF
    path.write_bytes(bytes(data))


def test_round_trip_and_magic(tmp_path):
    path = tmp_path / "checkpoint.pt"
    state = {"w": torch.arange(5.0), "step": 3, "name": "x"}
    save_verified(path, state)
    assert path.read_bytes().startswith(CHECKPOINT_MAGIC)
    got = load_verified(path)
    assert got["step"] == 3 and torch.equal(got["w"], state["w"])


def test_damaged_middle_is_refused(tmp_path):
    path = tmp_path / "checkpoint.pt"
    save_verified(path, {"w": torch.randn(1000)})
    _damage_middle(path)
    with pytest.raises(CheckpointError, match="damaged"):
        load_verified(path)


def test_load_latest_falls_back_to_previous(tmp_path):
    path = tmp_path / "checkpoint.pt"
    save_verified(path, {"step": 1, "w": torch.randn(100)})
    save_verified(path, {"step": 2, "w": torch.randn(100)})
    state, used, note = load_latest(path)
    assert state["step"] == 2 and used == path and note == ""
    _damage_middle(path)
    state, used, note = load_latest(path)
    assert state["step"] == 1 and used.name == "checkpoint_prev.pt"
    assert "damaged" in note and "checkpoint_prev.pt" in note
    _damage_middle(used)
    with pytest.raises(CheckpointError, match="no usable"):
        load_latest(path)


def test_missing_newest_uses_previous(tmp_path):
    path = tmp_path / "checkpoint.pt"
    save_verified(path, {"step": 1})
    save_verified(path, {"step": 2})
    path.unlink()
    state, used, note = load_latest(path)
    assert used.name == "checkpoint_prev.pt"
    assert state["step"] == 1 and "does not exist" in note


def test_plain_torch_file_still_loads(tmp_path):
    path = tmp_path / "old.pt"
    torch.save({"step": 7}, path)
    assert load_verified(path)["step"] == 7


def test_remove_stale_temps(tmp_path):
    path = tmp_path / "checkpoint.pt"
    stale = [tmp_path / ".checkpoint.pt.abc.tmp", tmp_path / ".checkpoint_prev.pt.x.tmp"]
    for s in stale:
        s.write_bytes(b"partial")
    keep = tmp_path / ".other.pt.abc.tmp"
    keep.write_bytes(b"not ours")
    removed = remove_stale_temps(path)
    assert sorted(removed) == sorted(stale)
    assert keep.exists() and not any(s.exists() for s in stale)


def test_keep_previous_after_a_kill_between_link_and_replace(tmp_path):
    """A write killed after keeping the previous file but before replacing the newest
    leaves both names on one file; the next write keeps it and strands no temporary."""
    import os

    path = tmp_path / "checkpoint.pt"
    save_verified(path, {"step": 1})
    os.link(path, tmp_path / "checkpoint_prev.pt")  # the state such a kill leaves
    save_verified(path, {"step": 2})
    assert load_verified(path)["step"] == 2
    assert load_verified(tmp_path / "checkpoint_prev.pt")["step"] == 1
    assert not list(tmp_path.glob(".*.tmp"))
