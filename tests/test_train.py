import dataclasses
import warnings

import pytest
import torch
import torch.nn.functional as F

import transformer_lib as tl


def test_smoothed_targets_put_1_minus_eps_on_target_and_spread_eps_without_pad():
    target = torch.tensor([3, 0, 5])  # the middle one is padding
    dist = tl.smoothed_targets(target, vocab_size=7, eps=0.1, pad_id=0)
    assert dist[0, 3].item() == pytest.approx(0.9)
    assert dist[0, 0].item() == 0.0  # <pad> never gets probability
    others = [i for i in range(7) if i not in (0, 3)]
    torch.testing.assert_close(dist[0, others], torch.full((5,), 0.1 / 5))
    torch.testing.assert_close(dist.sum(-1), torch.tensor([1.0, 0.0, 1.0]))
    assert torch.all(dist[1] == 0)  # a padding position carries no target at all


def test_label_smoothing_loss_ignores_padding_and_equals_cross_entropy_at_eps_0():
    logits = torch.randn(2, 4, 9)
    target = torch.tensor([[4, 5, 0, 0], [6, 7, 8, 0]])
    plain = F.cross_entropy(logits.view(-1, 9), target.view(-1), ignore_index=0)
    torch.testing.assert_close(tl.LabelSmoothingLoss(0.0)(logits, target), plain)
    changed = logits.clone()
    changed[target == 0] = 100.0  # whatever the model predicts at padding changes nothing
    loss = tl.LabelSmoothingLoss(0.1)
    torch.testing.assert_close(loss(changed, target), loss(logits, target))


@pytest.mark.parametrize("eps", [0.0, 0.1, 0.3])
def test_label_smoothing_loss_equals_the_textbook_form_and_its_gradients(eps):
    logits = (torch.randn(3, 5, 11, dtype=torch.float64) * 3).requires_grad_()
    target = torch.tensor([[4, 5, 2, 0, 0], [6, 7, 8, 10, 0], [1, 1, 3, 9, 2]])
    # the textbook form: the full (B*T, V) table of target distributions times the log-probs
    dist = tl.smoothed_targets(target, 11, eps, pad_id=0).double()
    log_probs = logits.reshape(-1, 11).log_softmax(dim=-1)
    textbook = -(dist * log_probs).sum() / (target != 0).sum()
    ours = tl.LabelSmoothingLoss(eps, pad_id=0)(logits, target)
    torch.testing.assert_close(ours, textbook, rtol=0, atol=1e-6)
    (expected,) = torch.autograd.grad(textbook, logits)
    (got,) = torch.autograd.grad(ours, logits)
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-6)
    # another pad id, in float32
    logits32, target32 = torch.randn(2, 4, 9), torch.tensor([[4, 5, 3, 3], [6, 7, 8, 0]])
    dist32 = tl.smoothed_targets(target32, 9, eps, pad_id=3)
    textbook32 = -(dist32 * logits32.view(-1, 9).log_softmax(-1)).sum() / (target32 != 3).sum()
    ours32 = tl.LabelSmoothingLoss(eps, pad_id=3)(logits32, target32)
    torch.testing.assert_close(ours32, textbook32, rtol=0, atol=1e-6)
    # 16-bit logits (autocast) are scored in float32
    logits16 = logits32.bfloat16()
    ours16 = tl.LabelSmoothingLoss(eps, pad_id=3)(logits16, target32)
    textbook16 = -(dist32 * logits16.float().view(-1, 9).log_softmax(-1)).sum() / 6
    assert ours16.dtype == torch.float32
    torch.testing.assert_close(ours16, textbook16, rtol=0, atol=1e-6)


def test_label_smoothing_loss_names_shape_mismatch():
    with pytest.raises(ValueError, match=r"logits \(2, 4, 9\) must be target \(2, 3\)"):
        tl.LabelSmoothingLoss()(torch.randn(2, 4, 9), torch.zeros(2, 3, dtype=torch.long))


