"""Interactive views: thin ipywidgets wrappers around :mod:`transformer_lib.teaching.viz`.

Each widget shows its controls and, below them, a PNG picture drawn as soon as it is displayed. The
picture is an ordinary image output (with a display id), updated in place whenever a control
changes: so a notebook read without a kernel still shows the first picture, and nbval never has
widget state to compare. The PNG has twice the pixels of its size on screen, so it stays sharp on
high-resolution displays.

A widget only turns its controls into arguments for a ``viz`` function (and, where it must, runs the
model); the drawing is ``viz``'s. What the user typed that cannot be drawn (an empty source, an
unknown character) is shown as a message under the controls, which stay alive. A control with one
possible value is hidden. Heat maps offer a colour-scale choice: one shared scale (0 to 1, so maps
compare and a flat map looks flat) or each map's own (0 to its largest weight, to see detail in a
faint map).

Every widget keeps its latest drawing in ``.png``, the numbers behind it in ``.state`` and the
message of the last input it could not draw in ``.error``; tests set a control's ``.value`` and
check them. ipywidgets is imported here only, so model code never needs it.

On the static site (``make site``, ``tools/make_site.py``) every widget still moves, and the widget
itself says how: :meth:`FigureWidget.frames` yields ``(control values, PNG)`` for every combination
of the values that :meth:`FigureWidget.site_values` offers, each PNG drawn by the widget's own
:meth:`~FigureWidget.draw` after setting those values, exactly as a reader moving the controls would
see it. The site cannot ask a live kernel, so the widget travels in the notebook:
:meth:`FigureWidget.snapshot` is a small JSON record of its controls and of the data its pictures
are drawn from (the attributes its class names in ``DATA``: attention maps, token labels; never the
model), and :meth:`FigureWidget.restore` rebuilds the same widget from it in another process. The
snapshot rides in the metadata of the controls' display output, under ``SNAPSHOT_KEY``: nbval never
compares output metadata, and ``nbstripout --keep-output`` keeps it, so the committed outputs nbval
reads are unchanged and a notebook grows by the size of its widgets' data (tens of kB), not by
hundreds of PNGs. A widget whose picture needs the model for a control value computes it up front
(``DecodingExplorer`` runs every step once); a control whose values are typed text (a source
sentence) stays at its value on the web.

A widget that runs a model runs it where the model is (a CPU, cuda or Apple's mps; GUIDE §10): it
builds every input on :func:`_model_device` (never on torch's default device, which is the CPU
unless the learner changed it) and brings what it draws back to the CPU, where matplotlib, the
labels and the snapshot read it.
"""

import base64
import html
import sys
from collections.abc import Iterator, Sequence

import ipywidgets as w
import matplotlib.pyplot as plt
import numpy as np
import torch
from IPython.display import Image, display
from matplotlib.figure import Figure

from ..applications.decode import greedy_decode
from ..model.attention import MultiHeadAttention, scaled_dot_product_attention
from ..model.layers import sinusoidal_encoding
from ..model.masks import causal_mask
from ..model.transformer import Transformer
from ..training.data import Vocab, make_batch
from ..training.subwords import SubwordVocab
from ..training.train import noam_lr
from ..training.translation_corpus import normalise_text
from . import viz
from .inspection import ATTENTION_KINDS, capture_attention

__all__ = [
    "SNAPSHOT_KEY",
    "control_values",
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
    "RotaryPairExplorer",
]

# The colour-scale choice of every heat-map widget: value -> the ``vmax`` that viz takes.
SCALES = {"shared": 1.0, "own": None}
TOKEN_SYMBOLS = (
    "Symbols: ^ = start of the output (&lt;bos&gt;), $ = its end (&lt;eos&gt;), · = a space."
)
ROW_RULE = "A decoder row a→b is the query at the position that reads a and writes b."


def scale_control() -> w.Dropdown:
    return w.Dropdown(
        options=[("shared: 0 to 1", "shared"), ("own: 0 to its largest weight", "own")],
        value="shared",
        description="colour scale",
    )


def _has_one_value(control: w.Widget) -> bool:
    values = control_values(control)
    return values is not None and len(values) <= 1


# Where a widget's snapshot rides in its controls' display output: output metadata, which nbval
# never compares.
SNAPSHOT_KEY = "transformer_lib/widget"
SNAPSHOT_VERSION = 1


