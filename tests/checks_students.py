"""Fake learner code, and checks on it, that the checks' tests of several notebooks share."""

import torch
from torch import nn

import transformer_lib as tl


def tiny_config():
    return tl.TransformerConfig(
        src_vocab_size=8, tgt_vocab_size=8, d_model=16, num_heads=2, d_ff=32, num_layers=1
    )


class NoCausalMask(nn.Module):
    """A model whose decoder runs without its causal mask (or with it, ``causal=True``)."""

    def __init__(self, causal: bool):
        super().__init__()
        self.causal, self.model = causal, tl.Transformer(tiny_config())

    def forward(self, src, tgt):
        return self.model(src, tgt, tgt_mask=None if self.causal else tl.padding_mask(tgt, 0))


def mha_variant(forward):
    import solutions

    return type(
        "Variant", (solutions.solution("02", "MyMultiHeadAttention"),), {"forward": forward}
    )


def solution(notebook, name):
    import solutions

    return solutions.solution(notebook, name)


def assert_check_leaves_random_state_alone(check: str) -> None:
    """Run ``check`` on the course's solution between two draws of the learner's seeded stream: the
    check must pass and the stream must go on as if the check had not run."""
    import solutions

    code = next(
        solutions.solution(e.notebook, e.name) for e in solutions.EXERCISES if e.check == check
    )
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    assert getattr(tl.checks, check)(code)
    assert torch.equal(torch.rand(3), expected)
