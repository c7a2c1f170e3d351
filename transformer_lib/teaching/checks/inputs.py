"""The inputs the checks draw: one function per kind of exercise, each returning its cases.

A :class:`~.engine.Case` holds the student code's arguments, how messages name them, the student
class's arguments and the tensors whose gradients are compared. The cases expose the classic bugs:
several shapes (a square one hides a transpose), causal masks, padding that differs per sequence,
at least one case with gradients. Every draw is seeded: a check says the same thing every time.
"""

import math

import torch

from ...model.attention import MultiHeadAttention
from ...model.encoder import EncoderLayer
from ...model.lm import LMConfig
from ...model.masks import causal_mask
from .engine import Case


def _generator() -> torch.Generator:
    return torch.Generator().manual_seed(0)


def _randn(gen, *shape, grad=False) -> torch.Tensor:
    return torch.randn(*shape, generator=gen).requires_grad_(grad)


def _padded(lengths: list[int], size: int, dims: int = 4) -> torch.Tensor:
    """A padding mask ``(B, 1, 1, T_k)`` (or ``(B, 1, T_k)``) that differs per sequence; the first
    sequence is padded, so its mask used for the whole batch differs from no mask."""
    keep = torch.arange(size)[None, :] < torch.tensor(lengths)[:, None]  # (B, T_k)
    return keep.view(len(lengths), *[1] * (dims - 2), size)


def _fixed(build):
    """The same module every time (seed 0, eval mode), built without moving the learner's random
    state."""
    with torch.random.fork_rng(devices=[]):
        # not torch.manual_seed: it would also queue a seed for CUDA
        torch.default_generator.manual_seed(0)
        return build().eval()


def attention() -> list[Case]:
    """Two shapes with d_k != d_v, a causal mask, per-sequence padding, and a query row with no
    allowed key."""
    gen = _generator()
    q, k, v, x = (
        _randn(gen, 2, 3, 4),
        _randn(gen, 2, 5, 4),
        _randn(gen, 2, 5, 6),
        _randn(gen, 2, 5, 4),
    )
    q4, k4, v4 = (
        _randn(gen, 3, 2, 4, 8, grad=True),
        _randn(gen, 3, 2, 4, 8, grad=True),
        _randn(gen, 3, 2, 4, 6, grad=True),
    )
    grads = {"q": q4, "k": k4, "v": v4}
    none_allowed = torch.ones(2, 3, 5, dtype=torch.bool)
    # sequence 0's query 1 may see no key: zero weights and a zero output, never NaN
    none_allowed[0, 1] = False
    return [
        Case((q, k, v), "for q (2, 3, 4), k (2, 5, 4), v (2, 5, 6), no mask"),
        Case((q4, k4, v4), "for (B, h, T, d_k) = (3, 2, 4, 8) and d_v = 6, no mask", inputs=grads),
        Case((x, x, x, causal_mask(5)[0]), "with a causal mask (1, 5, 5)"),
        Case(
            (q, k, v, _padded([3, 5], 5, dims=3)),
            "with a padding mask (2, 1, 5) that differs per sequence",
        ),
        Case(
            (q4, k4, v4, _padded([2, 4, 1], 4)),
            "with a padding mask (3, 1, 1, 4) that differs per sequence",
            inputs=grads,
        ),
        Case(
            (q, k, v, none_allowed),
            "with a mask (2, 3, 5) that lets query 1 of sequence 0 "
            "see no key (its weights and output must be 0, not NaN)",
        ),
    ]


