"""The Flower ``ServerApp`` and ``ClientApp`` of the federated strategies, and their files.

The server app runs the package's :class:`~sci_moe.federated.Server` with the strategy
saved by :func:`save_strategy` (e.g. :class:`~sci_moe.federated.fedlease.FedLEASE`: its
clustering, expert allocation and aggregation) over a :class:`FlowerEngine`; the client app
answers each message with the package's :meth:`~sci_moe.federated.Client.handle_bytes` on
the one client saved on that node by :func:`save_client`. Both are the code the in-process
:class:`~sci_moe.federated.Simulator` runs, on the same bytes, so a Flower run equals the
simulated one bit for bit (one intra-op thread per process).

Flower loads an app from a directory with a ``pyproject.toml``: :func:`write_app` writes
one (no network needed: the app's code is this installed package).

The files of :func:`save_strategy` and :func:`save_client` are pickles (a strategy and a
client hold the frozen layer as a module): load only files you wrote yourself. The
messages that cross the network are never pickles (:mod:`sci_moe.federated.messages`).
"""

from __future__ import annotations

import copy
import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

import torch
from torch import nn

from ..client import Client
from ..server import Server
from ..strategy import Strategy
from .engine import CLIENT, PAYLOAD, RECORD, FlowerEngine

__all__ = [
    "APP_MODULE",
    "RUN_CONFIG",
    "client_message",
    "load_client",
    "load_strategy",
    "make_client_app",
    "make_server_app",
    "run_server",
    "save_client",
    "save_strategy",
    "write_app",
]

log = logging.getLogger("sci_moe.federated")

#: Module name of the app in the directory :func:`write_app` writes.
APP_MODULE = "sci_moe_flower_app"

#: The run config of the server app (``flwr run ... --run-config 'key=value ...'``):
#: ``strategy-file`` (from :func:`save_strategy`), ``out`` (checkpoint and
#: ``results.json``), ``min-clients`` (clients to wait for before round 0; 0: all),
#: ``round-timeout`` (seconds per exchange; 0: wait for every node), ``join-timeout``
#: (seconds to wait for the clients), ``resume`` (continue from ``out``'s checkpoint),
#: ``stop-after`` (rounds to run in this call; 0: to the end).
RUN_CONFIG = MappingProxyType(
    {
        "strategy-file": "",
        "out": "flower_out",
        "min-clients": 0,
        "round-timeout": 600.0,
        "join-timeout": 120.0,
        "resume": False,
        "stop-after": 0,
    }
)

_STRATEGY_FORMAT = "sci-moe flower strategy v1"
_CLIENT_FORMAT = "sci-moe flower client v1"


_HOOKS = (
    "_forward_hooks",
    "_forward_hooks_with_kwargs",
    "_forward_hooks_always_called",
    "_forward_pre_hooks",
    "_forward_pre_hooks_with_kwargs",
    "_backward_hooks",
    "_backward_pre_hooks",
)


def _without_hooks(obj):
    """A deep copy of ``obj`` whose modules have no forward/backward hooks.

    ``transformers`` puts output-recording hooks (local functions, which do not pickle)
    on the layers of a model that ran; they only record, so dropping them changes no
    number.
    """
    obj = copy.deepcopy(obj)
    seen: set[int] = set()
    todo = [obj]
    while todo:
        x = todo.pop()
        if id(x) in seen:
            continue
        seen.add(id(x))
        if isinstance(x, nn.Module):
            for m in x.modules():
                for name in _HOOKS:
                    hooks = getattr(m, name, None)
                    if hooks:
                        hooks.clear()
        elif isinstance(x, dict):
            todo.extend(x.values())
        elif isinstance(x, list | tuple | set):
            todo.extend(x)
        elif hasattr(x, "__dict__") and not isinstance(x, torch.Tensor | type):
            todo.extend(vars(x).values())
    return obj


def _save(obj: dict, path: str | os.PathLike) -> Path:
    obj = _without_hooks(obj)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    torch.save(obj, tmp)
    os.replace(tmp, path)
    return path


