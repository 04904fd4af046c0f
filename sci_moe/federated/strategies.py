"""Server-side algorithms: FedLEASE and the baselines FedIT, local LoRA and IFCA.

Every strategy runs ``1 + rounds`` communication rounds. Round 0 is the warm-up: each
client trains its own one-expert LoRA (from one shared initialisation) for
``warmup_epochs`` epochs; rounds ``1..rounds`` train ``local_epochs`` epochs each. So all
methods see the same number of local epochs.

* :class:`FedLEASE` (Wang et al., NeurIPS 2025, arXiv:2509.15087): after the warm-up the
  server clusters the clients by the mean cosine distance of their ``B`` matrices
  (:func:`cluster_clients`, ``M`` by silhouette), initialises expert ``c`` as the mean of
  cluster ``c``'s warm-up LoRA and head (Eq. 3), and from then on sends each client all
  ``M`` experts and its cluster's router; the client trains its own expert and the router
  (the other experts frozen) and the server FedAvgs expert, head and router within each
  cluster (weights ``n_i``).
* :class:`FedIT`: one LoRA and head shared by all clients, FedAvg every round (after the
  same warm-up round, which it aggregates like any other round).
* :class:`LocalLoRA`: every client trains its own LoRA and head, nothing is shared.
* :class:`IFCA` (Ghosh et al., NeurIPS 2020): ``K`` cluster models initialised from the
  warm-up models of ``K`` random clients; each round every client picks the model with the
  lowest training loss, trains it, and the server FedAvgs each model over the clients that
  picked it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import torch

from .aggregation import fedavg
from .clustering import b_matrix_distances, cluster_clients
from .model import ModelSpec

__all__ = ["IFCA", "FedIT", "FedLEASE", "LocalLoRA", "RoundPlan", "Strategy"]

log = logging.getLogger("sci_moe.federated")


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
        for name in ("rounds", "warmup_epochs", "local_epochs", "seed"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < (1 if name != "seed" else 0):
                raise ValueError(f"{name} must be an int >= {int(name != 'seed')}, got {v!r}")


def _clone(state: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in state.items()}


class Strategy:
    """Base class: what to send each client, how to aggregate the replies.

    Parameters
    ----------
    spec : ModelSpec
        The client model (shapes of the experts and routers).
    num_clients : int
    plan : RoundPlan
    """

    name = "strategy"

    def __init__(self, spec: ModelSpec, num_clients: int, plan: RoundPlan) -> None:
        if isinstance(num_clients, bool) or not isinstance(num_clients, int) or num_clients < 2:
            raise ValueError(f"num_clients must be an int >= 2, got {num_clients!r}")
        self.spec, self.num_clients, self.plan = spec, num_clients, plan
        self.init_expert = spec.build(1, plan.seed).expert_state(0)
        self.local = [_clone(self.init_expert) for _ in range(num_clients)]

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
            self.local[c] = _clone(u["expert"])

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
        self.local = [_clone(s) for s in state["local"]]


class LocalLoRA(Strategy):
    """Per-client LoRA: every client trains alone (the no-communication baseline)."""

    name = "local"


class FedIT(Strategy):
    """One LoRA and head shared by all clients, FedAvg-ed every round (Zhang et al. 2024)."""

    name = "fedit"

    def __init__(self, spec: ModelSpec, num_clients: int, plan: RoundPlan) -> None:
        super().__init__(spec, num_clients, plan)
        self.glob = _clone(self.init_expert)
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
        self.glob = _clone(state["global"])


class _Clustered(Strategy):
    """Shared machinery of the two clustered strategies (labels + cluster experts)."""

    def __init__(self, spec, num_clients, plan):
        super().__init__(spec, num_clients, plan)
        self.labels: list[int] | None = None
        self.experts: list[dict] = []

    def state_dict(self):
        return {"local": self.local, "labels": self.labels, "experts": self.experts}

    def load_state_dict(self, state):
        super().load_state_dict(state)
        self.labels = None if state["labels"] is None else [int(v) for v in state["labels"]]
        self.experts = [_clone(s) for s in state["experts"]]


class FedLEASE(_Clustered):
    """FedLEASE: clustered LoRA experts with the slot-expanded adaptive top-M router.

    Parameters
    ----------
    spec, num_clients, plan
        See :class:`Strategy`.
    max_clusters : int
        ``M_max`` of the silhouette search.
    linkage : str
        Agglomerative linkage on the precomputed distances.
    fixed_labels : sequence of int, optional
        Use these clusters instead of the ``B``-matrix clustering (an oracle ablation:
        e.g. the true tasks); experts are still initialised from the cluster means.
    """

    name = "fedlease"

    def __init__(
        self,
        spec,
        num_clients,
        plan,
        max_clusters: int = 8,
        linkage: str = "average",
        fixed_labels=None,
    ):
        super().__init__(spec, num_clients, plan)
        if fixed_labels is not None:
            fixed_labels = [int(v) for v in fixed_labels]
            if len(fixed_labels) != num_clients or sorted(set(fixed_labels)) != list(
                range(max(fixed_labels) + 1)
            ):
                raise ValueError(
                    "fixed_labels must give one cluster per client, numbered 0..M-1 "
                    f"without gaps; got {fixed_labels}"
                )
        self.fixed_labels = fixed_labels
        if isinstance(max_clusters, bool) or not isinstance(max_clusters, int):
            raise ValueError(f"max_clusters must be an int, got {max_clusters!r}")
        if max_clusters < 2:
            raise ValueError(f"max_clusters must be >= 2, got {max_clusters}")
        self.max_clusters, self.linkage = max_clusters, linkage
        self.routers: list[dict] = []
        self.silhouette: dict[int, float] = {}

    @property
    def num_experts(self) -> int:
        """``M`` (0 before the clustering)."""
        return len(self.experts)

    def _cluster_message(self, rnd, cid, kind="train"):
        c = self.labels[cid]
        return {
            "kind": kind,
            "round": rnd,
            "experts": self.experts,
            "own": c,
            "router": self.routers[c],
            "train_router": True,
            "select": False,
            "epochs": self._epochs(rnd),
        }

    def messages(self, rnd):
        if self.labels is None:
            return super().messages(rnd)
        return {c: self._cluster_message(rnd, c) for c in range(self.num_clients)}

    def expected(self, rnd, cid):
        if self.labels is None:
            return self.init_expert, None, 1
        return self.init_expert, self.routers[self.labels[cid]], 1

    def aggregate(self, rnd, updates):
        if self.labels is None:
            super().aggregate(rnd, updates)
            self._cluster(sorted(updates))
            return
        for c in range(self.num_experts):
            members = [i for i in sorted(updates) if self.labels[i] == c]
            if not members:
                log.info("round %d: no valid update for expert %d; kept unchanged", rnd, c)
                continue
            n = [updates[i]["n"] for i in members]
            self.experts[c] = fedavg([updates[i]["expert"] for i in members], n)
            self.routers[c] = fedavg([updates[i]["router"] for i in members], n)

    def _cluster(self, warm: list[int]) -> None:
        """Clusters from the warm-up ``B`` matrices; experts from cluster means (Eq. 2-3)."""
        if len(warm) < 3:
            raise ValueError(
                f"only {len(warm)} clients finished the warm-up; FedLEASE needs >= 3 to cluster"
            )
        names = [k for k in self.init_expert if k.endswith(".lora_b")]
        bs = [{k: self.local[i][k] for k in names} for i in warm]
        labels = np.full(self.num_clients, -1)
        if self.fixed_labels is None:
            res = cluster_clients(b_matrix_distances(bs), self.max_clusters, self.linkage)
            labels[warm] = res.labels
            self.silhouette = res.silhouette
            M = res.num_clusters
        else:
            labels[warm] = np.asarray(self.fixed_labels)[warm]
            M = max(self.fixed_labels) + 1
            if len(set(labels[warm].tolist())) < M:
                raise ValueError("a fixed cluster has no client that finished the warm-up")
        sizes = np.bincount(labels[warm], minlength=M)
        for i in np.flatnonzero(labels < 0):
            labels[i] = int(sizes.argmax())
            log.warning("client %d missed the warm-up; assigned to the largest cluster", i)
        self.labels = [int(v) for v in labels]
        self.experts = []
        for c in range(M):
            members = [i for i in warm if labels[i] == c]
            self.experts.append(fedavg([self.local[i] for i in members], [1] * len(members)))
        router = self.spec.build(M, self.plan.seed).router_state()
        self.routers = [_clone(router) for _ in range(M)]

    def eval_messages(self):
        rnd = self.num_rounds
        return {c: self._cluster_message(rnd, c, "evaluate") for c in range(self.num_clients)}

    def state_dict(self):
        out = super().state_dict()
        out["routers"] = self.routers
        out["silhouette"] = {int(k): float(v) for k, v in self.silhouette.items()}
        return out

    def load_state_dict(self, state):
        super().load_state_dict(state)
        self.routers = [_clone(s) for s in state["routers"]]
        self.silhouette = dict(state["silhouette"])


class IFCA(_Clustered):
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
            self.experts = [_clone(self.local[warm[p]]) for p in sorted(pick)]
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
