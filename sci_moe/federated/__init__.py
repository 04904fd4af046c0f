"""Federated learning: client and server roles, messages, engines, aggregation.

The pieces every federated method here runs on; a paper's method is a subpackage
(:mod:`sci_moe.federated.fedlease`: FedLEASE's model, training and baselines).

* roles: :class:`Client` (:class:`ClientData`, :class:`TrainConfig`; the model from a
  :class:`ModelBuilder`), :class:`Server`; messages are plain dicts of tensors sent as
  bytes (:func:`encode_message`, :func:`decode_message`, :func:`check_update`);
* algorithms: :class:`Strategy`, :class:`ClusteredStrategy` over a :class:`RoundPlan`;
  :func:`fedavg`, :func:`clone_state`;
* engines: :class:`Simulator` (in-process); across machines the same code runs on Flower
  (:mod:`sci_moe.federated.flower`, the ``federated`` extra).
"""

from .aggregation import fedavg
from .client import Client, ClientData, ModelBuilder, TrainConfig
from .engines import Simulator
from .messages import check_update, decode_message, encode_message
from .server import Server
from .strategy import ClusteredStrategy, RoundPlan, Strategy, clone_state

__all__ = [
    "Client",
    "ClientData",
    "ClusteredStrategy",
    "ModelBuilder",
    "RoundPlan",
    "Server",
    "Simulator",
    "Strategy",
    "TrainConfig",
    "check_update",
    "clone_state",
    "decode_message",
    "encode_message",
    "fedavg",
]