def _load(path: str | os.PathLike, fmt: str, what: str) -> dict:
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{what} file {path} does not exist")
    try:
        obj = torch.load(path, weights_only=False)  # a pickle this operator wrote
    except Exception as err:
        raise ValueError(f"{path} is not a readable {what} file: {err}") from None
    if not isinstance(obj, dict) or obj.get("format") != fmt:
        raise ValueError(f"{path} is not a {what} file (expected format {fmt!r})")
    return obj


def save_strategy(strategy: Strategy, path: str | os.PathLike) -> Path:
    """Write a fresh strategy (its model spec, plan and options) for the server app."""
    if not isinstance(strategy, Strategy):
        raise ValueError(f"strategy must be a Strategy, got {type(strategy).__name__}")
    return _save({"format": _STRATEGY_FORMAT, "strategy": strategy}, path)


def load_strategy(path: str | os.PathLike) -> Strategy:
    """Inverse of :func:`save_strategy` (a pickle: only files you wrote)."""
    return _load(path, _STRATEGY_FORMAT, "strategy")["strategy"]


def save_client(client: Client, path: str | os.PathLike) -> Path:
    """Write one client (its id, data, model spec, local training config) for its node."""
    if not isinstance(client, Client):
        raise ValueError(f"client must be a Client, got {type(client).__name__}")
    return _save({"format": _CLIENT_FORMAT, "client": client}, path)


def load_client(path: str | os.PathLike) -> Client:
    """Inverse of :func:`save_client` (a pickle: only files you wrote)."""
    return _load(path, _CLIENT_FORMAT, "client")["client"]


def _option(cfg: Mapping, key: str, kind: type):
    v = cfg.get(key, RUN_CONFIG[key])
    if kind is float and isinstance(v, int) and not isinstance(v, bool):
        v = float(v)
    if not isinstance(v, kind) or (kind is int and isinstance(v, bool)):
        raise ValueError(f"run config {key}={v!r} must be a {kind.__name__}")
    if kind in (int, float) and v < 0:
        raise ValueError(f"run config {key}={v!r} must be >= 0")
    return v


def run_server(grid, run_config: Mapping) -> dict:
    """The server app's work: wait for the clients, run the rounds, evaluate, write results.

    Parameters
    ----------
    grid : flwr.serverapp.Grid
    run_config : mapping
        Keys of :data:`RUN_CONFIG`.

    Returns
    -------
    dict
        What ``OUT/results.json`` holds: ``history`` (per round: ``updates``,
        ``excluded`` client -> reason, byte counts, ``loss``), ``finished``, ``nodes``
        (client -> Flower node id) and, once finished, ``metrics`` (client -> test
        metrics).
    """
    path = _option(run_config, "strategy-file", str)
    if not path:
        raise ValueError("run config strategy-file is empty: pass the file of save_strategy")
    strategy = load_strategy(path)
    out = Path(_option(run_config, "out", str))
    out.mkdir(parents=True, exist_ok=True)
    ckpt = out / "checkpoint.pt"
    if _option(run_config, "resume", bool) and ckpt.exists():
        server = Server.resume(strategy, ckpt)
        log.info("resumed after round %d of %d", server.round, strategy.num_rounds)
    else:
        server = Server(strategy, checkpoint=ckpt)
    timeout = _option(run_config, "round-timeout", float)
    engine = FlowerEngine(
        grid,
        strategy.num_clients,
        round_timeout=timeout or None,
        join_timeout=_option(run_config, "join-timeout", float),
    )
    engine.wait_for_clients(_option(run_config, "min-clients", int) or strategy.num_clients)
    stop = _option(run_config, "stop-after", int)
    server.run(engine, until=server.round + stop if stop else None)
    results: dict = {
        "history": server.history,
        "finished": server.done,
        "nodes": {str(c): n for c, n in sorted(engine.nodes.items())},
    }
    if server.done:
        metrics = server.evaluate(engine)
        missing = sorted(set(range(strategy.num_clients)) - set(metrics))
        results["metrics"] = {str(c): m for c, m in metrics.items()}
        results["not_evaluated"] = {str(c): engine.reasons.get(c, "?") for c in missing}
    tmp = out / "results.json.tmp"
    tmp.write_text(json.dumps(results, indent=1, default=str))
    os.replace(tmp, out / "results.json")
    return results


