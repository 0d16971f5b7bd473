"""A model held in memory and shared: one copy of the base weights serves every LoRA training client,
every sampler snapshot and every reference (adapter-disabled) computation on that base.

peft keeps several named adapters on one model; a host activates the one a request needs under a
lock, so requests from different clients never interleave inside a forward pass. Sampler snapshots
are plain tensor copies of an adapter, loaded into a "sampler slot" adapter when sampled from.
"""

from __future__ import annotations

import copy
import functools
import itertools
import json
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kitchen.adapters.local.model.attention import (
    sdpa_backends,
    sdpa_restricted,
    use_engine_attention,
)
from kitchen.adapters.local.model.context import extend_context
from kitchen.adapters.local.model.locate import resolve_model
from kitchen.adapters.local.model.lora import fuse_lora_forwards, load_adapter_weights
from kitchen.adapters.local.model.quantization import prepare_quantized, quantization_config
from kitchen.adapters.local.model.settings import EngineSettings
from kitchen.adapters.local.model.vocab import WholeRows, split_head, splits_vocab
from kitchen.engine.errors import BackendError

_snapshot_ids = itertools.count(1)
_BASE = "\0base"  # ModelHost._active while every adapter is disabled


@dataclass(frozen=True)
class LoraSnapshot:
    """Frozen copy of one adapter's weights plus its peft config: what a sampler samples from."""

    config: Any  # peft.LoraConfig
    tensors: dict[str, Any]  # canonical key -> tensor on the model's device
    snapshot_id: int

    @classmethod
    def of(
        cls, config: Any, tensors: dict[str, Any], snapshot_id: int | None = None
    ) -> LoraSnapshot:
        """A new snapshot; `snapshot_id` is rank 0's for the copy a rank > 0 takes (world.py)."""
        sid = next(_snapshot_ids) if snapshot_id is None else snapshot_id
        return cls(config=config, tensors=tensors, snapshot_id=sid)


