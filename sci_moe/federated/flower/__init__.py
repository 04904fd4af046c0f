"""The federated strategies on Flower: a ``ServerApp`` and ``ClientApp`` over the package code.

A Flower deployment of the same algorithms the in-process
:class:`~sci_moe.federated.Simulator` runs: the server app runs
:class:`~sci_moe.federated.Server` with a saved strategy (e.g.
:class:`~sci_moe.federated.fedlease.FedLEASE`) over a :class:`FlowerEngine`, and each
SuperNode's client app answers with :meth:`~sci_moe.federated.Client.handle_bytes` on its
own client, which is the only data that node holds. Needs ``flwr`` (the ``federated``
extra: ``pip install "sci-moe[federated]"``); the Flower imports are inside the functions
that use them. How to deploy it on several machines: the federated docs page.

* :class:`FlowerEngine`: the engine interface (``exchange``) over a Flower grid, with
  clients found by node id each round (drop out and come back), missing replies recorded;
* :func:`make_server_app`, :func:`make_client_app`, :func:`run_server`,
  :func:`client_message`: the apps and what they do;
* :func:`save_strategy`, :func:`load_strategy`, :func:`save_client`,
  :func:`load_client`: the files the apps read; :func:`write_app`: the app directory
  ``flwr run`` takes, :data:`RUN_CONFIG` its options.
"""

from .apps import (
    APP_MODULE,
    RUN_CONFIG,
    client_message,
    load_client,
    load_strategy,
    make_client_app,
    make_server_app,
    run_server,
    save_client,
    save_strategy,
    write_app,
)
from .engine import FlowerEngine, flower_message

__all__ = [
    "APP_MODULE",
    "RUN_CONFIG",
    "FlowerEngine",
    "client_message",
    "flower_message",
    "load_client",
    "load_strategy",
    "make_client_app",
    "make_server_app",
    "run_server",
    "save_client",
    "save_strategy",
    "write_app",
]