def multi_head_attention() -> list[Case]:
    """Self-attention (no mask, causal, per-sequence padding) and cross-attention, for ``MyMHA(16,
    4)``, and a module with h != d_k, ``MyMHA(24, 3)`` (d_k = 8): splitting into d_k heads of h
    features shows there."""
    gen, build, wide = _generator(), ((16, 4), {}), ((24, 3), {})
    x, memory = _randn(gen, 3, 5, 16, grad=True), _randn(gen, 3, 7, 16, grad=True)
    x24, memory24 = _randn(gen, 3, 5, 24, grad=True), _randn(gen, 3, 7, 24)
    return [
        Case((x, x, x), "self-attention, x (3, 5, 16), no mask", build, {"x": x}),
        Case((x, x, x, causal_mask(5)), "causal self-attention", build),
        Case(
            (x, x, x, _padded([3, 5, 1], 5)),
            "self-attention with a padding mask that differs per sequence",
            build,
        ),
        Case(
            (x, memory, memory, _padded([4, 7, 2], 7)),
            "cross-attention to memory (3, 7, 16) with a per-sequence padding mask",
            build,
            {"x": x, "memory": memory},
        ),
        Case(
            (x24, x24, x24, causal_mask(5)),
            "MyMHA(24, 3): h=3 heads of d_k=8, causal self-attention",
            wide,
            {"x": x24},
        ),
        Case(
            (x24, memory24, memory24, _padded([4, 7, 2], 7)),
            "MyMHA(24, 3): cross-attention to memory (3, 7, 24) with a per-sequence padding mask",
            wide,
        ),
    ]


def layers(decoder: bool) -> list[Case]:
    """Post-LN and pre-LN layers of width 16 (h = d_k = 4) and of width 24 (h = 3, d_k = 8);
    encoder: padding masks; decoder: causal target masks, also padded."""
    gen, cases = _generator(), []
    for norm_first in (False, True):
        build, name = ((16, 4, 32), {"norm_first": norm_first}), f"norm_first={norm_first}"
        wide, wide_name = (
            ((24, 3, 40), {"norm_first": norm_first}),
            f"d_model=24, h=3 (d_k=8), norm_first={norm_first}",
        )
        x, memory, x7 = (
            _randn(gen, 3, 5, 16, grad=True),
            _randn(gen, 3, 7, 16, grad=True),
            _randn(gen, 3, 7, 16),
        )
        x24, memory24 = _randn(gen, 3, 5, 24), _randn(gen, 3, 7, 24)
        # T_tgt = T_src first: a target mask given to the cross-attention runs, and is diagnosed
        if decoder:
            cases += [
                Case(
                    (x7, x7, causal_mask(7) & _padded([5, 7, 2], 7), _padded([4, 7, 2], 7)),
                    f"{name}, x and memory (3, 7, 16), causal and padded target mask, "
                    "padded memory",
                    build,
                ),
                Case(
                    (x, memory, causal_mask(5), _padded([4, 7, 2], 7)),
                    f"{name}, x (3, 5, 16), memory (3, 7, 16)",
                    build,
                    {"x": x, "memory": memory},
                ),
                Case(
                    (x24, memory24, causal_mask(5) & _padded([5, 3, 4], 5), _padded([4, 7, 2], 7)),
                    f"{wide_name}, x (3, 5, 24), memory (3, 7, 24), padded masks",
                    wide,
                ),
            ]
        else:
            cases += [
                Case((x,), f"{name}, x (3, 5, 16), no mask", build, {"x": x}),
                Case(
                    (x, _padded([3, 5, 1], 5)), f"{name}, with a per-sequence padding mask", build
                ),
                Case(
                    (x24, _padded([3, 5, 1], 5)),
                    f"{wide_name}, x (3, 5, 24), per-sequence padding",
                    wide,
                ),
            ]
    return cases


def cross_attention() -> list[Case]:
    gen, attn = _generator(), _fixed(lambda: MultiHeadAttention(16, 4))
    x6, memory6 = _randn(gen, 3, 6, 16), _randn(gen, 3, 6, 16)
    x, memory = _randn(gen, 3, 5, 16, grad=True), _randn(gen, 3, 7, 16, grad=True)
    return [
        Case(
            (attn, x6, memory6, _padded([4, 6, 2], 6)),
            "x and memory (3, 6, 16), per-sequence memory mask",
        ),
        Case(
            (attn, x, memory, _padded([4, 7, 2], 7)),
            "x (3, 5, 16), memory (3, 7, 16), per-sequence memory mask",
            inputs={"x": x, "memory": memory},
        ),
    ]


