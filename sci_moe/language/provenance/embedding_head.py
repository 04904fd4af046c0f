r"""Frozen sentence embeddings + a Mixture-of-Experts classifier head.

The second classifier of the fingerprint study: a frozen text encoder (all-MiniLM-L6-v2 in
the benchmark, passed in as ``embed``; this field never loads it itself) and a trained head

.. math:: \text{logits} = W\,(h + \mathrm{MoE}(h)) + b,\qquad h = \mathrm{LayerNorm}(e(x)),

where :math:`e(x) \in \mathbb{R}^D` is the embedding and the MoE is a
:class:`sci_moe.moe.MoE` of MLP experts (top-k routing, load-balancing auxiliary loss added
to the cross-entropy).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import numpy as np
import torch
from torch import nn

from ..._util import check_device_name
from ...moe import MoE, MoEConfig
from ._fit import fit_classifier, predict_logits
from .bow import _check_labels, _class_names

__all__ = ["EmbeddingHeadConfig", "EmbeddingMoEClassifier", "MoEClassifierHead"]


@dataclass
class EmbeddingHeadConfig:
    """Options of :class:`EmbeddingMoEClassifier`.

    Parameters
    ----------
    num_experts, top_k, d_hidden : int
        The MoE head: routed MLP experts, experts per input, expert hidden size.
    load_balance_coef : float
        Weight of the load-balancing loss.
    steps, batch_size : int
        AdamW steps and minibatch size.
    lr, weight_decay : float
    seed : int
        Initialisation and batch order.
    """

    num_experts: int = 4
    top_k: int = 2
    d_hidden: int = 128
    load_balance_coef: float = 0.01
    steps: int = 400
    batch_size: int = 64
    lr: float = 3e-3
    weight_decay: float = 0.01
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("num_experts", "top_k", "d_hidden", "steps", "batch_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.top_k > self.num_experts:
            raise ValueError(f"top_k ({self.top_k}) must be <= num_experts ({self.num_experts})")
        if not self.lr > 0:
            raise ValueError(f"lr must be > 0, got {self.lr}")


class MoEClassifierHead(nn.Module):
    """LayerNorm, residual :class:`~sci_moe.moe.MoE` block, linear map to K logits.

    Parameters
    ----------
    d_in, num_classes : int
    config : EmbeddingHeadConfig
    """

    def __init__(self, d_in: int, num_classes: int, config: EmbeddingHeadConfig) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d_in)
        self.moe = MoE(
            MoEConfig(
                d_model=d_in,
                num_experts=config.num_experts,
                top_k=config.top_k,
                d_hidden=config.d_hidden,
                expert="mlp",
                activation="gelu",
                load_balance_coef=config.load_balance_coef,
                check_finite=False,
            )
        )
        self.out = nn.Linear(d_in, num_classes)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``x`` of shape (n, d_in) -> ``(logits (n, K), aux_loss)``."""
        h = self.norm(x)
        y, info = self.moe(h, return_routing=True)
        return self.out(h + y), info.aux_loss


class EmbeddingMoEClassifier:
    """K-way provenance classifier: frozen embeddings + :class:`MoEClassifierHead`.

    Parameters
    ----------
    embed : callable, optional
        ``embed(texts) -> ndarray (n, D)`` (frozen); needed by :meth:`fit` and
        :meth:`predict_proba` on texts, not by the ``*_features`` methods. The benchmark and
        CLI pass :func:`sci_moe.data.minilm.embed_texts`.
    config : EmbeddingHeadConfig, optional
    progress : bool
        Progress bar while training.
    device : str
        Where the head trains (``"cpu"``, ``"cuda"``, ``"cuda:N"``; the embedding is
        ``embed``'s business): the head moves there and stays there; predictions take any
        input and return CPU results. Not saved with the classifier.
    """

    kind = "embedding_moe"

    def __init__(
        self,
        embed: Callable[[Sequence[str]], np.ndarray] | None = None,
        config: EmbeddingHeadConfig | None = None,
        progress: bool = True,
        device: str = "cpu",
    ) -> None:
        self.embed = embed
        self.config = config or EmbeddingHeadConfig()
        self.progress = progress
        self.device = check_device_name(device)
        self.classes: tuple[str, ...] = ()
        self.head: MoEClassifierHead | None = None

    def _embed(self, texts: Sequence[str]) -> torch.Tensor:
        if self.embed is None:
            raise ValueError(
                "this classifier has no embed function: pass embed=... (e.g. "
                "sci_moe.data.minilm.embed_texts) or use the *_features methods"
            )
        x = np.asarray(self.embed(list(texts)), dtype=np.float32)
        if x.ndim != 2 or x.shape[0] != len(texts):
            raise ValueError(f"embed returned shape {x.shape}, expected ({len(texts)}, D)")
        return torch.from_numpy(x)

    def fit(self, texts: Sequence[str], labels, classes: Sequence[str] | None = None):
        """Embed ``texts`` and train the head; returns ``self``."""
        _check_labels(texts, labels)
        return self.fit_features(self._embed(texts), labels, classes)

    def fit_features(self, features, labels, classes: Sequence[str] | None = None):
        """Train the head on precomputed ``features`` of shape (n, D); returns ``self``."""
        x = torch.as_tensor(np.asarray(features, dtype=np.float32))
        y = torch.as_tensor(_check_labels(list(range(x.shape[0])), labels))
        self.classes = _class_names(y, classes)
        c = self.config
        torch.manual_seed(c.seed)
        self.head = MoEClassifierHead(x.shape[1], len(self.classes), c).float()
        fit_classifier(
            self.head, x, y, c, progress=self.progress, desc="MoE head", device=self.device
        )
        return self

    def predict_proba_features(self, features) -> np.ndarray:
        """Class probabilities from precomputed features, shape (n, K)."""
        if self.head is None:
            raise ValueError("the classifier is not fitted: call fit first")
        x = torch.as_tensor(np.asarray(features, dtype=np.float32))
        return torch.softmax(predict_logits(self.head, x), -1).numpy()

    def predict_proba(self, texts: Sequence[str]) -> np.ndarray:
        """Class probabilities, shape (n, K)."""
        return self.predict_proba_features(self._embed(texts))

    def predict(self, texts: Sequence[str]) -> np.ndarray:
        """Predicted class indices, shape (n,)."""
        return self.predict_proba(texts).argmax(axis=1)

    def state(self) -> tuple[dict, dict]:
        """``(config, arrays)`` for :func:`~sci_moe.language.provenance.save_classifier`."""
        if self.head is None:
            raise ValueError("the classifier is not fitted: call fit first")
        cfg = {"config": asdict(self.config), "d_in": self.head.norm.normalized_shape[0]}
        return cfg, {k: v.detach().cpu() for k, v in self.head.state_dict().items()}

    @classmethod
    def from_state(cls, classes, config: dict, arrays: dict, embed=None, **_):
        """Rebuild from :meth:`state` (give ``embed`` to classify texts)."""
        clf = cls(embed=embed, config=EmbeddingHeadConfig(**config["config"]), progress=False)
        clf.classes = tuple(classes)
        clf.head = MoEClassifierHead(int(config["d_in"]), len(clf.classes), clf.config).float()
        clf.head.load_state_dict({k: torch.as_tensor(v) for k, v in arrays.items()})
        clf.head.eval()
        return clf
