"""Interactive views: thin ipywidgets wrappers around :mod:`transformer_lib.viz`.

Each widget shows its controls and, below them, a PNG picture drawn as soon as it is displayed. The picture is
an ordinary image output (with a display id), updated in place whenever a control changes: so a notebook read
without a kernel still shows the first picture, and nbval never has widget state to compare.

Every widget keeps its latest drawing in ``.png`` and the numbers behind it in ``.state``; tests set a
control's ``.value`` and check both changed. ipywidgets is imported here only, so model code never needs it.
"""

import math
from collections.abc import Sequence

import ipywidgets as w
import matplotlib.pyplot as plt
import torch
from IPython.display import Image, display
from matplotlib.figure import Figure

from . import viz
from .attention import MultiHeadAttention
from .capture import capture_attention
from .data import Vocab, make_batch
from .decode import greedy_decode
from .layers import sinusoidal_encoding
from .masks import causal_mask
from .model import Transformer
from .train import noam_lr

__all__ = [
    "FigureWidget",
    "TemperatureExplorer",
    "HeadExplorer",
    "LayerHeadExplorer",
    "HeadCountExplorer",
    "MaskBuilder",
    "PositionalEncodingExplorer",
    "ScheduleExplorer",
    "AttentionExplorer",
    "DecodingExplorer",
]


class FigureWidget:
    """Controls above a picture that is redrawn whenever one of them changes.

    Subclasses build ``self.controls`` (name -> widget) and implement :meth:`draw`, which returns a Figure and
    may record what it showed in ``self.state``.
    """

    def __init__(self, controls: dict[str, w.Widget]):
        self.controls = controls
        self.state: dict = {}
        self.png = b""
        self.draw_count = 0
        self._handle = None
        for control in controls.values():
            control.observe(lambda _change: self.redraw(), names="value")
        self.redraw()

    def draw(self) -> Figure:
        raise NotImplementedError

    def redraw(self) -> None:
        fig = self.draw()
        self.png = viz.figure_to_png(fig)
        plt.close(fig)
        self.draw_count += 1
        if self._handle is not None:
            self._handle.update(Image(data=self.png, format="png"))

    def _ipython_display_(self) -> None:
        controls = w.HBox(list(self.controls.values()), layout=w.Layout(flex_flow="row wrap"))
        bundle = controls._repr_mimebundle_()
        # What a saved notebook shows where no kernel runs (GitHub, nbviewer) instead of the widget's repr.
        bundle["text/plain"] = self.controls_summary()
        display(bundle, raw=True)
        self._handle = display(Image(data=self.png, format="png"), display_id=True)

    def controls_summary(self) -> str:
        """One line naming the controls and their values, e.g. ``[controls: head = 0; run the notebook ...]``."""
        values = "; ".join(f"{name} = {control.value}" for name, control in self.controls.items())
        return f"[controls: {values}; run the notebook to move them]"


class TemperatureExplorer(FigureWidget):
    """``softmax(scores / temperature)``: drag the temperature from near-argmax to near-uniform."""

    def __init__(self, scores: torch.Tensor, labels: Sequence[str] | None = None, temperature: float = 1.0):
        self.scores, self.labels = torch.as_tensor(scores, dtype=torch.float32), labels
        super().__init__(
            {
                "temperature": w.FloatLogSlider(
                    value=temperature, base=10, min=-1.5, max=1.5, step=0.05, description="temperature"
                )
            }
        )

    def draw(self) -> Figure:
        t = self.controls["temperature"].value
        self.state = {"temperature": t, "probabilities": torch.softmax(self.scores / t, dim=0)}
        return viz.plot_softmax_temperature(self.scores, t, self.labels)


class HeadExplorer(FigureWidget):
    """Slide through the heads of one attention map ``weights (h, T_q, T_k)``."""

    def __init__(
        self,
        weights: torch.Tensor,
        query_labels: Sequence[str] | None = None,
        key_labels: Sequence[str] | None = None,
        title: str = "attention",
    ):
        if weights.dim() != 3:
            raise ValueError(f"weights must be (h, T_q, T_k), got shape {tuple(weights.shape)}")
        self.weights, self.query_labels, self.key_labels, self.title = weights.detach(), query_labels, key_labels, title
        super().__init__({"head": w.IntSlider(value=0, min=0, max=weights.size(0) - 1, description="head")})

    def draw(self) -> Figure:
        head = self.controls["head"].value
        self.state = {"head": head, "weights": self.weights[head]}
        return viz.plot_attention(self.weights[head], self.query_labels, self.key_labels, f"{self.title}, head {head}")


