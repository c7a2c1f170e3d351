"""Self-checks for the exercises and the debugging notebook.

Each ``check_*`` takes a student's function or class, runs it against the library on random inputs of several
shapes (with and without masks) and against properties that any correct version has, and returns a
:class:`CheckResult` that prints as one friendly paragraph: what passed, or the first thing that is wrong and a
hint. It never raises: an exception inside the student's code is reported, not shown as a traceback. A stub
that raises ``NotImplementedError`` is "not implemented yet", so notebooks stay runnable.
"""

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .attention import MultiHeadAttention, combine_heads, scaled_dot_product_attention, split_heads
from .layers import PositionwiseFeedForward, sinusoidal_encoding
from .masks import causal_mask
from .train import noam_lr, smoothed_targets

__all__ = [
    "CheckResult",
    "check_attention",
    "check_split_heads",
    "check_combine_heads",
    "check_multi_head_attention",
    "check_positional_encoding",
    "check_layer_norm",
    "check_causal_mask",
    "check_label_smoothing",
    "check_feed_forward",
    "check_noam_lr",
    "check_temperature_softmax",
    "check_shard_loss",
]


@dataclass
class CheckResult:
    """The outcome of a check: truthy when it passed; prints as its message."""

    name: str
    passed: bool
    message: str

    def __bool__(self) -> bool:
        return self.passed

    def __repr__(self) -> str:
        return self.message


class _Failure(Exception):
    """Raised inside a check to stop at the first problem, with the message to show."""


def _close(a: object, b: torch.Tensor, atol: float = 1e-5) -> bool:
    return isinstance(a, torch.Tensor) and a.shape == b.shape and torch.allclose(a.float(), b.float(), atol=atol)