def control_values(control: w.Widget) -> list | None:
    """Every value ``control`` can take now, in its own order; None for a box of typed text
    (open-ended).

    A checkbox: False, True. A menu or selection slider: its options' values. A slider: ``min`` to
    ``max`` in steps of ``step`` (for a log slider, of the exponent: ``base ** min`` ...
    ``base ** max``).
    """
    if isinstance(control, w.Checkbox):
        return [False, True]
    if hasattr(control, "options"):
        return list(control._options_values)  # the values whatever form the options were given in
    if isinstance(control, w.FloatLogSlider):
        count = round((control.max - control.min) / control.step)
        return [control.base ** (control.min + i * control.step) for i in range(count + 1)]
    if isinstance(control, (w.IntSlider, w.FloatSlider)):
        count = int(round((control.max - control.min) / control.step))
        return [control.min + i * control.step for i in range(count + 1)]
    return None


def _spread(values: list, count: int, keep) -> list:
    """At most ``count`` of ``values``, evenly spaced, with both ends (and ``keep``, the current
    value) among them."""
    if len(values) <= count:
        return values
    picked = {round(i * (len(values) - 1) / (count - 1)) for i in range(count)}
    picked |= {i for i, v in enumerate(values) if v == keep}
    return [values[i] for i in sorted(picked)]


def _encode(value):
    """A widget's data as JSON: tensors as raw little-endian bytes in base64 (exact, so a restored
    widget draws the very same picture), lists and tuples recursively, dicts as ``[key, value]``
    pairs (notebook files are written with sorted keys: a JSON object would lose the order), plain
    scalars as they are."""
    if isinstance(value, torch.Tensor):
        array = value.detach().cpu().contiguous().numpy()
        return {
            "__tensor__": base64.b64encode(
                array.astype(array.dtype.newbyteorder("<")).tobytes()
            ).decode(),
            "dtype": str(array.dtype),
            "shape": list(array.shape),
        }
    if isinstance(value, (list, tuple)):
        return [_encode(v) for v in value]
    if isinstance(value, dict):
        return {"__dict__": [[_encode(k), _encode(v)] for k, v in value.items()]}
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    raise TypeError(
        "a widget's data must be tensors, lists, dicts, strings or numbers, got "
        f"{type(value).__name__}"
    )


def _decode(value):
    if isinstance(value, dict) and "__tensor__" in value:
        dtype = np.dtype(value["dtype"]).newbyteorder("<")
        array = np.frombuffer(base64.b64decode(value["__tensor__"]), dtype=dtype).reshape(
            value["shape"]
        )
        return torch.from_numpy(array.astype(array.dtype.newbyteorder("="), copy=True))
    if isinstance(value, dict) and "__dict__" in value:
        return {_decode(k): _decode(v) for k, v in value["__dict__"]}
    if isinstance(value, list):
        return [_decode(v) for v in value]
    return value


# What rebuilds a control: its class name in ipywidgets and these traits, where it has them.
CONTROL_TRAITS = ("description", "min", "max", "step", "base", "continuous_update")


def _describe(control: w.Widget) -> dict:
    described = {"type": type(control).__name__, "value": control.value}
    described |= {
        trait: getattr(control, trait) for trait in CONTROL_TRAITS if hasattr(control, trait)
    }
    if hasattr(control, "options"):
        labels, values = control._options_labels, control._options_values
        described["options"] = [[label, value] for label, value in zip(labels, values, strict=True)]
    return described


def _build(described: dict) -> w.Widget:
    kwargs = {k: v for k, v in described.items() if k not in ("type", "options", "value")}
    if "options" in described:
        kwargs["options"] = [tuple(pair) for pair in described["options"]]
    control = getattr(w, described["type"])(**kwargs)
    control.value = described["value"]
    return control


def _model_device(model: torch.nn.Module) -> torch.device:
    """The device of ``model``'s parameters: where a widget builds the tensors it hands the model.

    A learner's model may sit on cuda or mps while a tensor made without ``device=`` lands on
    torch's default device (the CPU unless the learner set another): the model would get a tensor
    on one device beside weights on another, and raise. Every widget that runs a learner's model
    asks here, so the rule lives in one place."""
    return next(model.parameters()).device


