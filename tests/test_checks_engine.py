"""The checks' shared machinery: the registry, the never-raise engine (student errors, stubs,
warnings, hostile results), the learner's random state and global settings left alone, and every
check against the library's own code and broken code.
"""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from checks_students import NoCausalMask, assert_check_leaves_random_state_alone
from torch import nn

import transformer_lib as tl
from transformer_lib.teaching.checks.engine import default_device, set_default_device


def test_the_registry_is_the_one_source_of_the_public_checks_and_their_entries():
    """Every public check comes from an entry file and has an explicit signature and a docstring;
    every entry belongs to a public check, under one (check, variant) key; every exercise names a
    public check, with options that check takes; exercises and questions sit in their notebook's
    entry file, one per number."""
    import inspect

    from transformer_lib.teaching.checks import registry

    public = registry.checks()
    assert set(tl.checks.__all__) == {"CheckResult", *public}
    assert all(getattr(tl.checks, name) is check for name, check in public.items())
    for name, check in public.items():
        kinds = {parameter.kind for parameter in inspect.signature(check).parameters.values()}
        assert not kinds & {inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD}, name
        assert len(inspect.getdoc(check) or "") > 40, f"{name} has no docstring"
    assert {check for check, _ in registry.entries()} == set(public)
    assert all(key == (entry.check, entry.variant) for key, entry in registry.entries().items())
    numbers = [(exercise.notebook, exercise.number) for exercise in registry.exercises()]
    assert len(numbers) == len(set(numbers)) and numbers == sorted(
        numbers, key=lambda n: (n[0], int(n[1]))
    )
    asked = [(question.notebook, question.number) for question in registry.questions()]
    assert len(asked) == len(set(asked)) and not set(asked) & set(numbers)
    for module in registry.entry_files():
        for item in [*module.EXERCISES, *getattr(module, "QUESTIONS", ())]:
            assert module.__name__.split(".")[-1][2:4] == item.notebook, item
        for exercise in module.EXERCISES:
            assert set(exercise.options) <= set(
                inspect.signature(public[exercise.check]).parameters
            ), exercise


