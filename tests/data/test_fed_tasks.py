"""The federated text tasks (sci_moe.data.fed_tasks): the analogy task, per-class clipping,
the label-skewed evaluation sets and the held-out pools (issue 46)."""

from __future__ import annotations

import numpy as np
import pytest

from sci_moe.data.fed_tasks import (
    ALL_TASKS,
    TASKS,
    analogy_sentences,
    build_fed_clients,
    skewed_sample,
    task_sentences,
)


def test_analogy_sentences_and_task():
    texts, labels = analogy_sentences()
    assert len(texts) == len(labels) > 19000 and set(labels.tolist()) == {0, 1}
    assert texts[0] == "athens is to greece as baghdad is to iraq." and labels[0] == 0
    assert texts[-1] == texts[-1].lower() and labels[-1] == 1  # gram9-plural-verbs
    t, y = task_sentences("analogy", 30, seed=3)
    assert len(t) == 60 and np.bincount(y).tolist() == [30, 30]
    assert ALL_TASKS[: len(TASKS)] == TASKS and "analogy" in ALL_TASKS


def test_clip_per_class_lowers_to_what_the_task_has():
    with pytest.raises(ValueError, match="lower per_class"):
        task_sentences("sentiment", 150)
    t, y = task_sentences("sentiment", 150, clip=True)
    assert np.bincount(y).tolist() == [100, 100] and len(t) == 200


def test_skewed_sample_keeps_the_shares():
    rng = np.random.default_rng(0)
    labels = np.array([0] * 50 + [1] * 20)
    idx = skewed_sample(labels, np.array([0.5, 0.5]), 30, rng)
    assert np.bincount(labels[idx]).tolist() == [15, 15] and len(set(idx)) == 30
    # class 1 runs short: both classes scale down by the same factor
    idx = skewed_sample(labels, np.array([0.2, 0.8]), 50, rng)
    assert np.bincount(labels[idx], minlength=2).tolist() == [5, 20]
    idx = skewed_sample(labels, np.array([1.0, 0.0]), 10, rng)
    assert labels[idx].tolist() == [0] * 10
    with pytest.raises(ValueError, match="shares"):
        skewed_sample(labels, np.array([0.5, 0.6]), 10, rng)


def test_held_out_pools_give_disjoint_training_and_skewed_evaluation(tmp_path):
    pytest.importorskip("transformers")
    fs = build_fed_clients(
        clients_per_task=2,
        per_class=20,
        tasks=("sentiment", "analogy"),  # no repeated sentences (negation's templates repeat)
        alpha=1.0,
        test_fraction=0.4,
        seed=1,
        cache=tmp_path / "h.npz",
        eval_per_client=12,
    )
    assert fs.tasks.tolist() == [0, 0, 1, 1] and len(fs.validation) == 4
    for c, v in zip(fs.clients, fs.validation, strict=True):
        assert c.client_id == v.client_id
        assert c.data.hidden_train is v.data.hidden_train or np.array_equal(
            c.data.hidden_train.numpy(), v.data.hidden_train.numpy()
        )
        assert 2 <= len(c.data.y_test) <= 12 and 2 <= len(v.data.y_test) <= 12

    def rows(x):
        return {r.tobytes() for r in x.reshape(len(x), -1)}

    for t in (0, 1):  # no evaluation example is a training example of its task
        idx = np.flatnonzero(fs.tasks == t)
        train = set().union(*(rows(fs.clients[i].data.hidden_train.numpy()) for i in idx))
        for i in idx:
            for cl in (fs.clients[i], fs.validation[i]):
                assert not rows(cl.data.hidden_test.numpy()) & train
    # the per-client split (the default) is unchanged: no validation clients
    fs = build_fed_clients(2, per_class=8, tasks=("negation",), seed=0, cache=tmp_path / "g.npz")
    assert fs.validation is None and len(fs.clients) == 2