class FigureWidget:
    """Controls above a picture that is redrawn whenever one of them changes.

    Subclasses build ``self.controls`` (name -> widget) and implement :meth:`draw`, which returns a
    Figure and may record what it showed in ``self.state``. ``draw`` raises ValueError for input it
    cannot draw; the message is shown under the controls and the last good picture stays. A bound
    that follows another control (a slider whose maximum depends on a menu) is set in
    :meth:`update`, so it holds in a restored widget too.

    For the static site a subclass names in ``DATA`` the attributes that :meth:`update` and
    :meth:`draw` read besides the controls (what :meth:`snapshot` saves), and may lower
    ``SITE_STEPS`` or override :meth:`site_values` where the combinations of its controls are too
    many for the site.
    """

    DATA: tuple[str, ...] = ()
    # the most values of one slider that the static site offers (evenly spaced, ends included)
    SITE_STEPS = 16

    def __init__(self, controls: dict[str, w.Widget], caption: str = ""):
        self.controls = controls
        self.caption = w.HTML(caption)
        self.message = w.HTML("")
        self.state: dict = {}
        self.png = b""
        self.error: str | None = None
        self.draw_count = 0
        self._handle = None
        for control in controls.values():
            control.style.description_width = "initial"  # the whole description, never "temperat…"
            control.observe(lambda _change: self.redraw(), names="value")
        self.redraw()

    def draw(self) -> Figure:
        raise NotImplementedError

    def update(self) -> None:
        """Recompute what the controls' values need before :meth:`draw` (e.g. run the model on new
        text)."""

    def input_error(self) -> str | None:
        """A message about input that :meth:`update` set aside while the picture shows the last good
        input."""
        return None

    def redraw(self) -> None:
        try:
            self.update()
            fig = self.draw()
        except (
            ValueError
        ) as error:  # what the user typed: say so in the cell, keep the controls alive
            self._say(str(error))
            return
        self._say(self.input_error())
        self.png = viz.figure_to_png(fig)
        plt.close(fig)
        self.draw_count += 1
        if self._handle is not None:
            self._handle.update(self._image())
        for control in self.controls.values():
            control.layout.display = "none" if _has_one_value(control) else None

    def _say(self, error: str | None) -> None:
        self.error = error
        shown = (
            ""
            if error is None
            else f"<b style='color:#b00020'>Cannot draw this: {html.escape(error)}</b>"
        )
        self.message.value = shown

    def _image(self) -> Image:
        return Image(data=self.png, format="png", retina=True)

    def _ipython_display_(self) -> None:
        controls = w.HBox(list(self.controls.values()), layout=w.Layout(flex_flow="row wrap"))
        parts = [controls, self.message] + ([self.caption] if self.caption.value else [])
        bundle = w.VBox(parts)._repr_mimebundle_()
        # What a saved notebook shows where no kernel runs (GitHub, nbviewer) instead of the
        # widget's repr.
        bundle["text/plain"] = self.controls_summary()
        # for the static site; nbval skips it
        display(bundle, raw=True, metadata={SNAPSHOT_KEY: self.snapshot()})
        self._handle = display(self._image(), display_id=True)

    def site_values(self, name: str) -> list:
        """The values of control ``name`` that the static site offers, given the other controls'
        values now.

        A checkbox's and a menu's every value; at most ``SITE_STEPS`` of a slider's, evenly spaced
        with its ends and its current value among them; only the current value of a text box (what
        the model must read needs Python: on the web it is shown, disabled).
        """
        control = self.controls[name]
        values = control_values(control)
        if values is None:
            return [control.value]
        return _spread(values, self.SITE_STEPS, control.value)

    def values(self) -> dict:
        """Control name -> its value now."""
        return {name: control.value for name, control in self.controls.items()}

    def frames(self) -> Iterator[tuple[dict, bytes]]:
        """Every picture of the static site: ``(control values, PNG)`` for each combination of the
        values that :meth:`site_values` offers, controls taken in their order (so a bound that
        follows an earlier control, such as the pair slider's maximum under ``d_model``, is the one
        in force). Each PNG is ``self.png`` after setting those values, as a reader would; the
        controls are set back to their values at the start."""
        start = self.values()
        try:
            yield from self._frames_from(list(self.controls))
        finally:
            for name, value in start.items():
                self.controls[name].value = value

    def _frames_from(self, names: list[str]) -> Iterator[tuple[dict, bytes]]:
        if not names:
            if self.error is not None:
                raise ValueError(f"{type(self).__name__} cannot draw {self.values()}: {self.error}")
            yield self.values(), self.png
            return
        for value in self.site_values(names[0]):
            self.controls[names[0]].value = value
            yield from self._frames_from(names[1:])

    def snapshot(self) -> dict:
        """A JSON record from which :meth:`restore` rebuilds this widget without a kernel's other
        objects: the class, the caption, every control in order (name, type, bounds, options, value)
        and the attributes named in ``DATA``."""
        return {
            "version": SNAPSHOT_VERSION,
            "class": type(self).__name__,
            "caption": self.caption.value,
            "controls": [
                [name, _describe(control)] for name, control in self.controls.items()
            ],  # in order
            "data": {name: _encode(getattr(self, name)) for name in self.DATA},
        }

    @staticmethod
    def restore(snapshot: dict) -> "FigureWidget":
        """The widget a :meth:`snapshot` was taken of, drawn at the snapshot's control values.

        Only classes of this module are rebuilt. The subclass's ``__init__`` does not run (it may
        need a model): the data attributes are set from the snapshot, then the controls, then the
        first picture.
        """
        if snapshot.get("version") != SNAPSHOT_VERSION:
            raise ValueError(
                f"widget snapshot version {snapshot.get('version')}, expected {SNAPSHOT_VERSION}: "
                "re-execute the notebook (make notebooks)"
            )
        cls = getattr(sys.modules[__name__], snapshot["class"], None)
        if not (isinstance(cls, type) and issubclass(cls, FigureWidget)):
            raise ValueError(
                f"no widget class {snapshot['class']!r} in transformer_lib.teaching.widgets"
            )
        widget = cls.__new__(cls)
        for name in cls.DATA:
            setattr(widget, name, _decode(snapshot["data"][name]))
        controls = {name: _build(described) for name, described in snapshot["controls"]}
        FigureWidget.__init__(widget, controls, snapshot["caption"])
        return widget

    def controls_summary(self) -> str:
        """One line naming the controls and their values, e.g.
        ``[controls: head = 0; run the notebook ...]``.

        The colour scale is a way of looking, not a value of what is shown: it is left out.
        """
        values = "; ".join(
            f"{name} = {c.value}" for name, c in self.controls.items() if name != "scale"
        )
        return f"[controls: {values}; run the notebook to move them]"


