"""Interop with transformers' Mamba: configs and ``MambaMixer`` weights.

transformers' ``MambaMixer`` (``transformers.models.mamba``) is the implementation users
know; :class:`~.block.MambaBlock` uses its parameter names and shapes, so a mixer's
``state_dict`` loads unchanged. transformers is not imported here: the functions take
the objects you built with it.
"""

from __future__ import annotations

from torch import nn

from .block import MambaBlock, MambaConfig

__all__ = ["config_from_transformers", "from_transformers_mixer"]


def config_from_transformers(hf_config, **overrides) -> MambaConfig:
    """The :class:`~.block.MambaConfig` of a transformers ``MambaConfig``.

    Parameters
    ----------
    hf_config : transformers.MambaConfig
        Reads ``hidden_size``, ``state_size``, ``conv_kernel``, ``expand``,
        ``time_step_rank``, ``use_bias``, ``use_conv_bias``, ``hidden_act`` and
        ``intermediate_size``.
    **overrides
        Other :class:`~.block.MambaConfig` fields (``chunk_size``, ``scan``).

    Returns
    -------
    MambaConfig
    """
    act = getattr(hf_config, "hidden_act", "silu")
    if act != "silu":
        raise ValueError(f"only hidden_act='silu' is supported (Mamba's), got {act!r}")
    d_model, expand = int(hf_config.hidden_size), int(hf_config.expand)
    if int(hf_config.intermediate_size) != expand * d_model:
        raise ValueError(
            f"intermediate_size={hf_config.intermediate_size} is not expand * hidden_size "
            f"= {expand * d_model}; only the standard layout is supported"
        )
    return MambaConfig(
        d_model=d_model,
        d_state=int(hf_config.state_size),
        d_conv=int(hf_config.conv_kernel),
        expand=expand,
        dt_rank=int(hf_config.time_step_rank),
        bias=bool(hf_config.use_bias),
        conv_bias=bool(hf_config.use_conv_bias),
        **overrides,
    )


def from_transformers_mixer(mixer: nn.Module, **overrides) -> MambaBlock:
    """A :class:`~.block.MambaBlock` with the weights of a transformers ``MambaMixer``.

    Parameters
    ----------
    mixer : transformers.models.mamba.modeling_mamba.MambaMixer
        Its ``config`` gives the sizes; its ``state_dict`` is loaded strictly.
    **overrides
        Extra :class:`~.block.MambaConfig` fields (``chunk_size``, ``scan``).

    Returns
    -------
    MambaBlock
        Same dtype and device as the mixer; equal outputs (transformers' slow path)
        up to floating-point rounding.
    """
    if not hasattr(mixer, "config") or not hasattr(mixer, "A_log"):
        raise TypeError(f"expected a transformers MambaMixer, got {type(mixer).__name__}")
    cfg = config_from_transformers(mixer.config, **overrides)
    p = mixer.A_log
    block = MambaBlock(cfg).to(dtype=p.dtype, device=p.device)
    block.load_state_dict(mixer.state_dict(), strict=True)
    return block
