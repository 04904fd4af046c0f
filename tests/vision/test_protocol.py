import math

import pytest
import torch

from sci_moe.vision import background_shift_labels, incremental_tasks, mean_iou, per_class_iou


def test_tasks():
    assert incremental_tasks(6, 4, 1) == [[1, 2, 3, 4], [5], [6]]
    assert incremental_tasks(6, 2, 2) == [[1, 2], [3, 4], [5, 6]]
    assert incremental_tasks(5, 2, 2) == [[1, 2], [3, 4], [5]]
    with pytest.raises(ValueError):
        incremental_tasks(6, 7, 1)


def test_background_shift_labels():
    m = torch.tensor([[0, 1, 2], [3, 5, 6]])
    # step with classes {5}: old (1..4) and future (6) classes become background
    assert background_shift_labels(m, [5]).tolist() == [[0, 0, 0], [0, 5, 0]]
    assert background_shift_labels(m, [1, 2, 3, 4]).tolist() == [[0, 1, 2], [3, 0, 0]]
    assert torch.equal(background_shift_labels(m, range(7)), m)


def test_iou():
    t = torch.tensor([0, 1, 1, 2, 2, 2])
    p = torch.tensor([0, 1, 2, 2, 2, 0])
    iou = per_class_iou(p, t, [1, 2, 3])
    assert iou[1] == 0.5 and iou[2] == 0.5 and math.isnan(iou[3])
    assert mean_iou(p, t, [1, 2, 3]) == 0.5
