"""Random next-token batches for the serve benchmarks (bench/serve.py, bench/serve_load.py).

Its own module because importing either benchmark sets that benchmark's environment defaults."""

from __future__ import annotations

import numpy as np
from tinker import types


def sft_batch(n: int, length: int, seed: int, max_token: int = 1000) -> list[types.Datum]:
    """`n` rows of `length` random token ids in [10, max_token), every target weighted 1."""
    rng = np.random.default_rng(seed)
    rows = rng.integers(10, max_token, size=(n, length + 1), dtype=np.int64)
    return [
        types.Datum(
            model_input=types.ModelInput.from_ints(r[:-1].tolist()),
            loss_fn_inputs={
                "target_tokens": types.TensorData.from_numpy(r[1:]),
                "weights": types.TensorData.from_numpy(np.ones(length, dtype=np.float32)),
            },
        )
        for r in rows
    ]
