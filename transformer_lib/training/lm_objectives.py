"""The language models' objectives: BERT's masking recipe, the loss over the positions a target
counts at, and the :class:`~transformer_lib.training.train.Trainer` that trains
:class:`~transformer_lib.model.lm.DecoderOnlyLM` and :class:`~transformer_lib.model.lm.MaskedLM`
with it.

``IGNORE_INDEX`` (-100, ``F.cross_entropy``'s default ``ignore_index``) marks the targets a loss
skips; perplexity is :func:`~transformer_lib.training.train.perplexity`, which scores these models'
``(inputs, targets)`` batches as well as the encoder-decoder's.

Shapes (NOTATION.md): token ids ``(B, T)``, logits ``(B, T, V)``.
"""

import torch
import torch.nn.functional as F
from torch import nn

from .._arguments import check_real
from .train import IGNORE_INDEX, LM_BATCHES, Trainer

__all__ = [
    "mask_tokens",
    "masking_shares",
    "expected_masking_shares",
    "language_model_loss",
    "LanguageModelTrainer",
]


def mask_tokens(
    tokens: torch.Tensor,
    mask_id: int,
    vocab_size: int,
    special_ids: tuple[int, ...] = (0,),
    rate: float = 0.15,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT's masking recipe: pick ``rate`` of the maskable positions; of those, 80% become
    ``mask_id``, 10% a random token, 10% stay as they are. Returns
    ``(inputs (B, T), targets (B, T))``: targets hold the original token at picked positions and
    :data:`IGNORE_INDEX` everywhere else, so the loss counts only picked ones.

    ``special_ids`` (padding, ...) are never picked, and random replacements are never special
    tokens or the mask itself. Keeping 10% unchanged makes the model produce a useful prediction for
    every token it sees, not only for ``mask_id`` (which never appears when the model is used).
    """
    check_real("rate", rate, "in (0, 1]")
    maskable = torch.ones_like(tokens, dtype=torch.bool)
    for i in special_ids:
        maskable &= tokens != i
    draw = torch.rand(tokens.shape, generator=generator, device=tokens.device)  # (B, T)
    picked = maskable & (draw < rate)
    # which of 80/10/10 a picked position gets
    action = torch.rand(tokens.shape, generator=generator, device=tokens.device)  # (B, T)
    to_mask = picked & (action < 0.8)
    to_random = picked & (action >= 0.8) & (action < 0.9)
    forbidden = torch.tensor(sorted({*special_ids, mask_id}), device=tokens.device)
    allowed = torch.ones(vocab_size, dtype=torch.bool, device=tokens.device)
    allowed[forbidden] = False
    candidates = allowed.nonzero()[:, 0]  # ids a random replacement may take
    random_ids = candidates[
        torch.randint(len(candidates), tokens.shape, generator=generator, device=tokens.device)
    ]
    inputs = torch.where(to_mask, torch.full_like(tokens, mask_id), tokens)
    inputs = torch.where(to_random, random_ids, inputs)
    targets = torch.where(picked, tokens, torch.full_like(tokens, IGNORE_INDEX))
    return inputs, targets


def masking_shares(
    tokens: torch.Tensor,
    inputs: torch.Tensor,
    targets: torch.Tensor,
    mask_id: int,
    special_ids: tuple[int, ...],
) -> dict[str, float]:
    """What a masking did to ``tokens (B, T)``, as the shares that define BERT's recipe
    (:func:`mask_tokens` aims at 15% picked, 80% of them ``mask_id``, 10% another token, none of the
    rest changed). Shares, not positions: two correct recipes draw different positions, but the same
    shares. A replacement may draw the original token, so "given another token" sits a little under
    10%."""
    # the ids on the tokens' device: on mps or cuda a CPU tensor beside them fails
    special = torch.tensor(special_ids, dtype=tokens.dtype, device=tokens.device)
    maskable = ~torch.isin(tokens, special)  # (B, T)
    picked = targets != IGNORE_INDEX  # (B, T)
    replaced = picked & (inputs != tokens) & (inputs != mask_id)
    special_or_mask = torch.isin(
        inputs, torch.tensor([*special_ids, mask_id], dtype=inputs.dtype, device=inputs.device)
    )

    def share(part: torch.Tensor, whole: torch.Tensor) -> float:
        return part.sum().item() / max(whole.sum().item(), 1)

    return {
        "share of the non-special positions picked": share(picked & maskable, maskable),
        "share of the special positions picked": share(picked & ~maskable, ~maskable),
        "share of picked positions set to mask_id": share((inputs == mask_id) & picked, picked),
        "share of picked positions given another token": share(replaced, picked),
        "share of positions not picked that were changed": share(
            (inputs != tokens) & ~picked, ~picked
        ),
        "share of random replacements that are special or mask_id": share(
            replaced & special_or_mask, replaced
        ),
        "share of picked targets that are not the original token": share(
            picked & (targets != tokens), picked
        ),
    }


def expected_masking_shares(
    vocab_size: int, mask_id: int, special_ids: tuple[int, ...], rate: float = 0.15
) -> dict[str, float]:
    """The shares of :func:`masking_shares` that :func:`mask_tokens` has in expectation: ``rate`` of
    the maskable positions picked, 80% of those set to ``mask_id``, 10% given a random token (which
    is the original one in 1 of the ``candidates`` draws), and nothing else changed."""
    candidates = vocab_size - len({*special_ids, mask_id})  # the ids a random replacement may take
    return {
        "share of the non-special positions picked": rate,
        "share of the special positions picked": 0.0,
        "share of picked positions set to mask_id": 0.8,
        "share of picked positions given another token": 0.1 * (1 - 1 / candidates),
        "share of positions not picked that were changed": 0.0,
        "share of random replacements that are special or mask_id": 0.0,
        "share of picked targets that are not the original token": 0.0,
    }


def language_model_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over the positions whose target is not :data:`IGNORE_INDEX`.

    ``logits (B, T, V)``, ``targets (B, T)``. For the decoder-only model every target counts (the
    next character); for the masked model only the picked positions do.
    """
    if logits.shape[:-1] != targets.shape:
        raise ValueError(
            f"logits {tuple(logits.shape)} and targets {tuple(targets.shape)} must agree on (B, T)"
        )
    return F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=IGNORE_INDEX)


class LanguageModelTrainer(Trainer):
    """A :class:`~transformer_lib.Trainer` for language models: ``Trainer(..., batches=LM_BATCHES)``
    with :func:`language_model_loss`. The same steps, schedule, checkpoints and history, on batches
    ``(inputs (B, T), targets (B, T))`` such as :meth:`PythonSourceCorpus.batch` returns (or
    :func:`mask_tokens` makes); token accuracy counts the targets that are not :data:`IGNORE_INDEX`.
    """

    def __init__(
        self,
        model: nn.Module,
        optimizer,
        scheduler=None,
        clip_grad_norm: float | None = 1.0,
        device="cpu",
    ):
        loss = language_model_loss
        super().__init__(model, optimizer, scheduler, loss, clip_grad_norm, device, LM_BATCHES)
