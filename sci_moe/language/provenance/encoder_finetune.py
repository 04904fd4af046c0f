r"""A pretrained BERT-like encoder fine-tuned as a K-way classifier: top layers only, cached.

The third neural classifier of the fingerprint study (the benchmark passes
all-MiniLM-L6-v2; this field never loads it itself). Of the encoder's :math:`L`
transformer layers the lower :math:`L-k` stay frozen and the top :math:`k` (default 2)
are fine-tuned, with a linear head on the mean-pooled last states,

.. math:: \text{logits} = W \frac{\sum_t m_t h^{(L)}_t}{\sum_t m_t} + b,\qquad
    h^{(L)} = f_L \circ \dots \circ f_{L-k+1}\big(h^{(L-k)}\big),

where :math:`m_t` is the attention mask (the mean pooling of the sentence-transformers
model, before its L2 normalisation) and :math:`f_l` are deep copies of the pretrained
layers (the encoder passed in is never changed). Because the lower layers are frozen,
their output :math:`h^{(L-k)}` (embeddings and layers 1 to :math:`L-k`, the encoder in
eval mode) is computed **once per text** and cached; every training step then runs only
the top :math:`k` layers forward and backward. This is fine-tuning of the top ``k`` layers
with the lower layers frozen, not full fine-tuning (``k = L`` fine-tunes every transformer
layer, the embeddings still frozen).
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
import torch
from torch import nn

from ..._util import check_device_name
from ._fit import fit_classifier, predict_logits
from .bow import _check_labels, _class_names

__all__ = [
    "EncoderFinetuneClassifier",
    "EncoderFinetuneConfig",
    "TopLayersClassifier",
]


@dataclass
class EncoderFinetuneConfig:
    """Options of :class:`EncoderFinetuneClassifier`.

    Parameters
    ----------
    layers : int
        ``k``, the top transformer layers fine-tuned (1 to the encoder's layer count).
    max_length : int
        Tokens a text is truncated to (special tokens included).
    steps, batch_size : int
        AdamW steps of one fit (one cycle of
        :func:`~sci_moe.language.provenance.fit_until_flat`) and minibatch size.
    lr, weight_decay : float
        One learning rate for the top layers and the head (linear warm-up over 5 % of the
        steps, cosine decay to 0, gradient clipping at 1).
    seed : int
        Head initialisation, dropout and batch order.
    """

    layers: int = 2
    max_length: int = 128
    steps: int = 300
    batch_size: int = 16
    lr: float = 1e-4
    weight_decay: float = 0.01
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("layers", "max_length", "steps", "batch_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.max_length < 3:
            raise ValueError(f"max_length must be >= 3 (two special tokens), got {self.max_length}")
        if not self.lr > 0:
            raise ValueError(f"lr must be > 0, got {self.lr}")


def _encoder_layers(encoder: nn.Module) -> nn.ModuleList:
    layers = getattr(getattr(encoder, "encoder", None), "layer", None)
    if not isinstance(layers, nn.ModuleList) or not hasattr(encoder, "embeddings"):
        raise ValueError(
            f"{type(encoder).__name__} is not a BERT-like encoder (.embeddings and "
            ".encoder.layer, as transformers' BertModel)"
        )
    return layers


def _additive_mask(mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Padding mask (B, T) -> the additive attention mask (B, 1, 1, T) of the layers."""
    return (1.0 - mask[:, None, None, :].to(dtype)) * torch.finfo(dtype).min


class TopLayersClassifier(nn.Module):
    """The top ``k`` transformer layers (deep copies) + masked mean pooling + a linear head.

    Parameters
    ----------
    layers : sequence of nn.Module
        Pretrained layers of a BERT-like encoder, in order; copied, the originals untouched.
    hidden_size : int
        Width ``H`` of their states.
    num_classes : int
    """

    def __init__(self, layers: Sequence[nn.Module], hidden_size: int, num_classes: int) -> None:
        super().__init__()
        self.layers = nn.ModuleList(copy.deepcopy(layer) for layer in layers)
        for p in self.layers.parameters():
            p.requires_grad_(True)
        self.head = nn.Linear(hidden_size, num_classes)

    def encode(self, states: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """The mean-pooled output of the top layers, shape (B, H).

        ``states`` (B, T, H): the input of the first top layer; ``mask`` (B, T), bool or
        0/1, true on real tokens (padding at the end). Columns past the longest text of
        the batch are dropped first.
        """
        t = max(int(mask.sum(1).max()), 1)
        h, m = states[:, :t].float(), mask[:, :t]
        add = _additive_mask(m, h.dtype)
        for layer in self.layers:
            out = layer(h, add)
            h = out[0] if isinstance(out, tuple) else out  # transformers 4.x: a tuple
        w = m.to(h.dtype).unsqueeze(-1)
        return (h * w).sum(1) / w.sum(1).clamp_min(1.0)

    def forward(
        self, states: torch.Tensor, mask: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(logits (B, K), aux)``; ``aux`` is a zero (no auxiliary loss)."""
        return self.head(self.encode(states, mask)), states.new_zeros((), dtype=torch.float32)


def _frozen_checksum(encoder: nn.Module, layers: int) -> str:
    """SHA-256 of the frozen part of ``encoder`` (its embeddings and all but the top
    ``layers`` transformer layers): the parameters' names and float32 values, in order."""
    stack = _encoder_layers(encoder)
    parts = [("embeddings", encoder.embeddings)]
    parts += [(f"layer.{i}", stack[i]) for i in range(len(stack) - layers)]
    digest = hashlib.sha256()
    for prefix, module in parts:
        for name, p in module.named_parameters():
            digest.update(f"{prefix}.{name}".encode())
            digest.update(p.detach().float().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


class _Stop(Exception):
    """Ends the encoder's forward at the first fine-tuned layer."""


class EncoderFinetuneClassifier:
    """K-way provenance classifier fine-tuning the top layers of a pretrained encoder.

    The lower layers' states of every text :meth:`fit` sees are computed once and kept
    (:attr:`cache`, float32, the real tokens only: ``T_i x H`` per text, about 150 kB for a
    100-token text of MiniLM's ``H = 384``; each fit also holds its training and
    validation sets padded to their longest text, ``n x T x H`` floats), so cycles of
    :func:`~sci_moe.language.provenance.fit_until_flat` and classifiers sharing one
    ``cache`` (the benchmark's seeds on one pool) never recompute them.

    Parameters
    ----------
    encoder : transformers.BertModel
        A BERT-like encoder (``.embeddings``, ``.encoder.layer``, ``.config.hidden_size``);
        only read (run in eval mode under ``torch.no_grad`` for the lower states, its
        previous mode restored; its top layers deep-copied). The benchmark passes
        all-MiniLM-L6-v2 (:func:`sci_moe.data.minilm.load_encoder`).
    tokenizer : callable
        The encoder's ``transformers`` tokenizer (``tokenizer(texts, padding=True,
        truncation=True, max_length=..., return_tensors="pt")``).
    config : EncoderFinetuneConfig, optional
    progress : bool
        Progress bar while training.
    device : str
        Where the top layers train (``"cpu"``, ``"cuda"``, ``"cuda:N"``); the lower states
        are computed on the encoder's device and cached on the CPU. Predictions return CPU
        results.
    cache : dict, optional
        ``text -> Tensor (T_i, H)`` lower states to share between classifiers of the same
        encoder, ``layers`` and ``max_length`` (default: a fresh dict).

    Raises
    ------
    ValueError
        When the encoder is not BERT-like or ``config.layers`` is not in 1 to its layer
        count.

    Examples
    --------
    >>> from sci_moe.data.minilm import load_encoder
    >>> tokenizer, encoder = load_encoder()  # doctest: +SKIP
    >>> clf = EncoderFinetuneClassifier(  # doctest: +SKIP
    ...     encoder, tokenizer, EncoderFinetuneConfig(layers=2, steps=200))
    >>> clf = clf.fit(texts, labels, ["c4", "gopher"], val=(vt, vl),  # doctest: +SKIP
    ...               eval_every=40)
    >>> clf.predict(test_texts)  # doctest: +SKIP
    >>> from sci_moe.language.provenance import load_classifier, save_classifier
    >>> back = load_classifier(save_classifier(clf, "fp_ft"),  # doctest: +SKIP
    ...                        encoder=encoder, tokenizer=tokenizer)
    """

    kind = "encoder_finetune"

    def __init__(
        self,
        encoder: nn.Module,
        tokenizer,
        config: EncoderFinetuneConfig | None = None,
        progress: bool = True,
        device: str = "cpu",
        cache: dict | None = None,
    ) -> None:
        self.config = config or EncoderFinetuneConfig()
        n = len(_encoder_layers(encoder))
        if not 1 <= self.config.layers <= n:
            raise ValueError(
                f"config.layers must be in 1..{n} (the encoder's transformer layers), got "
                f"{self.config.layers}"
            )
        self.encoder = encoder
        self.tokenizer = tokenizer
        self.progress = progress
        self.device = check_device_name(device)
        self.cache: dict = {} if cache is None else cache
        self.classes: tuple[str, ...] = ()
        self.model: TopLayersClassifier | None = None
        #: Training losses per step and ``(step, validation accuracy)`` of the last fit.
        self.losses: list[float] = []
        self.curve: list[tuple[int, float]] = []

    # ------------------------------------------------------------------ lower states
    @torch.no_grad()
    def _run_lower(self, texts: list[str]) -> list[torch.Tensor]:
        layers = _encoder_layers(self.encoder)
        first = layers[len(layers) - self.config.layers]
        enc = self.tokenizer(
            texts,
            padding=True,
            truncation=True,
            max_length=self.config.max_length,
            return_tensors="pt",
        )
        dev = next(self.encoder.parameters()).device
        got: list[torch.Tensor] = []

        def grab(_module, args, kwargs):
            got.append(args[0] if args else kwargs["hidden_states"])
            raise _Stop

        hook = first.register_forward_pre_hook(grab, with_kwargs=True)
        was_training = self.encoder.training
        self.encoder.eval()
        try:
            self.encoder(
                input_ids=enc["input_ids"].to(dev), attention_mask=enc["attention_mask"].to(dev)
            )
        except _Stop:
            pass
        finally:
            hook.remove()
            self.encoder.train(was_training)
        h = got[0].float().cpu()
        lengths = enc["attention_mask"].sum(1).tolist()
        return [h[i, : int(n)].clone() for i, n in enumerate(lengths)]

    def lower_states(
        self, texts: Sequence[str], batch_size: int = 64, keep: bool = True
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The frozen lower layers' output for ``texts``, from :attr:`cache` where it has them.

        Parameters
        ----------
        texts : sequence of str
            Non-empty strings.
        batch_size : int
            Texts per forward of the lower layers.
        keep : bool
            Add the new texts' states to :attr:`cache`.

        Returns
        -------
        states : Tensor, float32, shape (n, T, H)
            Right-padded with zeros to the longest text ``T``.
        mask : Tensor, bool, shape (n, T)
            True on the real tokens.
        """
        texts = list(texts)
        if not texts or not all(isinstance(t, str) and t for t in texts):
            raise ValueError("texts must be a non-empty sequence of non-empty strings")
        todo = list(dict.fromkeys(t for t in texts if t not in self.cache))
        new = {}
        for s in range(0, len(todo), batch_size):
            chunk = todo[s : s + batch_size]
            new.update(zip(chunk, self._run_lower(chunk), strict=True))
        if keep:
            self.cache.update(new)
        rows = [self.cache[t] if t in self.cache else new[t] for t in texts]
        t_max = max(r.shape[0] for r in rows)
        states = torch.zeros(len(rows), t_max, rows[0].shape[1])
        mask = torch.zeros(len(rows), t_max, dtype=torch.bool)
        for i, r in enumerate(rows):
            states[i, : r.shape[0]] = r
            mask[i, : r.shape[0]] = True
        return states, mask

    # ------------------------------------------------------------------ fit / predict
    def _build(self, k: int) -> TopLayersClassifier:
        torch.manual_seed(self.config.seed)
        layers = _encoder_layers(self.encoder)
        top = list(layers)[len(layers) - self.config.layers :]
        return TopLayersClassifier(top, int(self.encoder.config.hidden_size), k).float()

    def fit(
        self,
        texts: Sequence[str],
        labels,
        classes: Sequence[str] | None = None,
        *,
        val: tuple[Sequence[str], Sequence[int]] | None = None,
        eval_every: int = 0,
        warm_start: bool = False,
    ):
        """Fine-tune the top layers and the head on ``texts`` with integer ``labels``.

        As :meth:`ByteTransformerClassifier.fit
        <sci_moe.language.provenance.ByteTransformerClassifier.fit>`: with ``val = (texts,
        labels)`` and ``eval_every > 0`` the validation accuracy is measured every
        ``eval_every`` steps and after the last, into :attr:`curve`; ``warm_start`` trains
        the fitted model on (a further cycle with a fresh optimiser and schedule), as
        :func:`~sci_moe.language.provenance.fit_until_flat` does. Returns ``self``.

        Raises
        ------
        ValueError
            For empty texts, labels not one per text, fewer than two classes, or
            ``warm_start`` without a fitted classifier of the same classes.
        """
        texts = list(texts)
        y = torch.as_tensor(_check_labels(texts, labels))
        names = _class_names(y, classes)
        if warm_start:
            if self.model is None:
                raise ValueError("warm_start needs a fitted classifier: call fit first")
            if names != self.classes:
                raise ValueError(
                    f"warm_start: classes {names} differ from the fitted {self.classes}"
                )
        x = self.lower_states(texts)
        if not warm_start:
            self.model = self._build(len(names))
        self.classes = names
        self.curve = []
        evaluate = None
        if val is not None and eval_every > 0:
            yv = torch.as_tensor(_check_labels(list(val[0]), val[1]))
            xv = self.lower_states(val[0])

            def evaluate(step: int) -> None:
                pred = predict_logits(self.model, xv, 64).argmax(-1)
                self.curve.append((step, float((pred == yv).double().mean())))

        self.losses = fit_classifier(
            self.model,
            x,
            y,
            self.config,
            progress=self.progress,
            desc=f"encoder top-{self.config.layers}",
            evaluate=evaluate,
            eval_every=eval_every,
            device=self.device,
        )
        return self

    def predict_proba(self, texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
        """Class probabilities, shape (n, K) (lower states of new texts are not cached)."""
        if self.model is None:
            raise ValueError("the classifier is not fitted: call fit first")
        texts = list(texts)
        out = []
        for s in range(0, len(texts), batch_size):
            x = self.lower_states(texts[s : s + batch_size], batch_size, keep=False)
            out.append(torch.softmax(predict_logits(self.model, x, batch_size), -1))
        if not out:
            raise ValueError("texts must be a non-empty sequence of non-empty strings")
        return torch.cat(out).numpy()

    def predict(self, texts: Sequence[str]) -> np.ndarray:
        """Predicted class indices, shape (n,)."""
        return self.predict_proba(texts).argmax(axis=1)

    # ------------------------------------------------------------------ persistence
    def _encoder_info(self) -> dict:
        """What :meth:`from_state` checks the encoder it is given against."""
        cfg = getattr(self.encoder, "config", None)
        return {
            "name": str(getattr(cfg, "_name_or_path", "") or type(self.encoder).__name__),
            "layers": len(_encoder_layers(self.encoder)),
            "hidden_size": int(self.encoder.config.hidden_size),
            "frozen_sha256": _frozen_checksum(self.encoder, self.config.layers),
        }

    def state(self) -> tuple[dict, dict]:
        """``(config, arrays)`` for :func:`~sci_moe.language.provenance.save_classifier`.

        Only what is trained: ``arrays`` are the fine-tuned top layers and the head
        (:attr:`model`'s state dict, CPU tensors); ``config`` holds the
        :class:`EncoderFinetuneConfig` (``layers``: the fine-tuned count) and the encoder's
        ``name``, transformer ``layers``, ``hidden_size`` and the SHA-256 of its frozen
        part (embeddings and lower layers), which :meth:`from_state` takes from the
        encoder it is given. The lower-state :attr:`cache` is not saved.
        """
        if self.model is None:
            raise ValueError("the classifier is not fitted: call fit first")
        arrays = {k: v.detach().cpu() for k, v in self.model.state_dict().items()}
        return {"config": asdict(self.config), "encoder": self._encoder_info()}, arrays

    @classmethod
    def from_state(
        cls, classes, config: dict, arrays: dict, encoder=None, tokenizer=None, **_
    ) -> EncoderFinetuneClassifier:
        """Rebuild from :meth:`state`, the frozen lower layers from ``encoder``.

        Parameters
        ----------
        classes : sequence of str
        config, arrays
            As :meth:`state` returned them.
        encoder, tokenizer
            The encoder the classifier was trained with and its tokenizer (for
            all-MiniLM-L6-v2: :func:`sci_moe.data.minilm.load_encoder`); only read, as in
            the constructor.

        Raises
        ------
        ValueError
            Without ``encoder`` or ``tokenizer``, or when ``encoder`` is not the one the
            classifier was trained with (another layer count, width or frozen weights).
        """
        saved = config["encoder"]
        if encoder is None or tokenizer is None:
            raise ValueError(
                f"an {cls.kind} classifier needs the encoder it was trained with "
                f"({saved['name']}) and its tokenizer: pass encoder=... and tokenizer=... "
                "(for all-MiniLM-L6-v2: tokenizer, encoder = sci_moe.data.minilm.load_encoder())"
            )
        clf = cls(encoder, tokenizer, EncoderFinetuneConfig(**config["config"]), progress=False)
        given = clf._encoder_info()
        for key in ("layers", "hidden_size", "frozen_sha256"):
            if given[key] != saved[key]:
                raise ValueError(
                    f"the encoder passed ({given['name']}) is not the one this classifier was "
                    f"trained with ({saved['name']}): its {key} is {given[key]}, saved "
                    f"{saved[key]}; pass the encoder it was trained with"
                )
        clf.classes = tuple(classes)
        clf.model = clf._build(len(clf.classes))
        clf.model.load_state_dict({k: torch.as_tensor(v) for k, v in arrays.items()})
        clf.model.eval()
        return clf