def test_noam_schedule_peaks_at_warmup():
    rates = [tl.noam_lr(step, d_model=512, warmup=4000) for step in range(1, 20001)]
    assert max(range(len(rates)), key=rates.__getitem__) + 1 == 4000
    assert rates[3999] == pytest.approx(512**-0.5 * 4000**-0.5)


def test_paper_optimizer_follows_the_schedule():
    model = torch.nn.Linear(2, 2)
    optimizer, scheduler = tl.paper_optimizer(model, d_model=512, warmup=10)
    for step in range(1, 15):
        assert optimizer.param_groups[0]["lr"] == pytest.approx(tl.noam_lr(step, 512, 10))
        optimizer.step()
        scheduler.step()
    assert optimizer.defaults["betas"] == (0.9, 0.98) and optimizer.defaults["eps"] == 1e-9


def test_warmup_linear_decay_rises_peaks_and_ends_at_zero():
    values = [tl.warmup_linear_decay(s, 10, 100) for s in range(1, 101)]
    assert values[9] == 1.0 and values[-1] == 0.0 and values[4] == pytest.approx(0.5)
    with pytest.raises(ValueError, match="0 < warmup < total_steps"):
        tl.warmup_linear_decay(1, 100, 100)


def tiny_trainer(task, dropout=0.1):
    tl.seed_everything(0)
    config = tl.TransformerConfig.cpu_tiny(len(task.vocab)).replace(dropout=dropout)
    model = tl.Transformer(config)
    optimizer, scheduler = tl.adam_with_warmup(model, lr=3e-3, warmup=2, total_steps=20)
    return tl.Trainer(model, optimizer, scheduler, tl.LabelSmoothingLoss(0.1))


def test_training_lowers_the_loss_and_records_history():
    task = tl.CopyTask()
    trainer = tiny_trainer(task)
    history = trainer.fit(lambda s: task.train_batch(s, 32), 20, progress=False)
    assert len(history.loss) == len(history.token_accuracy) == len(history.lr) == 20 == trainer.step
    assert sum(history.loss[-5:]) < sum(history.loss[:5])


def test_progress_sums_up_the_run_and_quiet_prints_nothing(capsys):
    task = tl.CopyTask()
    trainer = tiny_trainer(task)
    trainer.fit(lambda s: task.train_batch(s, 8), 3, progress=False)
    assert capsys.readouterr().out == ""
    trainer.fit(lambda s: task.train_batch(s, 8), 5, progress=True)
    summary = capsys.readouterr().out
    assert summary.startswith("trained steps 4-5 in ")
    assert f"loss {trainer.history.loss[3]:.3f} -> {trainer.history.loss[4]:.3f}" in summary


def test_resumed_checkpoint_continues_with_the_same_loss(tmp_path):
    task = tl.CopyTask()
    get_batch = lambda s: task.train_batch(s, 16)
    straight = tiny_trainer(task)
    straight.fit(get_batch, 8, progress=False)

    first = tiny_trainer(task)
    first.fit(get_batch, 4, progress=False)
    path = first.save_checkpoint(tmp_path / "ckpt.pt")
    # disturb the global RNG: the checkpoint must restore it (dropout is on)
    torch.manual_seed(1234)

    resumed = tiny_trainer(task)
    resumed.load_checkpoint(path)
    assert resumed.step == 4
    resumed.fit(get_batch, 8, progress=False)
    assert resumed.history.loss == pytest.approx(straight.history.loss, abs=1e-6)
    assert not (tmp_path / "ckpt.pt.tmp").exists()


def test_corrupt_checkpoint_raises_a_clear_error(tmp_path):
    task = tl.CopyTask()
    trainer = tiny_trainer(task)
    path = trainer.save_checkpoint(tmp_path / "ckpt.pt")
    path.write_bytes(path.read_bytes()[:100])  # truncated, as by a full disk
    with pytest.raises(tl.CheckpointError, match="truncated, corrupt or not a torch file"):
        trainer.load_checkpoint(path)


