"""Bad inputs and faults against data, training, checkpoints and decoding (issue 15;
tests/test_bad_inputs.py covers attention, masks, layers, the model and tracing). Each case asserts
the exception type and that the message names the offending value or shape, or asserts the safe
result."""

import math
import re

import numpy as np
import pytest
import torch

import transformer_lib as tl
from transformer_lib.training.train import DivergenceWarning

# --------------------------------------------------------------------------------------------------
# data


@pytest.mark.parametrize(
    ("pad_id", "error", "message"),
    [
        (7, ValueError, "pad_id must lie in [0, 7), got pad_id=7"),
        (-1, ValueError, "pad_id must lie in [0, 7), got pad_id=-1"),
        (2.0, TypeError, "pad_id must be an int, got 2.0 of type float"),
    ],
)
def test_vocab_pad_id_outside_the_vocabulary(pad_id, error, message):
    with pytest.raises(error, match=re.escape(message)):
        tl.Vocab("abc", pad_id=pad_id)


def test_vocab_decode_of_a_batch_names_its_shape():
    vocab = tl.Vocab("abc")
    with pytest.raises(ValueError, match=r"one sequence \(T,\), got a tensor of shape \(2, 3\)"):
        vocab.decode(torch.ones(2, 3, dtype=torch.long))


def test_vocab_decode_of_non_ids():
    with pytest.raises(TypeError, match="sequence of int ids, got an element 'a'"):
        tl.Vocab("abc").decode(["a", "b"])


def test_vocab_decode_of_an_unknown_id_is_unk():
    assert tl.Vocab("abc").decode([4, 99, 5]) == "a<unk>b"


def test_make_batch_of_nothing():
    with pytest.raises(ValueError, match="at least one"):
        tl.make_batch([], tl.Vocab("abc"))


# "ab" used to unpack silently as ("a", "b")
def test_make_batch_of_bare_strings_instead_of_pairs():
    with pytest.raises(TypeError, match=r"\(source text, target text\) pairs, got an element 'ab'"):
        tl.make_batch(["ab", "cd"], tl.Vocab("abcd"))


def test_vocab_decode_takes_numpy_ids():
    vocab = tl.Vocab("abc")
    assert vocab.decode(np.array(vocab.encode("cab"))) == "cab"


def test_date_range_whose_first_year_is_after_its_last():
    with pytest.raises(ValueError, match="got first_year=2020, last_year=2010"):
        tl.DateTask(first_year=2020, last_year=2010)


def test_date_range_outside_the_calendar():
    with pytest.raises(ValueError, match="got first_year=0, last_year=2000"):
        tl.DateTask(first_year=0, last_year=2000)


def test_date_task_with_more_held_out_days_than_days():
    with pytest.raises(
        ValueError, match="below the 365 days of 2021-2021, got num_test=300, num_valid=100"
    ):
        tl.DateTask(num_test=300, num_valid=100, first_year=2021, last_year=2021)


def test_copy_task_with_an_empty_alphabet():
    with pytest.raises(
        ValueError, match="alphabet must hold at least one character, got an empty string"
    ):
        tl.CopyTask(alphabet="")


@pytest.mark.parametrize(
    ("field", "value", "error", "message"),
    [
        ("num_test", 0, ValueError, "num_test must be >= 1, got num_test=0"),
        ("num_test", 2.5, TypeError, "num_test must be an int, got 2.5 of type float"),
        ("num_valid", -1, ValueError, "num_valid must be >= 0, got num_valid=-1"),
    ],
)
def test_copy_task_with_an_empty_or_odd_split(field, value, error, message):
    with pytest.raises(error, match=re.escape(message)):
        tl.CopyTask(**{field: value})


def test_copy_task_that_would_hold_out_most_strings():
    with pytest.raises(
        ValueError, match="num_test \\+ num_valid = 20 is more than half of the 6 possible strings"
    ):
        tl.CopyTask(num_test=10, num_valid=10, min_len=1, max_len=2, alphabet="ab")


def test_copy_task_with_lengths_the_wrong_way_round():
    with pytest.raises(ValueError, match="got min_len=5, max_len=3"):
        tl.CopyTask(min_len=5, max_len=3)


# ------------------------------------------------------------------------------------------------
# training


