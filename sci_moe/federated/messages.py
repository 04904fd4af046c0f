"""Messages between server and clients: plain dicts of tensors, serialised to bytes.

Every message crosses the engine as bytes (``torch.save`` of plain containers, loaded
with ``weights_only=True``), in the in-process simulator as well as between processes,
so both engines run the same code and the byte counts are the real payloads.

Down (server -> client): ``{"kind": "train" | "evaluate" | "stop", "round": int,
"experts": [expert state, ...], "own": int, "router": {name: Tensor} | None,
"train_router": bool, "select": bool, "epochs": int}``. With ``select=True`` (IFCA) the
client scores each expert as a one-expert model on its training data and trains the best.

Up (client -> server): ``{"kind": "update", "client": int, "n": int, "expert": expert state,
"router": {...} | None, "choice": int, "loss": float}``, ``{"kind": "metrics", ...}`` or
``{"kind": "dropped", "client": int, "reason": str}``.
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping

import torch

__all__ = ["check_update", "decode_message", "encode_message"]


def encode_message(message: Mapping) -> bytes:
    """Serialise a message (nested dicts/lists of tensors, numbers, strings) to bytes."""
    buf = io.BytesIO()
    torch.save(dict(message), buf)
    return buf.getvalue()


def decode_message(data: bytes) -> dict:
    """Inverse of :func:`encode_message` (``weights_only=True``: no code runs).

    Raises
    ------
    ValueError
        If ``data`` is not a serialised message dict.
    """
    try:
        msg = torch.load(io.BytesIO(data), weights_only=True)
    except Exception as err:
        raise ValueError(f"undecodable message ({len(data)} bytes): {err}") from None
    if not isinstance(msg, dict) or "kind" not in msg:
        raise ValueError("a message must be a dict with a 'kind' entry")
    return msg


def _check_tensors(got: object, want: Mapping[str, torch.Tensor], what: str) -> str | None:
    if not isinstance(got, Mapping):
        return f"{what} is a {type(got).__name__}, not a dict of tensors"
    if set(got) != set(want):
        missing, extra = sorted(set(want) - set(got)), sorted(set(got) - set(want))
        return f"{what} keys differ (missing {missing}, unexpected {extra})"
    for key, ref in want.items():
        t = got[key]
        if not isinstance(t, torch.Tensor):
            return f"{what}[{key!r}] is a {type(t).__name__}, not a tensor"
        if t.shape != ref.shape:
            return f"{what}[{key!r}] has shape {tuple(t.shape)}, expected {tuple(ref.shape)}"
        if not t.dtype.is_floating_point:
            return f"{what}[{key!r}] has dtype {t.dtype}, expected a float tensor"
        if not bool(torch.isfinite(t).all()):
            return f"{what}[{key!r}] has non-finite values (NaN/Inf)"
    return None


def check_update(
    reply: object,
    client: int,
    expert_like: Mapping[str, torch.Tensor],
    router_like: Mapping[str, torch.Tensor] | None,
    num_choices: int = 1,
) -> str | None:
    """Why a client's reply cannot be aggregated, or ``None`` if it can.

    Parameters
    ----------
    reply : object
        The decoded reply.
    client : int
        The client the reply must come from.
    expert_like : dict of str to Tensor
        An expert state with the expected keys and shapes.
    router_like : dict of str to Tensor or None
        The expected router shapes, ``None`` if no router is expected.
    num_choices : int
        Valid range of ``choice`` (IFCA cluster selected by the client).

    Returns
    -------
    str or None
        A reason ("dropped out: ...", "non-finite values", "keys differ", ...).
    """
    if not isinstance(reply, Mapping):
        return f"reply is a {type(reply).__name__}, not a message dict"
    if reply.get("kind") == "dropped":
        return f"dropped out: {reply.get('reason', 'no reason given')}"
    if reply.get("kind") != "update":
        return f"expected an 'update' reply, got kind {reply.get('kind')!r}"
    if reply.get("client") != client:
        return f"reply is from client {reply.get('client')!r}, expected {client}"
    n = reply.get("n")
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        return f"sample count n={n!r} must be a positive int"
    loss = reply.get("loss")
    if not isinstance(loss, float) or not math.isfinite(loss):
        return f"training loss {loss!r} is not a finite float"
    choice = reply.get("choice", 0)
    if isinstance(choice, bool) or not isinstance(choice, int) or not 0 <= choice < num_choices:
        return f"choice {choice!r} is not in [0, {num_choices})"
    why = _check_tensors(reply.get("expert"), expert_like, "expert")
    if why is None and router_like is not None:
        why = _check_tensors(reply.get("router"), router_like, "router")
    return why
