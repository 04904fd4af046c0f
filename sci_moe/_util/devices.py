"""Which torch device a run uses, and moving its data there: one rule for every method.

A run names its device as a string (``"cpu"``, ``"cuda"``, ``"cuda:1"``); the name is
checked when a config is built (:func:`check_device_name`: spelling only, so a config can
be read on any machine) and again when the run starts (:func:`resolve_device`: the device
must exist here). Data reaches the device through :func:`to_device`, which walks the
containers a batch is made of.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any

import torch

__all__ = ["DEVICE_TYPES", "check_device_name", "module_device", "resolve_device", "to_device"]

#: Device types a run may name (``cuda`` with an optional index).
DEVICE_TYPES = ("cpu", "cuda")
_NAME = re.compile(r"^(cpu|cuda(:\d+)?)$")


def check_device_name(name: object, *, what: str = "device") -> str:
    """Check the spelling of a device name; returns it.

    Parameters
    ----------
    name : str
        ``"cpu"``, ``"cuda"`` or ``"cuda:N"``.
    what : str
        The setting's name in the message.

    Raises
    ------
    ValueError
        Anything else (the message lists the valid names).
    """
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError(
            f"{what} must be 'cpu', 'cuda' or 'cuda:N' (N a device index), got {name!r}"
        )
    return name


def resolve_device(name: str, *, what: str = "device") -> torch.device:
    """The torch device ``name`` means on this machine.

    Parameters
    ----------
    name : str
        ``"cpu"``, ``"cuda"`` (the current CUDA device) or ``"cuda:N"``.
    what : str
        The setting's name in the message (``"--device"`` on a command line).

    Returns
    -------
    torch.device

    Raises
    ------
    ValueError
        A misspelt name, CUDA asked for where torch sees none, or an index past the
        devices there; the message says what to use instead.

    Examples
    --------
    >>> resolve_device("cpu")
    device(type='cpu')
    """
    check_device_name(name, what=what)
    if name == "cpu":
        return torch.device("cpu")
    if not torch.cuda.is_available():
        build = f"CUDA {torch.version.cuda}" if torch.version.cuda else "a CPU-only build"
        raise ValueError(
            f"{what}={name!r}, but torch sees no CUDA device here (torch {torch.__version__}, "
            f"{build}); use {what}=cpu, or run on a machine with an NVIDIA GPU and a "
            "CUDA build of torch"
        )
    device = torch.device(name)
    if device.index is None:
        return torch.device("cuda", torch.cuda.current_device())
    count = torch.cuda.device_count()
    if device.index >= count:
        raise ValueError(
            f"{what}={name!r}, but this machine has {count} CUDA device(s) "
            f"(cuda:0 to cuda:{count - 1}); name one of them"
        )
    return device


def to_device(obj: Any, device: torch.device | str, *, non_blocking: bool = False) -> Any:
    """``obj`` with every tensor in it on ``device``.

    Moves tensors and any object with a ``to(device)`` method its own way (a PyG
    ``Data``/``Batch``, a ``PackedSequence``, a module), and walks mappings, lists, tuples
    (named ones kept) and dataclass instances; anything
    else (numbers, strings, numpy arrays) is returned as it is. Containers are rebuilt,
    the input is not changed (objects with ``to`` may move in place, as a module does).

    Parameters
    ----------
    obj : object
        A batch: a tensor or a nest of the above.
    device : torch.device or str
    non_blocking : bool
        Passed to ``Tensor.to`` (overlaps copies from pinned memory).

    Examples
    --------
    >>> out = to_device({"x": torch.ones(2), "n": 3, "pair": (torch.zeros(1), "a")}, "cpu")
    >>> out["x"].device.type, out["n"], out["pair"][1]
    ('cpu', 3, 'a')
    """
    if isinstance(obj, torch.Tensor):
        return obj.to(device, non_blocking=non_blocking)
    to = getattr(obj, "to", None)
    if callable(to) and not isinstance(obj, type):
        # an object that knows how to move itself (PyG data, PackedSequence: a named tuple
        # whose lengths must stay on the CPU) is moved its own way, not walked
        return to(device)
    if isinstance(obj, Mapping):
        items = {k: to_device(v, device, non_blocking=non_blocking) for k, v in obj.items()}
        try:
            return type(obj)(items)
        except TypeError:  # a mapping type without a dict constructor
            return items
    if isinstance(obj, tuple):
        items = [to_device(v, device, non_blocking=non_blocking) for v in obj]
        return type(obj)(*items) if hasattr(obj, "_fields") else tuple(items)
    if isinstance(obj, list):
        return [to_device(v, device, non_blocking=non_blocking) for v in obj]
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        changes = {
            f.name: to_device(getattr(obj, f.name), device, non_blocking=non_blocking)
            for f in dataclasses.fields(obj)
            if f.init
        }
        return dataclasses.replace(obj, **changes)
    return obj


def module_device(module: torch.nn.Module) -> torch.device:
    """The device of a module's first parameter (or buffer); the CPU for an empty module.

    Methods that draw data inside their loss (fresh instances every update) draw it here.
    """
    for t in module.parameters():
        return t.device
    for t in module.buffers():
        return t.device
    return torch.device("cpu")
