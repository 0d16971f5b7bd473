"""Pieces every training workflow shares: where training starts (a base model, or a registered
model's weights), and how it ends (register the model)."""

from __future__ import annotations

import json
from typing import NamedTuple

from kitchen.engine.graph import Node
from kitchen.workflows.common.config import TrainConfig
from kitchen.workflows.common.register import RegisterModel
from kitchen.workflows.common.setup import InitTrainingClient


class StartPoint(NamedTuple):
    model_name: str  # the root model the backend loads
    load_checkpoint_path: str | None  # weights to load on top of it
    parent: str | None  # NAME:VERSION of the registered model this run starts from


def start_point(cfg: TrainConfig, load_checkpoint_path: str | None = None) -> StartPoint:
    """`--registered-model registry:NAME[:VERSION]` (or --base-model) resolves through the
    registry (a local read)."""
    if not cfg.registered_model:
        return StartPoint(cfg.model_name, load_checkpoint_path, None)
    from kitchen.engine.plugins import MODEL_REGISTRIES
    from kitchen.ports.model_registry import resolve_base_model

    found = resolve_base_model(cfg.registered_model, MODEL_REGISTRIES.get("default")(cfg.registry))
    return StartPoint(found.base_model, found.checkpoint_path, str(found.parent))


def init_training_client(cfg: TrainConfig, start: StartPoint) -> InitTrainingClient:
    """The policy's training client at the run's start point, with the config's LoRA rank,
    renderer and seed; with the model's image processor where the config's prompts carry images
    (`TrainConfig.takes_images`)."""
    return InitTrainingClient(
        start.model_name,
        lora_rank=cfg.lora_rank,
        renderer_name=cfg.renderer_name,
        seed=cfg.seed,
        load_checkpoint_path=start.load_checkpoint_path,
        images=cfg.takes_images,
    )


def registration_nodes(cfg: TrainConfig, recipe: str, start: StartPoint) -> list[Node]:
    """The run's last node, registering the model it trained: when register_model says so, or,
    left unset, unless the run is on the fake backend (a test oracle: its "model" must not sit in
    the registry beside real ones)."""
    register = cfg.register_model if cfg.register_model is not None else cfg.backend != "fake"
    if not register:
        return []
    config = json.loads(cfg.model_dump_json())
    return [
        RegisterModel(
            model_name=cfg.registry_name or recipe,
            base_model=start.model_name,
            recipe=recipe,
            config=config,
            parent=start.parent,
        )
    ]
