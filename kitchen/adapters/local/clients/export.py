"""Export a checkpoint as Hugging Face folders that plain `transformers` (and PEFT) load.

    adapter form (LoRA only)   adapter_model.safetensors + adapter_config.json (PEFT's format),
                               plus the tokenizer and its chat template
    merged form                a complete model folder: config.json, model.safetensors,
                               generation config, tokenizer and chat template

Sources: a folder the local engine wrote (save_state or save_weights_for_sampler), or a PEFT
adapter folder (e.g. one `tinker checkpoint download` fetched), whose base model is named in its
adapter_config.json. A vision-language model exports whole (vision tower included) with its image
processor's config, so `AutoModelForImageTextToText` and `AutoImageProcessor` load the folder. The merged model gives the engine's logprobs (fp32: < 1e-4; tested).

An adapter trained on a 4-bit base (`--base-quantization nf4`) is merged into that base's weights
dequantized, not the original fp32 ones: those are the weights it was trained against, so the
merged model computes what the engine computed. Its adapter form still names the fp32 base.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kitchen.adapters.local.clients import checkpoints as ckpt
from kitchen.adapters.local.model.host import auto_model_class
from kitchen.adapters.local.model.locate import resolve_model
from kitchen.engine.errors import BackendError, ConfigError

DTYPES = ("float32", "bfloat16", "float16")
IMAGE_PROCESSOR_FILES = (
    "preprocessor_config.json",
    "processor_config.json",
    "video_preprocessor_config.json",
)


@dataclass(frozen=True)
class Source:
    """What a checkpoint folder holds: its base model, and LoRA weights or a full model."""

    folder: Path
    base_model: str
    lora: bool
    kind: str  # "state" | "sampler" | "peft"
    base_quantization: str = "none"  # how the engine held the base it trained on


def inspect_checkpoint(path: str) -> Source:
    folder = Path(path.removeprefix("local://")).expanduser()
    if (folder / ckpt.META_FILE).is_file():
        meta = ckpt.read_meta(folder)
        return Source(
            folder, meta.base_model, meta.lora is not None, meta.kind, meta.base_quantization
        )
    config = folder / "adapter_config.json"
    if config.is_file():
        base = json.loads(config.read_text()).get("base_model_name_or_path")
        if not base:
            raise ConfigError(f"{config} names no base_model_name_or_path")
        return Source(folder, base, True, "peft")
    raise ConfigError(
        f"checkpoint {folder}: expected a folder written by the local engine "
        f"({ckpt.META_FILE}) or a PEFT adapter folder (adapter_config.json)"
    )


def export_checkpoint(path: str, out: Path, merge: bool, dtype: str = "float32") -> Source:
    """Write `path` as a Hugging Face folder at `out` (merged, or the adapter form)."""
    if dtype not in DTYPES:
        raise ConfigError(f"--dtype {dtype!r}: expected one of {', '.join(DTYPES)}")
    source = inspect_checkpoint(path)
    if not merge and not source.lora:
        raise ConfigError(
            f"checkpoint {source.folder} holds full weights, not a LoRA adapter; pass --merge"
        )
    base_path = resolve_model(source.base_model)
    if merge:
        ckpt.write_folder(out, lambda tmp: _write_merged(source, base_path, tmp, dtype))
    else:
        ckpt.write_folder(out, lambda tmp: _write_adapter(source, base_path, tmp))
    return source


def _write_adapter(source: Source, base_path: Path, tmp: Path) -> None:
    shutil.copy2(source.folder / ckpt.ADAPTER_WEIGHTS, tmp / ckpt.ADAPTER_WEIGHTS)
    config = json.loads((source.folder / "adapter_config.json").read_text())
    config["base_model_name_or_path"] = str(base_path)  # where PEFT finds the base offline
    (tmp / "adapter_config.json").write_text(json.dumps(config, indent=2) + "\n")
    _tokenizer(base_path).save_pretrained(tmp)
    _copy_image_processor(base_path, tmp)


def _write_merged(source: Source, base_path: Path, tmp: Path, dtype: str) -> None:
    import torch

    auto = _auto_class(base_path)
    if source.lora:
        model = _merged_lora(source, base_path)
    elif source.kind == "sampler":  # already a complete model folder
        model = auto.from_pretrained(source.folder, dtype="float32")
    else:  # a full fine-tuning state: the base architecture with the saved weights
        model = auto.from_pretrained(base_path, dtype="float32")
        ckpt.load_full_state(source.folder, model)
    model = model.to(getattr(torch, dtype))
    model.config.dtype = dtype
    model.save_pretrained(tmp)
    _tokenizer(base_path).save_pretrained(tmp)
    _copy_image_processor(base_path, tmp)


def _merged_lora(source: Source, base_path: Path) -> Any:
    """The base model with the adapter's delta added into its weights (computed in fp32)."""
    import torch
    from peft import PeftModel

    model = _base_weights(base_path, source.base_quantization)
    targets = set(json.loads((source.folder / "adapter_config.json").read_text())["target_modules"])
    head = model.get_output_embeddings()
    if model.config.tie_word_embeddings and any(
        name.split(".")[-1] in targets for name, m in model.named_modules() if m is head
    ):
        # The engine's LoRA on a tied lm_head changes the output projection only; merged into the
        # shared tensor it would change the input embeddings too. Untie first.
        head.weight = torch.nn.Parameter(model.get_input_embeddings().weight.detach().clone())
        model.config.tie_word_embeddings = False
    try:
        peft_model = PeftModel.from_pretrained(model, str(source.folder))
    except Exception as e:
        raise BackendError(
            f"checkpoint {source.folder}: the adapter does not fit {base_path}: {e}"
        ) from e
    return peft_model.merge_and_unload()


def _auto_class(base_path: Path) -> Any:
    from transformers import AutoConfig

    return auto_model_class(AutoConfig.from_pretrained(base_path))


def _copy_image_processor(base_path: Path, tmp: Path) -> None:
    """A vision-language model's image (and processor) configs, so the export reads images."""
    for name in IMAGE_PROCESSOR_FILES:
        if (base_path / name).is_file():
            shutil.copy2(base_path / name, tmp / name)


def _base_weights(base_path: Path, quantization: str) -> Any:
    """The base model in fp32, as the engine held it: quantized and dequantized again for nf4."""
    import torch

    from kitchen.adapters.local.model.quantization import quantization_config

    auto_class = _auto_class(base_path)
    quantized = quantization_config(quantization, "cpu")
    if quantized is None:
        return auto_class.from_pretrained(base_path, dtype="float32")
    model = auto_class.from_pretrained(
        base_path, dtype="float32", quantization_config=quantized, device_map={"": "cpu"}
    )
    return model.dequantize(dtype=torch.float32)


def _tokenizer(base_path: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(base_path)
