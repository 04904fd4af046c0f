"""Federated fine-tuning with LoRA experts: FedLEASE and its baselines.

FedLEASE (Wang, Bian, Zhang and Xu, "Adaptive LoRA Experts Allocation and Selection for
Federated Fine-Tuning", NeurIPS 2025, arXiv:2509.15087) clusters clients by their LoRA
``B`` matrices after a warm-up, gives each cluster one LoRA expert, and lets each client
mix its own expert with the others through a slot-expanded adaptive top-``M`` router
(:class:`sci_moe.moe.SlotExpandedRouter`, in the core).

* model: :class:`ModelSpec`, :class:`FedLoRAClassifier` (frozen BERT layer, routed LoRA on
  Q/V, exact at the first token: :class:`CLSAdaptedLayer`, :class:`LoRAMixtureLinear`);
* roles: :class:`Client` (:class:`ClientData`, :class:`TrainConfig`), :class:`Server`;
  messages are plain dicts of tensors sent as bytes (:func:`encode_message`);
* algorithms: :class:`FedLEASE`, :class:`FedIT`, :class:`LocalLoRA`, :class:`IFCA` over a
  :class:`RoundPlan`; pieces :func:`b_matrix_distances`, :func:`cluster_clients`,
  :func:`fedavg`;
* engines: :class:`Simulator` (in-process) and :class:`ProcessEngine` (one process per
  client, ``torch.distributed`` gloo over loopback).
"""

from .aggregation import fedavg
from .backbone import CLSAdaptedLayer
from .client import Client, ClientData, TrainConfig
from .clustering import ClusterResult, b_matrix_distances, cluster_clients
from .engines import ProcessEngine, Simulator
from .lora import LoRAMixtureLinear
from .messages import check_update, decode_message, encode_message
from .model import FedLoRAClassifier, ModelSpec
from .server import Server
from .strategies import IFCA, FedIT, FedLEASE, LocalLoRA, RoundPlan, Strategy

__all__ = [
    "IFCA",
    "CLSAdaptedLayer",
    "Client",
    "ClientData",
    "ClusterResult",
    "FedIT",
    "FedLEASE",
    "FedLoRAClassifier",
    "LoRAMixtureLinear",
    "LocalLoRA",
    "ModelSpec",
    "ProcessEngine",
    "RoundPlan",
    "Server",
    "Simulator",
    "Strategy",
    "TrainConfig",
    "b_matrix_distances",
    "check_update",
    "cluster_clients",
    "decode_message",
    "encode_message",
    "fedavg",
]
