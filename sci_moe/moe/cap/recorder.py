"""Record which experts a sci-moe model activates, and how long its forward passes take."""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from ..layer import MoE, MoEInfo
from ..routed import RoutedPath, routed_paths
from ..routing import Routing
from .hardware import Hardware
from .metrics import CapReport, cap_metrics
from .model import ModelSpec

__all__ = ["CapRecorder", "CapStep", "used_experts"]


def used_experts(routing: Routing) -> torch.Tensor:
    """Which experts serve at least one token of ``routing``: :math:`\\mathbb{1}[i]`.

    Dropped slots (index ``E``, capacity overflow or expert-choice padding) do not count.

    Parameters
    ----------
    routing : Routing

    Returns
    -------
    Tensor, shape (E,), bool
    """
    return _expert_counts(routing) > 0


def _expert_counts(routing: Routing) -> torch.Tensor:
    E = routing.num_experts
    flat = routing.indices.reshape(-1)
    return torch.bincount(flat, minlength=E + 1)[:E]


@dataclass
class CapStep:
    """One recorded forward pass of the model.

    Attributes
    ----------
    latency : float
        Wall time of the forward pass, s (device synchronised before and after on CUDA).
    tokens : int
        Tokens routed by the first MoE layer called in the pass.
    counts : list of ndarray or None
        Per routed path (in :attr:`CapRecorder.paths` order): tokens routed to each expert,
        shape ``(E,)``, int64, summed over the layer's calls in the pass; ``None`` if the
        layer was not called.
    """

    latency: float
    tokens: int
    counts: list[np.ndarray | None]

    def activated(self) -> np.ndarray:
        """Activated experts per MoE layer, shape ``(n_moe,)`` (0 for uncalled layers)."""
        return np.array([0 if c is None else int((c > 0).sum()) for c in self.counts], float)