def gpt_block() -> list[Case]:
    gen, layer = _generator(), _fixed(lambda: EncoderLayer(16, 4, 32, dropout=0.0))
    x, x3 = _randn(gen, 2, 6, 16, grad=True), _randn(gen, 3, 4, 16)
    return [
        Case((layer, x), "for a tl.EncoderLayer(16, 4, 32) and x (2, 6, 16)", inputs={"x": x}),
        Case((layer, x3), "for x (3, 4, 16)"),
    ]


def floats(
    shapes: list[tuple], build: tuple = ((), {}), extra: tuple = (), grad: bool = True
) -> list[Case]:
    """Random inputs of each shape (the first with gradients, if ``grad``), each followed by its
    ``extra`` argument if any."""
    gen, cases = _generator(), []
    for i, shape in enumerate(shapes):
        # not centred: a norm must do real work
        x = _randn(gen, *shape, grad=grad and i == 0).mul(3).add(1)
        more = extra[i : i + 1]
        about = f"for input {shape}" + "".join(f", temperature {t}" for t in more)
        cases.append(Case((x, *more), about, build, {"input": x} if grad and i == 0 else {}))
    return cases


def layer_norms() -> list[Case]:
    """``MyLayerNorm(8)`` on random tokens (the first with gradients), then on a constant token
    (variance 0) and near-constant ones (variance 1e-6 and 1e-4), where eps decides the output."""
    cases = floats([(3, 4, 8), (5, 8)], ((8,), {}))
    gen = _generator()
    # (3, d_model): token 0 constant; tokens 1 and 2 almost, near 0 so that float32 rounding stays
    # far below the tolerance in every correct way of writing the variance (E[x^2] - E[x]^2 too)
    flat = torch.tensor([2.0, 0.0, 0.0])[:, None].repeat(1, 8)
    flat[1] += 1e-3 * torch.randn(8, generator=gen)
    flat[2] += 1e-2 * torch.randn(8, generator=gen)
    return [
        *cases,
        Case(
            (flat,),
            "for a constant token and two near-constant ones (variance 0, ~1e-6, ~1e-4), "
            "where eps matters",
            ((8,), {}),
        ),
    ]


def numbered(shapes_and_args) -> list[Case]:
    """Inputs numbered 0, 1, 2, ... (a feature in the wrong place shows), the first with
    gradients."""
    cases = []
    for i, (shape, rest) in enumerate(shapes_and_args):
        x = torch.arange(math.prod(shape), dtype=torch.float32).view(shape).requires_grad_(i == 0)
        cases.append(
            Case(
                (x, *rest),
                f"for x {shape}" + "".join(f", num_heads={r}" for r in rest),
                inputs={"x": x} if i == 0 else {},
            )
        )
    return cases


def head_splits() -> list[Case]:
    """``split_heads``'s inputs: heads of width 4 (h = 2 and 3), then of widths 6 and 2 (h = 2 and
    5), so that a head width written as a number, not read from the input, shows."""
    return numbered([((2, 3, 8), (2,)), ((1, 5, 12), (3,)), ((2, 4, 12), (2,)), ((1, 3, 10), (5,))])


def positional_tables() -> list[Case]:
    return [
        Case((16, 50), "for d_model=16, max_len=50"),
        Case((6, 10), "for d_model=6, max_len=10"),
    ]


def causal_masks(with_cache: bool) -> list[Case]:
    sizes = [(2, 5), (3, 3), (1, 1)] if with_cache else [(4,), (7,), (1,)]
    return [
        Case(size, f"for {'(T_q, T_k)' if with_cache else 'T'} = {', '.join(map(str, size))}")
        for size in sizes
    ]


def target_changes() -> list[Case]:
    """Pairs of target batches that agree up to position t and differ after it (source and target
    ids 1-3)."""
    gen, cases = _generator(), []
    for t in (0, 2):
        src, tgt = (
            torch.randint(1, 4, (2, 6), generator=gen),
            torch.randint(1, 4, (2, 5), generator=gen),
        )
        changed = tgt.clone()
        changed[:, t + 1 :] = torch.randint(1, 4, changed[:, t + 1 :].shape, generator=gen)
        cases.append(
            Case((src, tgt, changed, t), f"changing target tokens after position {t} (ids 1-3)")
        )
    return cases