def test_label_smoothing_with_a_target_outside_the_vocabulary():
    with pytest.raises(ValueError, match=r"target holds id 9, outside the vocabulary \[0, 9\)"):
        tl.LabelSmoothingLoss(0.1)(torch.randn(1, 2, 9), torch.tensor([[4, 9]]))


def test_label_smoothing_with_a_negative_target():
    with pytest.raises(ValueError, match=r"target holds id -1, outside the vocabulary \[0, 9\)"):
        tl.LabelSmoothingLoss(0.0)(torch.randn(1, 2, 9), torch.tensor([[-1, 3]]))


def test_label_smoothing_with_a_vocabulary_too_small_to_smooth():
    with pytest.raises(ValueError, match="vocab_size=2 is too small to smooth: eps=0.1"):
        tl.LabelSmoothingLoss(0.1)(torch.randn(1, 2, 2), torch.tensor([[1, 1]]))


def test_no_smoothing_on_a_two_token_vocabulary_is_plain_cross_entropy():
    logits, target = torch.randn(1, 3, 2, requires_grad=True), torch.tensor([[1, 1, 0]])
    loss = tl.LabelSmoothingLoss(0.0)(logits, target)
    expected = torch.nn.functional.cross_entropy(logits[0, :2], target[0, :2])
    torch.testing.assert_close(loss, expected)
    loss.backward()
    assert torch.isfinite(logits.grad).all()


@pytest.mark.parametrize("eps", [1.0, -0.1])
def test_label_smoothing_eps_outside_its_range(eps):
    with pytest.raises(ValueError, match=re.escape(f"eps must lie in [0, 1), got eps={eps}")):
        tl.smoothed_targets(torch.tensor([3]), 9, eps)


def test_label_smoothing_with_float_targets():
    with pytest.raises(TypeError, match="integer token ids, got dtype torch.float32"):
        tl.smoothed_targets(torch.tensor([3.0]), 9, 0.1)


def test_label_smoothing_with_a_pad_id_outside_the_vocabulary():
    with pytest.raises(ValueError, match=r"pad_id must lie in \[0, 9\), got pad_id=9"):
        tl.smoothed_targets(torch.tensor([3]), 9, 0.1, pad_id=9)


def test_label_smoothing_with_logits_and_targets_of_different_shapes():
    with pytest.raises(ValueError, match=r"logits \(2, 4, 9\) must be target \(2, 5\)"):
        tl.LabelSmoothingLoss()(torch.randn(2, 4, 9), torch.zeros(2, 5, dtype=torch.long))


def fresh_trainer(lr=3e-3, task=None):
    task = task or tl.CopyTask(num_test=10, num_valid=10)
    tl.seed_everything(0)
    model = tl.Transformer(tl.TransformerConfig.cpu_tiny(len(task.vocab)))
    optimizer, scheduler = tl.adam_with_warmup(model, lr=lr, warmup=2, total_steps=50)
    return tl.Trainer(model, optimizer, scheduler), task


def test_a_batch_whose_targets_are_all_padding_records_nothing():
    trainer, task = fresh_trainer()
    batch = task.train_batch(0, 4)
    batch.tgt_out.fill_(task.vocab.pad_id)
    with pytest.raises(
        ValueError, match=r"batch of shape \(4, \d+\) has no target token .*pad_id=0"
    ):
        trainer.train_step(batch)
    assert trainer.step == 0 and trainer.history.token_accuracy == [] and trainer.history.loss == []


def test_token_accuracy_is_never_nan():
    trainer, task = fresh_trainer()
    trainer.fit(lambda s: task.train_batch(s, 8), 3, progress=False)
    assert all(0.0 <= a <= 1.0 for a in trainer.history.token_accuracy)


def test_adam_at_lr_1e3_warns_that_training_diverges():
    trainer, task = fresh_trainer(lr=1e3)
    with pytest.warns(
        DivergenceWarning, match=r"loss [\d.e+]+ at step \d+ is more than 10 times the first step's"
    ):
        try:
            trainer.fit(lambda s: task.train_batch(s, 16), 10, progress=False)
        except FloatingPointError as error:  # if it overflows later, that is its own clear error
            assert "lower the learning rate" in str(error)


