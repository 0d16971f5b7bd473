"""Regenerate the committed tokenizer files of the built-in tiny models.

    .venv/bin/python scripts/make_tiny_models.py

Writes kitchen/adapters/local/model/tiny/{tokenizer.json,chat_templates.json}. The tiny model weights are
not committed: they are generated deterministically (fixed seed) into the user cache on first use.
"""

from __future__ import annotations

from pathlib import Path

from kitchen.adapters.local.model.tiny_tokenizer import write_tiny_tokenizer_files

if __name__ == "__main__":
    folder = (
        Path(__file__).resolve().parent.parent / "kitchen" / "adapters" / "local" / "model" / "tiny"
    )
    write_tiny_tokenizer_files(folder)
    print(f"wrote {folder}/tokenizer.json and chat_templates.json")
