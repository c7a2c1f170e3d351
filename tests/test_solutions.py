"""The teacher's edition: every exercise has a reference solution that its check passes, a stub that the check
calls "not implemented yet", and a typical wrong answer that earns a specific hint; every Think/Experiment
question has a model answer."""

import inspect
import pathlib

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import solutions
import transformer_lib as tl
from solutions import exercise_table

IDS = [f"{exercise.notebook}-{exercise.number}-{exercise.name}" for exercise in solutions.EXERCISES]


def stub_like(solution):
    """The notebook's stub of an exercise: a function, or an nn.Module whose ``__init__`` is not written yet."""
    if isinstance(solution, type):

        class Stub(nn.Module):
            def __init__(self, *args, **kwargs):
                super().__init__()
                raise NotImplementedError

        return Stub

    def stub(*args, **kwargs):
        raise NotImplementedError

    return stub


@pytest.mark.parametrize("exercise", solutions.EXERCISES, ids=IDS)
def test_reference_solution_passes_and_stub_is_not_implemented(exercise):
    solution = solutions.solution(exercise.notebook, exercise.name)
    result = exercise.grade(solution)
    assert result and result.message.startswith("✅"), result.message
    stub = exercise.grade(stub_like(solution))
    assert not stub and "not implemented yet" in stub.message


def _wrong_mha(bias: bool):
    class WrongMHA(solutions.solution("02", "MyMultiHeadAttention")):
        def forward(self, query, key, value, mask=None):  # one sequence's mask for the whole batch
            return super().forward(query, key, value, None if mask is None else mask[:1])

    return WrongMHA


class PostLNAlways(nn.Module):  # norm_first ignored: always post-LN
    def __init__(self, d_model, num_heads, d_ff, norm_first=False):
        super().__init__()
        self.layer = solutions.solution("04", "MyEncoderLayer")(d_model, num_heads, d_ff, norm_first=False)
        self.self_attn, self.feed_forward = self.layer.self_attn, self.layer.feed_forward
        self.norm1, self.norm2 = self.layer.norm1, self.layer.norm2

    def forward(self, x, mask=None):
        return self.layer(x, mask)


class DecoderNoMemoryMask(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, norm_first=False):
        super().__init__()
        self.layer = solutions.solution("05", "MyDecoderLayer")(d_model, num_heads, d_ff, norm_first)
        for name in ("self_attn", "cross_attn", "feed_forward", "norm1", "norm2", "norm3"):
            setattr(self, name, getattr(self.layer, name))

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        return self.layer(x, memory, tgt_mask, None)


class PositionalEncodingParameter(nn.Module):
    def __init__(self, d_model, max_len):
        super().__init__()
        self.pe = nn.Parameter(tl.sinusoidal_encoding(d_model=d_model, max_len=max_len)[None])

    def forward(self, x):
        return x + self.pe[:, : x.size(1)]


class LayerNormUnbiased(solutions.solution("04", "MyLayerNorm")):
    def forward(self, x):  # var() divides by d_model - 1 by default
        return (x - x.mean(-1, keepdim=True)) / (x.var(-1, keepdim=True) + self.eps).sqrt() * self.weight + self.bias


class FeedForwardNoRelu(solutions.solution("04", "MyFeedForward")):
    def forward(self, x):
        return self.linear2(self.linear1(x))


WRONG = {  # name -> (a typical wrong answer, words its hint must contain)
    "my_attention": (
        lambda q, k, v, mask=None: tl.scaled_dot_product_attention(q, k, v, ~mask if mask is not None else None),
        "opposite polarity",
    ),
    "my_causal_mask": (lambda t: torch.ones(t, t, dtype=torch.bool).triu(), "not the past"),
    "my_split_heads": (lambda x, h: x.reshape(x.size(0), h, x.size(1), -1), "scrambled"),
    "my_combine_heads": (lambda x: x.reshape(x.size(0), x.size(2), -1), "transpose back"),
    "MyMultiHeadAttention": (_wrong_mha(False), "first sequence's mask"),
    "my_sinusoidal_encoding": (lambda d, n: tl.sinusoidal_encoding(d_model=n, max_len=d), "swapped the arguments"),
    "MyPositionalEncoding": (PositionalEncodingParameter, "register_buffer"),
    "MyLayerNorm": (LayerNormUnbiased, "unbiased variance"),
    "MyFeedForward": (FeedForwardNoRelu, "without the ReLU"),
    "MyEncoderLayer": (PostLNAlways, "post-LN and pre-LN are swapped"),
    "MyDecoderLayer": (DecoderNoMemoryMask, "ignored memory_mask"),
    "my_cross_attention": (lambda attn, x, memory, mask: attn(memory, x, x, mask)[0], "queries come from"),
    "my_smoothed_targets": (lambda t, v, e, p: tl.smoothed_targets(t, v, e, 0), "pad_id"),
    "my_noam_lr": (lambda s, d, w: d**-0.5 * min(s**-0.5, s * w**-1.0), "warm-up"),
    "my_softmax_with_temperature": (lambda logits, t: (logits * t).softmax(-1), "multiplied"),
    "my_cached_causal_mask": (lambda q, k: torch.ones(q, k, dtype=torch.bool).tril(), "every cached token"),
    "my_gpt_block": (lambda layer, x: layer(x), "causal mask"),
    "my_mask_tokens": (
        lambda tokens, mask_id, v, specials, rate, generator: tl.lm.mask_tokens(
            tokens, mask_id, v, (), rate, generator
        ),
        "special_ids were ignored",
    ),
    "my_parameter_count": (
        lambda config: tl.count_parameters(tl.DecoderOnlyLM(config.replace(max_len=1)))["total"],
        "max_len x d_model",
    ),
    "my_shard_loss": (
        lambda logits, target, n, w: F.cross_entropy(logits.flatten(0, 1), target.flatten(), ignore_index=0),
        "own tokens",
    ),
    "my_table3_row": (lambda: (tl.experiments.Row("base again", "C", {"d_model": 64}), "same"), "changes nothing"),
}