class TemperatureExplorer(FigureWidget):
    """``softmax(scores / temperature)``: drag the temperature from near-argmax to near-uniform."""

    DATA = ("scores", "labels")
    SITE_STEPS = 61  # one control: the site offers every value of the slider

    def __init__(
        self, scores: torch.Tensor, labels: Sequence[str] | None = None, temperature: float = 1.0
    ):
        self.scores, self.labels = torch.as_tensor(scores, dtype=torch.float32), labels
        super().__init__(
            {
                "temperature": w.FloatLogSlider(
                    value=temperature,
                    base=10,
                    min=-1.5,
                    max=1.5,
                    step=0.05,
                    description="temperature",
                )
            }
        )

    def draw(self) -> Figure:
        t = self.controls["temperature"].value
        self.state = {"temperature": t, "probabilities": torch.softmax(self.scores / t, dim=0)}
        return viz.plot_softmax_temperature(self.scores, t, self.labels)


class HeadExplorer(FigureWidget):
    """Slide through the heads of one attention map ``weights (h, T_q, T_k)``."""

    DATA = ("weights", "query_labels", "key_labels", "title")

    def __init__(
        self,
        weights: torch.Tensor,
        query_labels: Sequence[str] | None = None,
        key_labels: Sequence[str] | None = None,
        title: str = "attention",
    ):
        if weights.dim() != 3:
            raise ValueError(f"weights must be (h, T_q, T_k), got shape {tuple(weights.shape)}")
        self.weights, self.query_labels, self.key_labels, self.title = (
            weights.detach(),
            query_labels,
            key_labels,
            title,
        )
        super().__init__(
            {
                "head": w.IntSlider(value=0, min=0, max=weights.size(0) - 1, description="head"),
                "scale": scale_control(),
            }
        )

    def draw(self) -> Figure:
        head, scale = self.controls["head"].value, self.controls["scale"].value
        self.state = {"head": head, "scale": scale, "weights": self.weights[head]}
        return viz.plot_attention(
            self.weights[head],
            self.query_labels,
            self.key_labels,
            f"{viz.plain(self.title)}, head {head}",
            vmax=SCALES[scale],
            colorbar=True,
        )


class LayerHeadExplorer(FigureWidget):
    """Pick a layer and a head of captured attention (e.g. ``tl.capture_attention(encoder)``).

    ``maps``: layer name -> ``(h, T_q, T_k)`` weights, all for the same tokens.
    """

    DATA = ("maps", "query_labels", "key_labels")

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
                "scale": scale_control(),
            }
        )

    def draw(self) -> Figure:
        layer, head, scale = (self.controls[name].value for name in ("layer", "head", "scale"))
        self.state = {
            "layer": layer,
            "head": head,
            "scale": scale,
            "weights": self.maps[layer][head],
        }
        return viz.plot_attention(
            self.maps[layer][head],
            self.query_labels,
            self.key_labels,
            f"{layer}, head {head}",
            annotate=False,
            vmax=SCALES[scale],
            colorbar=True,
        )


