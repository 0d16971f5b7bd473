"""The model and device options every bench script takes, so one command measures a CPU and a GPU.

    --model NAME_OR_PATH          a model the engine resolves (default: the script's own)
    --size test|135m|1b           instead: a random-weight Llama-shaped model of that size with
                                  SmolLM2's tokenizer (vocabulary 49152), built once into the
                                  kitchen cache (4.3 GB for 1b); random weights are enough for
                                  throughput, the token ids are fixed
    --tokenizer NAME_OR_PATH      where --size takes its tokenizer (default smollm2-135m)
    --device auto|cpu|cuda        where every side computes (auto: CUDA when torch sees one)

The 1b shape is Llama-3.2-1B's on SmolLM2's vocabulary (hidden 2048, 16 layers, GQA 32/8, MLP
8192): the model of the 2026-11-26 H100 measurements (docs/gpu.md).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

SHAPE = ["hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads"]
SHAPE += ["intermediate_size", "head_dim"]  # the LlamaConfig fields each size sets, in order
SIZES: dict[str, tuple[int, ...]] = {
    "1b": (2048, 16, 32, 8, 8192, 64),  # Llama-3.2-1B's shape
    "135m": (576, 30, 9, 3, 1536, 64),  # SmolLM2-135M's
    "test": (64, 2, 4, 2, 128, 16),
}


def add_model_options(parser: argparse.ArgumentParser, default_model: str) -> None:
    parser.add_argument(
        "--model", default=default_model, help="a name or folder the engine resolves"
    )
    parser.add_argument(
        "--size",
        choices=sorted(SIZES),
        help="a random-weight Llama-shaped model instead of --model",
    )
    parser.add_argument("--tokenizer", default="smollm2-135m", help="the tokenizer --size uses")
    parser.add_argument("--device", default="auto", help="auto | cpu | cuda[:N]")


def resolve_model_options(args: argparse.Namespace) -> None:
    """Turn --size into --model (a folder) and --device auto into the device it means, in place,
    so child processes get explicit values."""
    from kitchen.adapters.local.model.settings import resolve_device

    if args.size:
        args.model = str(random_llama(args.size, args.tokenizer))
        args.size = None
    args.device = resolve_device(args.device)


def random_llama(size: str, tokenizer: str) -> Path:
    """The folder of a random-weight (seed 0) Llama model of `size` with `tokenizer`'s files."""
    from kitchen.adapters.local.model.locate import build_once, models_dir, resolve_model

    tokenizer_folder = resolve_model(tokenizer)

    def build(folder: Path) -> None:
        import torch
        from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

        vocab = AutoTokenizer.from_pretrained(tokenizer_folder)
        shape: dict[str, Any] = dict(zip(SHAPE, SIZES[size], strict=True))
        config = LlamaConfig(
            vocab_size=len(vocab),
            max_position_embeddings=131072,  # long-context rows for bench/memory.py
            tie_word_embeddings=True,
            bos_token_id=1,
            eos_token_id=2,
            pad_token_id=2,
            rms_norm_eps=1e-5,
            rope_parameters={"rope_type": "default", "rope_theta": 100000.0},
            **shape,
        )
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            model: Any = LlamaForCausalLM(config)
        model.save_pretrained(folder)
        vocab.save_pretrained(folder)

    return build_once(models_dir() / f"bench-llama-{size}-{tokenizer_folder.name}", build)