@pytest.mark.parametrize("exercise", solutions.EXERCISES, ids=IDS)
def test_a_typical_wrong_answer_gets_a_specific_hint(exercise):
    wrong, words = WRONG[exercise.name]
    result = exercise.grade(wrong)
    assert not result and words in result.message, result.message


def test_every_think_question_has_a_model_answer_and_every_solution_is_documented():
    for name, module in solutions.modules().items():
        for number in solutions.THINK.get(name[2:4], []):
            assert len(module.ANSWERS.get(number, "")) > 200, f"{name}: no model answer for exercise {number}"
    for exercise in solutions.EXERCISES:
        solution = solutions.solution(exercise.notebook, exercise.name)
        assert inspect.getdoc(solution), f"{exercise.notebook} {exercise.name} has no docstring"


def test_make_solutions_swaps_a_notebook_stub_for_the_solution_of_the_same_name():
    from solutions import build_notebooks, nb02_multi_head_attention

    stub = "\n".join(
        [
            "class MyMultiHeadAttention(nn.Module):",
            "    def __init__(self, d_model, num_heads):",
            "        super().__init__()",
            "        raise NotImplementedError",
            "",
            "tl.checks.check_multi_head_attention(MyMultiHeadAttention)",
        ]
    )
    source, name = build_notebooks._replace_stub(stub, nb02_multi_head_attention)
    assert name == "MyMultiHeadAttention" and "NotImplementedError" not in source
    namespace = {"tl": tl}
    exec(compile(source.replace("tl.checks.check_", "result = tl.checks.check_"), "<cell>", "exec"), namespace)
    assert namespace["result"], namespace["result"].message
    assert (
        build_notebooks._replace_stub("def shard_loss(x):\n    raise NotImplementedError", nb02_multi_head_attention)[0]
        is None
    )


def test_the_readme_lists_every_exercise_for_teachers():
    readme = (pathlib.Path(__file__).parent.parent / "README.md").read_text()
    section = readme.split("## For teachers", 1)[1].split("\n## ", 1)[0]
    for exercise in solutions.EXERCISES:
        notebook, number, name, check = exercise.notebook, exercise.number, exercise.name, exercise.graded_by
        assert f"| {notebook} | {number} | `{name}`" in section and f"`{check}`" in section, name
    assert exercise_table.markdown_table() in section, "run `python -m solutions.exercise_table` to update the README"


def test_every_exercise_of_the_registry_is_a_stub_and_its_check_in_its_notebook_and_nothing_else_is():
    """The registry, the solutions and the notebooks name the same exercises: each exercise cell (a stub and a
    check call) of notebook NN defines one registered exercise of NN and calls its check with its options."""
    import ast

    import nbformat

    from solutions import build_notebooks

    found = set()
    for path in sorted((pathlib.Path(__file__).parent.parent / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        for cell in build_notebooks.exercise_cells(nbformat.read(path, as_version=4)):
            tree = ast.parse(cell.source)
            (name,) = [n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.ClassDef)]
            (exercise,) = [e for e in solutions.EXERCISES if (e.notebook, e.name) == (path.name[:2], name)]
            assert f"tl.checks.{exercise.check}({name}" in cell.source, (path.name, name)
            assert all(f"{key}={value!r}" in cell.source for key, value in exercise.options.items()), (path.name, name)
            found.add((exercise.notebook, exercise.name))
    assert found == {(e.notebook, e.name) for e in solutions.EXERCISES}
