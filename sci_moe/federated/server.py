"""The server: rounds over an engine, validation of replies, checkpoints with exact resume."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from .._util import load_latest, progress_bar, save_verified
from .messages import check_update, decode_message, encode_message
from .strategy import Strategy

__all__ = ["Server"]

log = logging.getLogger("sci_moe.federated")


class Server:
    """Runs a :class:`Strategy` round by round through an engine.

    Each round the server encodes one message per client, the engine delivers them and
    returns the replies (bytes, or ``None`` for a client that did not answer; an engine
    may say why in a ``reasons`` dict, as :class:`~sci_moe.federated.flower.FlowerEngine`
    does), and every
    reply is checked (:func:`check_update`): a dropped, undecodable, malformed or non-finite
    update is excluded from that round with its reason logged (logger
    ``sci_moe.federated``) and recorded in :attr:`history`; the round completes with the
    others.

    Parameters
    ----------
    strategy : Strategy
    checkpoint : path, optional
        Written after every round (atomic, with a checksum checked when it is read, the
        previous round's file kept as ``<stem>_prev<suffix>``); resume with
        :meth:`resume`. Clients keep no state between rounds (their randomness is seeded
        by seed, client and round), so this file is the whole simulation's state and a
        resumed run ends bit-identical to an uninterrupted one.

    Attributes
    ----------
    round : int
        Rounds completed.
    history : list of dict
        Per round: ``round``, ``updates`` (client ids aggregated), ``excluded``
        (client id -> reason), ``bytes_down``, ``bytes_up``, ``loss`` (mean training loss
        of the aggregated updates, sample weighted).
    """

    def __init__(self, strategy: Strategy, checkpoint: str | os.PathLike | None = None) -> None:
        if not isinstance(strategy, Strategy):
            raise TypeError(f"strategy must be a Strategy, got {type(strategy).__name__}")
        self.strategy = strategy
        self.checkpoint = Path(checkpoint) if checkpoint is not None else None
        self.round = 0
        self.history: list[dict] = []

    @property
    def done(self) -> bool:
        """All rounds of the strategy completed."""
        return self.round >= self.strategy.num_rounds

    def step(self, engine) -> dict:
        """Run one round; returns its :attr:`history` entry."""
        if self.done:
            raise ValueError(f"all {self.strategy.num_rounds} rounds are done")
        rnd = self.round
        msgs = {c: encode_message(m) for c, m in self.strategy.messages(rnd).items()}
        replies = engine.exchange(msgs)
        valid, excluded, up = {}, {}, 0
        for c in sorted(msgs):
            raw = replies.get(c)
            if raw is None:
                why = getattr(engine, "reasons", {}).get(c, "client unreachable")
                excluded[c] = f"no reply ({why})"
                continue
            up += len(raw)
            try:
                reply = decode_message(raw)
            except ValueError as err:
                excluded[c] = str(err)
                continue
            expert_like, router_like, choices = self.strategy.expected(rnd, c)
            why = check_update(reply, c, expert_like, router_like, choices)
            if why is None:
                valid[c] = reply
            else:
                excluded[c] = why
        for c, why in excluded.items():
            log.warning("round %d: client %d excluded: %s", rnd, c, why)
        self.strategy.aggregate(rnd, valid)
        n = sum(u["n"] for u in valid.values())
        loss = sum(u["loss"] * u["n"] for u in valid.values()) / n if n else float("nan")
        entry = {
            "round": rnd,
            "updates": sorted(valid),
            "excluded": excluded,
            "bytes_down": sum(len(b) for b in msgs.values()),
            "bytes_up": up,
            "loss": loss,
        }
        self.history.append(entry)
        self.round += 1
        if self.checkpoint is not None:
            self.save(self.checkpoint)
        return entry

    def run(self, engine, until: int | None = None, progress: bool = False) -> list[dict]:
        """Run rounds up to ``until`` (default: all); returns :attr:`history`."""
        stop = self.strategy.num_rounds if until is None else min(until, self.strategy.num_rounds)
        bar = progress_bar(
            total=stop,
            initial=self.round,
            desc=self.strategy.name,
            unit="round",
            disable=not progress,
        )
        while self.round < stop:
            e = self.step(engine)
            bar.update(1)
            bar.set_postfix(loss=f"{e['loss']:.3f}")
        bar.close()
        return self.history

    def evaluate(self, engine) -> dict[int, dict]:
        """Final test metrics of every client (``accuracy``, ``experts_used``, ...)."""
        msgs = {c: encode_message(m) for c, m in self.strategy.eval_messages().items()}
        replies = engine.exchange(msgs)
        out = {}
        for c in sorted(msgs):
            raw = replies.get(c)
            try:
                msg = decode_message(raw) if raw is not None else None
            except ValueError as err:
                log.warning("client %d evaluation unreadable: %s", c, err)
                msg = None
            if msg is not None and msg.get("kind") == "metrics":
                out[c] = msg
        return out

    # -- checkpoints -----------------------------------------------------------------
    def state_dict(self) -> dict:
        """Round, history and the strategy's state (plain containers)."""
        return {
            "strategy": self.strategy.name,
            "round": self.round,
            "history": self.history,
            "state": self.strategy.state_dict(),
        }

    def save(self, path: str | os.PathLike) -> Path:
        """Write :meth:`state_dict` atomically with a checksum
        (:func:`sci_moe._util.save_verified`; the file it replaces is kept as the
        previous checkpoint)."""
        return save_verified(path, self.state_dict())

    @classmethod
    def resume(cls, strategy: Strategy, path: str | os.PathLike, **kwargs) -> Server:
        """A server continuing from a :meth:`save` file, for the same (fresh) ``strategy``.

        A damaged or missing ``path`` falls back to the previous round's file (a warning
        says so); :class:`sci_moe._util.CheckpointError` (a ``ValueError``) when neither
        is intact.
        """
        state, _, note = load_latest(path, what="federated server checkpoint")
        if note:
            log.warning("%s", note)
        if not isinstance(state, dict) or "round" not in state:
            raise ValueError(f"{path} is not a federated server checkpoint")
        if state.get("strategy") != strategy.name:
            raise ValueError(
                f"checkpoint {path} is for strategy {state.get('strategy')!r}, "
                f"not {strategy.name!r}; pass the matching strategy"
            )
        server = cls(strategy, kwargs.pop("checkpoint", path))
        strategy.load_state_dict(state["state"])
        server.round, server.history = int(state["round"]), list(state["history"])
        return server
