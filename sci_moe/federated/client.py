"""A federated client: its private data, local training and evaluation, and fault injection."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from .messages import decode_message, encode_message
from .model import FedLoRAClassifier, ModelSpec

__all__ = ["Client", "ClientData", "TrainConfig"]

_FAULTS = ("drop", "nan", "malformed")


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
class TrainConfig:
    """Local training of every client.

    Parameters
    ----------
    lr : float
        Learning rate.
    batch_size : int
    optimizer : {"adam", "sgd"}
        Adam, or plain SGD with momentum 0.9 (then the warm-up ``B`` is proportional to
        the accumulated gradient instead of Adam's sign-like normalised steps).
    seed : int
        Base seed; the minibatch order of client ``i`` in round ``t`` is seeded from
        ``(seed, i, t)``, so a run is reproducible whichever engine runs the client.
    """

    lr: float = 3e-3
    batch_size: int = 16
    seed: int = 0
    optimizer: str = "adam"

    def __post_init__(self) -> None:
        if not self.lr > 0:
            raise ValueError(f"lr must be > 0, got {self.lr!r}")
        if isinstance(self.batch_size, bool) or not isinstance(self.batch_size, int):
            raise ValueError(f"batch_size must be an int, got {self.batch_size!r}")
        if self.optimizer not in ("adam", "sgd"):
            raise ValueError(f"optimizer must be 'adam' or 'sgd', got {self.optimizer!r}")
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {self.batch_size}")


@dataclass
class Client:
    """A client that answers server messages (:mod:`sci_moe.federated.messages`).

    Parameters
    ----------
    client_id : int
    data : ClientData
    spec : ModelSpec
    train : TrainConfig
    faults : dict of int to str
        Injected faults by round: ``"drop"`` (no update: the client left the round),
        ``"nan"`` (an update full of NaN) or ``"malformed"`` (a tensor of the wrong shape).
    """

    client_id: int
    data: ClientData
    spec: ModelSpec
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

    def _model(self, msg: dict) -> FedLoRAClassifier:
        experts = msg["experts"]
        select = bool(msg.get("select", False))
        model = self.spec.build(1 if select else len(experts))
        if not select:
            for e, st in enumerate(experts):
                model.load_expert_state(e, st)
            if msg.get("router") is not None:
                model.load_router_state(msg["router"])
        return model

    def _inputs(self, model: FedLoRAClassifier, split: str) -> tuple:
        d = self.data
        if split == "train":
            return model.prepare(d.hidden_train, d.mask_train)
        return model.prepare(d.hidden_test, d.mask_test)

    @torch.no_grad()
    def _select(self, msg: dict) -> tuple[FedLoRAClassifier, int]:
        """IFCA: the expert with the lowest training loss, as a one-expert model."""
        model = self.spec.build(1)
        inputs = self._inputs(model, "train")
        losses = []
        for st in msg["experts"]:
            model.load_expert_state(0, st)
            losses.append(float(F.cross_entropy(model(*inputs, own=0), self.data.y_train)))
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
        train_router = bool(msg.get("train_router", False))
        params = model.trainable_parameters(own, train_router)
        if self.train.optimizer == "adam":
            opt = torch.optim.Adam(params, lr=self.train.lr)
        else:
            opt = torch.optim.SGD(params, lr=self.train.lr, momentum=0.9)
        inputs = self._inputs(model, "train")
        y = self.data.y_train
        g = torch.Generator().manual_seed(
            (self.train.seed * 1_000_003 + self.client_id * 10_007 + rnd) % 2**63
        )
        n, bs = len(y), self.train.batch_size
        total, count = 0.0, 0
        model.train()
        for _ in range(int(msg["epochs"])):
            perm = torch.randperm(n, generator=g)
            for start in range(0, n, bs):
                idx = perm[start : start + bs]
                loss = F.cross_entropy(model(*(t[idx] for t in inputs), own=own), y[idx])
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                total += float(loss.detach()) * len(idx)
                count += len(idx)
        return {
            "kind": "update",
            "client": self.client_id,
            "n": n,
            "expert": model.expert_state(own),
            "router": model.router_state() if train_router and model.num_experts > 1 else None,
            "choice": choice,
            "loss": total / max(count, 1),
        }

    @torch.no_grad()
    def _evaluate(self, msg: dict) -> dict:
        if msg.get("select", False):
            model, choice = self._select(msg)
            own = 0
        else:
            model, choice, own = self._model(msg), 0, int(msg["own"])
        model.eval()
        logits = model(*self._inputs(model, "test"), own=own)
        acc = float((logits.argmax(1) == self.data.y_test).double().mean())
        used = model.experts_used()
        return {
            "kind": "metrics",
            "client": self.client_id,
            "accuracy": acc,
            "n_test": len(self.data.y_test),
            "choice": choice,
            "experts_used": used,
        }
