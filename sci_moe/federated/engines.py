"""Two engines behind one interface: ``exchange({client: bytes}) -> {client: bytes | None}``.

* :class:`Simulator`: the clients are objects in this process, called one after the other
  (deterministic; for tests and benchmarks).
* :class:`ProcessEngine`: every client runs in its own process; messages travel over
  loopback TCP with ``torch.distributed`` point-to-point ``send``/``recv`` on the ``gloo``
  backend (rank 0 = server, rank ``i + 1`` = client ``i``). The clients run their rounds
  in parallel.

Both engines move the same bytes through the same client code, so with one intra-op
thread per process they give bit-identical results. (Flower was checked as an optional
engine and not used: see the federated docs page.)
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping, Sequence
from datetime import timedelta

import torch

from .client import Client

__all__ = ["ProcessEngine", "Simulator"]


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


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _send_bytes(data: bytes, dst: int) -> None:
    import torch.distributed as dist

    payload = (
        torch.frombuffer(bytearray(data), dtype=torch.uint8)
        if data
        else torch.empty(0, dtype=torch.uint8)
    )
    dist.send(torch.tensor([len(data)], dtype=torch.int64), dst)
    if len(data):
        dist.send(payload, dst)


def _recv_bytes(src: int) -> bytes:
    import torch.distributed as dist

    n = torch.zeros(1, dtype=torch.int64)
    dist.recv(n, src)
    buf = torch.empty(int(n), dtype=torch.uint8)
    if int(n):
        dist.recv(buf, src)
    return buf.numpy().tobytes()


_STOP = b""


def _client_main(rank: int, world: int, port: int, client: Client, threads: int, timeout_s):
    """Client process: receive a message, answer it, until the empty stop message."""
    import torch.distributed as dist

    torch.set_num_threads(threads)
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world,
        timeout=timedelta(seconds=timeout_s),
    )
    try:
        while True:
            msg = _recv_bytes(0)
            if msg == _STOP:
                break
            _send_bytes(client.handle_bytes(msg), 0)
    finally:
        dist.destroy_process_group()


class ProcessEngine:
    """Clients as separate processes, messages over loopback with ``torch.distributed`` (gloo).

    Use as a context manager: entering starts one process per client (each gets a pickled
    copy of its :class:`Client`) and joins the process group as rank 0; leaving sends
    every client the stop message and joins them.

    Parameters
    ----------
    clients : sequence of Client
    threads : int
        ``torch.set_num_threads`` in every process (1 gives results identical to the
        :class:`Simulator` run with one thread).
    timeout_s : float
        Process-group timeout (a client that never answers fails the round after it).
    start_method : {"forkserver", "spawn"}
        ``"forkserver"`` (default on Linux) imports torch and :mod:`sci_moe.federated` once
        in a server process and forks the clients from it (fast start); ``"spawn"``
        starts each client from a fresh interpreter (portable).

    Examples
    --------
    ``with ProcessEngine(clients) as engine: server.run(engine)``
    """

    def __init__(
        self,
        clients: Sequence[Client],
        threads: int = 1,
        timeout_s: float = 300.0,
        start_method: str | None = None,
    ):
        self.clients = list(clients)
        for i, c in enumerate(self.clients):
            if c.client_id != i:
                raise ValueError(f"clients[{i}] has client_id {c.client_id}; order them by id")
        if threads < 1:
            raise ValueError(f"threads must be >= 1, got {threads}")
        import multiprocessing

        if start_method is None:
            available = multiprocessing.get_all_start_methods()
            start_method = "forkserver" if "forkserver" in available else "spawn"
        if start_method not in ("forkserver", "spawn"):
            raise ValueError(f"start_method must be 'forkserver' or 'spawn', got {start_method!r}")
        self.threads, self.timeout_s, self.start_method = threads, timeout_s, start_method
        self._procs: list = []
        self._open = False

    def __enter__(self) -> ProcessEngine:
        import torch.distributed as dist
        import torch.multiprocessing as mp

        if dist.is_initialized():
            raise ValueError("a torch.distributed process group is already active here")
        port = _free_port()
        world = len(self.clients) + 1
        ctx = mp.get_context(self.start_method)
        if self.start_method == "forkserver":
            ctx.set_forkserver_preload(["torch", "sci_moe.federated"])
        env_threads = os.environ.get("OMP_NUM_THREADS")
        os.environ["OMP_NUM_THREADS"] = str(self.threads)
        try:
            for i, c in enumerate(self.clients):
                p = ctx.Process(
                    target=_client_main,
                    args=(i + 1, world, port, c, self.threads, self.timeout_s),
                    daemon=True,
                )
                p.start()
                self._procs.append(p)
        finally:
            if env_threads is None:
                os.environ.pop("OMP_NUM_THREADS", None)
            else:
                os.environ["OMP_NUM_THREADS"] = env_threads
        dist.init_process_group(
            "gloo",
            init_method=f"tcp://127.0.0.1:{port}",
            rank=0,
            world_size=world,
            timeout=timedelta(seconds=self.timeout_s),
        )
        self._open = True
        return self

    def exchange(self, messages: Mapping[int, bytes]) -> dict[int, bytes | None]:
        """Send every message, then receive every reply (the clients work in parallel)."""
        if not self._open:
            raise ValueError("use the ProcessEngine inside a 'with' block")
        for c, b in sorted(messages.items()):
            if not b:
                raise ValueError(f"message to client {c} is empty (reserved for stop)")
            _send_bytes(b, c + 1)
        return {c: _recv_bytes(c + 1) for c in sorted(messages)}

    def __exit__(self, *exc) -> None:
        import torch.distributed as dist

        if self._open:
            try:
                for i in range(len(self.clients)):
                    _send_bytes(_STOP, i + 1)
            finally:
                dist.destroy_process_group()
                self._open = False
        for p in self._procs:
            p.join(timeout=30)
            if p.is_alive():
                p.terminate()
        self._procs = []