class HeadCountExplorer(FigureWidget):
    """Change ``h`` at a fixed ``d_model``: ``d_k = d_model / h`` shrinks and each head gets its own
    map.

    Each ``h`` gets a freshly initialised :class:`MultiHeadAttention` (seeded, so the same ``h``
    always shows the same maps) applied to the same token vectors ``x (T, d_model)``. Both live on
    the CPU whatever device ``x`` came from (say, a model's embeddings on cuda): the seeded weights
    come from the CPU's random stream, so every machine draws the same maps, and that stream is the
    one put back afterwards.
    """

    DATA = ("x", "labels", "seed")

    def __init__(self, x: torch.Tensor, labels: Sequence[str] | None = None, seed: int = 0):
        if x.dim() != 2:
            raise ValueError(f"x must be (T, d_model) token vectors, got shape {tuple(x.shape)}")
        self.x, self.labels, self.seed = x.detach().cpu(), labels, seed  # x: (T, d_model)
        d_model = x.size(1)
        options = [h for h in range(1, min(d_model, 8) + 1) if d_model % h == 0]
        super().__init__(
            {
                "num_heads": w.SelectionSlider(
                    options=options, value=options[min(1, len(options) - 1)], description="heads h"
                ),
                "scale": scale_control(),
            }
        )

    def draw(self) -> Figure:
        h, scale = self.controls["num_heads"].value, self.controls["scale"].value
        with torch.random.fork_rng(
            devices=[]
        ):  # seeded weights; the learner's random stream is left as it was
            torch.manual_seed(self.seed)
            with torch.device("cpu"):  # beside x, whatever torch's default device is
                mha = MultiHeadAttention(self.x.size(1), h).eval()
        with torch.no_grad():
            _, weights = mha(
                self.x[None], self.x[None], self.x[None], need_weights=True
            )  # (1, h, T, T)
        self.state = {"num_heads": h, "scale": scale, "d_k": mha.d_k, "weights": weights[0]}
        return viz.plot_heads(
            weights[0],
            self.labels,
            self.labels,
            f"d_model = {self.x.size(1)}, h = {h}, d_k = d_model / h = {mha.d_k}",
            vmax="own" if scale == "own" else SCALES[scale],
        )


class MaskBuilder(FigureWidget):
    """Toggle the padding and the causal mask for a padded sequence and see the mask and the
    attention it allows.

    ``tokens`` is the sequence as text pieces, with ``pad`` marking padding. Queries and keys are
    seeded random vectors; the weights are those of ``tl.scaled_dot_product_attention`` under the
    mask.
    """

    DATA = ("tokens", "is_real", "q", "k")

    def __init__(self, tokens: Sequence[str], pad: str = "<pad>", seed: int = 0):
        self.tokens = list(tokens)
        self.is_real = torch.tensor([t != pad for t in self.tokens])
        generator = torch.Generator().manual_seed(seed)
        self.q, self.k = torch.randn(2, len(tokens), 8, generator=generator)  # (T, d_k) each
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
        _, weights = scaled_dot_product_attention(self.q, self.k, self.k, mask)  # (T, T)
        self.state = {"mask": mask, "weights": weights}
        return viz.plot_mask_and_weights(mask, weights, self.tokens)


