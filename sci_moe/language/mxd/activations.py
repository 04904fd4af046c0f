"""Collect a pretrained MLP's input and output over a corpus, cached on disk in chunks.

:func:`collect_activations` runs the model over token windows with forward hooks on one
MLP (:func:`~sci_moe.language.mxd.capture`; the forward stops after that block)
and writes the activations in chunks of ``chunk_windows`` windows to a directory:

* ``meta.json`` — the :class:`CollectionKey` (SHA-256 of the weight file, architecture,
  layer, context length, SHA-256 of the token ids, chunk size) and its digest;
* ``chunk_00000.safetensors``, ... — ``x`` (MLP input) and ``y`` (MLP output),
  ``(tokens, d_model)`` in the key's storage ``dtype`` (float32, or float16 / bfloat16 to
  halve the disk and memory of a million-token collection), plus the token ids, positions
  and source labels.

Every file is written atomically (temporary file + ``os.replace``) and each chunk names
the key digest and the SHA-256 of its tensors in its header; reading a chunk checks both
(and its token count), so a chunk that is read is complete, intact and belongs to this
collection. A rerun with the same key finds every chunk and costs nothing (the model
is not even loaded when passed as a loader); an interrupted collection resumes at the
first missing chunk; a directory that holds another collection (another model, layer,
corpus slice or context length) raises a ``ValueError`` naming what differs.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from torch import nn

from ..._util import atomic_save_json, atomic_write_bytes, progress_bar
from .sites import capture, mlp_site, run_until_captured
from .text import TokenWindows

__all__ = [
    "STORAGE_DTYPES",
    "ActivationCache",
    "CollectionKey",
    "collect_activations",
    "tensors_sha256",
    "tokens_sha256",
]

_FORMAT = 2
#: Storage dtypes of the activations (``CollectionKey.dtype``).
STORAGE_DTYPES = ("float32", "float16", "bfloat16")


def tokens_sha256(windows: TokenWindows) -> str:
    """SHA-256 of the token ids and source labels of ``windows`` (the corpus slice)."""
    h = hashlib.sha256()
    h.update(str(tuple(windows.ids.shape)).encode())
    h.update(windows.ids.contiguous().numpy().tobytes())
    h.update(windows.source.contiguous().numpy().tobytes())
    return h.hexdigest()


def tensors_sha256(tensors: dict[str, torch.Tensor]) -> str:
    """SHA-256 of named tensors: names, dtypes, shapes and bytes, in name order."""
    h = hashlib.sha256()
    for name in sorted(tensors):
        t = tensors[name].detach().cpu().contiguous()
        h.update(f"{name}:{t.dtype}:{tuple(t.shape)};".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy())
    return h.hexdigest()


@dataclass(frozen=True)
class CollectionKey:
    """Everything the cached activations depend on.

    Attributes
    ----------
    model_sha256 : str
        Hash of the model's weights (:func:`~sci_moe.language.mxd.file_sha256` of
        the weight file, or :func:`~sci_moe.language.mxd.module_sha256`).
    architecture : str
    layer : int
    context_len : int
    tokens_sha256 : str
        :func:`tokens_sha256` of the windows.
    n_windows : int
    chunk_windows : int
    dtype : str
        Storage dtype of ``x`` and ``y``, ``"float32"``, ``"float16"`` or ``"bfloat16"``.
    """

    model_sha256: str
    architecture: str
    layer: int
    context_len: int
    tokens_sha256: str
    n_windows: int
    chunk_windows: int
    dtype: str = "float32"
    format: int = _FORMAT

    def digest(self) -> str:
        """SHA-256 of the key's JSON (the cache's content hash)."""
        return hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()


class ActivationCache:
    """A directory of activation chunks written by :func:`collect_activations`.

    Parameters
    ----------
    path : path-like
    key : CollectionKey, optional
        When given, the directory must hold this collection (else ``ValueError``).
    """

    def __init__(self, path: str | os.PathLike, key: CollectionKey | None = None) -> None:
        self.path = Path(path)
        meta = self.path / "meta.json"
        if not meta.is_file():
            raise ValueError(f"{self.path} holds no activation cache (no meta.json)")
        stored = json.loads(meta.read_text())
        self.key = CollectionKey(**stored["key"])
        if key is not None and key != self.key:
            diff = [
                f"{name}: cached {getattr(self.key, name)!r} != requested {getattr(key, name)!r}"
                for name in asdict(key)
                if getattr(self.key, name) != getattr(key, name)
            ]
            raise ValueError(
                f"{self.path} holds activations of another collection ({'; '.join(diff)}); "
                "pass another cache directory or delete this one"
            )
        self.d_model = int(stored["d_model"])

    @property
    def n_chunks(self) -> int:
        """Number of chunks of the full collection."""
        return -(-self.key.n_windows // self.key.chunk_windows)

    def chunk_path(self, i: int) -> Path:
        """Path of chunk ``i``."""
        return self.path / f"chunk_{i:05d}.safetensors"

    def missing(self) -> list[int]:
        """Indices of chunks not (yet) on disk."""
        return [i for i in range(self.n_chunks) if not self.chunk_path(i).is_file()]

    @property
    def complete(self) -> bool:
        """Whether every chunk is on disk."""
        return not self.missing()

    def chunk_tokens(self, i: int) -> int:
        """Tokens of chunk ``i`` (its windows times the context length)."""
        lo = i * self.key.chunk_windows
        return (min(lo + self.key.chunk_windows, self.key.n_windows) - lo) * self.key.context_len

    @property
    def n_tokens(self) -> int:
        """Tokens of the full collection."""
        return self.key.n_windows * self.key.context_len

    def chunk(self, i: int, verify: bool = True) -> dict[str, torch.Tensor]:
        """Chunk ``i``: ``x``, ``y`` (the key's ``dtype``, ``(tokens, d_model)``),
        ``token``, ``position``, ``source`` (int64, ``(tokens,)``).

        With ``verify`` the tensors' SHA-256 (:func:`tensors_sha256`) must equal the one
        written in the chunk's header, and the token count the chunk's share of the
        windows; a chunk that fails raises a ``ValueError`` (delete the file and rerun
        :func:`collect_activations`, which rewrites just that chunk).
        """
        from safetensors import safe_open

        path = self.chunk_path(i)
        if not path.is_file():
            raise ValueError(f"chunk {i} of {self.path} is missing; rerun collect_activations")
        with safe_open(str(path), framework="pt") as fh:
            # one header entry "<key digest>/<tensors' SHA-256>" (safetensors writes its
            # metadata map in no fixed order: one entry keeps the bytes reproducible)
            digest, _, sha = (fh.metadata() or {}).get("key", "").partition("/")
            if digest != self.key.digest():
                raise ValueError(f"{path} belongs to another collection; delete the directory")
            out = {name: fh.get_tensor(name) for name in fh.keys()}
        if verify:
            n = self.chunk_tokens(i)
            bad = out["x"].shape != (n, self.d_model) or out["y"].shape != (n, self.d_model)
            if bad or tensors_sha256(out) != sha:
                raise ValueError(
                    f"{path} is corrupt (checksum or shape mismatch); delete it and rerun "
                    "collect_activations to rewrite it"
                )
        return out

    def load(self, max_tokens: int | None = None, verify: bool = True) -> dict[str, torch.Tensor]:
        """All chunks concatenated (the first ``max_tokens`` tokens if given).

        The output tensors are allocated once and filled chunk by chunk (no second copy
        of a collection of several GB); every chunk is verified (:meth:`chunk`).
        """
        if not self.complete:
            raise ValueError(
                f"{self.path} is incomplete (chunks {self.missing()[:5]}... missing); "
                "rerun collect_activations to resume"
            )
        total = self.n_tokens if max_tokens is None else min(max_tokens, self.n_tokens)
        out: dict[str, torch.Tensor] = {}
        filled = 0
        for i in range(self.n_chunks):
            if filled >= total:
                break
            part = self.chunk(i, verify=verify)
            take = min(part["x"].shape[0], total - filled)
            for name, t in part.items():
                if name not in out:
                    out[name] = torch.empty((total, *t.shape[1:]), dtype=t.dtype)
                out[name][filled : filled + take] = t[:take]
            filled += take
        return out


def collect_activations(
    model: nn.Module | Callable[[], nn.Module],
    layer: int,
    windows: TokenWindows,
    path: str | os.PathLike,
    model_sha256: str,
    chunk_windows: int = 32,
    batch_size: int = 8,
    show_progress: bool = True,
    max_chunks: int | None = None,
    dtype: str = "float32",
    deadline: float | None = None,
) -> ActivationCache:
    """Record the input and output of the MLP of block ``layer`` over ``windows``.

    Parameters
    ----------
    model : nn.Module or callable
        The model (``LlamaForCausalLM``/``LlamaModel``/``BertModel``), or a zero-argument
        loader called only if some chunk is missing.
    layer : int
        Block index, ``0 <= layer < num_layers``.
    windows : TokenWindows
        Token windows of shape ``(n_windows, context_len)``.
    path : path-like
        Cache directory (created; must be empty or hold this same collection).
    model_sha256 : str
        Hash of the weights (part of the key).
    chunk_windows : int
        Windows per chunk file.
    batch_size : int
        Windows per forward pass.
    show_progress : bool
        tqdm bar over chunks (plain lines when stderr is not a terminal).
    max_chunks : int, optional
        Stop after writing this many new chunks (for tests of resumption).
    dtype : {"float32", "float16", "bfloat16"}
        Storage dtype of the activations (part of the key).
    deadline : float, optional
        A :func:`time.perf_counter` time after which no new chunk is started: the
        collection returns incomplete (:attr:`ActivationCache.complete` is false) and a
        later call resumes it. Runs written in pieces pass their piece's deadline.

    The forward pass runs on the device of the model's parameters; the activations are
    moved to the CPU before they are written.

    Returns
    -------
    ActivationCache
    """
    for name, value in (("chunk_windows", chunk_windows), ("batch_size", batch_size)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    if dtype not in STORAGE_DTYPES:
        raise ValueError(f"dtype must be one of {STORAGE_DTYPES}, got {dtype!r}")
    if deadline is not None and (not isinstance(deadline, int | float) or math.isnan(deadline)):
        raise ValueError(f"deadline must be a time.perf_counter() value, got {deadline!r}")
    if not isinstance(model_sha256, str) or not model_sha256:
        raise ValueError("model_sha256 must be a non-empty string (the weights' hash)")
    if isinstance(layer, bool) or not isinstance(layer, int) or layer < 0:
        raise ValueError(f"layer must be an integer >= 0, got {layer!r}")
    path = Path(path)
    loaded = model if isinstance(model, nn.Module) else None
    arch = None
    if loaded is not None:
        site = mlp_site(loaded, layer)  # validates the layer before anything is written
        arch = site.architecture
    meta_file = path / "meta.json"
    if meta_file.is_file():
        cache = ActivationCache(path)
        arch = arch or cache.key.architecture
    key = CollectionKey(
        model_sha256=model_sha256,
        architecture=arch or "",
        layer=layer,
        context_len=windows.context_len,
        tokens_sha256=tokens_sha256(windows),
        n_windows=len(windows),
        chunk_windows=chunk_windows,
        dtype=dtype,
    )
    if meta_file.is_file():
        cache = ActivationCache(path, key)
        if cache.complete or (deadline is not None and time.perf_counter() > deadline):
            return cache
    if loaded is None:
        loaded = model()
        site = mlp_site(loaded, layer)
        if key.architecture != site.architecture:
            key = CollectionKey(**{**asdict(key), "architecture": site.architecture})
    if not meta_file.is_file():
        if path.exists() and any(path.iterdir()):
            raise ValueError(f"{path} is not empty and holds no activation cache; pass a new path")
        path.mkdir(parents=True, exist_ok=True)
        atomic_save_json(
            meta_file, {"key": asdict(key), "digest": key.digest(), "d_model": site.d_model}
        )
    cache = ActivationCache(path, key)
    todo = cache.missing()
    if max_chunks is not None:
        todo = todo[:max_chunks]
    digest = key.digest()
    was_training = loaded.training
    loaded.eval()
    bar = progress_bar(
        total=len(todo), desc=f"activations L{layer}", unit="chunk", disable=not show_progress
    )
    try:
        for i in todo:
            if deadline is not None and time.perf_counter() > deadline:
                break
            _write_chunk(loaded, site, windows, cache, i, batch_size, digest)
            bar.update(1)
    finally:
        bar.close()
        loaded.train(was_training)
    return cache


def _write_chunk(model, site, windows, cache, i, batch_size, digest) -> None:
    from safetensors.torch import save

    lo = i * cache.key.chunk_windows
    hi = min(lo + cache.key.chunk_windows, len(windows))
    xs, ys = [], []
    device = next(iter(model.parameters())).device
    dtype = getattr(torch, cache.key.dtype)
    with torch.no_grad(), capture(site, stop=True) as store:
        for b in range(lo, hi, batch_size):
            ids = windows.ids[b : min(b + batch_size, hi)].to(device)
            inputs = {"input_ids": ids}
            if site.architecture == "bert":
                inputs["attention_mask"] = torch.ones_like(ids)
            store.clear()
            run_until_captured(model, store, **inputs)
            xs.append(store["input"].reshape(-1, site.d_model).float().cpu().to(dtype))
            ys.append(store["output"].reshape(-1, site.d_model).float().cpu().to(dtype))
    ctx = windows.context_len
    tensors = {
        "x": torch.cat(xs).contiguous(),
        "y": torch.cat(ys).contiguous(),
        "token": windows.ids[lo:hi].reshape(-1).contiguous(),
        "position": torch.arange(ctx).repeat(hi - lo),
        "source": windows.source[lo:hi].repeat_interleave(ctx),
    }
    meta = {"key": f"{digest}/{tensors_sha256(tensors)}"}
    atomic_write_bytes(cache.chunk_path(i), save(tensors, metadata=meta))
