"""FedLEASE: adaptive LoRA experts allocation and selection for federated fine-tuning.

Wang, Bian, Zhang and Xu, "Adaptive LoRA Experts Allocation and Selection for Federated
Fine-Tuning" (NeurIPS 2025, arXiv:2509.15087): after a warm-up the server clusters the
clients by their LoRA ``B`` matrices, gives each cluster one LoRA expert, and each client
mixes its own expert with the others through a slot-expanded adaptive top-``M`` router.
The roles, messages and engines it runs on are the field's
(:mod:`sci_moe.federated`); the clients' data are built by
:func:`sci_moe.data.fed_tasks.build_fed_clients`.

* model: :class:`ModelSpec`, :class:`FedLoRAClassifier` (frozen BERT layer, routed LoRA on
  Q/V, exact at the first token: :class:`CLSAdaptedLayer`, :class:`LoRAMixtureLinear`);
* training: :class:`FedLEASE` (the server algorithm; clients train locally on the shared
  engine), its clustering :func:`b_matrix_distances`, :func:`cluster_clients`
  (:class:`ClusterResult`);
* baselines: :class:`FedIT`, :class:`LocalLoRA`, :class:`IFCA`.
"""

from .baselines import IFCA, FedIT, LocalLoRA
from .clustering import ClusterResult, b_matrix_distances, cluster_clients
from .model import CLSAdaptedLayer, FedLoRAClassifier, LoRAMixtureLinear, ModelSpec
from .train import FedLEASE

__all__ = [
    "IFCA",
    "CLSAdaptedLayer",
    "ClusterResult",
    "FedIT",
    "FedLEASE",
    "FedLoRAClassifier",
    "LoRAMixtureLinear",
    "LocalLoRA",
    "ModelSpec",
    "b_matrix_distances",
    "cluster_clients",
]
