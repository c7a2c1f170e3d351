"""The checks of notebook 10: the Table 3 row."""

import transformer_lib as tl


def test_table3_check_reports_a_row_that_fails_to_train(monkeypatch):
    # what a row with d_model=100000 meets while its model is built
    def out_of_memory(answer, results):
        raise RuntimeError("DefaultCPUAllocator: can't allocate memory")

    from transformer_lib.teaching.checks import nb10_paper_experiments

    monkeypatch.setattr(nb10_paper_experiments, "judge_own_row", out_of_memory)
    result = tl.checks.check_table3_row(lambda: ({"d_model": 100_000}, "lower"))
    assert (
        not result and "could not be trained (RuntimeError: DefaultCPUAllocator" in result.message
    ), result.message
