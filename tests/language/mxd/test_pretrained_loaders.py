"""The shipped pretrained models load offline with transformers' hub kernels off."""

from __future__ import annotations

import pytest


def test_minilm_loads_without_hub_kernels():
    """transformers enables hub kernels by default; on a GPU a kernelized layer would be
    fetched from the network (none there) and change the numerics."""
    pytest.importorskip("transformers")
    from sci_moe.language.mxd import load_minilm

    model = load_minilm().model
    assert model.use_kernels is False
    assert type(model).__name__ == "BertModel"
