"""Training: the label-smoothed loss, the paper's warmup schedule, and a small trainer with checkpoints."""

import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from torch import nn
from tqdm.auto import tqdm

from .data import Batch, Seq2SeqTask
from .model import Transformer, TransformerConfig
from .runtime import seed_everything

__all__ = [
    "smoothed_targets",
    "LabelSmoothingLoss",
    "noam_lr",
    "paper_optimizer",
    "warmup_linear_decay",
    "adam_with_warmup",
    "History",
    "Trainer",
    "CheckpointError",
    "train_task",
    "read_checkpoint",
    "load_model_weights",
]


def smoothed_targets(target: torch.Tensor, vocab_size: int, eps: float, pad_id: int = 0) -> torch.Tensor:
    """``target (N,)`` ids -> ``(N, vocab_size)`` distributions: ``1 - eps`` on the target and ``eps`` spread
    evenly over the other tokens except ``<pad>``, which never gets probability. Rows whose target is padding
    are all zero (they carry no loss)."""
    if not 0.0 <= eps < 1.0:
        raise ValueError(f"label smoothing eps must be in [0, 1), got {eps}")
    dist = torch.full((target.numel(), vocab_size), eps / (vocab_size - 2), device=target.device)  # (N, V)
    dist[:, pad_id] = 0.0
    dist.scatter_(1, target.reshape(-1, 1), 1.0 - eps)
    dist[target.reshape(-1) == pad_id] = 0.0
    return dist


class LabelSmoothingLoss(nn.Module):
    """Cross-entropy against :func:`smoothed_targets`, averaged over the non-padding target tokens.

    With ``eps=0`` it is the ordinary cross-entropy. The paper uses ``eps=0.1``: it "hurts perplexity, as the
    model learns to be more unsure, but improves accuracy and BLEU" (§5.4).
    """

    def __init__(self, eps: float = 0.1, pad_id: int = 0):
        super().__init__()
        self.eps, self.pad_id = eps, pad_id

    def forward(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """``logits (B, T, V)``, ``target (B, T)`` ids -> a scalar."""
        if logits.shape[:-1] != target.shape:
            raise ValueError(f"logits {tuple(logits.shape)} must be target {tuple(target.shape)} + (vocab_size,)")
        log_probs = logits.reshape(-1, logits.size(-1)).log_softmax(dim=-1)  # (B*T, V)
        dist = smoothed_targets(target, logits.size(-1), self.eps, self.pad_id)  # (B*T, V)
        num_tokens = (target != self.pad_id).sum().clamp(min=1)
        return -(dist * log_probs).sum() / num_tokens


def noam_lr(step: int, d_model: int, warmup: int = 4000, factor: float = 1.0) -> float:
    """The paper's schedule (eq. 3): ``factor * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)``.

    It rises linearly for ``warmup`` steps, peaks at ``step == warmup`` and then decays as ``1/sqrt(step)``.
    Steps count from 1.
    """
    step = max(step, 1)
    return factor * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


def paper_optimizer(
    model: nn.Module, d_model: int, warmup: int = 4000, factor: float = 1.0
) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LambdaLR]:
    """Adam(beta1=0.9, beta2=0.98, eps=1e-9) driven by :func:`noam_lr` (paper §5.3)."""
    optimizer = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda i: noam_lr(i + 1, d_model, warmup, factor))
    return optimizer, scheduler


def warmup_linear_decay(step: int, warmup: int, total_steps: int) -> float:
    """A multiplier of the learning rate: linear from 0 to 1 over ``warmup`` steps, then linear down to 0 at
    ``total_steps``. Small models trained for a fixed, short budget (the CPU presets) reach their best
    accuracy sooner with it than with :func:`noam_lr`, whose slow ``1/sqrt(step)`` tail never settles."""
    if not 0 < warmup < total_steps:
        raise ValueError(f"need 0 < warmup < total_steps, got warmup={warmup}, total_steps={total_steps}")
    step = max(step, 1)
    return min(step / warmup, max(0.0, (total_steps - step) / (total_steps - warmup)))


