"""An offline Hugging Face hub cache holding Kitchen's tiny models under the model names
tinker-cookbook asks for, so its tokenizer lookups and `kitchen serve`'s model loads both find them
with HF_HUB_OFFLINE=1 (the cache layout huggingface_hub reads: refs/main -> snapshots/<rev>/)."""

from __future__ import annotations

from pathlib import Path

from tests.helpers import place_in_hub_cache

# Cookbook name -> the tiny model whose chat format its renderer writes. Llama 3 names also load
# their tokenizer from thinkingmachineslabinc/meta-llama-3-instruct-tokenizer (tokenizer_utils).
LLAMA = "meta-llama/Llama-3.2-1B"
QWEN = "Qwen/Qwen3-4B-Instruct-2507"
MODELS = {
    LLAMA: "kitchen/tiny-llama",
    "thinkingmachineslabinc/meta-llama-3-instruct-tokenizer": "kitchen/tiny-llama",
    QWEN: "kitchen/tiny-qwen",
}


def build_hub_cache(hf_home: Path) -> Path:
    """Write every MODELS entry into `hf_home`/hub; returns `hf_home`."""
    for repo_id, tiny in MODELS.items():
        place_in_hub_cache(hf_home / "hub", repo_id, tiny)
    return hf_home
