"""The in-process engine; the interface every engine has: ``exchange({client: bytes}) ->
{client: bytes | None}``.

* :class:`Simulator`: the clients are objects in this process, called one after the other
  (deterministic; for tests, benchmarks and experiments).
* Across processes and machines the same server and client code runs on Flower
  (:class:`sci_moe.federated.flower.FlowerEngine` in a ``ServerApp``, the clients in
  ``ClientApp`` s on SuperNodes): the same bytes through the same client code, so with one
  intra-op thread per process the two give bit-identical results.

The earlier multi-process engine (one forked process per client, ``torch.distributed``
gloo over loopback) was retired for Flower: it could not leave one machine (loopback
address, client data pickled into forked processes), had a fixed client count, a dead
client broke the process group, and it had no TLS.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .client import Client

__all__ = ["Simulator"]


class Simulator:
    """In-process engine: ``exchange`` calls each client's ``handle_bytes`` in id order.

    Parameters
    ----------
    clients : sequence of Client
        ``clients[i].client_id`` must be ``i``.
    """

    def __init__(self, clients: Sequence[Client]) -> None:
        self.clients = list(clients)
        for i, c in enumerate(self.clients):
            if c.client_id != i:
                raise ValueError(f"clients[{i}] has client_id {c.client_id}; order them by id")

    def exchange(self, messages: Mapping[int, bytes]) -> dict[int, bytes | None]:
        """Deliver every message and collect the replies."""
        return {c: self.clients[c].handle_bytes(b) for c, b in sorted(messages.items())}

    def __enter__(self) -> Simulator:
        return self

    def __exit__(self, *exc) -> None:
        return None