def client_message(client: Client, kind: str, payload: bytes | None = None):
    """A client's answer to one Flower message: ``("hello", None)`` -> its id, else the
    reply bytes of :meth:`~sci_moe.federated.Client.handle_bytes` on ``payload``.

    Returns
    -------
    dict
        The entries of the reply's config record.
    """
    if kind == "hello":
        return {CLIENT: client.client_id}
    if payload is None:
        raise ValueError("a round message must carry a payload")
    return {PAYLOAD: client.handle_bytes(payload)}


def make_server_app():
    """The Flower ``ServerApp`` (imports ``flwr``: the ``federated`` extra)."""
    from flwr.serverapp import ServerApp

    app = ServerApp()

    @app.main()
    def main(grid, context) -> None:
        run_server(grid, context.run_config)

    return app


def make_client_app():
    """The Flower ``ClientApp``: node config ``data`` (a :func:`save_client` file) and
    optionally ``threads`` (intra-op threads, default 1)."""
    from flwr.app import ConfigRecord, Message, RecordDict
    from flwr.clientapp import ClientApp

    app = ClientApp()

    def answer(msg, context):
        cfg = context.node_config
        if "data" not in cfg:
            raise ValueError("node config has no 'data' (the file of save_client)")
        torch.set_num_threads(int(cfg.get("threads", 1)))
        client = load_client(cfg["data"])
        record = msg.content.config_records.get(RECORD)
        if record is None:
            raise ValueError(f"message without a {RECORD!r} record")
        kind = "hello" if record.get("kind") == "hello" else "round"
        reply = client_message(client, kind, record.get(PAYLOAD))
        return Message(RecordDict({RECORD: ConfigRecord(reply)}), reply_to=msg)

    app.query()(answer)
    app.train()(answer)
    return app


_PYPROJECT = """\
# A Flower app of sci-moe (written by sci_moe.federated.flower.write_app): its code is
# the installed sci-moe package, so nothing is installed or downloaded at run time.
[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "sci-moe-flower"
version = "1.0.0"
description = "sci-moe federated strategies (FedLEASE and baselines) on Flower"
license = "MIT"
dependencies = []

[tool.flwr.app]
publisher = "sci-moe"

[tool.flwr.app.components]
serverapp = "{module}:server_app"
clientapp = "{module}:client_app"

[tool.flwr.app.config]
{config}
"""

_MODULE = '''\
"""sci-moe on Flower (written by sci_moe.federated.flower.write_app)."""

from sci_moe.federated.flower import make_client_app, make_server_app

server_app = make_server_app()
client_app = make_client_app()
'''


def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return json.dumps(v)
    return repr(v)


def write_app(directory: str | os.PathLike, **config) -> Path:
    """Write the Flower app directory (``pyproject.toml`` and the app module) for ``flwr run``.

    Parameters
    ----------
    directory : path
        Created if missing; its ``pyproject.toml`` and ``sci_moe_flower_app.py`` are
        overwritten.
    **config
        Defaults of the run config (:data:`RUN_CONFIG`, ``_`` for ``-``), e.g.
        ``strategy_file="strategy.pt"``; ``flwr run --run-config`` overrides them.

    Returns
    -------
    Path
        The directory.
    """
    values = dict(RUN_CONFIG)
    for key, v in config.items():
        name = key.replace("_", "-")
        if name not in RUN_CONFIG:
            raise ValueError(f"unknown run config {name!r}; known: {sorted(RUN_CONFIG)}")
        if type(v) is not type(RUN_CONFIG[name]) and not (
            isinstance(RUN_CONFIG[name], float) and type(v) is int
        ):
            raise ValueError(f"{name} must be a {type(RUN_CONFIG[name]).__name__}, got {v!r}")
        values[name] = float(v) if isinstance(RUN_CONFIG[name], float) else v
    body = "\n".join(f"{k} = {_toml_value(v)}" for k, v in values.items())
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "pyproject.toml").write_text(_PYPROJECT.format(module=APP_MODULE, config=body))
    (directory / f"{APP_MODULE}.py").write_text(_MODULE)
    return directory