class ModelHost:
    """One loaded model (base weights frozen unless `trainable`), its tokenizer and its adapters."""

    def __init__(
        self,
        model_name: str,
        model_path: Path,
        model: Any,
        tokenizer: Any,
        autocast_dtype: Any = None,
        attention: list[Any] | None = None,
        quantization: str = "none",
    ) -> None:
        self.model_name = model_name
        self.quantization = quantization  # "none" | "nf4": how the base weights are held
        self.autocast_dtype = autocast_dtype  # torch dtype forward passes run in; None = fp32
        self.attention = attention  # SDPA backends its passes may use (attention.sdpa_backends)
        self.model_path = model_path
        self.base = model
        # Sharded over the ranks of a --nproc N run (distributed/sharded_base.py): its weights
        # are never whole outside a call, so nothing may copy them (snapshots merge per pass).
        self.sharded = False
        self.tokenizer = tokenizer
        self.lock = threading.RLock()
        self._peft: Any = None
        self._active: str | None = None  # adapter peft has active now (_BASE: none; None: unknown)
        self._slots: dict[str, str] = {}  # LoRA config signature -> sampler slot adapter name
        self._slot_owner: dict[str, int] = {}  # slot -> snapshot_id loaded in it
        self._merged_weights: dict[Any, Any] = {}  # base Linear -> buffer of its merged weight
        self._merged: tuple[int, dict[Any, Any]] | None = None  # snapshot_id -> merged forwards

    @property
    def model(self) -> Any:
        return self._peft if self._peft is not None else self.base

    @property
    def device(self) -> Any:
        return next(self.base.parameters()).device

    @property
    def max_context(self) -> int:
        return model_limits(self.base)[1]

    @property
    def vocab_size(self) -> int:
        return model_limits(self.base)[0]

    def freeze(self) -> None:
        """Promise that the base weights never change again (every host but full fine-tuning's):
        under autocast, its Linear layers then compute with weights cast once, and its head
        computes by vocabulary blocks, as a --nproc N run's does (vocab.py)."""
        if self.autocast_dtype is not None:
            cast_frozen_linears(self.base, self.autocast_dtype)
        if splits_vocab(self.base):
            head = self.base.get_output_embeddings()
            split_head(head, WholeRows(head.weight, compute_weight(head)))

    def add_adapter(self, name: str, config: Any, seed: int) -> None:
        """Add a LoRA adapter initialised from `seed` (B = 0, so the model starts equal to the base)."""
        import torch
        from peft import get_peft_model

        with self.lock, warnings.catch_warnings(), torch.random.fork_rng(devices=[]):
            # peft warns about LoRA on a tied lm_head; only its output gets the delta, embeddings stay.
            warnings.simplefilter("ignore")
            torch.manual_seed(seed)
            if self._peft is None:
                self._peft = get_peft_model(self.base, config, adapter_name=name)
            else:
                self._peft.add_adapter(name, config)
            fuse_lora_forwards(self._peft)
            self._active = None

    def remove_adapter(self, name: str) -> None:
        with self.lock, warnings.catch_warnings():
            warnings.simplefilter("ignore")  # peft notes which adapter becomes active instead
            if self._peft is not None and name in self._peft.peft_config:
                self._peft.delete_adapter(name)
                self._active = None

    @contextmanager
    def use(self, adapter: str | None) -> Iterator[Any]:
        """Hold the lock with `adapter` active (None: the base weights, every adapter disabled),
        under this host's autocast and attention kernels."""
        import torch

        with (
            self.lock,
            torch.autocast(
                self.device.type, dtype=self.autocast_dtype, enabled=self.autocast_dtype is not None
            ),
            sdpa_restricted(self.attention),
        ):
            if self._peft is None or (adapter is None and not self._peft.peft_config):
                if adapter is not None:
                    raise BackendError(f"adapter {adapter!r} does not exist on {self.model_name}")
                # No adapter left (every LoRA client closed): peft's own forward would look up
                # its deleted active adapter, and the LoRA layers left in the model add nothing.
                yield self.base
                return
            # Only a change of adapter goes through peft: its disable_adapter() context re-reads
            # the whole model's status (module reprs included) on every entry, which made a
            # 32-row SmolLM2 decode step on the base weights take 164 ms instead of 87.
            want = _BASE if adapter is None else adapter
            if self._active != want:
                if adapter is None:
                    if self._active is None:  # after add or remove it may be a deleted one
                        self._peft.set_adapter(next(iter(self._peft.peft_config)))
                    self._peft.base_model.disable_adapter_layers()
                else:
                    if self._active in (_BASE, None):
                        self._peft.base_model.enable_adapter_layers()
                    self._peft.set_adapter(adapter)
                self._active = want
            yield self._peft

    @contextmanager
    def use_snapshot(self, snapshot: LoraSnapshot, merge: bool = True) -> Iterator[Any]:
        """Hold the lock with `snapshot`'s weights active (copied into a sampler slot if not there).

        Under autocast a snapshot decodes with its decoder layers' LoRA delta merged into the base
        weights in the compute dtype, so a decode step runs no adapter ops there (a 32-row SmolLM2
        step with r = 32 adapters: 109 -> 73 ms). The merge costs about 120 ms, repaid within a
        few decode steps but not by one scoring pass: with `merge` False (compute_logprobs) the
        merge is used only if it already holds this snapshot (`merges`). W + delta rounded to bf16
        is as close to the fp32 model as the unmerged bf16 adapter (docs/adapters.md)."""
        with self.lock:
            signature = json.dumps(
                [
                    snapshot.config.r,
                    snapshot.config.lora_alpha,
                    sorted(snapshot.config.target_modules),
                    snapshot.config.exclude_modules,
                ]
            )
            slot = self._slots.get(signature)
            if slot is None:
                slot = f"sampler_slot_{len(self._slots)}"
                # A copy: peft keeps (and may annotate) the config object it is given.
                self.add_adapter(slot, copy.deepcopy(snapshot.config), seed=0)
                self._slots[signature] = slot
            if self._slot_owner.get(slot) != snapshot.snapshot_id:
                load_adapter_weights(self._peft, slot, snapshot.tensors)
                self._slot_owner[slot] = snapshot.snapshot_id
            forwards = self._merged_forwards(slot, snapshot.snapshot_id, build=merge)
            with self.use(slot) as model, _forwards_swapped(forwards or {}):
                yield model

    def use_weights(self, snapshot: LoraSnapshot | None, merge: bool = True) -> Any:
        """`snapshot`'s weights (use_snapshot, for `merge`), else the base's (use(None))."""
        return self.use_snapshot(snapshot, merge) if snapshot else self.use(None)

    def merges(self, snapshot: LoraSnapshot | None) -> bool:
        """Whether `snapshot` computes with merged weights even when not asked to merge (it was
        merged last): what every rank of a --nproc N run must then do to score as one process."""
        if self._merged is None or snapshot is None:
            return False
        return self._merged[0] == snapshot.snapshot_id and bool(self._merged[1])

    def _merged_forwards(self, slot: str, snapshot_id: int, build: bool) -> dict[Any, Any] | None:
        """Forwards of `slot`'s LoRA layers computing with its delta merged into their base
        Linear (None: not merged: fp32 hosts, where a merged copy would cost the model's size
        again for little; 4-bit hosts, where it would cost 4x the quantized weights; adapters
        other than plain LoRA on Linear layers; or another snapshot's merge held and `build`
        False).

        The head keeps its adapter apart (a few products of inner size r beside the vocabulary-sized one):
        merged, it would be a copy of a weight no rank of a --nproc N run holds whole. On such a
        sharded base a layer's weight is whole only while FSDP gathers it for a pass, so each
        forward merges it then, with the same products one process merges once: the same tokens
        at any N."""
        import torch
        from peft.tuners.lora import Linear as LoraLinear

        if self.autocast_dtype is None or self.quantization != "none":
            return None
        if self._merged is not None and self._merged[0] == snapshot_id:
            return self._merged[1]
        if not build:
            return None
        head = self.base.get_output_embeddings()
        # Every layer the adapter touches, whatever its kind: merging only some of them (peft's
        # 4-bit and embedding LoRA layers are no LoraLinear) would sample with the rest disabled.
        layers = [m for m in self._peft.modules() if slot in getattr(m, "lora_A", ())]
        if any(
            not isinstance(m, LoraLinear)
            or m.use_dora.get(slot)
            or m.fan_in_fan_out
            or type(m.get_base_layer()) is not torch.nn.Linear
            for m in layers
        ):
            return None
        forwards = {}
        with torch.no_grad():
            for layer in layers:
                if layer is head:
                    continue
                base: Any = layer.get_base_layer()
                a: Any = layer.lora_A[slot].weight
                b: Any = layer.lora_B[slot].weight
                delta = (b.detach().clone(), a.detach().clone(), layer.scaling[slot])
                if self.sharded:
                    forwards[layer] = functools.partial(
                        _merging_linear, base, delta, self.autocast_dtype
                    )
                    continue
                merged = self._merged_weights.get(base)
                if merged is None:
                    merged = self._merged_weights[base] = torch.empty_like(
                        base.weight, dtype=self.autocast_dtype
                    )
                merged.copy_(_merged_weight(base.weight, delta))
                bias = None if base.bias is None else base.bias.detach().to(self.autocast_dtype)
                forwards[layer] = functools.partial(_merged_linear, merged, bias)
        self._merged = (snapshot_id, forwards)
        return forwards


