"""kitchen serve's catalog of model names behind the gateway: a base model's sampler is kept, a
checkpoint's only while a call holds it or among the most recently used, so naming each step's
checkpoint over a long run keeps the open samplers bounded."""

from __future__ import annotations

import asyncio
import gc
import weakref
from dataclasses import dataclass
from typing import Any

from kitchen.serve.gateway import Gateway
from kitchen.serve.openai.models import ModelCatalog


class Sampler:
    def get_tokenizer(self) -> Any:
        return None


@dataclass
class Entry:
    sampler: Any
    base_model: str


class Service:
    """The slice of KitchenService a catalog uses; counts the samplers it opens."""

    def __init__(self) -> None:
        self.opened: list[weakref.ref[Any]] = []

    def open_sampler(self, model_path: str | None, base_model: str | None) -> Entry:
        sampler = Sampler()
        self.opened.append(weakref.ref(sampler))
        return Entry(sampler, base_model or "kitchen/tiny-llama")

    def loaded_models(self) -> list[tuple[str, int]]:
        return []


def test_fifty_checkpoint_names_keep_at_most_the_kept_samplers_and_the_held_ones() -> None:
    service = Service()
    gateway = Gateway(catalog=ModelCatalog(service, kept_checkpoints=3))  # type: ignore[arg-type]

    async def run() -> None:
        base = await gateway.lease("kitchen/tiny-llama", None)
        held = await gateway.lease("tinker://run/sampler_weights/step-0", None)
        for step in range(1, 50):
            lease = await gateway.lease(f"tinker://run/sampler_weights/step-{step}", "ep")
            lease.release()
            lease.release()  # given back once, however often called
        again = await gateway.lease("tinker://run/sampler_weights/step-49", None)
        assert again.model.sampler is service.opened[-1]()  # still open: reused, not reopened
        # held: step-0 and step-49; idle: step-47 and step-48 (step-46 went when 49 was idle)
        assert len([n for n in gateway.names() if n.startswith("tinker://")]) == 4
        again.release()
        held.release()
        base.release()

    asyncio.run(run())
    gc.collect()
    open_now = [n for n in gateway.names() if n.startswith("tinker://")]
    assert len(open_now) == 3 and "tinker://run/sampler_weights/step-49" in open_now
    assert "kitchen/tiny-llama" in gateway.names()
    assert sum(r() is not None for r in service.opened) == 4  # the base and the 3 kept
