"""The references of the checks that grade a student's class: the library's module holding the
student's weights, so the two must compute the same thing.

Before copying, each function looks at the student module's structure (parameters, their names,
parameters or buffers) and fails naming what is wrong: a layer in a plain list, a table stored as
a parameter.
"""

from functools import partial

import torch
from torch import nn

from ...model.attention import MultiHeadAttention
from ...model.decoder import DecoderLayer
from ...model.encoder import EncoderLayer
from ...model.layers import LayerNorm, PositionalEncoding, PositionwiseFeedForward
from .engine import Failure, describe

__all__ = [
    "copy_weight",
    "copy_weights",
    "multi_head_attention",
    "encoder_layer",
    "decoder_layer",
    "layer_norm",
    "feed_forward",
    "positional_encoding",
]


def copy_weight(target: nn.Module, student: nn.Module, source: str) -> None:
    """Copy ``student.<source>`` (weight, and bias if any) into ``target``, or fail naming what it
    should be."""
    module = student
    for part in filter(None, source.split(".")):
        module = getattr(module, part, None)
    weight, shape = getattr(module, "weight", None), tuple(target.weight.shape)
    if not isinstance(weight, torch.Tensor) or weight.shape != target.weight.shape:
        should = (
            f"nn.Linear({shape[1]}, {shape[0]})"
            if isinstance(target, nn.Linear)
            else f"a LayerNorm({shape[0]})"
        )
        found = f"weight {describe(weight)}" if module is not None else "nothing"
        names = (
            " Hint: name the gain and shift `weight` and `bias`, as nn.LayerNorm does."
            if weight is None and module is not None and not isinstance(target, nn.Linear)
            else ""
        )
        where = f"`{source}`" if source else "your module itself"
        raise Failure(
            f"this check copies weights through {where}, which should be {should}; found "
            f"{found}.{names}"
        )
    bias = getattr(module, "bias", None)
    with torch.no_grad():
        target.weight.copy_(weight)
        if target.bias is not None:
            target.bias.copy_(
                bias if isinstance(bias, torch.Tensor) else torch.zeros_like(target.bias)
            )


def copy_weights(reference: nn.Module, student: nn.Module, sources: dict) -> nn.Module:
    """``reference`` after copying ``student.<source>`` into each ``reference.<target>`` of
    ``sources``."""
    for target, source in sources.items():
        module = reference
        for part in filter(None, target.split(".")):
            module = getattr(module, part)
        copy_weight(module, student, source)
    return reference


_PROJECTIONS = ("w_q", "w_k", "w_v", "w_o")


class _WithWeights(MultiHeadAttention):
    """The library's module, asked for its weights on every call: a learner's module that returns
    ``(output, weights)`` has its weights compared too."""

    def forward(self, query, key, value, mask=None):
        return super().forward(query, key, value, mask, need_weights=True)


