"""The engine over Flower: ``exchange({client: bytes})`` as Flower messages through a SuperLink.

:class:`FlowerEngine` is what the :class:`~sci_moe.federated.Server` runs on inside a
Flower ``ServerApp``: the same interface as the in-process
:class:`~sci_moe.federated.Simulator` (``exchange({client: bytes}) -> {client: bytes |
None}``), with the bytes carried in Flower messages to the SuperNodes and back. Flower names
its nodes by random node ids; every node says which federated client it holds (the
``client-id`` of its node config) in answer to a ``query`` message, and the engine asks
each node it has not seen yet before every exchange, so a client whose node left and came
back (a new node id) is found again in the next round. A client with no connected node, or
whose node answers with an error or not before the round's timeout, gets ``None`` (the
server excludes it from that round and records why: :attr:`FlowerEngine.reasons`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping

__all__ = ["FlowerEngine", "flower_message"]

log = logging.getLogger("sci_moe.federated")

#: Record and key names of the payload inside a Flower message.
RECORD = "sci_moe"
PAYLOAD = "payload"
CLIENT = "client"


def flower_message(record: dict, node: int, message_type: str, group: str):
    """A Flower ``Message`` to ``node`` whose content is the config record ``record``."""
    from flwr.app import ConfigRecord, Message, RecordDict

    content = RecordDict({RECORD: ConfigRecord(record)})
    return Message(content, node, message_type, group_id=group)


def _error_text(msg) -> str:
    err = msg.error
    return f"Flower error {getattr(err, 'code', '?')}: {getattr(err, 'reason', err)}"


class FlowerEngine:
    """Server messages to Flower SuperNodes and back (inside a ``ServerApp``).

    Parameters
    ----------
    grid : flwr.serverapp.Grid
        The grid the ``ServerApp`` received.
    num_clients : int
        Federated clients ``0..num_clients-1``; a node claiming another id is ignored.
    round_timeout : float or None
        Seconds to wait for the replies of one exchange (``None``: until every node
        answered or the SuperLink reports it unavailable). Replies that come later are
        dropped: their clients are excluded from that round.
    join_timeout : float
        Seconds :meth:`wait_for_clients` waits, and seconds a new node has to say which
        client it holds.
    clock, sleep : callable
        Time source and sleep (seconds), for tests.
    make_message : callable
        ``(record, node, message_type, group) -> message`` (default
        :func:`flower_message`; tests pass stand-ins, as a Flower ``Message`` can only
        be made inside a running app).

    Attributes
    ----------
    nodes : dict of int to int
        Client id -> Flower node id of the nodes found so far.
    reasons : dict of int to str
        Why each client of the last exchange got no reply.
    """

    def __init__(
        self,
        grid,
        num_clients: int,
        round_timeout: float | None = 600.0,
        join_timeout: float = 120.0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        make_message: Callable | None = None,
    ) -> None:
        if isinstance(num_clients, bool) or not isinstance(num_clients, int) or num_clients < 1:
            raise ValueError(f"num_clients must be an int >= 1, got {num_clients!r}")
        if round_timeout is not None and not round_timeout > 0:
            raise ValueError(f"round_timeout must be > 0 or None, got {round_timeout!r}")
        if not join_timeout > 0:
            raise ValueError(f"join_timeout must be > 0, got {join_timeout!r}")
        self.grid, self.num_clients = grid, num_clients
        self.round_timeout, self.join_timeout = round_timeout, join_timeout
        self.clock, self.sleep = clock, sleep
        self.make_message = make_message or flower_message
        self.nodes: dict[int, int] = {}
        self.reasons: dict[int, str] = {}
        self._asked: set[int] = set()  # node ids that answered (or failed) the query
        self._group = 0

    # -- membership ------------------------------------------------------------------
    def refresh(self) -> dict[int, int]:
        """Forget nodes that left, ask the new ones which client they hold; returns
        :attr:`nodes`."""
        online = {int(n) for n in self.grid.get_node_ids()}
        self.nodes = {c: n for c, n in self.nodes.items() if n in online}
        self._asked &= online
        new = sorted(online - self._asked)
        if not new:
            return self.nodes
        ask = [self.make_message({"kind": "hello"}, n, "query", "hello") for n in new]
        for reply in self.grid.send_and_receive(ask, timeout=self.join_timeout):
            node = int(reply.metadata.src_node_id)
            if reply.has_error() or RECORD not in reply.content.config_records:
                why = _error_text(reply) if reply.has_error() else "no client id in the reply"
                log.warning("node %d did not say which client it holds: %s", node, why)
                continue
            cid = reply.content.config_records[RECORD].get(CLIENT)
            self._asked.add(node)
            if isinstance(cid, bool) or not isinstance(cid, int) or not 0 <= cid < self.num_clients:
                log.warning("node %d holds client %r, not in [0, %d)", node, cid, self.num_clients)
                continue
            if cid in self.nodes and self.nodes[cid] != node:
                log.warning("client %d is now on node %d (was %d)", cid, node, self.nodes[cid])
            self.nodes[cid] = node
        return self.nodes

    def wait_for_clients(self, min_clients: int) -> list[int]:
        """Wait until at least ``min_clients`` clients are connected (at most
        ``join_timeout`` seconds); returns the connected client ids.

        Raises
        ------
        ValueError
            If ``min_clients`` is out of range, or fewer clients connected in time.
        """
        if not 1 <= min_clients <= self.num_clients:
            raise ValueError(f"min_clients must be in [1, {self.num_clients}], got {min_clients}")
        end = self.clock() + self.join_timeout
        while len(self.refresh()) < min_clients:
            if self.clock() >= end:
                raise ValueError(
                    f"only {len(self.nodes)} of the {min_clients} clients needed connected "
                    f"within {self.join_timeout} s (clients {sorted(self.nodes)}); start "
                    "more SuperNodes or lower min-clients"
                )
            self.sleep(1.0)
        return sorted(self.nodes)

    # -- the engine interface --------------------------------------------------------
    def exchange(self, messages: Mapping[int, bytes]) -> dict[int, bytes | None]:
        """Send every message to its client's node; replies by client (``None``: no
        usable reply, the reason in :attr:`reasons`)."""
        self.refresh()
        self._group += 1
        out: dict[int, bytes | None] = {c: None for c in messages}
        self.reasons = {}
        sent, by_node = [], {}
        for c, payload in sorted(messages.items()):
            node = self.nodes.get(c)
            if node is None:
                self.reasons[c] = "not connected: no SuperNode holds this client"
                continue
            sent.append(self.make_message({PAYLOAD: payload}, node, "train", str(self._group)))
            by_node[node] = c
        replies = self.grid.send_and_receive(sent, timeout=self.round_timeout) if sent else []
        for reply in replies:
            c = by_node.get(int(reply.metadata.src_node_id))
            if c is None:  # an error the SuperLink made: match it by the message it answers
                c = next(
                    (
                        by_node[m.metadata.dst_node_id]
                        for m in sent
                        if m.metadata.message_id == reply.metadata.reply_to_message_id
                    ),
                    None,
                )
            if c is None:
                continue
            if reply.has_error():
                self.reasons[c] = _error_text(reply)
                continue
            record = reply.content.config_records.get(RECORD)
            payload = None if record is None else record.get(PAYLOAD)
            if isinstance(payload, bytes):
                out[c] = payload
            else:
                self.reasons[c] = "reply without a payload"
        for c in by_node.values():
            if out[c] is None and c not in self.reasons:
                self.reasons[c] = f"no reply within the round timeout ({self.round_timeout} s)"
        return out