def test_a_nan_loss_stops_training_with_the_step():
    trainer, task = fresh_trainer()
    with torch.no_grad():
        trainer.model.output_projection.weight[5, 0] = float("nan")
    with pytest.raises(FloatingPointError, match="loss became nan at step 0"):
        trainer.train_step(task.train_batch(0, 4))


def test_a_loss_that_ignores_another_pad_id_than_the_batch():
    trainer, task = fresh_trainer()
    trainer.loss_fn = tl.LabelSmoothingLoss(0.0, pad_id=3)
    with pytest.raises(ValueError, match="the batch pads with id 0 but the loss ignores pad_id=3"):
        trainer.train_step(task.train_batch(0, 4))


@pytest.mark.parametrize(
    ("changes", "error", "message"),
    [
        ({"steps": 0}, ValueError, "steps must be >= 1, got steps=0"),
        ({"batch_size": 1.5}, TypeError, "batch_size must be an int, got 1.5 of type float"),
        ({"warmup": 1600}, ValueError, "warmup must be below steps, got warmup=1600, steps=1600"),
        ({"lr": math.nan}, ValueError, "lr must be finite and > 0, got lr=nan"),
        ({"lr": -1e-3}, ValueError, "lr must be finite and > 0, got lr=-0.001"),
        ({"eps_ls": 1.0}, ValueError, r"eps_ls must lie in \[0, 1\), got eps_ls=1.0"),
    ],
)
def test_training_recipe_with_a_bad_field(changes, error, message):
    with pytest.raises(error, match=message):
        tl.CPU_RECIPE.replace(**changes)


@pytest.mark.parametrize(
    ("d_model", "warmup", "named"), [(512, 0, "warmup=0"), (0, 4000, "d_model=0")]
)
# was a bare ZeroDivisionError
def test_noam_schedule_with_no_warmup_or_no_width(d_model, warmup, named):
    with pytest.raises(ValueError, match=f"must be >= 1, got {named}"):
        tl.noam_lr(10, d_model, warmup)


def test_warmup_longer_than_training():
    with pytest.raises(ValueError, match="got warmup=100, total_steps=50"):
        tl.warmup_linear_decay(1, 100, 50)


# ---------------------------------------------------------------------------------------------
# checkpoints


def two_layer_trainer(task):
    tl.seed_everything(1)
    model = tl.Transformer(tl.TransformerConfig.cpu_tiny(len(task.vocab)).replace(num_layers=2))
    optimizer, scheduler = tl.adam_with_warmup(model, lr=3e-3, warmup=2, total_steps=50)
    return tl.Trainer(model, optimizer, scheduler)


def snapshot(model):
    return {name: tensor.clone() for name, tensor in model.state_dict().items()}


def assert_unchanged(model, before):
    for name, tensor in model.state_dict().items():
        assert torch.equal(tensor, before[name]), name


def test_loading_a_checkpoint_with_more_layers_names_them_and_changes_nothing(tmp_path):
    one_layer, task = fresh_trainer()
    path = two_layer_trainer(task).save_checkpoint(tmp_path / "two.pt")
    one_layer.fit(lambda s: task.train_batch(s, 4), 1, progress=False)
    before, optimizer_before = (
        snapshot(one_layer.model),
        one_layer.optimizer.state_dict()["state"][0]["exp_avg"].clone(),
    )
    with pytest.raises(
        tl.CheckpointError,
        match=r"different model \(unexpected \['decoder.layers.1.*nothing was loaded",
    ):
        one_layer.load_checkpoint(path)
    assert_unchanged(one_layer.model, before)
    assert torch.equal(one_layer.optimizer.state_dict()["state"][0]["exp_avg"], optimizer_before)
    assert one_layer.step == 1


def test_loading_a_checkpoint_of_another_width_names_the_shape(tmp_path):
    trainer, task = fresh_trainer()
    tl.seed_everything(0)
    wide = tl.Transformer(
        tl.TransformerConfig.cpu_tiny(len(task.vocab)).replace(d_model=32, d_ff=64)
    )
    optimizer, _ = tl.adam_with_warmup(wide, lr=1e-3, warmup=1, total_steps=5)
    path = tl.Trainer(wide, optimizer).save_checkpoint(tmp_path / "wide.pt")
    before = snapshot(trainer.model)
    with pytest.raises(
        tl.CheckpointError, match=r"has shape \(\d+, 32\), the model's is \(\d+, 64\)"
    ):
        trainer.load_checkpoint(path)
    assert_unchanged(trainer.model, before)


