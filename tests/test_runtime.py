import random

import numpy as np
import pytest
import torch

import transformer_lib as tl


def test_seed_everything_makes_every_generator_repeat():
    def draw():
        return random.random(), np.random.rand(), torch.rand(1).item()

    tl.seed_everything(123)
    first = draw()
    tl.seed_everything(123)
    assert draw() == first


def test_seed_everything_rejects_bad_seeds():
    with pytest.raises(ValueError, match="seed must be >= 0"):
        tl.seed_everything(-1)


def test_pick_device_falls_back_to_cpu_and_honours_prefer():
    assert tl.pick_device("cpu") == torch.device("cpu")
    assert tl.pick_device().type in {"cuda", "mps", "cpu"}


def test_pick_device_names_what_is_available():
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    with pytest.raises(ValueError, match=r"available: \["):
        tl.pick_device("cuda")