def target_rows() -> list[Case]:
    """Rows ``<bos> y <eos> <pad>...`` of lengths 6, then 4 and 9, so that slices written with the
    numbers of one length (``t[:, 0:5]``) show."""
    return [
        Case(
            (torch.tensor([[1, 5, 6, 7, 2, 0], [1, 8, 2, 0, 0, 0], [1, 4, 4, 9, 3, 2]]),),
            "for rows `<bos> y <eos> <pad>...` (bos=1, eos=2, pad=0)",
        ),
        Case((torch.tensor([[1, 5, 2, 0], [1, 6, 7, 2]]),), "for rows of length 4"),
        Case(
            (torch.tensor([[1, 5, 6, 7, 8, 9, 4, 3, 2], [1, 3, 2, 0, 0, 0, 0, 0, 0]]),),
            "for rows of length 9",
        ),
    ]


def smoothing_targets() -> list[Case]:
    return [
        Case(
            (torch.tensor([4, 0, 7, 5]), 9, 0.1, 0),
            "for target [4, 0, 7, 5], V=9, eps=0.1, pad_id=0",
        ),
        Case(
            (torch.tensor([3, 2, 6, 1]), 8, 0.2, 2),
            "for target [3, 2, 6, 1], V=8, eps=0.2, pad_id=2",
        ),
    ]


def schedule_steps() -> list[Case]:
    return [
        Case(
            (step, d_model, warmup),
            f"at step {step} (d_model={d_model}, warmup={warmup}, in "
            f"the {'warm-up, step <= warmup' if step <= warmup else 'decay, step > warmup'})",
        )
        for d_model, warmup in ((512, 4000), (64, 100))
        for step in (1, warmup // 2, warmup, 3 * warmup)
    ]


def shards() -> list[Case]:
    """Data-parallel shards of unequal length and padding: ``([(logits, target) per rank], tokens,
    world_size)``."""
    gen, cases = _generator(), []
    for world_size in (2, 3):
        per_rank = []
        for rank in range(world_size):
            length = 3 + 2 * rank  # later ranks hold longer sequences: unequal token counts
            target = torch.randint(1, 7, (2, length), generator=gen)
            target[0, length - rank - 1 :] = 0  # some padding (pad id 0)
            per_rank.append((_randn(gen, 2, length, 7, grad=True), target))
        tokens = sum(int((target != 0).sum()) for _, target in per_rank)
        cases.append(
            Case(
                (per_rank, tokens, world_size),
                f"with {world_size} processes holding unequal shards",
                inputs={f"rank {r}'s logits": logits for r, (logits, _) in enumerate(per_rank)},
            )
        )
    return cases


def token_batches() -> list[Case]:
    # (B, T): ids 0-4 special, 5 is <mask>
    tokens = torch.randint(6, 40, (100, 1000), generator=_generator())
    tokens[:, -100:] = 0  # padding at the end of every row
    return [
        Case(
            (tokens, 5, 40, (0, 1, 2, 3, 4), 0.15),
            "on 100,000 tokens (V=40, mask_id=5, specials 0-4, rate 0.15)",
        ),
        Case((tokens, 5, 40, (0, 1, 2, 3, 4), 0.3), "with rate 0.3"),
    ]


def lm_configs() -> list[Case]:
    base = LMConfig(vocab_size=101, d_model=128, num_heads=4, d_ff=512, num_layers=3, max_len=256)
    configs = [
        base,
        base.replace(positional="sinusoidal"),
        base.replace(norm_first=False, d_ff=300, num_layers=2),
        LMConfig.gpt2_small(),
    ]
    return [
        Case(
            (c,),
            f"for LMConfig(vocab_size={c.vocab_size}, d_model={c.d_model}, "
            f"d_ff={c.d_ff}, num_layers={c.num_layers}, max_len={c.max_len}, "
            f"positional={c.positional!r}, norm_first={c.norm_first})",
        )
        for c in configs
    ]


def own_row(results=None) -> list[Case]:
    """Notebook 10: ``my_row()`` takes no argument; ``results`` (the committed runs by default) go
    to the verdict."""
    return [Case((results,), "your row")]