def test_load_model_weights_of_another_model_changes_nothing(tmp_path):
    trainer, task = fresh_trainer()
    path = two_layer_trainer(task).save_checkpoint(tmp_path / "two.pt")
    before = snapshot(trainer.model)
    with pytest.raises(tl.CheckpointError, match="nothing was loaded"):
        tl.load_model_weights(trainer.model, path)
    assert_unchanged(trainer.model, before)


def test_a_failed_save_leaves_no_tmp_file_and_keeps_the_old_checkpoint(tmp_path, monkeypatch):
    trainer, _ = fresh_trainer()
    path = trainer.save_checkpoint(tmp_path / "ckpt.pt")
    good = path.read_bytes()

    def disk_full(state, target):
        with open(target, "wb") as file:
            file.write(b"half a file")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(torch, "save", disk_full)
    with pytest.raises(OSError, match="No space left on device"):
        trainer.save_checkpoint(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt.pt"] and path.read_bytes() == good


def test_a_truncated_checkpoint(tmp_path):
    trainer, _ = fresh_trainer()
    path = trainer.save_checkpoint(tmp_path / "ckpt.pt")
    path.write_bytes(path.read_bytes()[:64])
    with pytest.raises(
        tl.CheckpointError, match="ckpt.pt': it is truncated, corrupt or not a torch file"
    ):
        tl.train.read_checkpoint(path)


def test_a_missing_checkpoint(tmp_path):
    with pytest.raises(FileNotFoundError):
        tl.train.read_checkpoint(tmp_path / "missing.pt")


# ------------------------------------------------------------------------------------------------
# decoding


@pytest.fixture(scope="module")
def untrained():
    tl.seed_everything(0)
    model = tl.Transformer(tl.TransformerConfig.cpu_tiny(10)).eval()
    return model, torch.randint(4, 10, (2, 5))


def test_beam_wider_than_the_vocabulary(untrained):
    model, src = untrained
    with pytest.raises(ValueError, match="beam_width=12 must be below the vocabulary size 10"):
        tl.beam_search(model, src, 5, 1, 2, beam_width=12)


@pytest.mark.parametrize(
    ("width", "error", "message"),
    [
        (0, ValueError, "beam_width must be >= 1, got beam_width=0"),
        (2.0, TypeError, "beam_width must be an int, got 2.0 of type float"),
        (True, TypeError, "beam_width must be an int, got True of type bool"),
    ],
)
def test_beam_width_that_is_not_a_positive_whole_number(untrained, width, error, message):
    model, src = untrained
    with pytest.raises(error, match=re.escape(message)):
        tl.beam_search(model, src, 5, 1, 2, beam_width=width)


@pytest.mark.parametrize("temperature", [math.nan, math.inf, -math.inf, -0.5])
def test_sampling_temperature_that_is_nan_infinite_or_negative(untrained, temperature):
    model, src = untrained
    message = f"temperature must be finite and >= 0, got temperature={temperature} (0 means greedy)"
    with pytest.raises(ValueError, match=re.escape(message)):
        tl.sample_decode(model, src, 5, 1, 2, temperature=temperature)


def test_sampling_temperature_that_is_not_a_number(untrained):
    model, src = untrained
    with pytest.raises(TypeError, match="temperature must be a real number, got 'hot' of type str"):
        tl.sample_decode(model, src, 5, 1, 2, temperature="hot")


@pytest.mark.parametrize("temperature", [0, 0.0, 1e-12, 1e-7])
def test_a_vanishing_temperature_is_greedy(untrained, temperature):
    model, src = untrained
    sampled = tl.sample_decode(model, src, 6, 1, 2, temperature=temperature)
    assert torch.equal(sampled, tl.greedy_decode(model, src, 6, 1, 2))


def test_a_tiny_temperature_above_the_cut_gives_no_nan(untrained):
    model, src = untrained
    sampled = tl.sample_decode(
        model, src, 6, 1, 2, temperature=2e-6, generator=torch.Generator().manual_seed(0)
    )
    assert torch.equal(sampled, tl.greedy_decode(model, src, 6, 1, 2))


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ({"top_k": 0}, "top_k must be >= 1, got top_k=0"),
        ({"top_k": 2.5}, "top_k must be an int, got 2.5 of type float"),
        ({"top_p": 0.0}, "top_p must be in (0, 1], got top_p=0.0 (or None for no cut)"),
        ({"top_p": 1.5}, "top_p must be in (0, 1], got top_p=1.5 (or None for no cut)"),
        ({"top_p": math.nan}, "top_p must be in (0, 1], got top_p=nan (or None for no cut)"),
    ],
)
def test_sampling_cut_that_makes_no_sense(untrained, setting, message):
    model, src = untrained
    with pytest.raises(
        TypeError if "must be an int" in message else ValueError, match=re.escape(message)
    ):
        tl.sample_decode(model, src, 5, 1, 2, **setting)


