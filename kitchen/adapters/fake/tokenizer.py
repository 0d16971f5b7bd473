"""A byte-level tokenizer with ChatML and Llama-3 special tokens, in pure Python: what the fake
backend hands to renderers so workflow tests need neither transformers nor model files."""

from __future__ import annotations

import re

# The tiny models' special tokens, so a renderer sees the same markers on the fake as on them.
# Qwen3-VL's vision markers too, special tokens as in the tiny VLM's vocabulary, so the qwen3_vl
# renderers frame an image on the fake as they do on it.
from kitchen.adapters.local.model.tiny import VISION_TOKENS
from kitchen.adapters.local.model.tiny_tokenizer import SPECIAL_TOKENS


class FakeTokenizer:
    """ids 0-255 are bytes; special tokens follow."""

    name_or_path = "kitchen/fake"

    def __init__(self) -> None:
        specials = [*SPECIAL_TOKENS, *VISION_TOKENS]
        self.special_ids = {tok: 256 + i for i, tok in enumerate(specials)}
        self.id_to_special = {i: t for t, i in self.special_ids.items()}
        self._split = re.compile("(" + "|".join(re.escape(t) for t in specials) + ")")
        self.eos_token = "<|im_end|>"
        self.eos_token_id = self.special_ids[self.eos_token]
        self.bos_token = "<|begin_of_text|>"
        self.bos_token_id = self.special_ids[self.bos_token]
        self.pad_token_id = self.special_ids["<|endoftext|>"]
        self.vocab_size = 256 + len(specials)

    def __len__(self) -> int:
        return self.vocab_size

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        ids: list[int] = [self.bos_token_id] if add_special_tokens else []
        for piece in self._split.split(text):
            if piece in self.special_ids:
                ids.append(self.special_ids[piece])
            elif piece:
                ids.extend(piece.encode("utf-8"))
        return ids

    def decode(self, ids: list[int] | int, skip_special_tokens: bool = False) -> str:
        if isinstance(ids, int):
            ids = [ids]
        out, buf = [], bytearray()
        for i in ids:
            if i < 256:
                buf.append(i)
                continue
            out.append(buf.decode("utf-8", errors="replace"))
            buf = bytearray()
            if not skip_special_tokens:
                out.append(self.id_to_special.get(i, ""))
        out.append(buf.decode("utf-8", errors="replace"))
        return "".join(out)

    def convert_tokens_to_ids(self, token: str) -> int:
        return self.special_ids[token]

    def get_vocab(self) -> dict[str, int]:
        vocab = {bytes([i]).decode("latin-1"): i for i in range(256)}
        vocab.update(self.special_ids)
        return vocab
