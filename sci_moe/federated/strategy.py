"""The server-side algorithm interface: what to send each client, how to aggregate replies.

Every strategy runs ``1 + rounds`` communication rounds (:class:`RoundPlan`). Round 0 is
the warm-up: each client trains its own one-expert model (from one shared initialisation)
for ``warmup_epochs`` epochs; rounds ``1..rounds`` train ``local_epochs`` epochs each. So
all strategies see the same number of local epochs.

* :class:`Strategy`: the base class; on its own every client trains alone (local
  training, nothing shared).
* :class:`ClusteredStrategy`: the base of strategies that keep one expert per cluster of
  clients (cluster labels, cluster experts, their checkpoint state).

The algorithms of a paper subclass them (e.g. :mod:`sci_moe.federated.fedlease`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch

from .._util import check_int_attr
from .client import ModelBuilder

__all__ = ["ClusteredStrategy", "RoundPlan", "Strategy", "clone_state"]


@dataclass
class RoundPlan:
    """Number of rounds and local epochs shared by every strategy.

    Parameters
    ----------
    rounds : int
        Federated rounds after the warm-up round.
    warmup_epochs : int
        Local epochs of round 0.
    local_epochs : int
        Local epochs of every later round.
    seed : int
        Seeds the shared initial LoRA (and IFCA's choice of initial clients).
    """

    rounds: int = 10
    warmup_epochs: int = 2
    local_epochs: int = 1
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("rounds", "warmup_epochs", "local_epochs"):
            check_int_attr(self, name, 1)
        check_int_attr(self, "seed", 0)


def clone_state(state: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A detached copy of a parameter dict (what a strategy keeps of a client's reply)."""
    return {k: v.detach().clone() for k, v in state.items()}


class Strategy:
    """Base class: what to send each client, how to aggregate the replies.

    Parameters
    ----------
    spec : ModelBuilder
        The client model (shapes of the experts and routers), e.g.
        :class:`sci_moe.federated.fedlease.ModelSpec`.
    num_clients : int
    plan : RoundPlan
    """

    name = "strategy"

    def __init__(self, spec: ModelBuilder, num_clients: int, plan: RoundPlan) -> None:
        if isinstance(num_clients, bool) or not isinstance(num_clients, int) or num_clients < 2:
            raise ValueError(f"num_clients must be an int >= 2, got {num_clients!r}")
        self.spec, self.num_clients, self.plan = spec, num_clients, plan
        self.init_expert = spec.build(1, plan.seed).expert_state(0)
        self.local = [clone_state(self.init_expert) for _ in range(num_clients)]

    @property
    def num_rounds(self) -> int:
        """``1 + plan.rounds`` (warm-up included)."""
        return 1 + self.plan.rounds

    def _epochs(self, rnd: int) -> int:
        return self.plan.warmup_epochs if rnd == 0 else self.plan.local_epochs

    def _local_message(self, rnd: int, cid: int, kind: str = "train") -> dict:
        return {
            "kind": kind,
            "round": rnd,
            "experts": [self._expert_of(cid)],
            "own": 0,
            "router": None,
            "train_router": False,
            "select": False,
            "epochs": self._epochs(rnd),
        }

    def _expert_of(self, cid: int) -> dict:
        return self.local[cid]

    def messages(self, rnd: int) -> dict[int, dict]:
        """The round-``rnd`` message of every client."""
        return {c: self._local_message(rnd, c) for c in range(self.num_clients)}

    def expected(self, rnd: int, cid: int) -> tuple[dict, dict | None, int]:
        """Expected reply shapes: (expert state, router state or None, number of choices)."""
        return self.init_expert, None, 1

    def aggregate(self, rnd: int, updates: dict[int, dict]) -> None:
        """Fold the valid replies of round ``rnd`` into the server state."""
        for c, u in updates.items():
            self.local[c] = clone_state(u["expert"])

    def eval_messages(self) -> dict[int, dict]:
        """The final evaluation message of every client."""
        rnd = self.num_rounds
        return {c: self._local_message(rnd, c, "evaluate") for c in range(self.num_clients)}

    # -- checkpoints ---------------------------------------------------------------
    def state_dict(self) -> dict:
        """Plain containers of tensors (loadable with ``weights_only=True``)."""
        return {"local": self.local}

    def load_state_dict(self, state: Mapping) -> None:
        """Inverse of :meth:`state_dict`."""
        self.local = [clone_state(s) for s in state["local"]]


class ClusteredStrategy(Strategy):
    """Base of the strategies with one expert per cluster of clients.

    Attributes
    ----------
    labels : list of int or None
        Cluster of every client (``None`` until the strategy assigns them).
    experts : list of dict
        One expert state per cluster.
    """

    def __init__(self, spec, num_clients, plan):
        super().__init__(spec, num_clients, plan)
        self.labels: list[int] | None = None
        self.experts: list[dict] = []

    def state_dict(self):
        return {"local": self.local, "labels": self.labels, "experts": self.experts}

    def load_state_dict(self, state):
        super().load_state_dict(state)
        self.labels = None if state["labels"] is None else [int(v) for v in state["labels"]]
        self.experts = [clone_state(s) for s in state["experts"]]
