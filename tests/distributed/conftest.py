"""The ranks these tests start are gloo ranks on the CPU, as CI has them. Where torch sees a GPU the
ranks would take NCCL and a GPU each (and the launcher refuses more ranks than GPUs), so the GPUs
are hidden from the ranks and from the launching process alike."""

import pytest
import torch


@pytest.fixture(autouse=True)
def ranks_on_the_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
