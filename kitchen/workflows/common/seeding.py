"""Sampling seeds keyed by where a request sits in the run, not by how many requests came before.

A sampler's own seed stream depends on the process's history (how many samplers it made, which
request reached it first), so a resumed run drew different samples than the run it continues. A
`SeededSampler` gives every request without a seed one from a stream keyed by (run seed, step or
batch index, group index, ...): the keys live in the loop cursor saved with each checkpoint, so
restoring the cursor restores the sampling RNG, and a resumed run samples what an uninterrupted
one would.

Drawn seeds fit a signed 32-bit int: JAX-based Tinker-protocol servers (SkyRL's) keep seeds in int32
and refuse a larger one with HTTP 400. Two requests drawing one seed matters only when they also
share prompt and weights (a group's members): about G**2 / 2**32 for a group of G, 6e-8 at G = 16.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

SEED_LIMIT = 2**31  # drawn seeds are below this (see above)

# A key's second entry: which kind of draw, so no two kinds ever share seeds.
ROLLOUT_STREAM = 0
EVALUATION_STREAM = 1
TEACHER_STREAM = 2


class SeededSampler:
    """A sampling client whose unseeded requests draw seeds, in call order, from `key`'s stream;
    everything else is the wrapped client's."""

    def __init__(self, client: Any, key: Sequence[int]) -> None:
        self.client = client
        self.key = tuple(int(k) for k in key)
        self._rng = np.random.default_rng(list(self.key))

    def sample(self, prompt: Any, num_samples: int, sampling_params: Any, **kwargs: Any) -> Any:
        if getattr(sampling_params, "seed", None) is None:
            seed = int(self._rng.integers(0, SEED_LIMIT))
            sampling_params = sampling_params.model_copy(update={"seed": seed})
        return self.client.sample(
            prompt=prompt, num_samples=num_samples, sampling_params=sampling_params, **kwargs
        )

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)