def cast_frozen_linears(model: Any, dtype: Any) -> int:
    """Give every frozen Linear of `model` a copy of its weight in the autocast `dtype` to compute
    with; returns how many got one.

    Autocast caches its casts only for weights that train, so a frozen base weight is cast again on
    every forward: on SmolLM2 under bf16 that made a 32-row decode step ~1.7x slower than with the
    weights already in bf16. The copy holds exactly the values autocast would compute, so results
    do not change. The fp32 weights stay: an embedding tied to the head still reads them, peft
    creates adapters in its base layer's dtype (fp32 master weights), and fp32 calls still work.
    Call it only on a model whose base weights never change afterwards."""
    import torch

    count = 0
    for name, module in model.named_modules():
        if type(module) is not torch.nn.Linear or ".lora_" in f".{name}":
            continue
        if any(p.requires_grad for p in module.parameters()):
            continue
        weight = module.weight.detach().to(dtype)
        bias = None if module.bias is None else module.bias.detach().to(dtype)
        # An instance attribute, so peft's wrapper (which calls base_layer(x)) picks it up too.
        module.forward = functools.partial(_compute_linear, module, weight, bias)  # type: ignore[method-assign]
        count += 1
    return count


def compute_weight(module: Any) -> Any:
    """The copy of `module`'s weight that cast_frozen_linears gave it (None if none)."""
    forward = module.__dict__.get("forward")
    if isinstance(forward, functools.partial) and forward.func is _compute_linear:
        return forward.args[1]
    return None


