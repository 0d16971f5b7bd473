"""Built-in tiny models (`kitchen/tiny-*`): a Llama-style and a Qwen2-style decoder of about a million
parameters, and a Qwen3-VL vision-language model of 288 thousand, initialised from a fixed
seed, with the committed tiny tokenizer. They exist for tests and the fastest demo: loading one
takes a fraction of a second and a training step milliseconds.

The VLM (`kitchen/tiny-qwen3-vl`) is Qwen3-VL's architecture at toy size: a 2-block vision tower
(16-pixel patches, 2x2 merge, deepstack), a 2-layer text decoder with multimodal RoPE, Qwen3-VL's
image processor (images resized to 32-pixel multiples, 1 to 16 tokens each) and the tokenizer with
Qwen3-VL's vision tokens appended, so Kitchen's qwen3_vl renderers produce its inputs.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TINY_DIR = Path(__file__).resolve().parent / "tiny"
TINY_SEED = 1234
MAX_CONTEXT = 2048
# The token each chat template starts a sequence with (None: none) and ends a reply with.
TEMPLATE_TOKENS: dict[str, tuple[str | None, str]] = {
    "llama3": ("<|begin_of_text|>", "<|eot_id|>"),
    "chatml": (None, "<|im_end|>"),
    "qwen3_vl": (None, "<|im_end|>"),
}


@dataclass(frozen=True)
class TinySpec:
    """Architecture and chat format of one built-in tiny model."""

    name: str
    arch: str  # "llama" | "qwen2" | "qwen3_vl"
    chat_template: str  # key of chat_templates.json and of TEMPLATE_TOKENS
    hidden_size: int = 128
    intermediate_size: int = 384
    num_layers: int = 4
    num_heads: int = 4
    num_kv_heads: int = 2
    version: int = (
        1  # bump when the spec changes, so caches built from an older spec are not reused
    )

    @property
    def bos_token(self) -> str | None:
        return TEMPLATE_TOKENS[self.chat_template][0]

    @property
    def eos_token(self) -> str:
        return TEMPLATE_TOKENS[self.chat_template][1]

    @property
    def folder(self) -> str:
        """Cache folder name; it changes with the spec version and the committed tokenizer, so a
        regenerated tokenizer never meets weights built for an older vocabulary."""
        digest = hashlib.sha256((TINY_DIR / "tokenizer.json").read_bytes()).hexdigest()[:8]
        return f"{self.name.replace('/', '--')}-v{self.version}-{digest}"


TINY_MODELS: dict[str, TinySpec] = {
    spec.name: spec
    for spec in (
        TinySpec(name="kitchen/tiny-llama", arch="llama", chat_template="llama3"),
        TinySpec(name="kitchen/tiny-qwen", arch="qwen2", chat_template="chatml"),
        TinySpec(
            name="kitchen/tiny-qwen3-vl",
            arch="qwen3_vl",
            chat_template="qwen3_vl",
            hidden_size=64,
            intermediate_size=128,
            num_layers=2,
        ),
    )
}

# Qwen3-VL's vision tokens, appended to the tiny vocabulary (in this order) for the VLM.
VISION_TOKENS = ("<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>")
# The tiny VLM's image processor: Qwen3-VL's patching, images scaled to 32^2..128^2 pixels.
TINY_IMAGE_PROCESSOR: dict[str, Any] = dict(
    patch_size=16,
    merge_size=2,
    temporal_patch_size=2,
    size={"shortest_edge": 32 * 32, "longest_edge": 128 * 128},
)


def tiny_config(spec: TinySpec, token_ids: dict[str, int]) -> Any:
    """The transformers config of `spec` (ids of bos/eos/pad taken from the tiny tokenizer)."""
    from transformers import LlamaConfig, Qwen2Config, Qwen3VLConfig

    eos_ids = [token_ids[t] for t in (spec.eos_token, "<|im_end|>", "<|eot_id|>", "<|endoftext|>")]
    common: dict[str, Any] = dict(
        vocab_size=len(token_ids),
        hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.num_layers,
        num_attention_heads=spec.num_heads,
        num_key_value_heads=spec.num_kv_heads,
        max_position_embeddings=MAX_CONTEXT,
        rms_norm_eps=1e-5,
        tie_word_embeddings=True,
        bos_token_id=token_ids[spec.bos_token] if spec.bos_token else None,
        eos_token_id=list(dict.fromkeys(eos_ids)),
        pad_token_id=token_ids["<|pad|>"],
    )
    if spec.arch == "llama":
        return LlamaConfig(**common)
    if spec.arch == "qwen2":
        return Qwen2Config(**common)
    if spec.arch == "qwen3_vl":
        head_dim = spec.hidden_size // spec.num_heads
        text = dict(
            common,
            head_dim=head_dim,
            # M-RoPE: the rotary half-dimensions given to time, height and width.
            rope_parameters={
                "rope_type": "default",
                "rope_theta": 10000.0,
                "mrope_section": [head_dim // 4, head_dim // 8, head_dim // 8],
                "mrope_interleaved": True,
            },
        )
        vision = dict(
            depth=2,
            hidden_size=32,
            intermediate_size=64,
            num_heads=2,
            patch_size=TINY_IMAGE_PROCESSOR["patch_size"],
            spatial_merge_size=TINY_IMAGE_PROCESSOR["merge_size"],
            temporal_patch_size=TINY_IMAGE_PROCESSOR["temporal_patch_size"],
            out_hidden_size=spec.hidden_size,
            num_position_embeddings=64,  # an 8x8 grid of learned positions, interpolated
            deepstack_visual_indexes=[0],
        )
        start, end, image, video = (token_ids[t] for t in VISION_TOKENS)
        return Qwen3VLConfig(
            text_config=text,
            vision_config=vision,
            image_token_id=image,
            video_token_id=video,
            vision_start_token_id=start,
            vision_end_token_id=end,
            tie_word_embeddings=True,
        )
    raise ValueError(f"tiny model {spec.name}: unknown arch {spec.arch!r}")


def build_tiny_model(spec: TinySpec, folder: Path) -> None:
    """Write model weights (seeded init), config and tokenizer of `spec` into `folder`."""
    import torch
    from transformers import AutoModelForCausalLM, AutoModelForImageTextToText
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    vocab = tiny_vocabulary(spec)
    token_ids: dict[str, int] = dict(vocab["model"]["vocab"])
    token_ids.update({t["content"]: t["id"] for t in vocab["added_tokens"]})
    config = tiny_config(spec, token_ids)
    auto = AutoModelForImageTextToText if spec.arch == "qwen3_vl" else AutoModelForCausalLM
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(TINY_SEED)
        model = auto.from_config(config, dtype=torch.float32)
    model.save_pretrained(folder)
    write_tiny_tokenizer(spec, folder)
    if spec.arch == "qwen3_vl":
        from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import (
            Qwen2VLImageProcessorPil,
        )

        Qwen2VLImageProcessorPil(**TINY_IMAGE_PROCESSOR).save_pretrained(folder)


def tiny_vocabulary(spec: TinySpec) -> dict[str, Any]:
    """The committed tokenizer's JSON; a VLM's has VISION_TOKENS appended as special tokens."""
    vocab: dict[str, Any] = json.loads((TINY_DIR / "tokenizer.json").read_text())
    if spec.arch == "qwen3_vl":
        first = len(vocab["model"]["vocab"])
        vocab["added_tokens"] += [
            {
                "id": first + i,
                "content": token,
                "single_word": False,
                "lstrip": False,
                "rstrip": False,
                "normalized": False,
                "special": True,
            }
            for i, token in enumerate(VISION_TOKENS)
        ]
    return vocab


def write_tiny_tokenizer(spec: TinySpec, folder: Path) -> None:
    """Write the tiny tokenizer and a tokenizer config with this model's chat format."""
    (folder / "tokenizer.json").write_text(json.dumps(tiny_vocabulary(spec), ensure_ascii=False))
    templates = json.loads((TINY_DIR / "chat_templates.json").read_text())
    tokenizer_config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": spec.bos_token,
        "eos_token": spec.eos_token,
        "pad_token": "<|pad|>",
        "model_max_length": MAX_CONTEXT,
        "clean_up_tokenization_spaces": False,
        "add_bos_token": False,
        "chat_template": templates[spec.chat_template],
    }
    (folder / "tokenizer_config.json").write_text(json.dumps(tokenizer_config, indent=2) + "\n")