def test_foreign_file_is_not_a_checkpoint(tmp_path):
    path = tmp_path / "weights.pt"
    torch.save({"weight": torch.zeros(2)}, path)
    with pytest.raises(tl.CheckpointError, match="is not a Trainer checkpoint: expected keys"):
        tiny_trainer(tl.CopyTask()).load_checkpoint(path)


def test_a_diverging_loss_is_reported():
    task = tl.CopyTask()
    trainer = tiny_trainer(task)
    with torch.no_grad():
        trainer.model.output_projection.weight.fill_(float("nan"))
    with pytest.raises(FloatingPointError, match="loss became nan at step 0"):
        trainer.train_step(task.train_batch(0, 4))


def test_load_model_weights_restores_a_trained_model(tmp_path):
    task = tl.CopyTask()
    trainer = tiny_trainer(task)
    trainer.fit(lambda s: task.train_batch(s, 16), 3, progress=False)
    path = trainer.save_checkpoint(tmp_path / "ckpt.pt")
    fresh = tl.Transformer(trainer.model.config)
    tl.load_model_weights(fresh, path)
    for (name, a), b in zip(
        trainer.model.state_dict().items(), fresh.state_dict().values(), strict=True
    ):
        assert torch.equal(a, b), name


def test_train_task_recipe_learns_the_copy_task():
    task = tl.CopyTask(num_test=100)
    trainer = tl.train_task(task, steps=300, lr=5e-3, warmup=30, progress=False)
    assert trainer.step == 300
    assert tl.exact_match(trainer.model, task.test_pairs, task.vocab) > 0.9


def test_the_cpu_recipe_is_one_frozen_object_that_train_task_reads(monkeypatch):
    recipe = tl.CPU_RECIPE
    assert (recipe.steps, recipe.batch_size, recipe.lr, recipe.warmup) == (1600, 64, 3e-3, 100)
    with pytest.raises(dataclasses.FrozenInstanceError):
        recipe.steps = 10
    shorter = recipe.replace(steps=5, warmup=2, eps_ls=0.1)
    assert (
        shorter.eps_ls == 0.1 and shorter.batch_size == recipe.batch_size and recipe.steps == 1600
    )
    seen = []
    task = tl.CopyTask(num_test=10, num_valid=10)
    monkeypatch.setattr(
        task,
        "train_batch",
        lambda step, size: seen.append(size) or tl.CopyTask.train_batch(task, step, size),
    )
    trainer = tl.train_task(task, recipe=shorter, batch_size=8, progress=False)
    assert trainer.step == 5 and seen == [8] * 5
    assert trainer.loss_fn.eps == 0.1  # the recipe's eps_ls; the config has none
    assert not hasattr(trainer.model.config, "label_smoothing")
    assert max(trainer.history.lr) == pytest.approx(shorter.lr)  # the recipe's peak learning rate


def test_train_task_refuses_a_config_that_disagrees_with_the_task():
    task = tl.CopyTask(num_test=10, num_valid=10)
    config = tl.TransformerConfig.cpu_tiny(len(task.vocab))
    with pytest.raises(ValueError, match="config.pad_id=3 but the task's vocabulary pads with 0"):
        tl.train_task(task, config.replace(pad_id=3), steps=3, warmup=1, eps_ls=0.0, progress=False)
    with pytest.raises(TypeError, match="unexpected keyword argument 'learning_rate'"):
        tl.train_task(task, learning_rate=1e-3)


def test_a_non_zero_pad_id_trains_and_decodes():
    task = tl.CopyTask(num_test=50, num_valid=10, pad_id=7)
    v = task.vocab
    assert v.pad_id == 7 and v.itos[7] == "<pad>"
    trainer = tl.train_task(task, steps=300, lr=5e-3, warmup=30, progress=False)
    assert trainer.model.config.pad_id == 7 and trainer.loss_fn.pad_id == 7
    assert all(0.0 <= a <= 1.0 for a in trainer.history.token_accuracy)
    assert tl.exact_match(trainer.model, task.test_pairs, v) > 0.9
    src = tl.make_batch(task.test_pairs[:4], v).src  # padded with 7
    out = tl.greedy_decode(trainer.model, src, 12, v.bos_id, v.eos_id)
    assert [v.decode(row) for row in out] == [t for _, t in task.test_pairs[:4]]