def test_checks_load_only_on_first_use():
    import subprocess
    import sys

    code = (
        "import sys, transformer_lib as tl; assert 'transformer_lib.teaching.checks' not in "
        "sys.modules; assert tl.checks.check_noam_lr(tl.noam_lr)"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


REFERENCES = {  # the library's own functions and modules, in the forms the checks accept
    "check_attention": tl.scaled_dot_product_attention,
    "check_split_heads": tl.split_heads,
    "check_combine_heads": tl.combine_heads,
    "check_multi_head_attention": tl.MultiHeadAttention,
    "check_positional_encoding": tl.PositionalEncoding,
    "check_layer_norm": tl.LayerNorm,
    "check_causal_mask": lambda t: tl.causal_mask(t),
    "check_label_smoothing": tl.smoothed_targets,
    "check_feed_forward": tl.PositionwiseFeedForward,
    "check_noam_lr": tl.noam_lr,
    "check_temperature_softmax": lambda logits, t: (logits / t).softmax(-1),
}


@pytest.mark.parametrize("check", sorted(REFERENCES))
def test_the_library_itself_passes(check):
    assert getattr(tl.checks, check)(REFERENCES[check])


@pytest.mark.parametrize(
    ("check", "buggy", "phrase"),
    [
        ("check_split_heads", lambda x, h: x.reshape(x.size(0), h, x.size(1), -1), "scrambled"),
        (
            "check_split_heads",
            lambda x, h: x.view(x.size(0), x.size(1), h, -1),
            "heads axis must come before T",
        ),
        ("check_causal_mask", lambda t: torch.ones(t, t, dtype=torch.bool).triu(), "not the past"),
        ("check_causal_mask", lambda t: torch.ones(t, t).tril(), "dtype torch.float32"),
        ("check_causal_mask", lambda t: torch.ones(t, t, dtype=torch.bool).tril(-1), "see itself"),
        (
            "check_label_smoothing",
            lambda tg, v, e, p: tl.smoothed_targets(tg, v, e, p) + (tg[:, None] == p) * 0.1,
            "all zero",
        ),
        ("check_noam_lr", lambda s, d, w: d**-0.5 * min(s**-0.5, s * w**-1.0), "warm-up"),
        ("check_temperature_softmax", lambda logits, t: (logits * t).softmax(-1), "multiplied"),
        (
            "check_shard_loss",
            lambda logits, target, n, p: F.cross_entropy(
                logits.flatten(0, 1), target.flatten(), ignore_index=0
            ),
            "own tokens",
        ),
        (
            "check_shard_loss",
            lambda logits, target, n, p: (
                F.cross_entropy(
                    logits.flatten(0, 1), target.flatten(), ignore_index=0, reduction="sum"
                )
                / n
            ),
            "times too small",
        ),
        (
            "check_attention",
            lambda q, k, v, mask=None: tl.scaled_dot_product_attention(
                q * math.sqrt(q.size(-1)), k, v, mask
            ),
            "sqrt(d_k)",
        ),
    ],
)
def test_other_classic_mistakes_are_named(check, buggy, phrase):
    result = getattr(tl.checks, check)(buggy)
    assert not result and phrase in result.message, result.message


def _broken_functions(reference):
    def raises(*args, **kwargs):
        raise ValueError("a bug in the student's code")

    def no_grad(*args, **kwargs):
        with torch.no_grad():
            return reference(*args, **kwargs)

    return {
        "raises": raises,
        "None": lambda *a, **k: None,
        "wrong shape": lambda *a, **k: torch.zeros(1),
        "no_grad": no_grad,
    }


def _broken_classes(reference: type):
    def forward_with(body):
        return type(f"Broken{reference.__name__}", (reference,), {"forward": body})

    def no_grad(self, *args, **kwargs):
        with torch.no_grad():
            return reference.forward(self, *args, **kwargs)

    def raises(self, *args, **kwargs):
        raise ValueError("a bug in the student's code")

    class NotAModule:
        def __init__(self, *args, **kwargs):
            pass

    return {
        "raises": forward_with(raises),
        "None": forward_with(lambda self, *a, **k: None),
        "wrong shape": forward_with(lambda self, *a, **k: torch.zeros(1)),
        "no_grad": forward_with(no_grad),
        "not an nn.Module": NotAModule,
    }


def _robustness_cases():
    import solutions

    cases = []
    for exercise in solutions.EXERCISES:
        solution = solutions.solution(exercise.notebook, exercise.name)
        broken = (
            _broken_classes(solution) if isinstance(solution, type) else _broken_functions(solution)
        )
        cases += [(exercise.check, exercise.options, kind, code) for kind, code in broken.items()]
    cases += [
        ("check_causal_decoder", {}, kind, cls(True))
        for kind, cls in _broken_classes(NoCausalMask).items()
        if kind != "not an nn.Module"
    ] + [("check_causal_decoder", {}, "not an nn.Module", object())]
    cases += [
        ("check_shifted_targets", {}, kind, code)
        for kind, code in _broken_functions(lambda tgt: (tgt[:, :-1], tgt[:, 1:])).items()
    ]
    # public checks that no exercise grades any more (notebook 11 asks for the loss and the sampling
    # loop instead)
    cases += [
        ("check_gpt_block", {}, kind, code)
        for kind, code in _broken_functions(
            lambda layer, x: layer(x, tl.causal_mask(x.size(1)))
        ).items()
    ]
    cases += [
        ("check_lm_parameter_count", {}, kind, code)
        for kind, code in _broken_functions(
            lambda c: tl.count_parameters(tl.DecoderOnlyLM(c))["total"]
        ).items()
    ]
    # public checks that no exercise grades any more (issue 36: notebooks 02, 04 and 05 ask for
    # exercises where the learner decides more); notebook 08 and learners may still call them
    cases += [
        ("check_combine_heads", {}, kind, code)
        for kind, code in _broken_functions(tl.combine_heads).items()
    ]
    cases += [
        ("check_cross_attention", {}, kind, code)
        for kind, code in _broken_functions(
            lambda attn, x, memory, mask: attn(x, memory, memory, mask)[0]
        ).items()
    ]
    cases += [("check_layer_norm", {}, k, c) for k, c in _broken_classes(tl.LayerNorm).items()]
    cases += [
        ("check_feed_forward", {}, kind, code)
        for kind, code in _broken_classes(tl.PositionwiseFeedForward).items()
    ]
    # issue 36: notebook 06's exercises 1-2 and notebook 13's exercise 3 ask for decisions instead
    from solutions.nb13_modern_decoder import MySwiGLU

    cases += [
        ("check_label_smoothing", {}, kind, code)
        for kind, code in _broken_functions(tl.smoothed_targets).items()
    ]
    cases += [("check_noam_lr", {}, k, c) for k, c in _broken_functions(tl.noam_lr).items()]
    cases += [("check_swiglu", {}, k, c) for k, c in _broken_classes(MySwiGLU).items()]
    return cases


ROBUSTNESS = _robustness_cases()


def test_robustness_covers_every_check():
    assert {check for check, *_ in ROBUSTNESS} == {
        name for name in tl.checks.__all__ if name.startswith("check_")
    }


def _compares_gradients(check: str, code, options: dict) -> bool:
    """Whether the entry behind ``check`` (for this kind of code and these options) has a case that
    compares gradients."""
    from transformer_lib.teaching.checks import engine, registry

    variant = "with_cache" if options.get("with_cache") else engine.DEFAULT
    if check == "check_positional_encoding":
        variant = "module" if isinstance(code, type) else "table"
    entry = registry.entries().get((check, variant))
    return entry is not None and any(case.inputs for case in entry.cases())


@pytest.mark.parametrize(
    ("check", "options", "kind", "code"), ROBUSTNESS, ids=[f"{c}-{k}" for c, _, k, _ in ROBUSTNESS]
)
def test_student_code_never_makes_a_check_raise(check, options, kind, code):
    result = getattr(tl.checks, check)(code, **options)
    assert isinstance(result, tl.checks.CheckResult) and result.message
    if kind == "None":
        assert not result and "None" in result.message, result.message
    # checks that compare gradients say so; the others pass (a mask needs no gradient)
    elif kind == "no_grad":
        if _compares_gradients(check, code, options):
            assert not result and "carries no gradient" in result.message, result.message
        else:
            assert result, result.message
    else:
        assert not result, result.message
    if kind == "not an nn.Module" and check != "check_causal_decoder":
        assert "nn.Module" in result.message


def test_student_code_that_changes_the_callers_input_in_place_is_named():
    """Issue #29, 5: scaling the caller's q in place changes the caller's tensor (and k and v in
    self-attention)."""

    def scale_in_place(q, k, v, mask=None):
        q.div_(math.sqrt(q.size(-1)))  # the scaling done on the caller's tensor
        scores = q @ k.transpose(-2, -1)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        return scores.softmax(-1) @ v

    result = tl.checks.check_attention(scale_in_place)
    assert (
        not result
        and "changed its input tensor number 1" in result.message
        and "in place" in result.message
    )

    def scale_a_copy(q, k, v, mask=None):  # the same arithmetic on a tensor of its own: right
        q = q.clone()
        q.div_(math.sqrt(q.size(-1)))
        return tl.scaled_dot_product_attention(q * math.sqrt(q.size(-1)), k, v, mask)

    assert tl.checks.check_attention(scale_a_copy)


@pytest.mark.parametrize("context", [torch.no_grad, torch.inference_mode])
def test_a_check_called_under_no_grad_still_compares_gradients(context):
    with context():
        assert tl.checks.check_attention(tl.scaled_dot_product_attention)
        assert tl.checks.check_multi_head_attention(tl.MultiHeadAttention)


def test_a_nan_result_is_called_nan():
    def nan_attention(q, k, v, mask=None):
        return tl.scaled_dot_product_attention(q, k, v, mask)[0] * float("nan")

    result = tl.checks.check_attention(nan_attention)
    assert not result and "NaN" in result.message
    nan_lr = tl.checks.check_noam_lr(lambda step, d_model, warmup: float("nan"))
    assert not nan_lr and "NaN" in nan_lr.message


@pytest.mark.parametrize("check", ["check_encoder", "check_multi_head_attention", "check_generate"])
def test_a_check_leaves_the_learners_random_state_alone(check):
    """Building the student's module (its initial weights) and the check's own fixed modules draw
    random numbers; none of them may move the learner's seeded stream."""
    assert_check_leaves_random_state_alone(check)


def test_a_warning_of_student_code_is_shown_and_the_check_still_judges():
    def attention_that_warns(q, k, v, mask=None):
        import warnings

        warnings.warn("a note from the student's code", UserWarning, stacklevel=1)
        return tl.scaled_dot_product_attention(q, k, v, mask)

    with pytest.warns(UserWarning, match="a note from the student's code"):
        assert tl.checks.check_attention(attention_that_warns)


class MisspelledForward(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.w_q, self.w_k, self.w_v, self.w_o = (nn.Linear(d_model, d_model) for _ in range(4))

    # the typo: nn.Module raises NotImplementedError itself
    def foward(self, query, key, value, mask=None):
        return query


def test_only_the_stubs_own_not_implemented_error_means_not_implemented_yet():
    result = tl.checks.check_multi_head_attention(MisspelledForward)
    assert (
        not result and "not implemented yet" not in result.message and "spelling" in result.message
    )

    def meta_attention(q, k, v, mask=None):
        torch.empty(2, device="meta").cpu()  # PyTorch's own NotImplementedError
        return q

    result = tl.checks.check_attention(meta_attention)
    assert not result and "raised NotImplementedError" in result.message, result.message


@pytest.mark.parametrize(
    "check",
    ["check_attention", "check_multi_head_attention", "check_encoder_layer", "check_decoder_layer"],
)
def test_a_check_called_under_autocast_still_passes_a_correct_answer(check):
    import solutions

    code = next(
        solutions.solution(e.notebook, e.name) for e in solutions.EXERCISES if e.check == check
    )
    with torch.autocast("cpu", dtype=torch.bfloat16):
        result = getattr(tl.checks, check)(code)
    assert result, result.message


@pytest.mark.parametrize(
    ("check", "code"),
    [
        ("check_temperature_softmax", lambda logits, t: ((logits / t).softmax(-1), "junk")),
        ("check_split_heads", lambda x, h: (tl.split_heads(x, h), None)),
        (
            "check_positional_encoding",
            lambda d, n: (tl.sinusoidal_encoding(d_model=d, max_len=n), 0),
        ),
        ("check_label_smoothing", lambda *args: (tl.smoothed_targets(*args), 1)),
    ],
)
def test_a_tuple_is_no_answer_where_the_form_is_one_tensor(check, code):
    result = getattr(tl.checks, check)(code)
    assert not result and "got tuple" in result.message, result.message


def test_exit_in_student_code_is_reported():
    import sys

    result = tl.checks.check_attention(lambda q, k, v, mask=None: sys.exit(1))
    assert not result and "SystemExit" in result.message, result.message


def test_a_students_warning_is_shown_once_however_often_the_check_runs(recwarn):
    def attention_that_warns(q, k, v, mask=None):
        import warnings

        warnings.warn("shown once", UserWarning, stacklevel=1)
        return tl.scaled_dot_product_attention(q, k, v, mask)

    assert tl.checks.check_attention(attention_that_warns) and tl.checks.check_attention(
        attention_that_warns
    )
    assert sum("shown once" in str(w.message) for w in recwarn) == 1


class ScrambledOutput(nn.Module):
    """A multi-head attention whose output projection is applied twice: wrong for any weights."""

    def __init__(self, d_model, num_heads):
        super().__init__()
        self.num_heads = num_heads
        self.w_q, self.w_k, self.w_v, self.w_o = (nn.Linear(d_model, d_model) for _ in range(4))

    def forward(self, query, key, value, mask=None):
        q, k, v = (
            tl.split_heads(w(t), self.num_heads)
            for w, t in ((self.w_q, query), (self.w_k, key), (self.w_v, value))
        )
        return self.w_o(
            self.w_o(tl.combine_heads(tl.scaled_dot_product_attention(q, k, v, mask)[0]))
        )


def test_a_check_says_the_same_thing_whatever_the_learners_seed_and_leaves_every_stream_alone():
    import random

    messages = set()
    for seed in (1, 2):
        torch.manual_seed(seed)
        random.seed(seed)
        np.random.seed(seed)
        python_next, numpy_next = random.Random(seed).random(), np.random.RandomState(seed).rand()
        messages.add(tl.checks.check_multi_head_attention(ScrambledOutput).message)
        assert random.random() == python_next and np.random.rand() == numpy_next
    assert len(messages) == 1, messages


def test_a_stub_in_any_form_and_in_a_helper_is_not_implemented_yet():
    def todo(q, k, v, mask=None):
        raise NotImplementedError("todo")

    def one_line(q, k, v, mask=None):
        if True:
            raise NotImplementedError

    assert "not implemented yet" in tl.checks.check_attention(todo).message
    assert "not implemented yet" in tl.checks.check_attention(one_line).message

    def my_split_heads(x, num_heads):
        raise NotImplementedError

    class UsesAStubbedHelper(nn.Module):
        def __init__(self, d_model, num_heads):
            super().__init__()
            self.num_heads = num_heads
            self.w_q, self.w_k, self.w_v, self.w_o = (nn.Linear(d_model, d_model) for _ in range(4))

        def forward(self, query, key, value, mask=None):
            return my_split_heads(self.w_q(query), self.num_heads)

    message = tl.checks.check_multi_head_attention(UsesAStubbedHelper).message
    assert "not implemented yet (`my_split_heads`, which your code calls)" in message, message


def test_a_not_implemented_error_from_the_standard_library_is_no_stub():
    import logging

    def attention(q, k, v, mask=None):
        # an abstract method: the standard library raises NotImplementedError
        logging.Handler().emit(None)

    result = tl.checks.check_attention(attention)
    assert (
        not result and "raised NotImplementedError: emit must be implemented" in result.message
    ), result.message


def test_warnings_are_shown_even_when_student_code_raises(recwarn):
    def warns_then_raises(q, k, v, mask=None):
        import warnings

        warnings.warn("a clue before the error", UserWarning, stacklevel=1)
        raise ValueError("boom")

    result = tl.checks.check_attention(warns_then_raises)
    assert not result and "ValueError: boom." in result.message and ".." not in result.message
    assert any("a clue before the error" in str(w.message) for w in recwarn)


class NumpyWeights(ScrambledOutput):
    """Weights drawn from NumPy's global stream, then scrambled: a wrong module whose numbers depend
    on it."""

    def __init__(self, d_model, num_heads):
        super().__init__(d_model, num_heads)
        with torch.no_grad():
            self.w_q.weight.copy_(torch.from_numpy(np.random.randn(d_model, d_model)))


def test_messages_do_not_depend_on_pythons_or_numpys_seed_and_the_default_dtype_is_restored():
    messages = set()
    for seed in (1, 2):
        np.random.seed(seed)
        messages.add(tl.checks.check_multi_head_attention(NumpyWeights).message)
    assert len(messages) == 1, messages

    def sets_float64(q, k, v, mask=None):
        torch.set_default_dtype(torch.float64)
        return tl.scaled_dot_product_attention(q, k, v, mask)

    tl.checks.check_attention(sets_float64)
    assert torch.get_default_dtype() == torch.float32


def test_any_base_exception_but_keyboard_interrupt_becomes_a_message():
    class Odd(BaseException):
        pass

    def raises_odd(q, k, v, mask=None):
        raise Odd("odd")

    result = tl.checks.check_attention(raises_odd)
    assert not result and "Odd: odd" in result.message


@pytest.mark.parametrize("check", ["check_gpt_block", "check_cross_attention"])
def test_student_code_that_changes_a_shared_module_cannot_change_the_reference(check):
    """Issue #29, 9: a module the case hands to both sides is copied for the student's side."""

    def drops_the_mask_for_every_caller(module, x, *rest):
        forward = module.forward
        module.forward = lambda *args: (
            forward(*args[:3]) if check == "check_cross_attention" else forward(args[0])
        )
        return (
            module(x, rest[0], rest[0], rest[1]) if rest else module(x, tl.causal_mask(x.size(1)))
        )

    result = getattr(tl.checks, check)(drops_the_mask_for_every_caller)
    assert not result, result.message


class _Unprintable(Exception):
    """An exception that cannot be printed: printing it raises another such exception."""

    def __str__(self):
        raise _Unprintable

    def __repr__(self):
        raise _Unprintable


class _NotAStringException(Exception):
    def __str__(self):
        return 42


class _UnprintableWarning(UserWarning):
    def __str__(self):
        raise _Unprintable


class _NoShape(torch.Tensor):
    @property
    def shape(self):
        raise _Unprintable


class _Unrepresentable:
    def __repr__(self):
        raise _Unprintable

    def __float__(self):
        raise _Unprintable()


class _ModuleNone(nn.Module):
    __module__ = None

    def __init__(self, d_model, num_heads):
        super().__init__()
        raise NotImplementedError


def _raises(exc):
    def code(*args, **kwargs):
        raise exc

    return code


def _warns_unprintably(*args, **kwargs):
    import warnings

    warnings.warn(_UnprintableWarning(), stacklevel=1)
    return tl.scaled_dot_product_attention(*args)


HOSTILE = {
    "exception whose str and repr raise": ("check_attention", _raises(_Unprintable())),
    "exception whose str is no string": ("check_attention", _raises(_NotAStringException())),
    "base exception whose str raises": (
        "check_attention",
        _raises(type("Odd", (BaseException,), {"__str__": _Unprintable.__str__})()),
    ),
    "warning whose str raises": ("check_attention", _warns_unprintably),
    "result whose shape raises": (
        "check_attention",
        lambda q, k, v, mask=None: torch.zeros(2).as_subclass(_NoShape),
    ),
    "result whose repr and float raise": (
        "check_noam_lr",
        lambda step, d_model, warmup: _Unrepresentable(),
    ),
    "class whose repr raises": ("check_multi_head_attention", _Unrepresentable()),
    "stub class with __module__ None": ("check_multi_head_attention", _ModuleNone),
    "stub function whose exception cannot print": ("check_split_heads", _raises(_Unprintable())),
}


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_hostile_but_possible_code_never_makes_a_check_raise(kind):
    """Issue #29, 10: what student code hands back is formatted defensively; a check never
    raises."""
    import warnings

    check, code = HOSTILE[kind]
    escaped = None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = getattr(tl.checks, check)(code)
    # what escaped may not even print: name its type only, outside the handler
    except BaseException as exc:
        escaped = type(exc).__name__
    if escaped:
        pytest.fail(f"{check} raised {escaped}", pytrace=False)
    assert (
        isinstance(result, tl.checks.CheckResult)
        and not result
        and result.message.startswith(("❌", "⏳"))
    )
    if kind == "stub class with __module__ None":
        assert "not implemented yet" in result.message, result.message


@pytest.mark.parametrize("setting", ["meta device", "float16", "float64"])
@pytest.mark.parametrize(
    "check",
    [
        "check_attention",
        "check_multi_head_attention",
        "check_conv_feed_forward",
        "check_encoder",
        "check_decoder_layer",
        "check_transformer_parameter_count",
    ],
)
def test_a_check_runs_in_float32_on_the_cpu_whatever_the_learner_set(check, setting):
    """Issue #29, 11: correct code failed after `torch.set_default_device("meta")` or a float16
    default dtype."""
    import solutions

    code = next(
        solutions.solution(e.notebook, e.name) for e in solutions.EXERCISES if e.check == check
    )
    dtype = torch.get_default_dtype()
    try:
        if setting == "meta device":
            torch.set_default_device("meta")
        else:
            torch.set_default_dtype(getattr(torch, setting))
        result = getattr(tl.checks, check)(code)
        after = default_device(), torch.get_default_dtype()
    finally:
        set_default_device(None)
        torch.set_default_dtype(dtype)
    assert result, result.message
    assert after == (
        (torch.device("meta"), dtype)
        if setting == "meta device"
        else (torch.device("cpu"), getattr(torch, setting))
    )


def test_a_check_leaves_global_settings_as_it_found_them():
    """Issue #29, 11: whatever student code sets, the default device, deterministic-algorithms flag,
    thread count, anomaly mode and recursion limit are as before."""
    import sys

    def meddles(q, k, v, mask=None):
        torch.set_default_device("meta")
        torch.use_deterministic_algorithms(True, warn_only=True)
        torch.set_num_threads(threads + 1)
        torch.set_anomaly_enabled(True)
        sys.setrecursionlimit(limit + 1000)
        raise ValueError("and then a bug")

    before = (
        default_device(),
        torch.are_deterministic_algorithms_enabled(),
        torch.get_num_threads(),
        torch.is_anomaly_enabled(),
        sys.getrecursionlimit(),
    )
    threads, limit = before[2], before[4]
    assert not tl.checks.check_attention(meddles)
    after = (
        default_device(),
        torch.are_deterministic_algorithms_enabled(),
        torch.get_num_threads(),
        torch.is_anomaly_enabled(),
        sys.getrecursionlimit(),
    )
    assert after == before