class CapRecorder:
    """Record expert activation and latency of a model's forward passes.

    Inside ``with CapRecorder(model) as rec:``, every call of ``model`` is one step:
    its wall latency is measured (``torch.cuda.synchronize`` before and after when the
    model is on a GPU) and, for every routed path (:func:`~sci_moe.moe.routed_paths`:
    each :class:`~sci_moe.moe.MoE` layer and each path of a field layer that exposes
    ``routed_paths()``, e.g. SPiCE's scalar and vector routers or a diffusion time
    mixture), the experts that served at least one token. For an ``MoE`` the routing is
    read from its ``routing=`` argument when one is passed, else from the
    :class:`Routing` its router returns; for other paths from their router's output.
    :meth:`report` turns the run into S-MBU and S-MFU (MoE-CAP Eqs. 4-5).

    Parameters
    ----------
    model : nn.Module
        Holds one or more routed layers (may itself be one).
    spec : ModelSpec, optional
        Default :meth:`ModelSpec.from_module(model) <ModelSpec.from_module>`; a given
        spec must list the model's routed paths in :func:`~sci_moe.moe.routed_paths`
        order.

    Attributes
    ----------
    paths : list of RoutedPath
        What is recorded, one entry of :attr:`CapStep.counts` each.
    layers : list of nn.Module
        The owner of each path.
    synchronize : bool
        Synchronise CUDA around each pass (on by default; without it GPU latencies are
        launch times).

    Examples
    --------
    >>> model = torch.nn.Sequential(MoE(d_model=16, num_experts=8, top_k=2))
    >>> with CapRecorder(model) as rec:
    ...     _ = model(torch.randn(4, 16))
    >>> rec.activated().shape
    (1, 1)
    """

    def __init__(
        self, model: nn.Module, spec: ModelSpec | None = None, *, synchronize: bool = True
    ) -> None:
        if not isinstance(model, nn.Module):
            raise TypeError(f"model must be an nn.Module, got {type(model).__name__}")
        self.model = model
        self.paths: list[RoutedPath] = routed_paths(model)
        if not self.paths:
            raise ValueError(
                f"{type(model).__name__} contains no sci_moe.moe.MoE layer nor any layer "
                "with routed_paths(); nothing to record"
            )
        self.layers = [p.owner for p in self.paths]
        self.spec = ModelSpec.from_module(model) if spec is None else spec
        spec_e = [s.num_experts for s in self.spec.moe_layers]
        if spec_e != [p.num_experts for p in self.paths]:
            raise ValueError(
                f"spec {self.spec.name!r} does not match the model's {len(self.layers)} MoE "
                "layers (count or num_experts); omit spec to describe the model itself"
            )
        self.synchronize = synchronize
        self.steps: list[CapStep] = []
        self.untimed_calls = 0
        self._handles: list = []
        self._depth = 0
        self._t0 = 0.0
        self._calls: list[tuple[int, torch.Tensor, int]] = []
        self._router_out: dict[int, Routing] = {}
        self._device = None

    # -- hooks ----------------------------------------------------------------------

    def _sync(self) -> None:
        if self.synchronize and self._device is not None and self._device.type == "cuda":
            torch.cuda.synchronize(self._device)

    def _model_pre(self, module, args) -> None:
        self._depth += 1
        if self._depth == 1:
            self._calls = []
            self._sync()
            self._t0 = time.perf_counter()

    def _model_post(self, module, args, output) -> None:
        self._depth -= 1
        if self._depth:
            return
        self._sync()
        latency = time.perf_counter() - self._t0
        counts: list[np.ndarray | None] = [None] * len(self.paths)
        tokens = 0
        for i, (layer_idx, c, t) in enumerate(self._calls):
            c = c.cpu().numpy().astype(np.int64)
            prev = counts[layer_idx]
            counts[layer_idx] = c if prev is None else prev + c
            if i == 0:
                tokens = t
        self.steps.append(CapStep(latency, tokens, counts))
        self._calls = []

    def _router_post(self, router, args, output) -> None:
        if isinstance(output, Routing):
            self._router_out[id(router)] = output

    def _path_post(self, path_idx: int):
        def hook(router, args, output) -> None:
            if isinstance(output, Routing):
                self._record(path_idx, output)

        return hook

    def _record(self, path_idx: int, routing: Routing) -> None:
        if self._depth == 0:
            self.untimed_calls += 1
            return
        with torch.no_grad():
            counts = _expert_counts(routing)
        self._calls.append((path_idx, counts, routing.num_tokens))

    def _layer_pre(self, layer, args, kwargs) -> None:
        self._router_out.pop(id(layer.router), None)

    def _layer_post(self, layer_idx: int):
        def hook(layer, args, kwargs, output) -> None:
            routing = kwargs.get("routing")
            if routing is None and len(args) > 1 and isinstance(args[1], Routing):
                routing = args[1]
            if routing is None and isinstance(output, tuple) and len(output) == 2:
                if isinstance(output[1], MoEInfo):
                    routing = output[1].routing
            if routing is None:
                routing = self._router_out.pop(id(layer.router), None)
            if routing is None:
                return
            self._record(layer_idx, routing)

        return hook

    # -- context manager ------------------------------------------------------------

    def __enter__(self) -> CapRecorder:
        if self._handles:
            raise RuntimeError("this CapRecorder is already recording")
        param = next(self.model.parameters(), None)
        self._device = None if param is None else param.device
        routers = {}
        for i, path in enumerate(self.paths):
            layer = path.owner
            if isinstance(layer, MoE):
                routers[id(layer.router)] = layer.router
                hook = layer.register_forward_pre_hook(self._layer_pre, with_kwargs=True)
                self._handles.append(hook)
                hook = layer.register_forward_hook(self._layer_post(i), with_kwargs=True)
                self._handles.append(hook)
            elif path.router is not None:
                self._handles.append(path.router.register_forward_hook(self._path_post(i)))
        for router in routers.values():
            self._handles.append(router.register_forward_hook(self._router_post))
        # Registered after the layers' hooks: when the model is itself an MoE layer its
        # post-hook then runs after the layer's.
        self._handles.append(self.model.register_forward_pre_hook(self._model_pre))
        self._handles.append(self.model.register_forward_hook(self._model_post))
        return self

    def __exit__(self, *exc) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []
        self._depth = 0
        self._router_out.clear()

    # -- results ----------------------------------------------------------------------

    def activated(self) -> np.ndarray:
        """Activated experts per step and routed path, shape ``(n_steps, n_paths)``."""
        return np.array([s.activated() for s in self.steps]).reshape(
            len(self.steps), len(self.layers)
        )

    def latencies(self) -> np.ndarray:
        """Latency of each recorded pass, shape ``(n_steps,)``, s."""
        return np.array([s.latency for s in self.steps], dtype=np.float64)

    def report(
        self,
        hardware: Hardware | str,
        *,
        batch_size: int | None = None,
        seq_len: float = 0,
        skip: int = 0,
        **kwargs,
    ) -> CapReport:
        """S-MBU and S-MFU of the recorded run.

        Uses the mean latency as ``TPOT``, the mean tokens per pass as ``T`` and the mean
        activated experts per layer; since bytes and FLOPs are linear in these, the
        result equals total bytes (FLOPs) over total time.

        Parameters
        ----------
        hardware : Hardware or str
        batch_size : int, optional
            Sequences per pass for the KV-cache term (default: tokens per pass, as when
            decoding one token per sequence).
        seq_len : float
            Context length per sequence for the KV cache and attention scores (0 for
            models without attention).
        skip : int
            Leading passes to leave out (warm-up).
        **kwargs
            ``dtype``, ``kv_dtype``, ``num_devices``, ``expert_count``, ``lm_head`` of
            :func:`~sci_moe.moe.cap.cap_metrics`.

        Returns
        -------
        CapReport
        """
        if not isinstance(skip, int) or skip < 0:
            raise ValueError(f"skip must be an integer >= 0, got {skip!r}")
        steps = self.steps[skip:]
        if not steps:
            raise ValueError(
                f"no forward pass recorded after skipping {skip}; call the model inside "
                "`with CapRecorder(model):` (calls of the MoE layers alone are not timed)"
            )
        tokens = float(np.mean([s.tokens for s in steps]))
        latency = float(np.mean([s.latency for s in steps]))
        counts = np.mean([s.activated() for s in steps], axis=0)
        if batch_size is None:
            batch_size = max(1, round(tokens))
        rep = cap_metrics(
            self.spec,
            hardware,
            batch_size=batch_size,
            seq_len=seq_len,
            tpot=latency,
            tokens=tokens,
            activated=counts,
            **kwargs,
        )
        return dataclasses.replace(rep, activated_mode="recorded", steps=len(steps))