def _call(what: str, fn: Callable, *args, **kwargs):
    """Run student code; turn its exceptions into a friendly failure."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = fn(*args, **kwargs)
        except NotImplementedError:
            raise
        except Exception as exc:  # noqa: BLE001 -- any error in student code becomes a message
            raise _Failure(f"{what} raised {type(exc).__name__}: {exc}. {_hint_for_exception(exc)}") from None
    implicit = [w for w in caught if "Implicit dimension choice for softmax" in str(w.message)]
    if implicit:
        raise _Failure(
            f"{what} called softmax without `dim`, so PyTorch guessed an axis (for a 4-D tensor it "
            "picks dim=1, the heads!). Hint: write `scores.softmax(dim=-1)`: each query's row over the keys."
        )
    return result


def _hint_for_exception(exc: Exception) -> str:
    text = str(exc)
    if "Boolean value of Tensor with more than one" in text:
        return "Hint: `if mask:` asks a whole tensor for one True/False; write `if mask is not None:`."
    if "cannot assign module before Module.__init__" in text or "has no attribute '_modules'" in text:
        return "Hint: the first line of `__init__` must be `super().__init__()`."
    if "shape" in text or "size" in text or "dimension" in text:
        return "Hint: print the shapes of q, k, v and of each intermediate tensor; compare with the shape comments."
    return "Hint: run it by hand on a small input and read the error's last line."


def _run(name: str, body: Callable[[], str]) -> CheckResult:
    try:
        passed = body()
    except NotImplementedError:
        return CheckResult(
            name,
            False,
            f"⏳ {name}: not implemented yet. Replace `raise NotImplementedError` with "
            "your code and run this cell again.",
        )
    except _Failure as failure:
        return CheckResult(name, False, f"❌ {name}: {failure}")
    return CheckResult(name, True, f"✅ {name}: {passed}")


def _output_and_weights(result):
    if isinstance(result, tuple) and len(result) == 2:
        return result
    return result, None


# --- scaled dot-product attention --------------------------------------------------------------------


def check_attention(attention: Callable) -> CheckResult:
    """``attention(q, k, v, mask=None) -> (output, weights)`` (or just ``output``), masks bool, True = may attend."""

    def body() -> str:
        gen = torch.Generator().manual_seed(0)
        shapes = [((2, 3, 4), (2, 5, 4), (2, 5, 6)), ((2, 2, 4, 8), (2, 2, 4, 8), (2, 2, 4, 8))]
        for q_shape, k_shape, v_shape in shapes:
            q, k, v = (torch.randn(s, generator=gen) for s in (q_shape, k_shape, v_shape))
            out, weights = _output_and_weights(_call("your attention", attention, q, k, v))
            ref_out, ref_weights = scaled_dot_product_attention(q, k, v)
            if not isinstance(out, torch.Tensor) or out.shape != ref_out.shape:
                got = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
                raise _Failure(
                    f"for q {q_shape}, k {k_shape}, v {v_shape} the output should be "
                    f"{tuple(ref_out.shape)} (..., T_q, d_v), got {got}. Hint: weights (..., T_q, T_k) @ v."
                )
            if weights is not None:
                if weights.shape != ref_weights.shape:
                    raise _Failure(
                        f"weights should be {tuple(ref_weights.shape)} (..., T_q, T_k), got {tuple(weights.shape)}."
                    )
                if not torch.allclose(weights.sum(-1), torch.ones(weights.shape[:-1]), atol=1e-5):
                    raise _Failure(
                        "each row of the weights should sum to 1, but they don't"
                        + (
                            " (the columns do: softmax ran over the queries). "
                            if torch.allclose(
                                weights.sum(-2), torch.ones(weights.shape[:-2] + weights.shape[-1:]), atol=1e-5
                            )
                            else ". "
                        )
                        + "Hint: `scores.softmax(dim=-1)`, over the keys."
                    )
            if not _close(out, ref_out):
                raise _Failure(_diagnose_scores(q, k, v, out))
        q, k, v = (torch.randn(2, 5, 4, generator=gen) for _ in range(3))
        mask = causal_mask(5)[0]  # (1, 5, 5)
        out, weights = _output_and_weights(_call("your attention with a mask", attention, q, k, v, mask))
        ref_out, _ = scaled_dot_product_attention(q, k, v, mask)
        if not _close(out, ref_out):
            raise _Failure(_diagnose_mask(q, k, v, mask, out))
        future = v.clone()
        future[:, 3:] += 10.0
        later, _ = _output_and_weights(_call("your attention with a mask", attention, q, k, future, mask))
        if not _close(later[:, :3], out[:, :3]):
            raise _Failure("with a causal mask, changing the future values changed earlier outputs: the future leaks.")
        perm = torch.randperm(5, generator=gen)
        permuted, _ = _output_and_weights(_call("your attention", attention, q, k[:, perm], v[:, perm]))
        unmasked, _ = _output_and_weights(_call("your attention", attention, q, k, v))
        if not _close(permuted, unmasked):
            raise _Failure(
                "shuffling the keys and values together changed the output; attention should not care "
                "about the order of key/value pairs."
            )
        single, _ = _output_and_weights(_call("your attention", attention, q[:1], k[:1], v[:1]))
        if not _close(single, unmasked[:1]):
            raise _Failure(
                "the first sequence's output changed when the batch held other sequences: sequences in a "
                "batch must not mix. Hint: transpose only the last two axes, `k.transpose(-2, -1)`."
            )
        return (
            "matches the library on 2 shapes, with and without a causal mask; rows sum to 1, no future leaks, "
            "key order and batch-mates don't matter. Well done!"
        )

    return _run("check_attention", body)


def _diagnose_scores(q, k, v, out) -> str:
    d_k = q.size(-1)
    candidates = {
        "you did not divide the scores by sqrt(d_k)": 1.0,
        "you divided the scores by d_k instead of sqrt(d_k)": 1.0 / d_k,
    }
    for message, scale in candidates.items():
        expected = (q @ k.transpose(-2, -1) * scale).softmax(-1) @ v
        if _close(out, expected):
            return f"{message}. Hint: `scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))`."
    if _close(out, (q @ k.transpose(-2, -1) / math.sqrt(d_k)).softmax(-2) @ v):
        return "softmax ran over the queries (dim=-2). Hint: `scores.softmax(dim=-1)`, over the keys."
    return (
        "the output differs from the library's. Hint: scores = q k^T / sqrt(d_k); weights = softmax over the "
        "last axis; output = weights @ v."
    )


def _diagnose_mask(q, k, v, mask, out) -> str:
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if _close(out, scores.softmax(-1) @ v):
        return (
            "the mask changed nothing. Hint: `masked_fill` returns a new tensor: write "
            "`scores = scores.masked_fill(~mask, float('-inf'))`, and check you used the mask at all."
        )
    if _close(out, scores.masked_fill(mask, float("-inf")).softmax(-1).nan_to_num(0) @ v):
        return (
            "the mask is inverted: in this course True means 'may attend'. Hint: fill where the mask is False, "
            "`scores.masked_fill(~mask, float('-inf'))` (or `mask == 0`)."
        )
    if _close(out, scores.masked_fill(~mask, 0.0).softmax(-1) @ v):
        return (
            "masked scores were set to 0, but exp(0) = 1 still gives them weight. Hint: fill with "
            "float('-inf') so softmax gives exactly 0."
        )
    return "with a causal mask the output differs from the library's. Hint: mask the scores before the softmax."


# --- heads -------------------------------------------------------------------------------------------


def check_split_heads(split: Callable) -> CheckResult:
    """``split(x (B, T, h * d), num_heads) -> (B, h, T, d)``."""

    def body() -> str:
        for shape, heads in (((2, 3, 8), 2), ((1, 5, 12), 3)):
            x = torch.arange(math.prod(shape), dtype=torch.float32).view(shape)
            got, expected = _call("your split_heads", split, x, heads), split_heads(x, heads)
            if isinstance(got, torch.Tensor) and torch.equal(got, expected):
                continue
            b, t, width = shape
            if isinstance(got, torch.Tensor) and got.shape == (b, t, heads, width // heads):
                raise _Failure(
                    f"got {tuple(got.shape)} = (B, T, h, d); the heads axis must come before T. Hint: "
                    "`.transpose(1, 2)` after the view."
                )
            if not isinstance(got, torch.Tensor) or got.shape != expected.shape:
                raise _Failure(
                    f"for x {shape} and h={heads} expected {tuple(expected.shape)} (B, h, T, d), got "
                    f"{tuple(got.shape) if isinstance(got, torch.Tensor) else type(got).__name__}."
                )
            if torch.equal(got, x.reshape(b, heads, t, width // heads)):
                raise _Failure(
                    "the shape is right but tokens are scrambled: reshaping straight to (B, h, T, d) cuts "
                    "*across* tokens. Hint: `x.view(B, T, h, d).transpose(1, 2)`."
                )
            raise _Failure(
                "the shape is right but the values are not where they belong. Hint: head i must "
                "hold features i*d .. (i+1)*d - 1 of every token."
            )
        return "splits (B, T, h*d) into (B, h, T, d) with every feature in its head. Well done!"

    return _run("check_split_heads", body)


def check_combine_heads(combine: Callable) -> CheckResult:
    """``combine(x (B, h, T, d)) -> (B, T, h * d)``, the inverse of split_heads."""

    def body() -> str:
        for shape in ((2, 2, 3, 4), (1, 3, 5, 2)):
            x = torch.arange(math.prod(shape), dtype=torch.float32).view(shape)
            got, expected = _call("your combine_heads", combine, x), combine_heads(x)
            if isinstance(got, torch.Tensor) and torch.equal(got, expected):
                continue
            b, h, t, d = shape
            if not isinstance(got, torch.Tensor) or got.shape != expected.shape:
                raise _Failure(
                    f"for x {shape} expected {tuple(expected.shape)} (B, T, h*d), got "
                    f"{tuple(got.shape) if isinstance(got, torch.Tensor) else type(got).__name__}."
                )
            if torch.equal(got, x.reshape(b, t, h * d)):
                raise _Failure(
                    "the shape is right, but reshaping (B, h, T, d) straight to (B, T, h*d) glues "
                    "*different tokens* into one vector: a silent bug, the model still runs. Hint: "
                    "`x.transpose(1, 2).reshape(B, T, h * d)`: transpose back first."
                )
            raise _Failure("the shape is right but features are misplaced; combine must undo split exactly.")
        return "puts every head's features back next to each other, token by token. Well done!"

    return _run("check_combine_heads", body)


def check_multi_head_attention(module_class: type) -> CheckResult:
    """``module_class(d_model, num_heads)`` with ``nn.Linear`` attributes ``w_q``, ``w_k``, ``w_v``, ``w_o`` and
    ``forward(query, key, value, mask=None) -> output`` or ``(output, weights)``."""

    def body() -> str:
        d_model, heads = 16, 4
        torch.manual_seed(0)
        student = _call(f"{module_class.__name__}({d_model}, {heads})", module_class, d_model, heads)
        reference = MultiHeadAttention(d_model, heads)
        expected_params = sum(p.numel() for p in reference.parameters())
        found = sum(p.numel() for p in student.parameters())
        if found != expected_params:
            raise _Failure(
                f"the module registers {found} parameters, the library {expected_params}: layers kept in "
                "local variables, plain lists or tuples are invisible to `.parameters()`, so the optimizer "
                "never trains them. Hint: assign each layer to `self.` (or use nn.ModuleList)."
            )
        missing = [n for n in ("w_q", "w_k", "w_v", "w_o") if not isinstance(getattr(student, n, None), nn.Linear)]
        if missing:
            raise _Failure(f"this check copies weights through attributes w_q, w_k, w_v, w_o; missing: {missing}.")
        reference.load_state_dict(
            {
                f"{n}.{p}": getattr(student, n).state_dict()[p]
                for n in ("w_q", "w_k", "w_v", "w_o")
                for p in ("weight", "bias")
            }
        )
        x, memory = torch.randn(2, 5, d_model), torch.randn(2, 7, d_model)
        for what, args, mask in (
            ("self-attention", (x, x, x), None),
            ("causal self-attention", (x, x, x), causal_mask(5)),
            ("cross-attention", (x, memory, memory), None),
        ):
            out, _ = _output_and_weights(_call(f"your module ({what})", student, *args, mask=mask))
            expected, _ = reference(*args, mask=mask)
            if not _close(out, expected, atol=1e-4):
                raise _Failure(f"{what}: " + _diagnose_mha(reference, args, mask, out))
        out, _ = _output_and_weights(student(x, x, x))
        out.square().mean().backward()
        frozen = [n for n, p in student.named_parameters() if p.grad is None or not p.grad.abs().sum()]
        if frozen:
            raise _Failure(f"no gradient reached {frozen}. Hint: is every layer used in forward?")
        return (
            "equals the library's MultiHeadAttention for self-, causal and cross-attention, and every parameter "
            "gets a gradient. Well done!"
        )

    return _run("check_multi_head_attention", body)


def _diagnose_mha(reference: MultiHeadAttention, args, mask, out) -> str:
    query, key, value = args
    q = split_heads(reference.w_q(query), reference.num_heads)
    k = split_heads(reference.w_k(key), reference.num_heads)
    v = split_heads(reference.w_v(value), reference.num_heads)
    scores = q @ k.transpose(-2, -1)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    per_head = (scores / math.sqrt(reference.d_model)).softmax(-1) @ v
    if _close(out, reference.w_o(combine_heads(per_head)), atol=1e-4):
        return (
            "scores were divided by sqrt(d_model); each head works in d_k = d_model / h dimensions. Hint: "
            "divide by sqrt(d_k), the width of one head's queries."
        )
    heads = (scores / math.sqrt(reference.d_k)).softmax(-1) @ v  # (B, h, T, d_k)
    b, h, t, d = heads.shape
    if _close(out, reference.w_o(heads.reshape(b, t, h * d)), atol=1e-4):
        return (
            "heads were merged with a reshape that did not transpose back, mixing tokens. Hint: "
            "`out.transpose(1, 2).reshape(B, T, d_model)`."
        )
    return "the output differs from the library's with the same weights. Hint: test split, attention, combine alone."


# --- positions, normalisation, masks, targets ---------------------------------------------------------


def check_positional_encoding(encoding) -> CheckResult:
    """Either a function ``encoding(d_model, max_len) -> (max_len, d_model)`` table, or a module class
    ``encoding(d_model, max_len)`` whose ``forward(x (B, T, d_model))`` adds the encodings to ``x``."""

    def body() -> str:
        d_model, max_len, batch, length = 16, 50, 3, 6
        expected = sinusoidal_encoding(d_model=d_model, max_len=max_len)
        if not isinstance(encoding, type):
            table = _call("your encoding", encoding, d_model, max_len)
            if not _close(table, expected, atol=1e-4):
                got = tuple(table.shape) if isinstance(table, torch.Tensor) else type(table).__name__
                raise _Failure(
                    f"the table should be {(max_len, d_model)} with PE[pos, 2i] = sin(pos / "
                    f"10000^(2i/d_model)) and PE[pos, 2i+1] = cos(...); got {got} with other values. Hint: "
                    "even features get sin, odd ones cos, and the pair (2i, 2i+1) shares a frequency."
                )
            return "the table matches the paper's formula. Well done!"
        module = _call(f"{encoding.__name__}({d_model}, {max_len})", encoding, d_model, max_len)
        module.eval()
        out = _call("your module", module, torch.zeros(batch, length, d_model))
        if not isinstance(out, torch.Tensor) or out.shape != (batch, length, d_model):
            raise _Failure(f"for x of shape {(batch, length, d_model)} the output must keep that shape.")
        if not torch.allclose(out[0], out[1]) and torch.allclose(out[:, 0], out[:, 1]):
            raise _Failure(
                "every sequence in the batch got a different encoding, and every position in a sequence "
                "the same one: the encodings were added along the batch axis. Hint: the table must be "
                "(1, max_len, d_model) and added as `x + pe[:, :x.size(1)]`."
            )
        if not torch.allclose(out[0], out[1]):
            raise _Failure("sequences in one batch got different encodings; they must all get the same.")
        if not _close(out[0], expected[:length], atol=1e-4):
            raise _Failure("added to zeros, your module should give exactly the sinusoidal table, and it doesn't.")
        return "adds the same sinusoidal encodings to every sequence, along the positions. Well done!"

    return _run("check_positional_encoding", body)


def check_layer_norm(module_class: type) -> CheckResult:
    """``module_class(d_model)``: LayerNorm over the last axis with learnable gain and shift, like nn.LayerNorm."""

    def body() -> str:
        d_model = 8
        student = _call(f"{module_class.__name__}({d_model})", module_class, d_model)
        if sum(p.numel() for p in student.parameters()) != 2 * d_model:
            raise _Failure(
                f"LayerNorm({d_model}) should learn {2 * d_model} numbers (a gain and a shift per feature); "
                f"it registers {sum(p.numel() for p in student.parameters())}. Hint: nn.Parameter(...)."
            )
        x = torch.randn(3, 4, d_model) * 3 + 1
        out = _call("your LayerNorm", student, x)
        reference = nn.LayerNorm(d_model)
        with torch.no_grad():  # the student's gain and shift, whatever they are called, start at 1 and 0
            expected = reference(x)
        if _close(out, expected, atol=1e-4):
            return "normalises each token over its features like nn.LayerNorm. Well done!"
        mean, var = x.mean(-1, keepdim=True), x.var(-1, keepdim=True, unbiased=True)
        if _close(out, (x - mean) / torch.sqrt(var + 1e-5), atol=1e-4):
            raise _Failure(
                "you used the unbiased variance (dividing by d_model - 1). Hint: `x.var(-1, "
                "unbiased=False, keepdim=True)`, as nn.LayerNorm does."
            )
        if isinstance(out, torch.Tensor) and out.shape == x.shape and out.mean(-1).abs().max() > 1e-3:
            raise _Failure(
                "the outputs don't have mean 0 over each token's features: you normalised over another "
                "axis. Hint: mean and variance over dim=-1 with keepdim=True."
            )
        raise _Failure("the output differs from nn.LayerNorm's. Hint: (x - mean) / sqrt(var + eps) * gain + shift.")

    return _run("check_layer_norm", body)


def check_causal_mask(make_mask: Callable, with_cache: bool = False) -> CheckResult:
    """``make_mask(T) -> bool (T, T)`` (or ``(1, 1, T, T)``), True where query i may attend to key j <= i.

    With ``with_cache=True``: ``make_mask(T_q, T_k)`` for the last ``T_q`` queries of a sequence of ``T_k``
    (decoding with a KV cache), so query i sits at position ``i + T_k - T_q``.
    """

    def body() -> str:
        sizes = [(2, 5), (3, 3), (1, 1)] if with_cache else [(4, 4), (7, 7), (1, 1)]  # T = 1 is ambiguous: last
        for size_q, size_k in sizes:
            args = (size_q, size_k) if with_cache else (size_q,)
            got = _call("your causal mask", make_mask, *args)
            expected = causal_mask(size_q, size_k)[0, 0]
            if not isinstance(got, torch.Tensor):
                raise _Failure(f"expected a tensor, got {type(got).__name__}.")
            if got.dtype != torch.bool:
                raise _Failure(
                    f"the mask has dtype {got.dtype}; masks are bool, True = may attend. Hint: "
                    "`torch.ones(T, T, dtype=torch.bool).tril()`."
                )
            try:
                got = got.reshape(size_q, size_k)
            except RuntimeError:
                raise _Failure(
                    f"for {args} expected ({size_q}, {size_k}) or (1, 1, {size_q}, {size_k}), got {tuple(got.shape)}."
                ) from None
            if torch.equal(got, expected):
                continue
            if torch.equal(got, ~expected):
                raise _Failure("the mask is inverted: True should mark what a query *may* see (j <= i).")
            if torch.equal(got, torch.ones(size_q, size_k, dtype=torch.bool).triu(size_k - size_q)):
                raise _Failure("this lets each token see the future and not the past: use `.tril()`, not `.triu()`.")
            if torch.equal(got, torch.ones(size_q, size_k, dtype=torch.bool).tril(-1 + size_k - size_q)):
                raise _Failure("a token must be allowed to see itself: the diagonal belongs to the mask.")
            if with_cache and torch.equal(got, torch.ones(size_q, size_k, dtype=torch.bool).tril()):
                raise _Failure(
                    f"for T_q={size_q} new queries among T_k={size_k} positions, query i is position "
                    f"i + {size_k - size_q}: it sees every cached token. Hint: `.tril(diagonal=T_k - T_q)`."
                )
            raise _Failure(f"for {args} the mask should be {expected.int().tolist()} (1 = may attend).")
        return "lets each position see itself and the past only. Well done!"

    return _run("check_causal_mask", body)


def check_label_smoothing(make_targets: Callable) -> CheckResult:
    """``make_targets(target (N,), vocab_size, eps, pad_id) -> (N, vocab_size)`` distributions."""

    def body() -> str:
        target, vocab_size, eps, pad_id = torch.tensor([4, 0, 7, 5]), 9, 0.1, 0
        got = _call("your label smoothing", make_targets, target, vocab_size, eps, pad_id)
        expected = smoothed_targets(target, vocab_size, eps, pad_id)
        if _close(got, expected):
            return "1 - eps on the target, eps spread over the rest, nothing on padding. Well done!"
        if not isinstance(got, torch.Tensor) or got.shape != expected.shape:
            raise _Failure(f"expected shape {tuple(expected.shape)} (N, vocab_size).")
        if not math.isclose(got[0, 4].item(), 1 - eps, abs_tol=1e-6):
            raise _Failure(f"the target token should get 1 - eps = {1 - eps}, got {got[0, 4].item():.4f}.")
        if got[0, pad_id].abs().item() > 1e-6:
            raise _Failure("<pad> got probability; it is never a correct answer. Hint: set column pad_id to 0.")
        if got[1].abs().sum() > 1e-6:
            raise _Failure("a row whose target is padding should be all zero, so it adds nothing to the loss.")
        raise _Failure(
            f"the other tokens should share eps equally: eps / (vocab_size - 2) = {eps / (vocab_size - 2):.4f} "
            f"each (not the target, not <pad>); got {got[0, 1].item():.4f}."
        )

    return _run("check_label_smoothing", body)


def check_feed_forward(module_class: type) -> CheckResult:
    """``module_class(d_model, d_ff)`` with ``nn.Linear`` attributes ``linear1``, ``linear2``:
    ``FFN(x) = max(0, x W1 + b1) W2 + b2`` at every position."""

    def body() -> str:
        d_model, d_ff = 8, 32
        student = _call(f"{module_class.__name__}({d_model}, {d_ff})", module_class, d_model, d_ff)
        reference = PositionwiseFeedForward(d_model, d_ff)
        if not all(isinstance(getattr(student, n, None), nn.Linear) for n in ("linear1", "linear2")):
            raise _Failure(
                "this check copies weights through attributes linear1 (d_model -> d_ff) and linear2 "
                "(d_ff -> d_model); define both as nn.Linear."
            )
        try:
            reference.linear1.load_state_dict(student.linear1.state_dict())
            reference.linear2.load_state_dict(student.linear2.state_dict())
        except RuntimeError:
            raise _Failure(
                f"linear1 must be nn.Linear({d_model}, {d_ff}) and linear2 nn.Linear({d_ff}, {d_model})."
            ) from None
        x = torch.randn(2, 5, d_model)
        out = _call("your feed-forward", student, x)
        if _close(out, reference(x)):
            return "two linear layers around a ReLU, the same at every position. Well done!"
        if _close(out, reference.linear2(reference.linear1(x))):
            raise _Failure("without the ReLU, two linear layers are just one linear layer. Hint: torch.relu between.")
        raise _Failure("the output differs from linear2(relu(linear1(x))).")

    return _run("check_feed_forward", body)


def check_noam_lr(schedule: Callable) -> CheckResult:
    """``schedule(step, d_model, warmup) -> float``, the paper's learning rate (eq. 3), steps counted from 1."""

    def body() -> str:
        for d_model, warmup in ((512, 4000), (64, 100)):
            for step in (1, warmup // 2, warmup, 3 * warmup, 20 * warmup):
                got, expected = _call("your schedule", schedule, step, d_model, warmup), noam_lr(step, d_model, warmup)
                if not isinstance(got, (int, float)) or not math.isclose(got, expected, rel_tol=1e-6):
                    phase = "warm-up (step <= warmup)" if step <= warmup else "decay (step > warmup)"
                    raise _Failure(
                        f"at step {step} (d_model={d_model}, warmup={warmup}, in the {phase}) expected "
                        f"{expected:.3e}, got {got!r}. Hint: d_model**-0.5 * min(step**-0.5, "
                        "step * warmup**-1.5)."
                    )
        return "rises linearly during warm-up, peaks at step = warmup, then decays as 1/sqrt(step). Well done!"

    return _run("check_noam_lr", body)


def check_temperature_softmax(softmax_with_temperature: Callable) -> CheckResult:
    """``softmax_with_temperature(logits (..., V), temperature) -> probabilities (..., V)``."""

    def body() -> str:
        logits = torch.tensor([[2.0, 1.0, 0.1, -1.0], [0.5, 0.5, 3.0, 0.0]])
        for temperature in (0.1, 1.0, 5.0):
            got = _call("your function", softmax_with_temperature, logits, temperature)
            expected = (logits / temperature).softmax(-1)
            if _close(got, expected):
                continue
            if _close(got, (logits * temperature).softmax(-1)):
                raise _Failure("you multiplied by the temperature; divide: a high temperature should flatten.")
            raise _Failure(
                f"at temperature {temperature} expected {expected.tolist()}. Hint: "
                "`(logits / temperature).softmax(dim=-1)`."
            )
        return "low temperatures sharpen, high ones flatten. Well done!"

    return _run("check_temperature_softmax", body)


def check_shard_loss(shard_loss: Callable) -> CheckResult:
    """``shard_loss(logits (B, T, V), target (B, T), global_tokens, world_size) -> scalar``.

    The loss that each of ``world_size`` data-parallel processes should backpropagate so that DDP's average of
    their gradients is the gradient of the mean cross-entropy over all ``global_tokens`` non-pad tokens of the
    whole batch (pad id 0), however unequally the tokens are spread over the processes.
    """

    def body() -> str:
        gen = torch.Generator().manual_seed(0)
        vocab_size = 7
        for world_size in (2, 3):
            shards = []
            for rank in range(world_size):
                batch, length = 2, 3 + 2 * rank  # later ranks hold longer sequences: unequal token counts
                target = torch.randint(1, vocab_size, (batch, length), generator=gen)
                target[0, length - rank - 1 :] = 0  # some padding
                shards.append((torch.randn(batch, length, vocab_size, generator=gen), target))
            counts = [int((target != 0).sum()) for _, target in shards]
            sums = [
                F.cross_entropy(logits.flatten(0, 1), target.flatten(), ignore_index=0, reduction="sum")
                for logits, target in shards
            ]
            global_tokens = sum(counts)
            expected = sum(sums) / global_tokens  # the big batch's mean over all its tokens
            got = [_call("your function", shard_loss, logits, target, global_tokens, world_size)
                   for logits, target in shards]
            if not all(isinstance(g, torch.Tensor) and g.dim() == 0 for g in got):
                raise _Failure("return one scalar tensor per process (a 0-dim tensor, as `loss.backward()` needs).")
            averaged = sum(got) / world_size  # what DDP's gradient averaging amounts to
            if _close(averaged, expected):
                continue
            if all(_close(g, total / n) for g, total, n in zip(got, sums, counts, strict=True)):
                raise _Failure(
                    "you averaged over each process's own tokens. With unequal shards the average of those "
                    "means is not the mean over all tokens. Hint: sum over this shard's non-pad tokens and "
                    "divide by `global_tokens`."
                )
            if _close(averaged * world_size, expected):
                raise _Failure(
                    f"the processes' average is {world_size} times too small: DDP divides the summed gradients "
                    "by `world_size`, so multiply your loss by `world_size` to undo it."
                )
            raise _Failure(
                f"with {world_size} processes their average is {averaged.item():.4f}, the big batch's mean is "
                f"{expected.item():.4f}. Hint: cross-entropy summed over this shard's non-pad tokens "
                "(`reduction='sum', ignore_index=0`), times `world_size`, divided by `global_tokens`."
            )
        return "the processes' average equals the big batch's mean over all tokens, however unequal. Well done!"

    return _run("check_shard_loss", body)

