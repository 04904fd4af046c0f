import json

import pytest
import torch

from sci_moe.language.mxd import (
    ActivationCache,
    capture,
    collect_activations,
    mlp_site,
    module_sha256,
)


def _fail():
    raise AssertionError("the model must not be loaded when the cache is complete")


def test_collection_matches_hooks_and_reruns_for_free(tiny_llama, windows, tmp_path):
    sha = module_sha256(tiny_llama)
    cache = collect_activations(
        tiny_llama,
        1,
        windows,
        tmp_path / "c",
        sha,
        chunk_windows=4,
        batch_size=3,
        show_progress=False,
    )
    assert cache.complete and cache.n_chunks == 3
    data = cache.load()
    site = mlp_site(tiny_llama, 1)
    with capture(site) as store:
        tiny_llama(input_ids=windows.ids)
    torch.testing.assert_close(data["x"], store["input"].reshape(-1, 16), rtol=0, atol=1e-6)
    torch.testing.assert_close(data["y"], store["output"].reshape(-1, 16), rtol=0, atol=1e-6)
    assert torch.equal(data["token"], windows.ids.reshape(-1))
    assert torch.equal(data["source"], windows.source.repeat_interleave(8))
    again = collect_activations(
        _fail, 1, windows, tmp_path / "c", sha, chunk_windows=4, show_progress=False
    )
    assert again.key == cache.key
    assert cache.load(max_tokens=5)["x"].shape == (5, 16)


def test_interrupted_collection_resumes_to_the_same_bytes(tiny_llama, windows, tmp_path):
    sha = module_sha256(tiny_llama)
    full = collect_activations(
        tiny_llama, 2, windows, tmp_path / "a", sha, chunk_windows=3, show_progress=False
    )
    part = collect_activations(
        tiny_llama,
        2,
        windows,
        tmp_path / "b",
        sha,
        chunk_windows=3,
        show_progress=False,
        max_chunks=2,
    )
    assert part.missing() == [2, 3]
    with pytest.raises(ValueError, match="incomplete"):
        part.load()
    calls = []

    def loader():
        calls.append(1)
        return tiny_llama

    done = collect_activations(
        loader, 2, windows, tmp_path / "b", sha, chunk_windows=3, show_progress=False
    )
    assert calls == [1] and done.complete
    for i in range(full.n_chunks):
        assert full.chunk_path(i).read_bytes() == done.chunk_path(i).read_bytes()


def test_cache_of_another_collection_is_refused(tiny_llama, tiny_bert, windows, tmp_path):
    sha = module_sha256(tiny_llama)
    collect_activations(
        tiny_llama, 1, windows, tmp_path / "c", sha, chunk_windows=5, show_progress=False
    )
    with pytest.raises(ValueError, match="layer: cached 1 != requested 2"):
        collect_activations(
            tiny_llama, 2, windows, tmp_path / "c", sha, chunk_windows=5, show_progress=False
        )
    with pytest.raises(ValueError, match="model_sha256"):
        collect_activations(
            tiny_llama, 1, windows, tmp_path / "c", "other", chunk_windows=5, show_progress=False
        )
    with pytest.raises(ValueError, match="tokens_sha256"):
        collect_activations(
            tiny_llama,
            1,
            windows.subset(slice(0, 5)),
            tmp_path / "c",
            sha,
            chunk_windows=5,
            show_progress=False,
        )
    with pytest.raises(ValueError, match="out of range"):
        collect_activations(tiny_llama, 7, windows, tmp_path / "d", sha, show_progress=False)
    with pytest.raises(ValueError, match="no activation cache"):
        ActivationCache(tmp_path / "nothing")
    # a chunk copied in from another collection is detected
    collect_activations(
        tiny_llama, 2, windows, tmp_path / "e", sha, chunk_windows=5, show_progress=False
    )
    (tmp_path / "c" / "chunk_00001.safetensors").write_bytes(
        (tmp_path / "e" / "chunk_00001.safetensors").read_bytes()
    )
    with pytest.raises(ValueError, match="another collection"):
        ActivationCache(tmp_path / "c").load()
    meta = json.loads((tmp_path / "c" / "meta.json").read_text())
    assert meta["digest"] == ActivationCache(tmp_path / "c").key.digest()


def test_bert_collection(tiny_bert, windows, tmp_path):
    cache = collect_activations(
        tiny_bert, 0, windows, tmp_path / "b", module_sha256(tiny_bert), show_progress=False
    )
    assert cache.key.architecture == "bert"
    data = cache.load()
    block = tiny_bert.encoder.layer[0]
    with torch.no_grad():
        expected = block.output.dense(block.intermediate(data["x"]))
    torch.testing.assert_close(data["y"], expected, rtol=0, atol=1e-6)