def test_exact_match_of_nothing(untrained):
    model, _ = untrained
    with pytest.raises(ValueError, match="at least one"):
        tl.exact_match(model, [], tl.Vocab("abcdef"))


def test_exact_match_in_batches_of_zero(untrained):
    model, _ = untrained
    with pytest.raises(ValueError, match="batch_size must be >= 1, got batch_size=0"):
        tl.exact_match(model, [("ab", "ab")], tl.Vocab("abcdef"), batch_size=0)


@pytest.mark.parametrize("decode", [tl.greedy_decode, tl.beam_search])
def test_decoding_length_that_is_not_a_whole_number(untrained, decode):
    model, src = untrained
    with pytest.raises(TypeError, match="max_len must be an int, got 5.0"):
        decode(model, src, 5.0, 1, 2)


def test_a_numpy_temperature_is_a_number(untrained):
    model, src = untrained
    generator = torch.Generator().manual_seed(0)
    sampled = tl.sample_decode(
        model, src, 5, 1, 2, temperature=np.float32(0.5), generator=generator
    )
    assert sampled.shape[0] == 2 and sampled.dtype == torch.long


# a grid read from a CSV hands NumPy scalars
def test_numpy_whole_numbers_are_whole_numbers(untrained):
    task = tl.CopyTask(num_test=np.int64(10), num_valid=np.int64(10), pad_id=np.int64(3))
    assert len(task.test_pairs) == 10 and task.vocab.pad_id == 3
    recipe = tl.TrainingRecipe(
        steps=np.int64(20), batch_size=np.int32(4), lr=1e-3, warmup=np.int64(2), eps_ls=0.0
    )
    assert recipe.steps == 20 and type(recipe.steps) is int
    model, src = untrained
    assert len(tl.beam_search(model, src, 5, 1, 2, beam_width=np.int64(2))) == 2
    assert (
        torch.isfinite(tl.decode.filter_top_k_top_p(torch.randn(2, 9), top_k=np.int64(2))).sum()
        == 4
    )


@pytest.mark.parametrize(
    ("value", "rule"),
    [(0.0, "in (0, 1]"), (1.5, "in (0, 1]"), (math.nan, "finite"), (-0.5, "finite and >= 0")],
)
def test_a_real_number_that_breaks_its_rule_is_named_with_the_rule(value, rule):
    from transformer_lib._arguments import check_real

    with pytest.raises(ValueError, match=re.escape(f"x must be {rule}, got x={value} (hint)")):
        check_real("x", value, rule, "(hint)")
    with pytest.raises(TypeError, match="x must be a real number, got True of type bool"):
        check_real("x", True, rule)
    check_real("x", np.float32(0.5), rule)  # NumPy scalars pass


def test_masking_rate_outside_0_1():
    tokens = torch.randint(4, 10, (2, 5))
    with pytest.raises(ValueError, match=re.escape("rate must be in (0, 1], got rate=0.0")):
        tl.lm.mask_tokens(tokens, 3, 10, rate=0.0)


def test_generating_past_max_len_names_the_prompt_and_the_new_tokens():
    tl.seed_everything(0)
    model = tl.DecoderOnlyLM(tl.LMConfig.cpu_char(10).replace(max_len=8)).eval()
    message = (
        "positions 0..9 (prompt length 4 + max_new_tokens 6) exceed max_len=8 of DecoderOnlyLM; "
        "use a shorter input or a config with a larger max_len"
    )
    with pytest.raises(ValueError, match=re.escape(message)):
        tl.lm.generate(model, torch.randint(0, 10, (1, 4)), 6)
