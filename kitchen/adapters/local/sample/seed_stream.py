"""A sampling request's random numbers, drawn from every bit of its 64-bit seed.

torch's CPU generator (mt19937) keeps only the low 32 bits of a seed: `manual_seed(0)` and
`manual_seed(2**40)` draw the same numbers, so two clients of `kitchen serve` asking for seeds 0 and
2**40 got the same tokens. A seed below 2**32 draws from one torch generator on it, exactly as
before. A larger one also runs a second generator on its high 32 bits and draws
u = frac(u_low + frac(2 u_high)): still uniform (u_low is, and is independent of u_high), and the
weight 2 keeps a seed apart from the one with its halves swapped. A negative seed is read as torch
reads it, as its 64-bit two's complement.
"""

from __future__ import annotations

import random
import threading
from typing import Any

from kitchen.engine.errors import BackendError


def seed_halves(seed: int) -> tuple[int, int]:
    """The seed's 64 bits (a negative one as its two's complement) as its low and high 32;
    BackendError outside 64 bits."""
    if not -(2**63) <= seed < 2**64:
        raise BackendError(
            f"sample: sampling_params.seed is {seed}; "
            "expected a 64-bit integer (-2**63 to 2**64 - 1)"
        )
    bits = seed % 2**64
    return bits % 2**32, bits >> 32


class SeedStream:
    """Uniform numbers in [0, 1) for one request, a pure function of its seed."""

    def __init__(self, seed: int, device: Any) -> None:
        import torch

        low, high = seed_halves(seed)
        self.low = torch.Generator(device=device).manual_seed(low)
        self.high = torch.Generator(device=device).manual_seed(high) if high else None

    def uniform(self, shape: tuple[int, ...], device: Any) -> Any:
        """A float64 tensor of `shape` on `device`; each call continues the stream."""
        import torch

        u = torch.rand(shape, generator=self.low, dtype=torch.float64, device=device)
        if self.high is None:
            return u
        v = torch.rand(shape, generator=self.high, dtype=torch.float64, device=device)
        return (u + (2 * v) % 1.0) % 1.0


class RequestSeeds:
    """Each sample request's seed: `SamplingParams.seed` where given, else the next of a stream
    seeded by the backend seed and the sampler's id, drawn at submission (so it follows submission
    order and a whole run is reproducible); drawn seeds are below 2**31, as every seed Kitchen
    draws (docs/resume.md)."""

    def __init__(self, seed: int, sampler_id: str) -> None:
        self._stream = random.Random(f"{seed}:{sampler_id}")
        self._lock = threading.Lock()

    def draw(self, params: Any) -> int:
        if params.seed is not None:
            return int(params.seed)
        with self._lock:
            return self._stream.getrandbits(31)
