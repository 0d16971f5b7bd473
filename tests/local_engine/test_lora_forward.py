"""The engine's LoRA forward (scale on the rank side, one addmm) equals peft's own forward."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from peft.tuners.lora import Linear as LoraLinear

from kitchen.adapters.local.model.host import ModelHost, load_host
from kitchen.adapters.local.model.lora import LoraSpec, adapter_parameters, peft_config
from kitchen.adapters.local.model.settings import EngineSettings
from kitchen.ports import BackendSettings
from tests.helpers import engine_device, engine_generator

from .conftest import TINY

TOKENS = [[1, 5, 9, 14, 3, 7, 2, 11], [4, 4, 8, 15, 16, 23, 42, 6]]


def _tokens() -> torch.Tensor:
    return torch.tensor(TOKENS, device=engine_device())


def _host_with_adapter(tmp_path: Path, dtype: str, **lora: Any) -> ModelHost:
    settings = EngineSettings.from_backend_settings(
        BackendSettings(log_dir=tmp_path, dtype=dtype, device=engine_device())
    )
    host = load_host(TINY, settings)
    host.freeze()
    config = peft_config(host.base, LoraSpec(rank=4))
    for key, value in lora.items():
        setattr(config, key, value)
    host.add_adapter("a", config, seed=3)
    generator = engine_generator(0)
    with torch.no_grad():  # B starts at 0: make the adapter count
        for p in adapter_parameters(host.model, "a").values():
            p.normal_(0.0, 0.03, generator=generator)
    return host


@contextmanager
def _pefts_own_forward(model: Any) -> Iterator[None]:
    """Each LoRA layer computes with peft's forward (the class's) instead of the engine's."""
    saved = {
        m: m.__dict__.pop("forward")
        for m in model.modules()
        if isinstance(m, LoraLinear) and "forward" in m.__dict__
    }
    try:
        yield
    finally:
        for module, forward in saved.items():
            module.forward = forward


def _logits_and_grads(host: ModelHost) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    params = adapter_parameters(host.model, "a")
    with host.use("a") as model, torch.enable_grad():
        logits = model(input_ids=_tokens(), use_cache=False).logits.float()
        (logits.square().mean() + logits[..., 7].sum()).backward()
    grads = {k: p.grad.detach().clone() for k, p in params.items()}
    for p in params.values():
        p.grad = None
    return logits.detach(), grads


def test_fused_lora_forward_equals_pefts_in_fp32(tmp_path: Path) -> None:
    host = _host_with_adapter(tmp_path, "float32")
    fused = [
        m for m in host.model.modules() if isinstance(m, LoraLinear) and "forward" in m.__dict__
    ]
    assert len(fused) == sum(isinstance(m, LoraLinear) for m in host.model.modules()) > 0
    got_logits, got_grads = _logits_and_grads(host)
    with _pefts_own_forward(host.model):
        want_logits, want_grads = _logits_and_grads(host)
    torch.testing.assert_close(got_logits, want_logits, rtol=1e-5, atol=1e-5)
    assert got_grads.keys() == want_grads.keys()
    for key, want in want_grads.items():  # every A and B, lm_head's too
        torch.testing.assert_close(
            got_grads[key], want, rtol=0, atol=1e-5 * float(want.abs().max())
        )


def test_fused_lora_layer_in_bf16_is_as_close_to_fp32_as_pefts(tmp_path: Path) -> None:
    """bf16 rounds the two differently (scale before or after B, the sum inside the addmm); each
    LoRA layer's output and gradients must be as close to fp32 as peft's. (Through a whole model the
    roundings compound differently, so that comparison says little either way.)"""
    host = _host_with_adapter(tmp_path, "bfloat16")
    x = torch.randn(
        3, 7, host.base.config.hidden_size, generator=engine_generator(1), device=engine_device()
    )
    layers = [
        m
        for m in host.model.modules()
        if isinstance(m, LoraLinear) and m.in_features == x.shape[-1]
    ]

    def run(layer: Any, autocast: bool) -> list[torch.Tensor]:
        x_ = x.clone().requires_grad_()
        params = [layer.lora_A["a"].weight, layer.lora_B["a"].weight]
        with host.use("a"), torch.autocast(x.device.type, torch.bfloat16, enabled=autocast):
            out = layer(x_)
        out.float().square().sum().backward()
        grads = [x_.grad, *(p.grad for p in params)]
        for p in params:
            p.grad = None
        return [out.detach().float(), *grads]

    def error(got: list[torch.Tensor], want: list[torch.Tensor]) -> list[float]:
        return [
            float((g - w).abs().mean() / w.abs().mean()) for g, w in zip(got, want, strict=True)
        ]

    assert layers
    fused_errors, peft_errors = [], []
    for layer in layers:
        fp32 = run(layer, autocast=False)
        fused_errors += error(run(layer, autocast=True), fp32)
        with _pefts_own_forward(host.model):
            peft_errors += error(run(layer, autocast=True), fp32)
    assert max(peft_errors) < 0.02  # bf16 rounding, not another formula
    for fused_error, peft_error in zip(fused_errors, peft_errors, strict=True):
        assert fused_error <= 1.3 * peft_error  # one tensor's rounding varies either way
    assert sum(fused_errors) <= 1.05 * sum(peft_errors)


def test_disabled_adapters_and_dora_take_pefts_path(tmp_path: Path) -> None:
    host = _host_with_adapter(tmp_path, "float32")
    with torch.no_grad():
        with host.use(None) as model:
            base = model(input_ids=_tokens()).logits
        with host.use("a") as model:
            adapted = model(input_ids=_tokens()).logits
        with host.use(None) as model:
            base_again = model(input_ids=_tokens()).logits
    assert not torch.allclose(base, adapted, atol=1e-3)
    torch.testing.assert_close(base_again, base, rtol=0, atol=0)

    dora = _host_with_adapter(tmp_path, "float32", use_dora=True)
    got, _ = _logits_and_grads(dora)
    with _pefts_own_forward(dora.model):
        want, _ = _logits_and_grads(dora)
    torch.testing.assert_close(got, want, rtol=0, atol=0)
