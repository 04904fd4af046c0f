"""Activation chunks for million-token collections: float16 storage, checksums verified on
read, a deadline that pauses the collection, and a load that fills preallocated tensors."""

import time

import pytest
import torch

from sci_moe.language.mxd import ActivationCache, collect_activations, module_sha256
from sci_moe.language.mxd.activations import tensors_sha256


def _collect(model, windows, path, **kw):
    opts = dict(chunk_windows=3, batch_size=2, show_progress=False)
    return collect_activations(model, 1, windows, path, module_sha256(model), **{**opts, **kw})


def test_float16_storage_rounds_the_float32_collection(tiny_llama, windows, tmp_path):
    full = _collect(tiny_llama, windows, tmp_path / "f32").load()
    half = _collect(tiny_llama, windows, tmp_path / "f16", dtype="float16").load()
    assert half["x"].dtype == torch.float16 and half["y"].dtype == torch.float16
    assert torch.equal(half["x"], full["x"].half()) and torch.equal(half["y"], full["y"].half())
    assert torch.equal(half["token"], full["token"])
    # the storage dtype is part of the key: a float32 directory refuses a float16 request
    with pytest.raises(ValueError, match="dtype"):
        _collect(tiny_llama, windows, tmp_path / "f32", dtype="float16")
    with pytest.raises(ValueError, match="dtype must be one of"):
        _collect(tiny_llama, windows, tmp_path / "x", dtype="int8")


def test_a_corrupt_chunk_is_refused_on_read(tiny_llama, windows, tmp_path):
    from safetensors import safe_open
    from safetensors.torch import save

    cache = _collect(tiny_llama, windows, tmp_path / "c")
    path = cache.chunk_path(1)
    with safe_open(str(path), framework="pt") as fh:
        meta = fh.metadata()
        tensors = {n: fh.get_tensor(n) for n in fh.keys()}
    tensors["y"][0, 0] += 1.0  # same header (key digest and checksum), other bytes
    path.write_bytes(save(tensors, metadata=meta))
    cache.chunk(0)
    with pytest.raises(ValueError, match="corrupt"):
        cache.chunk(1)
    with pytest.raises(ValueError, match="corrupt"):
        cache.load()
    assert cache.chunk(1, verify=False)["y"].shape == (24, 16)
    # deleting the damaged chunk and collecting again rewrites just it
    path.unlink()
    again = _collect(tiny_llama, windows, tmp_path / "c")
    assert again.complete and again.load()["y"].shape == (80, 16)


def test_the_checksum_names_each_tensor():
    a = {"x": torch.zeros(2, 3), "y": torch.ones(2)}
    assert tensors_sha256(a) == tensors_sha256(dict(reversed(a.items())))
    assert tensors_sha256(a) != tensors_sha256({"x": torch.zeros(2, 3), "z": torch.ones(2)})
    assert tensors_sha256(a) != tensors_sha256({"x": torch.zeros(3, 2), "y": torch.ones(2)})
    assert tensors_sha256(a) != tensors_sha256({"x": torch.zeros(2, 3).half(), "y": torch.ones(2)})


def test_a_deadline_pauses_and_a_later_call_resumes(tiny_llama, windows, tmp_path):
    paused = _collect(tiny_llama, windows, tmp_path / "p", deadline=time.perf_counter() - 1)
    assert isinstance(paused, ActivationCache) and paused.missing() == [0, 1, 2, 3]
    done = _collect(tiny_llama, windows, tmp_path / "p", deadline=time.perf_counter() + 3600)
    full = _collect(tiny_llama, windows, tmp_path / "f")
    assert done.complete and done.n_tokens == 80 and done.chunk_tokens(3) == 8
    for i in range(full.n_chunks):
        assert full.chunk_path(i).read_bytes() == done.chunk_path(i).read_bytes()
    with pytest.raises(ValueError, match="deadline"):
        _collect(tiny_llama, windows, tmp_path / "q", deadline="soon")


def test_load_fills_preallocated_tensors_in_chunk_order(tiny_llama, windows, tmp_path):
    cache = _collect(tiny_llama, windows, tmp_path / "c")
    whole = cache.load()
    parts = [cache.chunk(i) for i in range(cache.n_chunks)]
    for name in whole:
        assert torch.equal(whole[name], torch.cat([p[name] for p in parts]))
    head = cache.load(max_tokens=30)
    assert all(torch.equal(head[n], whole[n][:30]) for n in whole)
    assert cache.load(max_tokens=10_000)["x"].shape == (80, 16)
