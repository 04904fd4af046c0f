"""Recurrent generation for MoE language models made of Mamba / Routing Mamba blocks.

A stack of :class:`~.block.MambaBlock` / :class:`~.rom.RoMBlock` mixers (``layers`` of
``"m"`` and ``"r"`` only in :class:`~sci_moe.language.MoELMConfig`) needs no KV cache:
each block carries a :class:`~.block.MambaState` of constant size (conv window + SSM
state), so a new token costs the same at any position. The prompt is prefilled with
the parallel scan, then tokens are generated one step at a time.
"""

from __future__ import annotations

import torch

from .block import MambaBlock, MambaState

__all__ = ["initial_states", "lm_step", "recurrent_generate"]


def _check_model(model) -> None:
    blocks = getattr(model, "blocks", None)
    if blocks is None or not hasattr(model, "tok"):
        raise TypeError(f"model must be a MoETransformerLM, got {type(model).__name__}")
    kinds = [b.kind for b in blocks]
    if any(not isinstance(b.attn, MambaBlock) for b in blocks):
        raise ValueError(
            f"recurrent generation needs Mamba/RoM blocks only (layers of 'm' and 'r'), "
            f"got layer kinds {''.join(kinds)!r}: attention blocks need a KV cache"
        )
    if model.pos is not None:
        raise ValueError(
            "recurrent generation needs a model without a position table "
            "(MoELMConfig(positions=False))"
        )


def initial_states(model, batch_size: int) -> list[MambaState]:
    """Zero :class:`~.block.MambaState` of every block, for ``batch_size`` sequences."""
    _check_model(model)
    return [b.attn.initial_state(batch_size) for b in model.blocks]


def lm_step(
    model, idx: torch.Tensor, states: list[MambaState]
) -> tuple[torch.Tensor, list[MambaState]]:
    """Run tokens ``idx`` of shape ``(batch, T)`` after ``states``: logits and new states.

    ``T`` may be the whole prompt (prefill, parallel scan) or 1 (a generation step).

    Returns
    -------
    logits : Tensor, shape (batch, T, vocab_size)
    states : list of MambaState
        One per block, after the last token.
    """
    _check_model(model)
    if idx.dim() != 2:
        raise ValueError(f"idx must have shape (batch, time), got {tuple(idx.shape)}")
    if len(states) != len(model.blocks):
        raise ValueError(f"need one state per block ({len(model.blocks)}), got {len(states)}")
    x = model.tok(idx)
    new_states = []
    for block, state in zip(model.blocks, states, strict=True):
        res = block.attn(block.norm1(x), state, return_state=True)
        a, s = res[0], res[1]  # a RoMBlock also returns its routing info
        new_states.append(s)
        x = x + a
        if block.ffn is not None:
            h = block.norm2(x)
            x = x + (block.ffn(h, return_routing=True)[0] if block.is_moe else block.ffn(h))
    return model.head(model.norm(x)), new_states


@torch.no_grad()
def recurrent_generate(
    model,
    prompt: torch.Tensor,
    new_tokens: int,
    temperature: float = 1.0,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Continue ``prompt`` by ``new_tokens`` tokens with constant-size states.

    Parameters
    ----------
    model : MoETransformerLM
        Mamba / RoM blocks only, no position table.
    prompt : Tensor, shape (batch, T), int64
        At least one token per sequence.
    new_tokens : int
        Tokens to generate (>= 0).
    temperature : float
        Sampling temperature; 0 takes the most likely token (greedy).
    generator : torch.Generator, optional
        For reproducible sampling.

    Returns
    -------
    Tensor, shape (batch, T + new_tokens)
        The prompt followed by the generated tokens.
    """
    if prompt.dim() != 2 or prompt.shape[1] < 1:
        raise ValueError(f"prompt must have shape (batch, T >= 1), got {tuple(prompt.shape)}")
    if new_tokens < 0 or temperature < 0:
        raise ValueError(
            f"need new_tokens >= 0 and temperature >= 0, got {new_tokens}, {temperature}"
        )
    was_training = model.training
    model.eval()
    try:
        logits, states = lm_step(model, prompt, initial_states(model, prompt.shape[0]))
        out = [prompt]
        for _ in range(new_tokens):
            last = logits[:, -1].float()
            if temperature == 0:
                nxt = last.argmax(-1, keepdim=True)
            else:
                probs = torch.softmax(last / temperature, dim=-1)
                nxt = torch.multinomial(probs, 1, generator=generator)
            out.append(nxt)
            logits, states = lm_step(model, nxt, states)
    finally:
        model.train(was_training)
    return torch.cat(out, dim=1)