def multi_head_attention(student: nn.Module, d_model: int, num_heads: int) -> MultiHeadAttention:
    """The library's module with the student's weights, after checking the parameter count (biases
    optional)."""
    linears = {n: getattr(student, n, None) for n in _PROJECTIONS}
    per_head = [n for n, layer in linears.items() if isinstance(layer, nn.ModuleList)]
    if per_head:
        raise Failure(
            f"`{per_head[0]}` is a list of per-head layers (notebook 02's design A); this check "
            "needs design B, one `nn.Linear(d_model, d_model)` per projection, split into heads "
            "after the product (section 3 copies design A's weights into it with `torch.cat`)."
        )
    biased = {
        n for n, layer in linears.items() if isinstance(layer, nn.Linear) and layer.bias is not None
    }
    found = sum(p.numel() for p in student.parameters())
    # w_q, w_k, w_v, w_o; with biases
    counts = {False: 4 * d_model * d_model, True: 4 * d_model * (d_model + 1)}
    if found not in counts.values():
        unregistered = [n for n, layer in linears.items() if not isinstance(layer, nn.Linear)]
        expected = counts[bool(biased)]
        if 0 < len(biased) < 4 and not unregistered:
            raise Failure(
                f"only {sorted(biased)} have a bias: give all four projections a bias, or none "
                "(the paper's equations have none: `nn.Linear(d_model, d_model, bias=False)`)."
            )
        for name, layer in linears.items():
            if isinstance(layer, nn.Linear) and (layer.in_features, layer.out_features) != (
                d_model,
                d_model,
            ):
                raise Failure(
                    f"{name} maps {layer.in_features} -> {layer.out_features} features; "
                    f"with d_model={d_model} every projection is nn.Linear(d_model, "
                    "d_model) (h heads of d_k each)."
                )
        if found < counts[False] or unregistered:
            raise Failure(
                f"the module registers {found} parameters, the library {expected}, and "
                f"{unregistered} are not nn.Linear attributes: layers kept in local variables, "
                "plain lists or tuples are invisible to `.parameters()`, so the optimizer never "
                "trains them. Hint: assign each layer to `self.` (or use nn.ModuleList)."
            )
        known = {
            id(p)
            for layer in linears.values()
            if isinstance(layer, nn.Linear)
            for p in layer.parameters()
        }
        extra = [n for n, p in student.named_parameters() if id(p) not in known]
        raise Failure(
            f"the module registers {found} parameters, the library {expected}; the extra ones are "
            f"{extra}. Hint: multi-head attention needs only w_q, w_k, w_v, w_o."
        )
    reference = _WithWeights(d_model, num_heads, bias=bool(biased))
    return copy_weights(reference, student, {n: n for n in _PROJECTIONS})


def _distinct_norms(student: nn.Module, names: list[str]) -> None:
    """Fail when two sublayers share one LayerNorm (one module, or one gain or shift); else give
    each norm its own gain and shift (not 1 and 0, the same for every fresh norm), so that a norm
    used in the wrong sublayer shows."""
    norms = {name: getattr(student, name, None) for name in names}
    seen: dict[int, str] = {}
    for name, norm in norms.items():
        if not isinstance(norm, nn.Module):
            continue  # copy_weight names what is missing
        for tensor in (norm, *norm.parameters()):
            if id(tensor) in seen and seen[id(tensor)] != name:
                raise Failure(
                    f"`{seen[id(tensor)]}` and `{name}` are one LayerNorm (or share its gain or "
                    "shift): each sublayer has a LayerNorm of its own, with its own learned gain "
                    f"and shift. Hint: `self.{seen[id(tensor)]} = nn.LayerNorm(d_model)` and "
                    f"`self.{name} = nn.LayerNorm(d_model)`, two calls."
                )
            seen[id(tensor)] = name
    with torch.no_grad():
        for i, norm in enumerate(norms.values()):
            for part, values in (
                ("weight", torch.linspace(0.5, 2.0, 64)),
                ("bias", torch.linspace(-1.0, 1.0, 64)),
            ):
                tensor = getattr(norm, part, None)
                if isinstance(tensor, torch.Tensor) and tensor.dim() == 1 and tensor.numel() <= 64:
                    tensor.copy_(values.roll(7 * (i + 1))[: tensor.numel()])


def _layer(
    kind: type, attentions: tuple, student: nn.Module, d_model, num_heads, d_ff, norm_first=False
):
    """``tl.EncoderLayer``/``tl.DecoderLayer`` with the student's weights; ``normK`` is the K-th
    residual's norm."""
    reference = kind(d_model, num_heads, d_ff, dropout=0.0, norm_first=norm_first)
    residuals = [name for name, _ in reference.named_children() if name.startswith("residual_")]
    _distinct_norms(student, [f"norm{i}" for i in range(1, len(residuals) + 1)])
    sources = {f"{a}.{w}": f"{a}.{w}" for a in attentions for w in _PROJECTIONS}
    sources |= {f"feed_forward.{n}": f"feed_forward.{n}" for n in ("linear1", "linear2")}
    return copy_weights(
        reference, student, sources | {f"{r}.norm": f"norm{i}" for i, r in enumerate(residuals, 1)}
    )


