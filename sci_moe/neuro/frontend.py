"""Subject-specific linear front end: voxels -> voxel tokens in a shared feature space."""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import nn

__all__ = ["SubjectFrontEnd", "check_voxels"]


def check_voxels(x: torch.Tensor, num_voxels: int, subject: str = "") -> None:
    """Raise ``ValueError`` unless ``x`` is a finite ``(B, num_voxels)`` voxel matrix.

    Parameters
    ----------
    x : Tensor, shape (B, V)
    num_voxels : int
        Voxels the subject's front end was built for.
    subject : str
        Named in the message.
    """
    who = f" of subject {subject!r}" if subject else ""
    if not isinstance(x, torch.Tensor) or x.dim() != 2:
        shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        raise ValueError(f"voxels{who} must be a (samples, voxels) tensor, got {shape}")
    if x.shape[1] != num_voxels:
        raise ValueError(
            f"voxels{who} have {x.shape[1]} columns but the front end expects {num_voxels}; "
            "pass the subject's full voxel matrix (same mask as at training) or add the "
            "subject with its own voxel count (add_subject)"
        )
    if not torch.isfinite(x).all():
        bad = (~torch.isfinite(x)).any(0).nonzero().flatten()[:5].tolist()
        raise ValueError(
            f"voxels{who} contain NaN/inf (first bad voxel columns {bad}); drop those voxels "
            "from the mask or impute them before decoding"
        )


class SubjectFrontEnd(nn.Module):
    """One linear map per subject from voxels to voxel tokens.

    For voxel ``v`` of subject ``s`` and sample ``b``:

    .. math:: h_{b,v} = x_{b,v}\\, a_{s,v} + c_{s,v} \\in \\mathbb{R}^d

    ``a_{s,v}`` (value direction) and ``c_{s,v}`` (a learned voxel identity) are the
    subject's parameters; everything after the front end is shared across subjects.
    MoRE-Brain's front end is a dense subject ridge map into a shared space; this front
    end keeps one token per voxel instead, so the expert-choice routers pick *voxels*
    (their learned identity in a space shared by all subjects) and the voxel -> expert
    assignment can be read off directly and compared with brain regions. Adapting to a
    new subject means learning its ``a, c`` (and the routers) with the experts frozen.

    Parameters
    ----------
    voxels_per_subject : mapping of str to int
        Voxel count of each subject.
    d_model : int
        Token size ``d``.

    Attributes
    ----------
    value : ParameterDict of Parameter, shape (V_s, d)
    identity : ParameterDict of Parameter, shape (V_s, d)
    """

    def __init__(self, voxels_per_subject: Mapping[str, int], d_model: int) -> None:
        super().__init__()
        if d_model < 1:
            raise ValueError(f"d_model must be >= 1, got {d_model}")
        self.d_model = int(d_model)
        self.value = nn.ParameterDict()
        self.identity = nn.ParameterDict()
        self.num_voxels: dict[str, int] = {}
        for name, v in voxels_per_subject.items():
            self.add_subject(name, v)

    def add_subject(self, name: str, num_voxels: int) -> None:
        """Add a subject with fresh parameters (``a ~ N(0, 1/d)``, ``c ~ N(0, 1/d)``)."""
        if not isinstance(name, str) or not name or "." in name:
            raise ValueError(f"subject name must be a non-empty str without '.', got {name!r}")
        if name in self.num_voxels:
            raise ValueError(f"subject {name!r} already exists")
        if int(num_voxels) < 1:
            raise ValueError(f"subject {name!r} needs >= 1 voxel, got {num_voxels}")
        d = self.d_model
        ref = next(iter(self.value.values()), None)
        kw = {} if ref is None else {"dtype": ref.dtype}
        dev = None if ref is None else ref.device
        # drawn on the CPU (the draws of a CPU model), then put beside the other subjects
        value = torch.randn(int(num_voxels), d, **kw) * d**-0.5
        identity = torch.randn(int(num_voxels), d, **kw) * d**-0.5
        self.value[name] = nn.Parameter(value.to(dev))
        self.identity[name] = nn.Parameter(identity.to(dev))
        self.num_voxels[name] = int(num_voxels)

    @property
    def subjects(self) -> list[str]:
        """Subject names in insertion order."""
        return list(self.num_voxels)

    def extra_repr(self) -> str:
        return f"subjects={self.num_voxels}, d_model={self.d_model}"

    def subject_parameters(self, name: str) -> list[nn.Parameter]:
        """The parameters of one subject (``[value, identity]``)."""
        self._check_subject(name)
        return [self.value[name], self.identity[name]]

    def _check_subject(self, name: str) -> None:
        if name not in self.num_voxels:
            raise ValueError(
                f"unknown subject {name!r}; known: {self.subjects} (add it with add_subject)"
            )

    def forward(self, x: torch.Tensor, subject: str) -> torch.Tensor:
        """Voxel tokens.

        Parameters
        ----------
        x : Tensor, shape (B, V_s)
        subject : str

        Returns
        -------
        Tensor, shape (B, V_s, d)
        """
        self._check_subject(subject)
        check_voxels(x, self.num_voxels[subject], subject)
        a, c = self.value[subject], self.identity[subject]
        return x.to(a.dtype).unsqueeze(-1) * a + c
