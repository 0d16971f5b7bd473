"""The one conversion of a per-token column to numpy, for every formula that reads one."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
from tinker import types

FloatArray = npt.NDArray[np.float64]


def as_array(values: Any) -> FloatArray:
    """TensorData, numpy, a list (None -> nan) or a torch tensor on any device -> flat float64."""
    if isinstance(values, types.TensorData):
        values = values.to_numpy()
    elif hasattr(values, "detach"):  # a torch tensor, without importing torch
        values = values.detach().cpu().numpy()
    return np.asarray(values, dtype=np.float64).reshape(-1)
