"""General training settings: early stopping on the selection metric, dropping the last partial batch,
Nesterov momentum; each against a plain re-statement of the rule on tiny inputs."""
from __future__ import annotations

import pytest
import torch

from harness.config.params import parse
from harness.config.spec import TrainSpec, load_task
from harness.errors import ConfigError
from harness.run import runner
from harness.run import train as tr


def _fit(tiny_task, scores, overrides, select="a2b/R@1", state=None, untrained=None):
    """Run the training loop of the tiny task with validation returning ``scores`` in turn (after ``untrained``,
    the untrained model's score, when given; without it the untrained model is not a candidate)."""
    first = [f"train.select_untrained={untrained is not None}".lower()]
    spec = load_task(tiny_task, [f"train.epochs={len(scores)}", f"train.select={select}", *first, *overrides])
    data = runner.load_data(spec)
    torch.manual_seed(0)
    method = runner.build_method(spec, "contrastive", data, torch.device("cpu"))
    t = spec.methods["contrastive"].train
    step = tr.make_step(method, tr.make_optimizer(method, t), data["train"], torch.device("cpu"), None)
    given = iter(([] if untrained is None or state else [untrained]) + scores[len(state.history) if state else 0:])
    return tr.fit(method, data["train"], t, seed=0, step=step, epoch=tr.run_epoch,
                  validate=lambda: {select: next(given)}, state=state)


def original_early_stop(scores, tolerated):
    """Epochs trained and best epoch under Doodle2Search's rule: a counter of epochs without a strictly
    better value; an epoch that finds the counter at ``tolerated`` ends training."""
    best, best_epoch, counter = float("-inf"), 0, 0
    for e, score in enumerate(scores, 1):
        if score > best:
            best, best_epoch, counter = score, e, 0
        elif counter == tolerated:
            return e, best_epoch
        else:
            counter += 1
    return len(scores), best_epoch


@pytest.mark.parametrize("scores", [[1, 3, 2, 2, 2, 5, 6, 1, 1, 1, 1, 1], [1, 2, 3, 4, 5, 6, 7, 8],
                                    [5, 5, 5, 5, 5, 5, 5, 5], [1, 0, 2, 0, 3, 0, 0, 0, 4, 0, 0, 0]])
@pytest.mark.parametrize("patience", [1, 2, 3])
def test_early_stop_keeps_the_best_epoch_and_matches_the_counter_rule(tiny_task, scores, patience):
    fit = _fit(tiny_task, [float(s) for s in scores], [f"train.early_stop_patience={patience}"])
    epochs, best = original_early_stop(scores, patience - 1)
    assert len(fit.history) == epochs
    assert fit.best_epoch == best and fit.best_score == max(scores[:epochs])
    assert tr.stopped_early(fit, parse(TrainSpec, {"early_stop_patience": patience}, "t")) == (epochs < len(scores))


@pytest.mark.parametrize("untrained, scores, best", [(5.0, [1.0, 2.0, 3.0], 0), (5.0, [1.0, 5.0, 3.0], 0),
                                                      (1.0, [1.0, 2.0, 3.0], 3), (2.0, [1.0, 3.0, 2.0], 2)])
def test_the_untrained_model_is_the_first_candidate(tiny_task, untrained, scores, best):
    """Epoch 0 is kept unless a trained epoch is strictly better; its state is the model before any step."""
    fit = _fit(tiny_task, scores, [], untrained=untrained)
    assert fit.best_epoch == best and fit.untrained == {"a2b/R@1": untrained} and len(fit.history) == len(scores)
    if best == 0:
        spec = load_task(tiny_task, ["train.epochs=1"])
        torch.manual_seed(0)
        start = runner.build_method(spec, "contrastive", runner.load_data(spec), torch.device("cpu")).state_dict()
        assert all(torch.equal(start[k], v) for k, v in fit.best_state.items())


def test_early_stop_counts_from_a_kept_untrained_model(tiny_task):
    fit = _fit(tiny_task, [1.0, 1.0, 9.0, 9.0], ["train.early_stop_patience=2"], untrained=5.0)
    assert fit.best_epoch == 0 and len(fit.history) == 2


def test_early_stop_minimises_rank_metrics_and_is_off_by_default(tiny_task):
    ranks = [9.0, 4.0, 6.0, 5.0, 7.0, 3.0]
    fit = _fit(tiny_task, ranks, ["train.early_stop_patience=2"], select="a2b/MeanR")
    assert len(fit.history) == 4 and fit.best_epoch == 2  # epochs 3 and 4 rank no better than 4.0
    assert len(_fit(tiny_task, ranks, [], select="a2b/MeanR").history) == len(ranks)


def test_a_resumed_run_that_had_stopped_trains_no_further(tiny_task):
    scores = [1.0, 2.0, 1.0, 1.0, 3.0, 4.0]
    first = _fit(tiny_task, scores, ["train.early_stop_patience=2"])
    assert len(first.history) == 4
    again = _fit(tiny_task, scores, ["train.early_stop_patience=2"], state=first)
    assert len(again.history) == 4 and again.best_epoch == 2


@pytest.mark.parametrize("n,batch", [(10, 4), (12, 4), (3, 4), (4, 4), (1, 2), (129, 32)])
def test_drop_last_leaves_out_only_the_last_partial_batch(n, batch):
    kept = tr.batches(n, batch, torch.Generator().manual_seed(0), drop_last=True)
    every = tr.batches(n, batch, torch.Generator().manual_seed(0))
    assert sum(map(len, every)) == n and len(torch.cat(every).unique()) == n
    full, rest = divmod(n, batch)
    if rest and full:  # a partial batch beside full ones goes; an epoch smaller than a batch keeps its one batch
        assert [len(b) for b in kept] == [batch] * full and all(torch.equal(a, b) for a, b in zip(kept, every))
    else:
        assert [b.tolist() for b in kept] == [b.tolist() for b in every]
    assert tr.steps_per_epoch(n, batch, True) == len(kept) and tr.steps_per_epoch(n, batch) == len(every)


def test_drop_last_in_the_training_loop(tiny_task):
    seen: list[int] = []

    def step(index):
        seen.append(len(index))
        return {}

    spec = load_task(tiny_task, ["train.batch_size=100", "train.drop_last=true"])
    t = spec.methods["contrastive"].train
    tr.run_epoch(step, 240, t.batch_size, torch.Generator().manual_seed(0), drop_last=t.drop_last)
    assert seen == [100, 100]


def test_nesterov_is_passed_to_sgd_and_refused_elsewhere(tiny_task):
    spec = load_task(tiny_task, ["train.optimizer=sgd", "train.nesterov=true"])
    method = runner.build_method(spec, "contrastive", runner.load_data(spec), torch.device("cpu"))
    group = tr.make_optimizer(method, spec.methods["contrastive"].train).param_groups[0]
    assert group["nesterov"] is True and group["momentum"] == 0.9
    plain = load_task(tiny_task, ["train.optimizer=sgd"])
    assert tr.make_optimizer(method, plain.methods["contrastive"].train).param_groups[0]["nesterov"] is False
    with pytest.raises(ConfigError, match="nesterov applies to optimizer sgd only"):
        load_task(tiny_task, ["train.optimizer=adam", "train.nesterov=true"])
    with pytest.raises(ConfigError, match="early_stop_patience must be >= 1"):
        load_task(tiny_task, ["train.early_stop_patience=0"])