def _compute_linear(module: Any, weight: Any, bias: Any, x: Any) -> Any:
    import torch
    import torch.nn.functional as F

    device = x.device.type
    if x.dtype == weight.dtype or (
        torch.is_autocast_enabled(device) and torch.get_autocast_dtype(device) == weight.dtype
    ):
        return F.linear(x, weight, bias)
    return F.linear(x, module.weight, module.bias)  # an fp32 call (autocast off) stays fp32


def _merged_weight(weight: Any, delta: tuple[Any, Any, float]) -> Any:
    """W + scale * B @ A, summed in fp32 (rounded to the compute dtype by the caller)."""
    import torch

    b, a, scale = delta
    with torch.autocast(weight.device.type, enabled=False):
        return torch.addmm(weight, b, a, alpha=scale)


def _merged_linear(weight: Any, bias: Any, x: Any) -> Any:
    import torch.nn.functional as F

    return F.linear(x, weight, bias)


def _merging_linear(base: Any, delta: tuple[Any, Any, float], dtype: Any, x: Any) -> Any:
    """A sharded base's Linear with the delta merged into its weight as gathered for this pass."""
    import torch.nn.functional as F

    bias = None if base.bias is None else base.bias.detach().to(dtype)
    return F.linear(x, _merged_weight(base.weight.detach(), delta).to(dtype), bias)


@contextmanager
def _forwards_swapped(forwards: dict[Any, Any]) -> Iterator[None]:
    """Modules compute with the given forwards, then get their own back."""
    saved = {m: m.__dict__.get("forward") for m in forwards}
    for module, forward in forwards.items():
        module.forward = forward
    try:
        yield
    finally:
        for module, forward in saved.items():
            if forward is None:
                del module.forward
            else:
                module.forward = forward


def model_limits(model: Any) -> tuple[int, int]:
    """(vocabulary size, context length): the token ids and the sequence length `model` can read."""
    config = model.config
    config = getattr(config, "text_config", None) or config  # a VLM's context is its decoder's
    vocab = int(model.get_input_embeddings().num_embeddings)
    return vocab, int(getattr(config, "max_position_embeddings", 0) or 1 << 20)


def auto_model_class(config: Any) -> Any:
    """The transformers auto class that loads a model of `config` with its language head: a
    vision-language model (a config with a vision tower) loads whole, vision included."""
    from transformers import AutoModelForCausalLM, AutoModelForImageTextToText

    vlm = getattr(config, "vision_config", None) is not None
    return AutoModelForImageTextToText if vlm else AutoModelForCausalLM


def load_host(
    model_name: str,
    settings: EngineSettings,
    model_path: Path | None = None,
    quantization: str = "none",
) -> ModelHost:
    """Resolve `model_name` (unless `model_path` is given) and load model + tokenizer, frozen, in eval
    mode; with `quantization` "nf4" its decoder Linears are held in 4 bits (quantization.py)."""
    from transformers import AutoConfig, AutoTokenizer
    from transformers.utils import logging as hf_logging

    path = model_path if model_path is not None else resolve_model(model_name)
    hf_logging.disable_progress_bar()  # per-load bars would flood logs and CI output
    quantized = quantization_config(quantization, settings.device, settings.autocast_dtype)
    # A quantized model is quantized as it loads onto its device; `.to` is refused afterwards.
    placement = {} if quantized is None else {"device_map": {"": settings.device}}
    try:
        config = AutoConfig.from_pretrained(path)
    except Exception as e:
        raise BackendError(f"could not load model {model_name!r} from {path}: {e}") from e
    extend_context(config, settings.context_length, settings.rope_scaling, model_name)
    try:
        # fp32 master weights whatever the compute dtype: bf16 runs as autocast (see EngineSettings).
        model: Any = auto_model_class(config).from_pretrained(
            path, config=config, dtype="float32", quantization_config=quantized, **placement
        )
        tokenizer = AutoTokenizer.from_pretrained(path)
    except Exception as e:
        raise BackendError(f"could not load model {model_name!r} from {path}: {e}") from e
    if quantized is None:
        model = model.to(settings.device)
    else:
        prepare_quantized(model)
    use_engine_attention(model)
    model.eval()  # no dropout: forward passes are deterministic
    model.requires_grad_(False)
    attention = sdpa_backends(settings.device, settings.cudnn_attention)
    return ModelHost(
        model_name, Path(path), model, tokenizer, settings.autocast_dtype, attention, quantization
    )