class PositionalEncodingExplorer(FigureWidget):
    """Pick ``d_model`` and a feature pair ``i``: the heatmap of all encodings and the pair's two
    curves.

    On the static site: ``d_model`` a power of two from 16 to 256 (5 of its 32 values), the pair as
    any slider.
    """

    DATA = ("max_len",)
    SITE_D_MODELS = (16, 32, 64, 128, 256)

    def __init__(self, max_len: int = 100, d_model: int = 64):
        self.max_len = max_len
        super().__init__(
            {
                "d_model": w.IntSlider(
                    value=d_model, min=8, max=256, step=8, description="d_model"
                ),
                "pair": w.IntSlider(value=0, min=0, max=d_model // 2 - 1, description="pair i"),
            }
        )

    def update(self) -> None:
        # redraws if the value had to move
        self.controls["pair"].max = self.controls["d_model"].value // 2 - 1

    def site_values(self, name: str) -> list:
        if name == "d_model":
            return sorted({*self.SITE_D_MODELS, self.controls["d_model"].value})
        return super().site_values(name)

    def draw(self) -> Figure:
        d_model = self.controls["d_model"].value
        pair = min(self.controls["pair"].value, d_model // 2 - 1)
        pe = sinusoidal_encoding(max_len=self.max_len, d_model=d_model)  # (max_len, d_model)
        self.state = {
            "d_model": d_model,
            "pair": pair,
            "wavelength": viz.encoding_wavelength(pair, d_model),
            "pe": pe,
        }
        return viz.plot_encoding_pair(pe, pair)


class ScheduleExplorer(FigureWidget):
    """The paper's learning-rate schedule for any ``d_model`` and ``warmup``, against the paper's
    own.

    On the static site: 5 values of ``d_model`` (powers of two, 64 to 1024) and 9 of ``warmup``.
    """

    DATA = ("steps",)
    SITE = {
        "d_model": (64, 128, 256, 512, 1024),
        "warmup": (100, 500, 1000, 2000, 3000, 4000, 6000, 8000, 10000),
    }

    def __init__(self, steps: int = 20000):
        self.steps = steps
        super().__init__(
            {
                "d_model": w.IntSlider(value=512, min=64, max=1024, step=64, description="d_model"),
                "warmup": w.IntSlider(
                    value=4000, min=100, max=10000, step=100, description="warmup"
                ),
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
        return viz.plot_schedule(
            {f"d_model={d_model}, warmup={warmup}": ours, "paper: 512, 4000": paper}
        )

    def site_values(self, name: str) -> list:
        return sorted({*self.SITE[name], self.controls[name].value})


def _token_labels(vocab: Vocab | SubwordVocab, ids: torch.Tensor) -> list[str]:
    """One short label per token: ``^`` for ``<bos>``, ``$`` for ``<eos>``, ``·`` for each space. A
    character token ``" "`` reads ``·``; a subword piece carries its word's leading space, so
    ``" chat"`` reads ``·chat`` (never byte-level BPE's raw ``Ġchat``: :attr:`SubwordVocab.itos`
    holds each piece's text)."""
    specials = {"<bos>": "^", "<eos>": "$"}
    return [specials.get(vocab.itos[i], vocab.itos[i].replace(" ", "·")) for i in ids.tolist()]


def _decoder_row_labels(reads: Sequence[str], writes: Sequence[str]) -> list[str]:
    """The rule both decoding widgets label decoder query rows by: ``a→b`` = reads ``a``, writes
    ``b``."""
    return [f"{r}→{writes[i]}" if i < len(writes) else r for i, r in enumerate(reads)]


def _check_source(vocab: Vocab | SubwordVocab, text: str, max_len: int) -> None:
    """A readable ValueError for a source the model cannot translate: an empty one, one with a
    character a character :class:`Vocab` lacks, or one longer than the model's ``max_len`` positions
    (in tokens). A :class:`SubwordVocab` knows every character (byte-level BPE spells an unseen one
    with byte tokens)."""
    if not text.strip():
        example = (
            "a sentence" if isinstance(vocab, SubwordVocab) else "a date such as '3 march 1987'"
        )
        raise ValueError(f"the source is empty: type some text, e.g. {example}")
    if isinstance(vocab, Vocab):
        unknown = sorted({ch for ch in text if ch not in vocab.stoi})
        if unknown:
            known = "".join(ch for ch in vocab.itos if len(ch) == 1)
            raise ValueError(
                f"the model knows no {', '.join(map(repr, unknown))}; it reads only these "
                f"characters: {known!r}"
            )
    length = len(vocab.encode(text))
    if length > max_len:
        unit = "characters" if isinstance(vocab, Vocab) else "tokens"
        raise ValueError(f"the source has {length} {unit}; this model reads at most {max_len}")


def _source_batch(
    vocab: Vocab | SubwordVocab, text: str, max_len: int, device: torch.device
) -> torch.Tensor:
    """``(1, S)`` token ids of the source ``text`` after :func:`_check_source`, on ``device`` (the
    model's: :func:`_model_device`); for a :class:`SubwordVocab` the text is first normalised as
    :func:`~transformer_lib.translation.translate` and the training text were.

    The batch is built on ``device`` directly rather than built and moved: then it is right even
    where the learner has set torch's default device to another one."""
    source = normalise_text(text) if isinstance(vocab, SubwordVocab) else text
    _check_source(vocab, source, max_len)
    with torch.device(device):
        return make_batch([(source, "")], vocab).src  # (1, S)


class AttentionExplorer(FigureWidget):
    """Type a source text; see every layer's and head's attention in a trained :class:`Transformer`.

    The model translates the text greedily, then one forward pass over
    ``(source, <bos> + translation)`` is captured. ``kind`` is one of
    ``tl.inspection.ATTENTION_KINDS`` (the names ``tl.inspection.attention_kind`` gives): ``"self"``
    (encoder), ``"masked self"`` (decoder) or ``"cross"``. The layer, head and query sliders take
    their bounds from the model and the current text; the source redraws when you press Enter.
    The model runs on its own device (:func:`_model_device`), a new source included; the maps and
    labels are kept on the CPU, for the pictures and the snapshot.
    """

    KINDS = ATTENTION_KINDS
    DATA = ("text", "translation", "_maps", "_labels")
    # None in a widget restored from a snapshot: it cannot read a new text
    model: Transformer | None = None
    # the last source that could not be drawn, and why
    _rejected: tuple[str | None, str] = (None, "")

    def __init__(
        self,
        model: Transformer,
        vocab: Vocab | SubwordVocab,
        text: str,
        kind: str = "cross",
        max_len: int = 32,
    ):
        if kind not in self.KINDS:
            raise ValueError(f"kind must be one of {list(self.KINDS)}, got {kind!r}")
        self.model, self.vocab, self.max_len = model, vocab, max_len
        config = model.config
        self._run(text)
        super().__init__(
            {
                "text": w.Text(
                    value=text, description="source (Enter redraws)", continuous_update=False
                ),
                "kind": w.Dropdown(
                    options=[(words, k) for k, words in self.KINDS.items()],
                    value=kind,
                    description="attention",
                ),
                "layer": w.IntSlider(
                    value=0, min=0, max=config.num_layers - 1, description="layer"
                ),
                "head": w.IntSlider(value=0, min=0, max=config.num_heads - 1, description="head"),
                "query": w.IntSlider(
                    value=0, min=0, max=self._query_count(kind) - 1, description="query"
                ),
                "scale": scale_control(),
            },
            caption="Type a source and press Enter to translate it and redraw. "
            f"{TOKEN_SYMBOLS} {ROW_RULE}",
        )

    def _run(self, text: str) -> None:
        if self.model is None:
            raise ValueError(
                "this copy of the explorer has no model to read a new source: run it in JupyterLab"
            )
        model, vocab = self.model, self.vocab
        device = _model_device(model)  # the inputs go where the model is; the maps come back
        src = _source_batch(vocab, text, model.config.max_len, device)  # (1, S)
        out = greedy_decode(model, src, self.max_len, vocab.bos_id, vocab.eos_id)[
            0
        ]  # (<= max_len,)
        out = out[out != vocab.pad_id]
        bos = torch.tensor([vocab.bos_id], device=device)  # (1,)
        tgt = torch.cat([bos, out[out != vocab.eos_id]])[None]  # (1, T)
        model.eval()
        with torch.no_grad(), capture_attention(model) as attention:
            model(src, tgt)
        src, tgt, out = src.cpu(), tgt.cpu(), out.cpu()  # (1, S), (1, T), (<= max_len,)
        self.text, self.translation = text, vocab.decode(out)
        self._maps = {
            kind: [weights[0].cpu() for _, weights in attention.of_kind(kind)]  # (h, T_q, T_k)
            for kind in self.KINDS
        }
        source, reads = _token_labels(vocab, src[0]), _token_labels(vocab, tgt[0])
        self._labels = {
            "source": source,
            "decoder": _decoder_row_labels(reads, _token_labels(vocab, out)),
        }

    def site_values(self, name: str) -> list:
        """As any widget's, but the query stays where it is on the static site: the map shows every
        query's row already, and the highlight of each one would multiply the pictures by the number
        of tokens."""
        if name == "query":
            return [self.controls["query"].value]
        return super().site_values(name)

    def input_error(self) -> str | None:
        text, error = self._rejected
        if self.controls["text"].value == text:
            return f"{error} (the picture shows {self.text!r})"
        return None

    def _query_count(self, kind: str) -> int:
        return len(self._labels["source" if kind == "self" else "decoder"])

    def update(self) -> None:
        text = self.controls["text"].value
        if text != self.text and text != self._rejected[0]:
            try:
                self._run(text)
            except ValueError as error:
                self._rejected = (text, str(error))
                raise
        # bounds follow the text
        self.controls["query"].max = self._query_count(self.controls["kind"].value) - 1

    def draw(self) -> Figure:
        c = {name: control.value for name, control in self.controls.items()}
        weights = self._maps[c["kind"]][c["layer"]][c["head"]]  # (T_q, T_k)
        query_labels = self._labels["source" if c["kind"] == "self" else "decoder"]
        key_labels = self._labels["decoder" if c["kind"] == "masked self" else "source"]
        query = min(c["query"], len(query_labels) - 1)
        self.state = {**c, "weights": weights, "translation": self.translation}
        return viz.plot_attention(
            weights,
            query_labels,
            [label.split("→")[0] for label in key_labels],  # keys are the tokens read
            highlight_query=query,
            annotate=False,
            vmax=SCALES[c["scale"]],
            colorbar=True,
            title=viz.plain(
                f"{self.KINDS[c['kind']]}, layer {c['layer']}, head {c['head']}  ->  "
                f"{self.translation}"
            ),
        )


class DecodingExplorer(FigureWidget):
    """Step through greedy decoding: at step ``t`` the model has written ``t`` tokens, and the
    picture shows where each step's query looked in the source (cross-attention of the last layer,
    averaged over heads). Rows not written yet are blank and unlabelled; a written row ``a→b`` read
    ``a`` and wrote ``b``. The model decodes on its own device (:func:`_model_device`); the rows and
    tokens are kept on the CPU, for the pictures and the snapshot."""

    DATA = ("rows", "tokens", "row_labels", "source")

    def __init__(
        self, model: Transformer, vocab: Vocab | SubwordVocab, text: str, max_len: int = 32
    ):
        src = _source_batch(vocab, text, model.config.max_len, _model_device(model))  # (1, S)
        with capture_attention(model) as attention:
            out = greedy_decode(model, src, max_len, vocab.bos_id, vocab.eos_id)[
                0
            ].cpu()  # (<= max_len,); cached: one call per step
        src = src.cpu()  # (1, S): for the labels
        layer = attention.of_kind("cross")[-1][0]
        steps = attention.calls[layer]  # one (1, h, 1, S) per step, on the model's device
        self.rows = torch.cat([step[0].mean(0) for step in steps]).cpu()  # (steps, S)
        self.tokens = _token_labels(vocab, out[out != vocab.pad_id])
        self.row_labels = _decoder_row_labels(["^"] + self.tokens[:-1], self.tokens)
        self.source = _token_labels(vocab, src[0])
        super().__init__(
            {
                "step": w.IntSlider(value=1, min=1, max=len(self.tokens), description="step"),
                "scale": scale_control(),
            },
            caption=f"{TOKEN_SYMBOLS} {ROW_RULE}",
        )

    def draw(self) -> Figure:
        step, scale = self.controls["step"].value, self.controls["scale"].value
        shown = self.rows.clone()
        shown[step:] = 0  # not written yet
        labels = self.row_labels[:step] + [""] * (len(self.tokens) - step)
        written = "".join(self.tokens[:step])
        self.state = {
            "step": step,
            "scale": scale,
            "written": written,
            "row": self.rows[step - 1],
            "labels": labels,
        }
        return viz.plot_attention(
            shown,
            labels,
            self.source,
            highlight_query=step - 1,
            annotate=False,
            vmax=SCALES[scale],
            colorbar=True,
            title=viz.plain(f"step {step}: wrote '{self.tokens[step - 1]}', so far '{written}'"),
        )


class RotaryPairExplorer(FigureWidget):
    """Slide a query's position and pick a pair: RoPE turns the pair by ``position * w_i``; the key
    (red) stays at ``key_position``, and the title gives the pair's share of the score, which
    depends only on the offset.

    On the static site: every pair, and 16 of the positions (evenly spaced, ends included).
    """

    DATA = ("vector", "theta", "key_position")

    def __init__(
        self,
        vector: torch.Tensor,
        theta: float = 10000.0,
        max_position: int = 63,
        key_position: int = 0,
    ):
        if vector.dim() != 1 or vector.numel() % 2:
            raise ValueError(
                f"vector must be 1-D with an even width d_k, got shape {tuple(vector.shape)}"
            )
        self.vector, self.theta, self.key_position = (
            vector.detach().float(),
            float(theta),
            key_position,
        )
        super().__init__(
            {
                "position": w.IntSlider(value=3, min=0, max=max_position, description="query at"),
                "pair": w.IntSlider(
                    value=0, min=0, max=vector.numel() // 2 - 1, description="pair i"
                ),
            }
        )

    def draw(self) -> Figure:
        position, pair = self.controls["position"].value, self.controls["pair"].value
        self.state = {"position": position, "pair": pair}
        return viz.plot_rotary_pair(
            self.vector, pair, [position], self.theta, key_position=self.key_position
        )