class LayerHeadExplorer(FigureWidget):
    """Pick a layer and a head of captured attention (e.g. ``tl.capture_attention(encoder)``).

    ``maps``: layer name -> ``(h, T_q, T_k)`` weights, all for the same tokens.
    """

    def __init__(
        self,
        maps: dict[str, torch.Tensor],
        query_labels: Sequence[str] | None = None,
        key_labels: Sequence[str] | None = None,
    ):
        if not maps:
            raise ValueError("maps is empty: capture some attention first")
        self.maps, self.query_labels, self.key_labels = maps, query_labels, key_labels
        heads = next(iter(maps.values())).size(0)
        super().__init__(
            {
                "layer": w.Dropdown(options=list(maps), description="layer"),
                "head": w.IntSlider(value=0, min=0, max=heads - 1, description="head"),
            }
        )

    def draw(self) -> Figure:
        layer, head = self.controls["layer"].value, self.controls["head"].value
        self.state = {"layer": layer, "head": head, "weights": self.maps[layer][head]}
        return viz.plot_attention(
            self.maps[layer][head], self.query_labels, self.key_labels, f"{layer}, head {head}", annotate=False
        )


class HeadCountExplorer(FigureWidget):
    """Change ``h`` at a fixed ``d_model``: ``d_k = d_model / h`` shrinks and each head gets its own map.

    Each ``h`` gets a freshly initialised :class:`MultiHeadAttention` (seeded, so the same ``h`` always shows
    the same maps) applied to the same token vectors ``x (T, d_model)``.
    """

    def __init__(self, x: torch.Tensor, labels: Sequence[str] | None = None, seed: int = 0):
        if x.dim() != 2:
            raise ValueError(f"x must be (T, d_model) token vectors, got shape {tuple(x.shape)}")
        self.x, self.labels, self.seed = x.detach(), labels, seed
        d_model = x.size(1)
        options = [h for h in range(1, min(d_model, 8) + 1) if d_model % h == 0]
        super().__init__(
            {
                "num_heads": w.SelectionSlider(
                    options=options, value=options[min(1, len(options) - 1)], description="heads h"
                )
            }
        )

    def draw(self) -> Figure:
        h = self.controls["num_heads"].value
        torch.manual_seed(self.seed)
        mha = MultiHeadAttention(self.x.size(1), h).eval()
        with torch.no_grad():
            _, weights = mha(self.x[None], self.x[None], self.x[None], need_weights=True)  # (1, h, T, T)
        self.state = {"num_heads": h, "d_k": mha.d_k, "weights": weights[0]}
        return viz.plot_heads(
            weights[0], self.labels, self.labels, f"d_model = {self.x.size(1)}, h = {h}, d_k = d_model / h = {mha.d_k}"
        )


class MaskBuilder(FigureWidget):
    """Toggle the padding and the causal mask for a padded sequence and see the mask and the attention it allows.

    ``tokens`` is the sequence as text pieces, with ``pad`` marking padding; the scores are seeded random.
    """

    def __init__(self, tokens: Sequence[str], pad: str = "<pad>", seed: int = 0):
        self.tokens = list(tokens)
        self.is_real = torch.tensor([t != pad for t in self.tokens])
        generator = torch.Generator().manual_seed(seed)
        self.scores = torch.randn(len(tokens), len(tokens), generator=generator)
        super().__init__(
            {
                "padding": w.Checkbox(value=True, description="padding mask"),
                "causal": w.Checkbox(value=False, description="causal mask"),
            }
        )

    def mask(self) -> torch.Tensor:
        """``(T, T)`` bool: True = may attend."""
        t = len(self.tokens)
        mask = torch.ones(t, t, dtype=torch.bool)
        if self.controls["padding"].value:
            mask &= self.is_real[None, :]  # no query looks at a padding key
        if self.controls["causal"].value:
            mask &= causal_mask(t)[0, 0]
        return mask

    def draw(self) -> Figure:
        mask = self.mask()
        weights = self.scores.masked_fill(~mask, float("-inf")).softmax(-1).nan_to_num(0.0)
        self.state = {"mask": mask, "weights": weights}
        fig, (left, right) = plt.subplots(1, 2, figsize=(3 + 0.8 * len(self.tokens), 0.9 + 0.4 * len(self.tokens)))
        viz.plot_mask(mask, self.tokens, self.tokens, ax=left)
        viz.plot_attention(weights, self.tokens, self.tokens, title="weights after softmax", annotate=False, ax=right)
        fig.tight_layout()
        return fig