def adam_with_warmup(
    model: nn.Module, lr: float, warmup: int, total_steps: int
) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LambdaLR]:
    """The paper's Adam settings with a peak learning rate ``lr`` and :func:`warmup_linear_decay`."""
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.98), eps=1e-9)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda i: warmup_linear_decay(i + 1, warmup, total_steps))
    return optimizer, scheduler


@dataclass
class History:
    """Per training step: the loss, the token accuracy of the teacher-forced predictions, the learning rate."""

    loss: list[float] = field(default_factory=list)
    token_accuracy: list[float] = field(default_factory=list)
    lr: list[float] = field(default_factory=list)


class CheckpointError(ValueError):
    """A checkpoint file that cannot be read back: truncated, corrupt, or not written by :class:`Trainer`."""


_CHECKPOINT_KEYS = {"model", "optimizer", "scheduler", "step", "history", "rng_state"}


# No percentage in the bar: the step count says the same and reads the same in a log.
_BAR_FORMAT = "{desc}: {n_fmt}/{total_fmt} steps |{bar}| {elapsed}<{remaining}{postfix}"


class Trainer:
    """Runs optimisation steps on batches drawn by step number, and saves or resumes all of its state.

    ``get_batch(step)`` must return the batch for that step (the tasks in :mod:`transformer_lib.data` do), so a
    resumed run sees the same data as an uninterrupted one.
    """

    def __init__(
        self,
        model: nn.Module,
        optimizer: torch.optim.Optimizer,
        scheduler: torch.optim.lr_scheduler.LRScheduler | None = None,
        loss_fn: nn.Module | None = None,
        clip_grad_norm: float | None = 1.0,
        device: torch.device | str = "cpu",
    ):
        self.model, self.optimizer, self.scheduler = model.to(device), optimizer, scheduler
        self.loss_fn = loss_fn if loss_fn is not None else LabelSmoothingLoss(0.0)
        self.clip_grad_norm, self.device = clip_grad_norm, torch.device(device)
        self.step = 0
        self.history = History()

    def train_step(self, batch: Batch) -> float:
        """One forward, backward and update; returns the loss."""
        self.model.train()
        batch = batch.to(self.device)
        logits = self.model(batch.src, batch.tgt_in, batch.src_mask, batch.tgt_mask)  # (B, T, V)
        loss = self.loss_fn(logits, batch.tgt_out)
        if not torch.isfinite(loss):
            raise FloatingPointError(f"loss became {loss.item()} at step {self.step}; lower the learning rate")
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if self.clip_grad_norm is not None:
            nn.utils.clip_grad_norm_(self.model.parameters(), self.clip_grad_norm)
        self.optimizer.step()
        if self.scheduler is not None:
            self.scheduler.step()
        self.step += 1
        real = batch.tgt_out != 0
        accuracy = (logits.argmax(-1)[real] == batch.tgt_out[real]).float().mean().item()
        self.history.loss.append(loss.item())
        self.history.token_accuracy.append(accuracy)
        self.history.lr.append(self.optimizer.param_groups[0]["lr"])
        return loss.item()

    def fit(self, get_batch: Callable[[int], Batch], num_steps: int, progress: bool = True) -> History:
        """Train until ``self.step == num_steps`` (so calling it again after a resume continues the count).

        With ``progress`` a bar shows the steps while training and one line sums them up at the end (a saved
        notebook keeps only the bar's first frame, so the line is what a reader sees later).
        """
        first_step, started = self.step, time.perf_counter()
        # In Jupyter the bar is a widget and every redraw is a message on the kernel's output channel. While
        # nbval waits for a long cell it does not read that channel, and past ZeroMQ's 1000-message buffer
        # messages are dropped (the cell's end among them), so redraw at most once a second.
        bar = tqdm(total=num_steps, initial=self.step, disable=not progress, desc="training", leave=False,
                   mininterval=1.0, bar_format=_BAR_FORMAT)
        while self.step < num_steps:
            loss = self.train_step(get_batch(self.step))
            bar.update(1)
            bar.set_postfix(loss=f"{loss:.3f}", refresh=False)
        bar.close()
        if progress and self.step > first_step:
            losses = self.history.loss
            print(f"trained steps {first_step + 1}-{self.step} in {time.perf_counter() - started:.1f} s: "
                  f"loss {losses[first_step]:.3f} -> {losses[-1]:.3f}")
        return self.history

    def save_checkpoint(self, path: str | os.PathLike) -> Path:
        """Write everything needed to resume, atomically: a crash mid-write never leaves a half file."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        state = {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict() if self.scheduler is not None else None,
            "step": self.step,
            "history": asdict(self.history),
            "rng_state": torch.get_rng_state(),
        }
        tmp = path.with_name(path.name + ".tmp")
        torch.save(state, tmp)
        os.replace(tmp, path)
        return path

    def load_checkpoint(self, path: str | os.PathLike) -> None:
        """Restore a checkpoint written by :meth:`save_checkpoint` (tensors and plain data only)."""
        state = read_checkpoint(path, self.device)
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        if self.scheduler is not None and state["scheduler"] is not None:
            self.scheduler.load_state_dict(state["scheduler"])
        self.step = state["step"]
        self.history = History(**state["history"])
        torch.set_rng_state(state["rng_state"].cpu())


def read_checkpoint(path: str | os.PathLike, device: torch.device | str = "cpu") -> dict:
    """Read a :class:`Trainer` checkpoint with ``weights_only=True`` (no code runs), or raise a
    :class:`CheckpointError` that says what is wrong with the file."""
    try:
        state = torch.load(path, map_location=device, weights_only=True)
    except FileNotFoundError:
        raise
    except Exception as exc:  # torch raises several types for a damaged file
        raise CheckpointError(
            f"could not read checkpoint {os.fspath(path)!r}: it is truncated, corrupt or not a torch file "
            f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})"
        ) from None
    if not isinstance(state, dict) or not _CHECKPOINT_KEYS <= state.keys():
        found = sorted(state) if isinstance(state, dict) else type(state).__name__
        raise CheckpointError(
            f"{os.fspath(path)!r} is not a Trainer checkpoint: expected keys {sorted(_CHECKPOINT_KEYS)}, found {found}"
        )
    return state


def load_model_weights(model: nn.Module, path: str | os.PathLike) -> nn.Module:
    """Load only the model weights of a :class:`Trainer` checkpoint into ``model`` (for inference)."""
    model.load_state_dict(read_checkpoint(path, next(model.parameters()).device)["model"])
    return model


def train_task(
    task: Seq2SeqTask,
    config: TransformerConfig | None = None,
    steps: int = 1600,
    batch_size: int = 64,
    lr: float = 3e-3,
    warmup: int = 100,
    seed: int = 0,
    progress: bool = True,
    device: torch.device | str = "cpu",
) -> Trainer:
    """The course's CPU recipe: a fresh model (``cpu_tiny`` unless ``config`` says otherwise), Adam with
    :func:`warmup_linear_decay`, the config's label smoothing, and ``steps`` batches of the task.

    On two CPU cores it teaches the date task to >= 99% exact match in about half a minute (notebook 06 builds
    the same loop piece by piece). Returns the trainer; ``trainer.model`` is the trained model.
    """
    seed_everything(seed)
    config = config if config is not None else TransformerConfig.cpu_tiny(len(task.vocab))
    model = Transformer(config)
    optimizer, scheduler = adam_with_warmup(model, lr, warmup, steps)
    loss_fn = LabelSmoothingLoss(config.label_smoothing, config.pad_id)
    trainer = Trainer(model, optimizer, scheduler, loss_fn, device=device)
    trainer.fit(lambda step: task.train_batch(step, batch_size), steps, progress=progress)
    return trainer
