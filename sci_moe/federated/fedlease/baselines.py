"""FedLEASE's baselines: local LoRA, FedIT and IFCA, on the same rounds as FedLEASE.

Every strategy runs one warm-up round (each client trains its own one-expert LoRA from
one shared initialisation) and then ``plan.rounds`` rounds (:class:`~sci_moe.federated.RoundPlan`),
so all methods see the same number of local epochs.

* :class:`LocalLoRA`: every client trains its own LoRA and head, nothing is shared.
* :class:`FedIT` (Zhang et al., ICASSP 2024): one LoRA and head shared by all clients,
  FedAvg every round (after the same warm-up round, which it aggregates like any other
  round).
* :class:`IFCA` (Ghosh et al., NeurIPS 2020): ``K`` cluster models initialised from the
  warm-up models of ``K`` random clients; each round every client picks the model with
  the lowest training loss, trains it, and the server FedAvgs each model over the clients
  that picked it.
"""

from __future__ import annotations

import torch

from ..aggregation import fedavg
from ..client import ModelBuilder
from ..strategy import ClusteredStrategy, RoundPlan, Strategy, clone_state

__all__ = ["IFCA", "FedIT", "LocalLoRA"]


class LocalLoRA(Strategy):
    """Per-client LoRA: every client trains alone (the no-communication baseline)."""

    name = "local"


class FedIT(Strategy):
    """One LoRA and head shared by all clients, FedAvg-ed every round (Zhang et al. 2024)."""

    name = "fedit"

    def __init__(self, spec: ModelBuilder, num_clients: int, plan: RoundPlan) -> None:
        super().__init__(spec, num_clients, plan)
        self.glob = clone_state(self.init_expert)
        self.local = []

    def _expert_of(self, cid):
        return self.glob

    def aggregate(self, rnd, updates):
        if updates:
            cs = sorted(updates)
            self.glob = fedavg([updates[c]["expert"] for c in cs], [updates[c]["n"] for c in cs])

    def state_dict(self):
        return {"global": self.glob}

    def load_state_dict(self, state):
        self.glob = clone_state(state["global"])


class IFCA(ClusteredStrategy):
    """Iterative federated clustering: clients pick the cluster model of least loss.

    Parameters
    ----------
    spec, num_clients, plan
        See :class:`Strategy`.
    num_clusters : int
        ``K`` (IFCA needs it given; the benchmark gives the true number of tasks).
    """

    name = "ifca"

    def __init__(self, spec, num_clients, plan, num_clusters: int = 4):
        super().__init__(spec, num_clients, plan)
        if isinstance(num_clusters, bool) or not isinstance(num_clusters, int):
            raise ValueError(f"num_clusters must be an int, got {num_clusters!r}")
        if not 1 <= num_clusters <= num_clients:
            raise ValueError(f"num_clusters must be in [1, {num_clients}], got {num_clusters}")
        self.num_clusters = num_clusters

    def _select_message(self, rnd, kind="train"):
        return {
            "kind": kind,
            "round": rnd,
            "experts": self.experts,
            "own": 0,
            "router": None,
            "train_router": False,
            "select": True,
            "epochs": self._epochs(rnd),
        }

    def messages(self, rnd):
        if not self.experts:
            return super().messages(rnd)
        return {c: self._select_message(rnd) for c in range(self.num_clients)}

    def expected(self, rnd, cid):
        return self.init_expert, None, max(1, len(self.experts))

    def aggregate(self, rnd, updates):
        if not self.experts:
            super().aggregate(rnd, updates)
            warm = sorted(updates)
            if len(warm) < self.num_clusters:
                raise ValueError(
                    f"only {len(warm)} clients finished the warm-up; IFCA needs "
                    f">= {self.num_clusters}"
                )
            g = torch.Generator().manual_seed(self.plan.seed)
            pick = torch.randperm(len(warm), generator=g)[: self.num_clusters].tolist()
            self.experts = [clone_state(self.local[warm[p]]) for p in sorted(pick)]
            return
        labels = list(self.labels) if self.labels is not None else [-1] * self.num_clients
        for i, u in updates.items():
            labels[i] = int(u["choice"])
        self.labels = labels
        for k in range(len(self.experts)):
            members = [i for i in sorted(updates) if updates[i]["choice"] == k]
            if members:
                n = [updates[i]["n"] for i in members]
                self.experts[k] = fedavg([updates[i]["expert"] for i in members], n)

    def eval_messages(self):
        return {
            c: self._select_message(self.num_rounds, "evaluate") for c in range(self.num_clients)
        }
