"""LoRA adapters on a shared base model: which modules get one, and copying adapter weights by name.

Adapter tensors travel under peft's canonical keys (the parameter name with the adapter name
removed, e.g. `base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight`), so a saved
`adapter_model.safetensors` + `adapter_config.json` also loads with `PeftModel.from_pretrained`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from kitchen.engine.errors import BackendError

# Tinker's LoRA scale is independent of r ("LoRA without regret": alpha = 32, scale alpha / r), so
# one learning rate suits every r.
LORA_ALPHA = 32
# Module names of vision towers (a part of the dotted path), and peft's regex excluding them.
VISION_MODULES = frozenset({"visual", "vision_tower", "vision_model"})
VISION_EXCLUDE = r".*\.(" + "|".join(sorted(VISION_MODULES)) + r")\..*"


@dataclass(frozen=True)
class LoraSpec:
    """A training client's LoRA choice, as `create_lora_training_client` takes it."""

    rank: int
    train_attn: bool = True
    train_mlp: bool = True
    train_unembed: bool = True
    # A vision-language model's vision tower (attention and MLP of its blocks) gets LoRA too;
    # off, as on Tinker: only the language model adapts.
    train_vision: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def lora_targets(model: Any, spec: LoraSpec) -> list[str]:
    """Leaf names of the Linear modules LoRA wraps: attention projections (modules under an
    `attn`/`attention` block), MLP projections (under `mlp`), and the unembedding (lm_head); a
    vision tower's (modules under VISION_MODULES) only with `spec.train_vision`."""
    import torch

    attn: set[str] = set()
    mlp: set[str] = set()
    for name, module in model.named_modules():
        parts = name.split(".")
        # Once peft has wrapped a layer, its original Linear lives at `<layer>.base_layer`.
        if any(p.startswith("lora_") for p in parts) or not isinstance(module, torch.nn.Linear):
            continue
        if parts[-1] == "base_layer":
            parts = parts[:-1]
        parents = parts[:-1]
        if not spec.train_vision and is_vision_module(name):
            continue
        if any("attn" in p or "attention" in p for p in parents):
            attn.add(parts[-1])
        elif any("mlp" in p or "feed_forward" in p for p in parents):
            mlp.add(parts[-1])
    targets: set[str] = set()
    if spec.train_attn:
        targets |= attn
    if spec.train_mlp:
        targets |= mlp
    if spec.train_unembed:
        head = model.get_output_embeddings()
        head_names = [n for n, m in model.named_modules() if m is head]
        targets |= {n.split(".")[-1] for n in head_names}
    if not targets:
        raise BackendError(
            f"LoRA rank {spec.rank} with train_attn={spec.train_attn}, train_mlp={spec.train_mlp}, "
            f"train_unembed={spec.train_unembed} selects no module of {type(model).__name__}"
        )
    return sorted(targets)


def is_vision_module(name: str) -> bool:
    """Whether the module `name` belongs to a vision tower (Qwen-VL's `visual`)."""
    return any(part in VISION_MODULES for part in name.split("."))


def peft_config(model: Any, spec: LoraSpec) -> Any:
    from peft import LoraConfig

    has_vision = any(is_vision_module(n) for n, _ in model.named_modules())
    return LoraConfig(
        r=spec.rank,
        lora_alpha=LORA_ALPHA,
        lora_dropout=0.0,
        target_modules=lora_targets(model, spec),
        # A vision tower whose Linear layers share a leaf name with the decoder's stays frozen.
        exclude_modules=VISION_EXCLUDE if has_vision and not spec.train_vision else None,
        bias="none",
    )


def adapter_parameters(model: Any, adapter: str) -> dict[str, Any]:
    """canonical key -> Parameter of `adapter`, in module order (stable, so optimizer state lines up)."""
    marker = f".{adapter}."
    found: dict[str, Any] = {}
    for name, param in model.named_parameters():
        if ".lora_" in name and marker in name:
            found[name.replace(marker, ".", 1)] = param
    if not found:
        raise BackendError(f"adapter {adapter!r} has no LoRA parameters in this model")
    return found


def snapshot_adapter(model: Any, adapter: str) -> dict[str, Any]:
    """Detached copies of `adapter`'s weights (what a sampler snapshot keeps)."""
    return {k: p.detach().clone() for k, p in adapter_parameters(model, adapter).items()}


def load_adapter_weights(model: Any, adapter: str, tensors: dict[str, Any]) -> None:
    """Copy `tensors` (canonical keys) into `adapter`; the key sets and shapes must match exactly."""
    import torch

    params = adapter_parameters(model, adapter)
    missing, extra = params.keys() - tensors.keys(), tensors.keys() - params.keys()
    if missing or extra:
        example = sorted(missing or extra)[0]
        raise BackendError(
            f"LoRA weights do not match adapter {adapter!r}: {len(missing)} missing and {len(extra)} "
            f"unexpected tensors (e.g. {example}); was the checkpoint made with another rank or modules?"
        )
    with torch.no_grad():
        for key, param in params.items():
            source = tensors[key]
            if source.shape != param.shape:
                raise BackendError(
                    f"LoRA tensor {key} has shape {tuple(source.shape)}; adapter {adapter!r} expects "
                    f"{tuple(param.shape)}"
                )
            param.copy_(source.to(device=param.device, dtype=param.dtype))


def fuse_lora_forwards(model: Any) -> int:
    """Give every peft LoRA Linear of `model` the forward `_lora_linear`; returns how many got it.

    peft computes base(x) + B(A(x)) * scale: the scale multiplies, and the sum then adds, a tensor
    of the layer's full output width (for the unembedding, [tokens, vocabulary]), forward and
    backward. Scaling the r-wide A(x) instead and adding B's product inside one addmm gives the
    same sum without those passes: a SmolLM2 LoRA SFT step (8 x 128 tokens, r = 16) took 3-8% less
    time in fp32 and in bf16."""
    import functools

    from peft.tuners.lora import Linear as LoraLinear

    count = 0
    for module in model.modules():
        if isinstance(module, LoraLinear) and "forward" not in module.__dict__:
            module.forward = functools.partial(_lora_linear, module)  # type: ignore[method-assign]
            count += 1
    return count


def _lora_linear(layer: Any, x: Any, *args: Any, **kwargs: Any) -> Any:
    import torch

    name = None if args or kwargs else _plain_lora_adapter(layer, x)
    if name is None:
        return type(layer).forward(layer, x, *args, **kwargs)
    base = layer.base_layer(x)
    h = torch.nn.functional.linear(x, layer.lora_A[name].weight) * layer.scaling[name]
    b = layer.lora_B[name].weight
    out = torch.addmm(base.reshape(-1, base.shape[-1]), h.reshape(-1, h.shape[-1]), b.t())
    return out.view(base.shape)


def _plain_lora_adapter(layer: Any, x: Any) -> str | None:
    """The one active adapter of `layer` when it is plain LoRA that `_lora_linear` computes exactly
    as peft would; None sends the call to peft's own forward."""
    import torch

    names = layer.active_adapters
    if layer.disable_adapters or layer.merged or len(names) != 1:
        return None
    name: str = names[0]
    if (
        name not in layer.lora_A
        or name in layer.lora_variant  # DoRA and other variants compute more than B @ A
        or not isinstance(layer.lora_dropout[name], torch.nn.Identity)
        or layer.fan_in_fan_out
    ):
        return None
    a, b = layer.lora_A[name].weight, layer.lora_B[name].weight
    if not torch.is_autocast_enabled(x.device.type) and not x.dtype == a.dtype == b.dtype:
        return None  # peft casts x to the adapter's dtype first
    return name
