"""A federated client: its private data, local training and evaluation, and fault injection.

Local training runs on the training engine (:class:`sci_moe.train.Trainer`, one per
round, nothing written): the round's epochs over the client's examples, its optimiser and
schedule from the client's :class:`TrainConfig`, every generator seeded from
``(seed, client, round)``. A client keeps no state between rounds, so the server's state is
the whole simulation's (what :meth:`sci_moe.federated.Server.save` checkpoints).

Device (``TrainConfig.device``): the client trains, selects (IFCA) and evaluates with its
model, its frozen inputs and labels on that device; the states it sends back are CPU
tensors, so the server (aggregation, clustering, checkpoints) and the messages are the
same whichever device the clients used.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Protocol

import torch
import torch.nn.functional as F
from torch import nn

from .._util import module_device
from ..train import (
    DistributedContext,
    ShuffledBatches,
    Trainer,
    TrainingDiverged,
    derive_seed,
    get_rng_state,
    run_device,
    set_rng_state,
)
from ..train import TrainConfig as EngineConfig
from .messages import decode_message, encode_message

__all__ = ["Client", "ClientData", "ModelBuilder", "TrainConfig"]

_FAULTS = ("drop", "nan", "malformed")


class ModelBuilder(Protocol):
    """What clients and strategies build the client model from
    (e.g. :class:`sci_moe.federated.fedlease.ModelSpec`).

    ``build(num_experts, seed)`` returns a module with ``M`` experts whose parameters
    travel in groups: ``expert_state(e)`` / ``load_expert_state(e, state)`` (one expert's
    tensors by name), ``router_state()`` / ``load_router_state(state)``,
    ``trainable_parameters(own, train_router)``, ``prepare(hidden, mask)`` (frozen inputs),
    ``forward(*prepared, own=o)`` (logits) and ``experts_used()`` (routing statistics).
    """

    def build(self, num_experts: int = 1, seed: int = 0) -> nn.Module:
        """A model with ``num_experts`` experts, initialised from ``seed``."""
        ...


@dataclass
class ClientData:
    """One client's examples: frozen inputs of the adapted layer and integer labels.

    Parameters
    ----------
    hidden_train, hidden_test : Tensor, shape (N, L, d)
        Output of the frozen layers below the adapted one.
    mask_train, mask_test : Tensor, shape (N, L)
        1 for real tokens, 0 for padding.
    y_train, y_test : Tensor, shape (N,), int64
        Labels in ``[0, K)``.
    """

    hidden_train: torch.Tensor
    mask_train: torch.Tensor
    y_train: torch.Tensor
    hidden_test: torch.Tensor
    mask_test: torch.Tensor
    y_test: torch.Tensor

    def __post_init__(self) -> None:
        for split in ("train", "test"):
            h, m, y = (getattr(self, f"{k}_{split}") for k in ("hidden", "mask", "y"))
            if h.dim() != 3 or m.shape != h.shape[:2] or y.shape != h.shape[:1]:
                raise ValueError(
                    f"{split}: hidden must be (N, L, d), mask (N, L), y (N,); got "
                    f"{tuple(h.shape)}, {tuple(m.shape)}, {tuple(y.shape)}"
                )
            if y.dtype != torch.long:
                raise ValueError(f"y_{split} must be int64 labels, got {y.dtype}")
        if len(self.y_train) < 1:
            raise ValueError("a client needs at least one training example")

    @property
    def n_train(self) -> int:
        """Number of training examples."""
        return len(self.y_train)

    def non_finite(self) -> list[str]:
        """Which inputs hold NaN or inf (empty list: none), naming the first bad example."""
        out = []
        for split in ("train", "test"):
            for k in ("hidden", "mask"):
                t = getattr(self, f"{k}_{split}")
                bad = ~torch.isfinite(t).reshape(t.shape[0], -1).all(1)
                if bool(bad.any()):
                    first = int(bad.nonzero()[0, 0])
                    out.append(
                        f"{k}_{split} has NaN or inf in {int(bad.sum())} of {len(bad)} examples "
                        f"(the first is example {first})"
                    )
        return out


@dataclass
class TrainConfig(EngineConfig):
    """Local training of every client: the engine's options
    (:class:`sci_moe.train.TrainConfig`), applied to each local round.

    A round trains ``epochs`` (the server's message) passes over the client's examples,
    so ``steps`` is replaced by ``epochs * ceil(n / batch_size)`` in each round, and the
    learning-rate schedule (constant by default) runs over that round. The round's
    generators (data order, dropout) are seeded from ``(seed, client, round)``, so a run
    is reproducible whichever engine runs the client. No evaluation, checkpoint or budget
    applies inside a round (the server checkpoints between rounds).

    Parameters
    ----------
    optimizer : {"adam", "sgd", "adamw"}
        Adam, or SGD with ``momentum`` (0.9; then the warm-up ``B`` is proportional to the
        accumulated gradient instead of Adam's sign-like normalised steps).
    """

    lr: float = 3e-3
    batch_size: int = 16
    optimizer: str = "adam"
    schedule: str = "constant"
    warmup: float = 0.0
    grad_clip: float | None = None
    eval_every: int = 0
    restore_best: bool = False
    checkpoint_minutes: float = 0.0
    progress: bool = False

    def round_config(self, steps: int, seed: int) -> EngineConfig:
        """The engine config of one local round of ``steps`` steps (``threads=None``
        keeps the process's thread count: the caller of the simulation chose it)."""
        threads = self.threads if self.threads is not None else torch.get_num_threads()
        return dataclasses.replace(self, steps=steps, seed=seed, threads=threads)


@dataclass
class Client:
    """A client that answers server messages (:mod:`sci_moe.federated.messages`).

    Parameters
    ----------
    client_id : int
    data : ClientData
    spec : ModelBuilder
        Builds the client model (e.g. :class:`sci_moe.federated.fedlease.ModelSpec`).
    train : TrainConfig
    faults : dict of int to str
        Injected faults by round: ``"drop"`` (no update: the client left the round),
        ``"nan"`` (an update full of NaN) or ``"malformed"`` (a tensor of the wrong shape).
    """

    client_id: int
    data: ClientData
    spec: ModelBuilder
    train: TrainConfig = field(default_factory=TrainConfig)
    faults: dict[int, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for r, f in self.faults.items():
            if f not in _FAULTS:
                raise ValueError(f"fault {f!r} in round {r} must be one of {_FAULTS}")
        bad = self.data.non_finite()
        if bad:
            raise ValueError(
                f"client {self.client_id}: " + "; ".join(bad) + "; clean or drop these examples "
                "(NaN inputs would train and evaluate on NaN without a word)"
            )
        self._prepared: dict[tuple[str, int], tuple] = {}

    # -- plumbing ------------------------------------------------------------------
    def handle_bytes(self, data: bytes) -> bytes:
        """Decode a server message, answer it, encode the reply."""
        return encode_message(self.handle(decode_message(data)))

    def handle(self, msg: dict) -> dict:
        """Answer one decoded server message."""
        kind = msg["kind"]
        if kind == "train":
            fault = self.faults.get(int(msg["round"]))
            if fault == "drop":
                return {"kind": "dropped", "client": self.client_id, "reason": "injected"}
            reply = self._train(msg)
            if fault == "nan":
                reply["expert"] = {
                    k: torch.full_like(v, math.nan) for k, v in reply["expert"].items()
                }
            elif fault == "malformed":
                key = next(iter(reply["expert"]))
                reply["expert"][key] = reply["expert"][key][..., :-1]
            return reply
        if kind == "evaluate":
            return self._evaluate(msg)
        raise ValueError(f"unknown message kind {kind!r}; expected 'train' or 'evaluate'")

    def _model(self, msg: dict) -> nn.Module:
        experts = msg["experts"]
        select = bool(msg.get("select", False))
        model = self.spec.build(1 if select else len(experts))
        if not select:
            for e, st in enumerate(experts):
                model.load_expert_state(e, st)
            if msg.get("router") is not None:
                model.load_router_state(msg["router"])
        return model

    def _placed(self, model: nn.Module) -> nn.Module:
        """``model`` on the device of the client's training (``train.device``; ``None``:
        the CPU, where it was built; a client is one process's work)."""
        return model.to(run_device(self.train.device, DistributedContext()))

    def _inputs(self, model: nn.Module, split: str) -> tuple:
        """The frozen inputs of ``split``, prepared on ``model``'s device."""
        d, dev = self.data, module_device(model)
        if split == "train":
            return model.prepare(d.hidden_train.to(dev), d.mask_train.to(dev))
        return model.prepare(d.hidden_test.to(dev), d.mask_test.to(dev))

    @staticmethod
    def _to_cpu(state: dict | None) -> dict | None:
        """A state for the wire: CPU tensors (the server's aggregation and clustering, the
        messages and the checkpoints are the same whichever device trained)."""
        if state is None:
            return None
        return {k: v.cpu() for k, v in state.items()}

    @torch.no_grad()
    def _select(self, msg: dict) -> tuple[nn.Module, int]:
        """IFCA: the expert with the lowest training loss, as a one-expert model."""
        model = self._placed(self.spec.build(1))
        inputs = self._inputs(model, "train")
        y = self.data.y_train.to(module_device(model))
        losses = []
        for st in msg["experts"]:
            model.load_expert_state(0, st)
            losses.append(float(F.cross_entropy(model(*inputs, own=0), y)))
        choice = int(torch.tensor(losses).argmin())
        model.load_expert_state(0, msg["experts"][choice])
        return model, choice

    # -- work ----------------------------------------------------------------------
    def _train(self, msg: dict) -> dict:
        rnd = int(msg["round"])
        if msg.get("select", False):
            model, choice = self._select(msg)
            own = 0
        else:
            model, choice = self._model(msg), 0
            own = int(msg["own"])
        model = self._placed(model)  # before the optimiser: the engine's device
        train_router = bool(msg.get("train_router", False))
        params = model.trainable_parameters(own, train_router)
        inputs = self._inputs(model, "train")
        y = self.data.y_train.to(module_device(model))
        n, bs = len(y), self.train.batch_size
        cfg = self.train.round_config(
            steps=int(msg["epochs"]) * math.ceil(n / bs),
            seed=derive_seed(self.train.seed, self.client_id, rnd),
        )
        seen = [0.0, 0]

        def loss_fn(m, idx):
            loss = F.cross_entropy(m(*(t[idx] for t in inputs), own=own), y[idx])
            seen[0] += float(loss.detach()) * len(idx)
            seen[1] += len(idx)
            return loss

        trainer = Trainer(
            model,
            loss_fn,
            ShuffledBatches(n, bs, torch.tensor, seed=cfg.seed),
            cfg,
            param_groups=[{"params": params}],
            name=f"client {self.client_id} round {rnd}",
            # One process's work, also inside a caller's process group: no gradient
            # all-reduce with the server or other clients.
            context=DistributedContext(),
        )
        outer = get_rng_state()  # the round reseeds the global generators; restore them
        try:
            trainer.fit()
        except TrainingDiverged as err:
            return {"kind": "dropped", "client": self.client_id, "reason": str(err)}
        finally:
            set_rng_state(outer)
        return {
            "kind": "update",
            "client": self.client_id,
            "n": n,
            "expert": self._to_cpu(model.expert_state(own)),
            "router": (
                self._to_cpu(model.router_state())
                if train_router and model.num_experts > 1
                else None
            ),
            "choice": choice,
            "loss": seen[0] / max(seen[1], 1),
        }

    @torch.no_grad()
    def _evaluate(self, msg: dict) -> dict:
        if msg.get("select", False):
            model, choice = self._select(msg)
            own = 0
        else:
            model, choice, own = self._placed(self._model(msg)), 0, int(msg["own"])
        model.eval()
        logits = model(*self._inputs(model, "test"), own=own)
        y = self.data.y_test.to(logits.device)
        acc = float((logits.argmax(1) == y).double().mean())
        used = model.experts_used()
        return {
            "kind": "metrics",
            "client": self.client_id,
            "accuracy": acc,
            "n_test": len(self.data.y_test),
            "choice": choice,
            "experts_used": used,
        }
