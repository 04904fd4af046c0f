"""FedLEASE's training: the server algorithm of its rounds (Wang et al., NeurIPS 2025).

Wang, Bian, Zhang and Xu, "Adaptive LoRA Experts Allocation and Selection for Federated
Fine-Tuning" (arXiv:2509.15087). Round 0 is the warm-up: each client trains its own
one-expert LoRA (from one shared initialisation) for ``warmup_epochs`` epochs. Then the
server clusters the clients by the mean cosine distance of their ``B`` matrices
(:func:`~sci_moe.federated.fedlease.cluster_clients`, ``M`` by silhouette), initialises
expert ``c`` as the mean of cluster ``c``'s warm-up LoRA and head (Eq. 3), and from then on
sends each client all ``M`` experts and its cluster's router; the client trains its own
expert and the router (the other experts frozen) on the shared training engine
(:class:`sci_moe.federated.Client`), and the server FedAvgs expert, head and router within
each cluster (weights ``n_i``).
"""

from __future__ import annotations

import logging

import numpy as np

from ..aggregation import fedavg
from ..strategy import ClusteredStrategy, clone_state
from .clustering import b_matrix_distances, cluster_clients

__all__ = ["FedLEASE"]

log = logging.getLogger("sci_moe.federated")


class FedLEASE(ClusteredStrategy):
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
        self.routers = [clone_state(router) for _ in range(M)]

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
        self.routers = [clone_state(s) for s in state["routers"]]
        self.silhouette = dict(state["silhouette"])
