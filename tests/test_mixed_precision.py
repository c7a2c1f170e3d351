"""Trainer(precision=...): bfloat16 and float16 autocast in the one training loop, and checkpoints
that resume the float16 gradient scaler. Everything runs on the CPU (bfloat16 autocast runs there;
float16 too where this PyTorch has it)."""

import pytest
import torch

import transformer_lib as tl
from transformer_lib.training.train import PRECISIONS


def _cpu_fp16_available() -> bool:
    try:
        tl.Trainer(
            torch.nn.Linear(1, 1), torch.optim.SGD([torch.zeros(1)], lr=1.0), precision="fp16"
        )
    except ValueError:
        return False
    return True


def tiny_trainer(task, precision="fp32"):
    tl.seed_everything(0)
    config = tl.TransformerConfig.cpu_tiny(len(task.vocab)).replace(dropout=0.1)
    model = tl.Transformer(config)
    optimizer, scheduler = tl.adam_with_warmup(model, lr=3e-3, warmup=2, total_steps=20)
    loss = tl.LabelSmoothingLoss(0.1)
    return tl.Trainer(model, optimizer, scheduler, loss, precision=precision)


def test_bf16_trains_under_autocast_and_keeps_float32_weights():
    task = tl.CopyTask()
    trainer = tiny_trainer(task, "bf16")
    seen = []
    hook = trainer.model.output_projection.register_forward_hook(
        lambda m, i, out: seen.append(out.dtype)
    )
    history = trainer.fit(lambda s: task.train_batch(s, 32), 20, progress=False)
    hook.remove()
    assert seen and set(seen) == {torch.bfloat16}  # the output projection ran in 16 bits
    assert all(p.dtype == torch.float32 for p in trainer.model.parameters())
    assert trainer.scaler is None  # bfloat16 has float32's range: no loss scaling
    assert sum(history.loss[-5:]) < sum(history.loss[:5])


def test_fp32_is_the_default_and_runs_without_autocast():
    trainer = tiny_trainer(tl.CopyTask())
    assert trainer.precision == "fp32" and trainer.autocast_dtype is None and trainer.scaler is None


@pytest.mark.parametrize("bad", ["float16", "bf32", None, 16, ["bf16"]])
def test_an_unknown_precision_names_the_choices(bad):
    with pytest.raises(ValueError, match=r"precision must be one of \['bf16', 'fp16', 'fp32'\]"):
        tiny_trainer(tl.CopyTask(), bad)


def test_a_precision_the_device_lacks_is_refused_not_silently_float32(monkeypatch):
    real = torch.autocast

    class NoHalfAutocast(real):  # what torch.autocast does for a dtype a device lacks
        def __init__(self, device_type, dtype=None, enabled=True, cache_enabled=None):
            import warnings

            warnings.warn("In CPU autocast, but the target dtype is not supported", stacklevel=2)
            super().__init__(device_type, dtype=dtype, enabled=False)

    monkeypatch.setattr(torch, "autocast", NoHalfAutocast)
    with pytest.raises(ValueError, match="precision='fp16' is not supported on device 'cpu'"):
        tiny_trainer(tl.CopyTask(), "fp16")


def test_fp16_on_a_gpu_without_bfloat16_is_named(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: False)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "Tesla T4")
    with pytest.raises(
        ValueError, match="needs a GPU with bfloat16.*Tesla T4.*use precision='fp16'"
    ):
        tl.training.train._check_precision("bf16", torch.device("cuda"))


def test_precisions_map_to_their_autocast_dtypes():
    assert PRECISIONS == {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}


def test_bf16_checkpoint_resumes_to_the_same_losses(tmp_path):
    task = tl.CopyTask()
    get_batch = lambda s: task.train_batch(s, 16)
    straight = tiny_trainer(task, "bf16")
    straight.fit(get_batch, 6, progress=False)
    first = tiny_trainer(task, "bf16")
    first.fit(get_batch, 3, progress=False)
    path = first.save_checkpoint(tmp_path / "ckpt.pt")
    torch.manual_seed(99)
    resumed = tiny_trainer(task, "bf16")
    resumed.load_checkpoint(path)
    resumed.fit(get_batch, 6, progress=False)
    assert resumed.history.loss == pytest.approx(straight.history.loss, abs=1e-6)
    assert tl.training.train.read_checkpoint(path)["precision"] == "bf16"


@pytest.mark.skipif(not _cpu_fp16_available(), reason="this PyTorch has no float16 CPU autocast")
def test_fp16_scales_the_loss_and_its_checkpoint_resumes_the_scaler(tmp_path):
    task = tl.CopyTask()
    get_batch = lambda s: task.train_batch(s, 16)
    straight = tiny_trainer(task, "fp16")
    straight.fit(get_batch, 6, progress=False)
    first = tiny_trainer(task, "fp16")
    first.fit(get_batch, 3, progress=False)
    # a scale the fresh scaler does not start from, so that resuming it is visible
    first.scaler.update(new_scale=1024.0)
    path = first.save_checkpoint(tmp_path / "ckpt.pt")
    saved = tl.training.train.read_checkpoint(path)
    assert saved["precision"] == "fp16" and saved["scaler"]["scale"] == 1024.0
    resumed = tiny_trainer(task, "fp16")
    assert resumed.scaler.get_scale() == 65536.0
    resumed.load_checkpoint(path)
    assert resumed.scaler.get_scale() == 1024.0 and resumed.step == 3
    resumed.fit(get_batch, 6, progress=False)
    assert len(resumed.history.loss) == 6
    assert all(torch.isfinite(p).all() for p in resumed.model.parameters())
    assert straight.scaler.get_scale() > 0


def test_the_scaler_state_round_trips_through_a_checkpoint_file(tmp_path):
    """Holds even where float16 CPU autocast is missing: the scaler's state is plain numbers."""
    scaler = torch.amp.GradScaler("cpu", init_scale=512.0, growth_interval=7)
    torch.save({"scaler": scaler.state_dict()}, tmp_path / "s.pt")
    back = torch.amp.GradScaler("cpu")
    back.load_state_dict(torch.load(tmp_path / "s.pt", weights_only=True)["scaler"])
    assert back.get_scale() == 512.0 and back.get_growth_interval() == 7


def test_an_old_checkpoint_without_a_scaler_still_loads(tmp_path):
    task = tl.CopyTask()
    trainer = tiny_trainer(task)
    trainer.fit(lambda s: task.train_batch(s, 8), 2, progress=False)
    path = trainer.save_checkpoint(tmp_path / "old.pt")
    state = torch.load(path, weights_only=True)
    del state["scaler"], state["precision"]  # as written before mixed precision existed
    torch.save(state, path)
    for precision in ("fp32", "bf16"):
        again = tiny_trainer(task, precision)
        again.load_checkpoint(path)
        assert again.step == 2
