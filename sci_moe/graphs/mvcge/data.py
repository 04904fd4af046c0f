"""The two multi-view settings of the MvCGE benchmark: complementary and consistent views.

Both are multi-view contextual SBMs (:func:`~sci_moe.graphs.make_multiview_csbm`) over the
same nodes, ``C = 4`` classes, ``V = 3`` views, shared weak Gaussian features (class
means ``s e_c``, unit noise, ``d = 8``), with a known oracle-neighbour Bayes accuracy
(:func:`~sci_moe.graphs.bayes_optimal_accuracy`) for all views, each view and the
features alone:

* ``"complementary"``: view ``v`` (``v = 0, 1, 2``) makes class ``v`` a community (the
  partition puts class ``v`` in one block and the other classes in the other, contrast
  ``lambda``): each view is informative about a different class, class 3 is "a community
  in no view", and only the views together identify every class;
* ``"consistent"``: every view has the same four-block partition (one block per class,
  contrast ``lambda``) with independent edges: every view is informative about every
  class, and the views agree.
"""

from __future__ import annotations

from ..sbm import MultiViewCSBMConfig

__all__ = ["MVCGE_SETTINGS", "mvcge_csbm_config"]

#: The settings of :func:`mvcge_csbm_config` with their partitions and default contrast.
MVCGE_SETTINGS = {
    "complementary": (((1, 0, 0, 0), (0, 1, 0, 0), (0, 0, 1, 0)), 0.7),
    "consistent": (((0, 1, 2, 3),) * 3, 0.4),
}


def mvcge_csbm_config(
    setting: str,
    num_nodes: int = 600,
    contrast: float | None = None,
    mean_degree: float = 6.0,
    feature_signal: float = 1.0,
) -> MultiViewCSBMConfig:
    """The :class:`~sci_moe.graphs.MultiViewCSBMConfig` of one benchmark setting.

    Parameters
    ----------
    setting : {"complementary", "consistent"}
    num_nodes : int
    contrast : float, optional
        ``lambda`` of every view (default 0.7 complementary, 0.4 consistent).
    mean_degree : float
        Expected degree per view.
    feature_signal : float
        Distance of the class means from the origin (feature noise 1).

    Returns
    -------
    MultiViewCSBMConfig
        4 classes, 3 views, 20/20/60 % train/validation/test split.

    Examples
    --------
    >>> mvcge_csbm_config("complementary").partitions[0]
    (1, 0, 0, 0)
    """
    if setting not in MVCGE_SETTINGS:
        raise ValueError(f"setting must be one of {sorted(MVCGE_SETTINGS)}, got {setting!r}")
    partitions, default = MVCGE_SETTINGS[setting]
    lam = default if contrast is None else contrast
    return MultiViewCSBMConfig(
        num_nodes=num_nodes,
        num_classes=4,
        partitions=partitions,
        contrast=(lam,) * len(partitions),
        mean_degree=mean_degree,
        feature_signal=feature_signal,
    )