class PositionalEncodingExplorer(FigureWidget):
    """Pick ``d_model`` and a feature pair ``i``: the heatmap of all encodings and the pair's two curves."""

    def __init__(self, max_len: int = 100, d_model: int = 64):
        self.max_len = max_len
        super().__init__(
            {
                "d_model": w.IntSlider(value=d_model, min=8, max=256, step=8, description="d_model"),
                "pair": w.IntSlider(value=0, min=0, max=d_model // 2 - 1, description="pair i"),
            }
        )
        self.controls["d_model"].observe(self._bound_pair, names="value")

    def _bound_pair(self, change) -> None:
        self.controls["pair"].max = change["new"] // 2 - 1  # redraws if the value had to move

    def draw(self) -> Figure:
        d_model, pair = (
            self.controls["d_model"].value,
            min(self.controls["pair"].value, self.controls["d_model"].value // 2 - 1),
        )
        pe = sinusoidal_encoding(d_model, self.max_len).numpy()  # (max_len, d_model)
        wavelength = 2 * math.pi * 10000 ** (2 * pair / d_model)
        self.state = {"d_model": d_model, "pair": pair, "wavelength": wavelength, "pe": pe}
        fig, (heat, curves) = plt.subplots(1, 2, figsize=(10, 2.8))
        heat.imshow(pe, cmap="RdBu", vmin=-1, vmax=1, aspect="auto", interpolation="nearest")
        heat.axvline(2 * pair, color="black", lw=1)
        heat.set_xlabel("feature")
        heat.set_ylabel("position")
        heat.set_title(f"PE, d_model = {d_model}")
        curves.plot(pe[:, 2 * pair], label=f"sin (feature {2 * pair})")
        curves.plot(pe[:, 2 * pair + 1], label=f"cos (feature {2 * pair + 1})")
        curves.set_xlabel("position")
        curves.set_title(f"pair {pair}: one turn every {wavelength:.1f} positions")
        curves.legend(fontsize=7, loc="upper right")
        fig.tight_layout()
        return fig


class ScheduleExplorer(FigureWidget):
    """The paper's learning-rate schedule for any ``d_model`` and ``warmup``, against the paper's own."""

    def __init__(self, steps: int = 20000):
        self.steps = steps
        super().__init__(
            {
                "d_model": w.IntSlider(value=512, min=64, max=1024, step=64, description="d_model"),
                "warmup": w.IntSlider(value=4000, min=100, max=10000, step=100, description="warmup"),
            }
        )

    def draw(self) -> Figure:
        d_model, warmup = self.controls["d_model"].value, self.controls["warmup"].value
        ours = [noam_lr(s, d_model, warmup) for s in range(1, self.steps + 1)]
        paper = [noam_lr(s, 512, 4000) for s in range(1, self.steps + 1)]
        self.state = {
            "d_model": d_model,
            "warmup": warmup,
            "peak_step": max(range(self.steps), key=ours.__getitem__) + 1,
            "peak_lr": max(ours),
        }
        return viz.plot_schedule({f"d_model={d_model}, warmup={warmup}": ours, "paper: 512, 4000": paper})


def _token_labels(vocab: Vocab, ids: torch.Tensor) -> list[str]:
    return [{"<bos>": "^", "<eos>": "$", " ": "·"}.get(vocab.itos[i], vocab.itos[i]) for i in ids.tolist()]


class AttentionExplorer(FigureWidget):
    """Type a source text; see every layer's and head's attention in a trained :class:`Transformer`.

    The model translates the text greedily, then one forward pass over ``(source, <bos> + translation)`` is
    captured. ``kind`` picks encoder self-attention, decoder (masked) self-attention or cross-attention; the
    layer, head and query sliders take their bounds from the model and the current text.
    """

    KINDS = {
        "encoder self": ("encoder", "self_attn"),
        "decoder self": ("decoder", "self_attn"),
        "cross": ("decoder", "cross_attn"),
    }

    def __init__(self, model: Transformer, vocab: Vocab, text: str, kind: str = "cross", max_len: int = 32):
        self.model, self.vocab, self.max_len = model, vocab, max_len
        config = model.config
        self._run(text)
        super().__init__(
            {
                "text": w.Text(value=text, description="source", continuous_update=False),
                "kind": w.Dropdown(options=list(self.KINDS), value=kind, description="attention"),
                "layer": w.IntSlider(value=0, min=0, max=config.num_layers - 1, description="layer"),
                "head": w.IntSlider(value=0, min=0, max=config.num_heads - 1, description="head"),
                "query": w.IntSlider(value=0, min=0, max=self._query_count(kind) - 1, description="query"),
            }
        )

    def _run(self, text: str) -> None:
        model, vocab = self.model, self.vocab
        src = make_batch([(text, "")], vocab).src  # (1, S)
        out = greedy_decode(model, src, self.max_len, vocab.bos_id, vocab.eos_id)[0]  # (<= max_len,)
        out = out[out != vocab.pad_id]
        tgt = torch.cat([torch.tensor([vocab.bos_id]), out[out != vocab.eos_id]])[None]  # (1, T)
        model.eval()
        with torch.no_grad(), capture_attention(model) as attention:
            model(src, tgt)
        self.text, self.translation = text, vocab.decode(out)
        self._maps = {name: calls[-1][0] for name, calls in attention.calls.items() if calls}  # (h, T_q, T_k) each
        self._labels = {"src": _token_labels(vocab, src[0]), "tgt": _token_labels(vocab, tgt[0])}

    def _query_count(self, kind: str) -> int:
        return len(self._labels["tgt" if self.KINDS[kind][0] == "decoder" else "src"])

    def redraw(self) -> None:
        if self.controls["text"].value != self.text:
            self._run(self.controls["text"].value)
        self.controls["query"].max = self._query_count(self.controls["kind"].value) - 1  # bounds follow the text
        super().redraw()

    def draw(self) -> Figure:
        c = {name: control.value for name, control in self.controls.items()}
        stack, attn = self.KINDS[c["kind"]]
        weights = self._maps[f"{stack}.layers.{c['layer']}.{attn}"][c["head"]]  # (T_q, T_k)
        query_labels = self._labels["tgt" if stack == "decoder" else "src"]
        key_labels = self._labels["src" if (stack == "encoder" or attn == "cross_attn") else "tgt"]
        query = min(c["query"], len(query_labels) - 1)
        self.state = {**c, "weights": weights, "translation": self.translation}
        return viz.plot_attention(
            weights,
            query_labels,
            key_labels,
            highlight_query=query,
            annotate=False,
            title=f"{c['kind']}, layer {c['layer']}, head {c['head']}  ->  {self.translation}",
        )


class DecodingExplorer(FigureWidget):
    """Step through greedy decoding: at step ``t`` the model has written ``t`` tokens, and the picture shows
    where each step's query looked in the source (cross-attention of the last layer, averaged over heads)."""

    def __init__(self, model: Transformer, vocab: Vocab, text: str, max_len: int = 32):
        src = make_batch([(text, "")], vocab).src  # (1, S)
        with capture_attention(model) as attention:
            out = greedy_decode(model, src, max_len, vocab.bos_id, vocab.eos_id)[0]  # cached: one call per step
        layer = f"decoder.layers.{model.config.num_layers - 1}.cross_attn"
        self.rows = torch.cat([step[0].mean(0) for step in attention.calls[layer]])  # (steps, S)
        self.tokens = _token_labels(vocab, out[out != vocab.pad_id])
        self.source = _token_labels(vocab, src[0])
        super().__init__({"step": w.IntSlider(value=1, min=1, max=len(self.tokens), description="step")})

    def draw(self) -> Figure:
        step = self.controls["step"].value
        shown = self.rows.clone()
        shown[step:] = 0  # not written yet
        self.state = {"step": step, "written": "".join(self.tokens[:step]), "row": self.rows[step - 1]}
        return viz.plot_attention(
            shown,
            self.tokens,
            self.source,
            highlight_query=step - 1,
            annotate=False,
            title=f"step {step}: wrote {self.tokens[step - 1]!r} so far '{''.join(self.tokens[:step])}'",
        )