def layer_norm(student: nn.Module, d_model: int) -> LayerNorm:
    """``tl.LayerNorm(d_model)`` (eps 1e-5) with the student's gain ``weight`` and shift ``bias``,
    both set first to values other than 1 and 0, so that a gain or shift forgotten, applied twice or
    in the wrong order shows. They carry nn.LayerNorm's names, which the encoder and decoder layers'
    checks read too: other names fail here, so that the learner hears it at once."""
    found = sum(p.numel() for p in student.parameters())
    if found != 2 * d_model:
        raise Failure(
            f"LayerNorm({d_model}) should learn {2 * d_model} numbers (a gain and a shift per "
            f"feature); it registers {found}. Hint: `nn.Parameter(torch.ones(d_model))` and "
            "`torch.zeros`."
        )
    named = dict(student.named_parameters())
    if not {"weight", "bias"} <= set(named) or any(
        named[n].shape != (d_model,) for n in ("weight", "bias")
    ):
        shapes = ", ".join(f"`{name}` {tuple(p.shape)}" for name, p in named.items())
        raise Failure(
            "this check reads the gain and the shift by nn.LayerNorm's names, `weight` and "
            f"`bias`, each of shape ({d_model},) (the encoder layer's check reads them too); "
            f"found {shapes}. Hint: `self.weight = nn.Parameter(torch.ones(d_model))`, "
            "`self.bias = nn.Parameter(torch.zeros(d_model))`."
        )
    if not (torch.all(named["weight"] == 1) and torch.all(named["bias"] == 0)):
        raise Failure(
            "a fresh LayerNorm should only normalise: its gain `weight` starts at 1 and "
            "its shift `bias` at 0, as in nn.LayerNorm. Hint: `torch.ones(d_model)` and "
            "`torch.zeros(d_model)`."
        )
    with torch.no_grad():
        named["weight"].copy_(torch.linspace(0.5, 2.0, d_model))
        named["bias"].copy_(torch.linspace(-1.0, 1.0, d_model))
    return copy_weights(LayerNorm(d_model), student, {"": ""})


def positional_encoding(student: nn.Module, d_model: int, max_len: int) -> PositionalEncoding:
    """Check that the table is a registered buffer, then return the library's module."""
    size = d_model * max_len
    if not any(t.numel() == size for t in student.buffers()):
        params = [n for n, p in student.named_parameters() if p.numel() == size]
        plain = [
            n for n, v in vars(student).items() if isinstance(v, torch.Tensor) and v.numel() == size
        ]
        if params:
            raise Failure(
                f"the table is an nn.Parameter (`{params[0]}`): trainable, it would be "
                "learned, not fixed; frozen (requires_grad=False), it still shows up in "
                "`.parameters()` and in parameter counts, and is handed to the optimizer. Hint: "
                "`self.register_buffer('pe', table)`: it moves with `.to(device)`, is saved "
                "in the state_dict, and is no parameter."
            )
        if plain:
            raise Failure(
                f"the table is a plain attribute `self.{plain[0]}`: `.to(device)` leaves "
                "it behind, so on a GPU it stays on the CPU. Hint: "
                "`self.register_buffer('pe', table)`."
            )
        raise Failure(
            f"no buffer of max_len x d_model = {size} numbers: store the table with "
            "`self.register_buffer('pe', table)`."
        )
    return PositionalEncoding(d_model, max_len=max_len, dropout=0.0)


encoder_layer = partial(_layer, EncoderLayer, ("self_attn",))
decoder_layer = partial(_layer, DecoderLayer, ("self_attn", "cross_attn"))


def feed_forward(student: nn.Module, d_model: int, d_ff: int) -> PositionwiseFeedForward:
    return copy_weights(
        PositionwiseFeedForward(d_model, d_ff),
        student,
        {"linear1": "linear1", "linear2": "linear2"},
    )