def test_a_loss_far_above_its_start_warns_once_as_divergence():
    task = tl.CopyTask()
    trainer = tiny_trainer(task)
    trainer.train_step(task.train_batch(0, 8))
    trainer.history.loss[0] = 0.01  # pretend the run started far lower than where it is now
    with pytest.warns(
        tl.train.DivergenceWarning, match=r"more than 10 times the first step's 0.01"
    ):
        trainer.train_step(task.train_batch(1, 8))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        trainer.train_step(task.train_batch(2, 8))  # once is enough


def test_adam_at_an_absurd_learning_rate_is_reported():
    task = tl.CopyTask()
    tl.seed_everything(0)
    model = tl.Transformer(tl.TransformerConfig.cpu_tiny(len(task.vocab)))
    trainer = tl.Trainer(model, torch.optim.Adam(model.parameters(), lr=1e3), clip_grad_norm=None)
    with pytest.warns(tl.train.DivergenceWarning, match="training is diverging"):
        try:
            trainer.fit(lambda s: task.train_batch(s, 16), 10, progress=False)
        except FloatingPointError:
            pass  # going on, the loss may overflow: that stops training with its own error


def test_a_trainer_reads_another_kind_of_batch_through_a_batch_kind():
    """A Trainer is told how to check and run a batch (BatchKind), not by the model's type."""
    task = tl.CopyTask(num_test=10, num_valid=10)
    model = tl.Transformer(tl.TransformerConfig.cpu_tiny(len(task.vocab)))
    seen = []

    def forward(model, pair, device):
        batch = pair[0].to(device)
        seen.append(batch.src.shape)
        logits = model(batch.src, batch.tgt_in, batch.src_mask, batch.tgt_mask)  # (B, T, V)
        return logits, batch.tgt_out, batch.tgt_out != batch.pad_id

    kind = tl.train.BatchKind(check=lambda pair, loss_fn: None, forward=forward)
    trainer = tl.Trainer(model, torch.optim.Adam(model.parameters(), lr=1e-3), batches=kind)
    loss = trainer.train_step((task.train_batch(0, 4), "anything else"))
    assert len(seen) == 1 and seen[0][0] == 4 and trainer.step == 1 and loss > 0
    assert trainer.loss_fn is None  # the default loss: cross-entropy over the counted positions


def test_token_accuracy_is_the_share_of_counted_positions_whose_argmax_is_the_target():
    task = tl.CopyTask(num_test=10, num_valid=10)
    tl.seed_everything(0)
    model = tl.Transformer(tl.TransformerConfig.cpu_tiny(len(task.vocab)))
    seen = []

    def forward(model, batch, device):
        logits, target, counted = tl.train.SEQ2SEQ_BATCHES.forward(model, batch, device)
        seen.append((logits.detach(), target, counted))  # (B, T, V), (B, T), (B, T)
        return logits, target, counted

    kind = tl.train.BatchKind(check=tl.train.SEQ2SEQ_BATCHES.check, forward=forward)
    trainer = tl.Trainer(model, torch.optim.Adam(model.parameters(), lr=3e-3), batches=kind)
    trainer.fit(lambda s: task.train_batch(s, 16), 30, progress=False)
    for (logits, target, counted), accuracy in zip(
        seen, trainer.history.token_accuracy, strict=True
    ):
        hits = ((logits.argmax(-1) == target) & counted).sum()
        assert accuracy == pytest.approx((hits / counted.sum()).item(), abs=1e-6)
    assert 0 < trainer.history.token_accuracy[-1] < 1  # a step with both hits and misses
