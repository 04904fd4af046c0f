"""The tuning grid of ``run.py``: the same number of configurations for every model.

:func:`grid` lists the ``build_model`` options (hidden widths in channels, experts and
top-k, the cross-conformer block, attention heads or atom pooling) a model is tuned over.
A helper module: ``run.py`` imports it.
"""

from __future__ import annotations

__all__ = [
    "grid",
]


def grid(name: str, widths: list[int], size: int) -> list[dict]:
    """The ``size`` tuning configurations of a model (the same count for every model).

    SPiCE's knobs are width, (experts, top-k) and the cross-conformer block; its full
    grid is ``widths x {(4, 1), (8, 2)} x {cross-conformer on, off}``, ordered so that the
    first 4 cover every knob at both levels: (w, 4, 1, on), (w, 8, 2, on), (w, 8, 2, off),
    (w', 4, 1, on) with ``w`` the widest and ``w'`` the next width, then the rest. Every
    other model gets the same number of configurations over its own knobs: width, then
    the attention heads (``attention_ensemble``: 4, then 2) or the atom pooling of a
    conformer (every other model: ``"sum"``, then ``"mean"``), i.e. ``widths x {default,
    alternative}`` with the default knob first. The first 2 configurations are those of
    earlier runs (``--grid-size 2``: SPiCE at the widest width with (4, 1) or (8, 2),
    every other model at the first two widths).

    Parameters
    ----------
    name : str
        Model name (:data:`sci_moe.molecules.spice.MODEL_NAMES`).
    widths : list of int
        Candidate hidden widths (channels), narrowest first.
    size : int
        Number of configurations (>= 1, at most the model's full grid).

    Returns
    -------
    list of dict
        ``build_model`` options per configuration.
    """
    if size < 1:
        raise ValueError(f"grid size must be >= 1, got {size}")
    if name == "spice":
        wide = list(reversed(widths))
        first = [(wide[0], 4, 1, True), (wide[0], 8, 2, True), (wide[0], 8, 2, False)]
        if len(wide) > 1:
            first.append((wide[1], 4, 1, True))
        rest = [
            (h, e, k, cc)
            for h in wide
            for cc in (True, False)
            for e, k in ((4, 1), (8, 2))
            if (h, e, k, cc) not in first
        ]
        configs = [
            {"hidden": h, "num_experts": e, "top_k": k, "cross_conformer": cc}
            for h, e, k, cc in first + rest
        ]
    else:
        alt = ("heads", 4, 2) if name == "attention_ensemble" else ("atom_pool", "sum", "mean")
        configs = [{"hidden": h, alt[0]: alt[1]} for h in widths]
        configs += [{"hidden": h, alt[0]: alt[2]} for h in widths]
    if size > len(configs):
        raise ValueError(f"grid size {size} > the {len(configs)} configurations of {name}")
    return configs[:size]
