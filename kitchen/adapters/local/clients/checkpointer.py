"""A training client's saved weights: its save_state and save_weights_for_sampler folders
(checkpoints.py is their format), the state it loads back, and the in-memory snapshots its
samplers read. The client builds one and hands it those calls; ranks > 0 call it by command when
full fine-tuning's weights are shards."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tinker import types

from kitchen.adapters.local.clients import checkpoints as ckpt
from kitchen.adapters.local.distributed.commands import (
    GatherWeights,
    LoadState,
    SaveSharded,
    TakeSnapshot,
)
from kitchen.adapters.local.model.host import LoraSnapshot
from kitchen.adapters.local.model.lora import (
    adapter_parameters,
    load_adapter_weights,
    snapshot_adapter,
)
from kitchen.engine.errors import BackendError

if TYPE_CHECKING:
    from kitchen.adapters.local.clients.engine import Engine
    from kitchen.adapters.local.clients.executor import Executor
    from kitchen.adapters.local.clients.sampling_client import LocalSamplingClient
    from kitchen.adapters.local.model.host import ModelHost
    from kitchen.adapters.local.model.lora import LoraSpec
    from kitchen.adapters.local.train.optimizer import AdamState


@dataclass(eq=False)
class Checkpointer:
    """The checkpoints of client `model_id`: `host`'s weights (its `adapter`'s, of `peft_config`;
    None: full fine-tuning's whole model) and `adam`'s state, as `lora` and `seed` made them."""

    engine: Engine
    host: ModelHost
    adapter: str | None
    peft_config: Any  # the adapter's (peft's LoraConfig); None for full fine-tuning
    lora: LoraSpec | None
    seed: int
    model_id: str
    adam: AdamState

    @property
    def ranks(self) -> Executor:
        return self.engine.ranks

    @property
    def sharded_full(self) -> bool:
        """Full fine-tuning at N > 1: the weights and the optimizer state are FSDP's shards."""
        return self.adapter is None and self.host.sharded

    def save_state(self, name: str) -> types.SaveWeightsResponse:
        def fill(folder: Path) -> None:
            if self.sharded_full:
                self.save_sharded(str(folder))
            else:
                self._write_weights(folder)
                ckpt.save_optimizer(folder, self.adam.optimizer)
            self._meta("state").write(folder)

        dest = ckpt.checkpoint_folder(self.engine.settings.checkpoint_root, "state", name)
        return types.SaveWeightsResponse(path=str(ckpt.write_folder(dest, fill)))

    def save_sharded(self, folder: str) -> None:
        """Every rank: the weights' and the optimizer's shards to `folder`/SHARDED_DIR
        (torch.distributed.checkpoint), and the whole weights gathered into the file one process
        writes, by rank 0 (full fine-tuning at N > 1; `folder` is rank 0's, not yet in place)."""
        self.ranks.tell(SaveSharded(self.model_id, folder))
        from kitchen.adapters.local.distributed import sharded_model

        with self.host.lock:
            weights = sharded_model.whole_weights(self.host.base)
            if self.ranks.leader:
                twins = sharded_model.tied_twins(self.host.base)
                ckpt.save_full_tensors(
                    Path(folder), {k: v for k, v in weights.items() if k not in twins}
                )
            del weights
            sharded_model.save_sharded(
                Path(folder) / ckpt.SHARDED_DIR, self.host.base, self.adam.optimizer
            )

    def load_state(self, path: str, with_optimizer: bool) -> types.LoadWeightsResponse:
        self.ranks.tell(LoadState(self.model_id, path, with_optimizer))
        folder = ckpt.parse_checkpoint_path(path)
        meta = ckpt.read_meta(folder)
        if meta.kind != "state":
            raise BackendError(
                f"checkpoint {folder} holds sampler weights; load_state needs a save_state folder"
            )
        mine = self.lora.to_dict() if self.lora else None
        if meta.lora != mine:
            raise BackendError(
                f"checkpoint {folder} was saved with LoRA {meta.lora}; this client has {mine}"
            )
        with self.host.lock:
            self.adam.optimizer.zero_grad(set_to_none=True)
            if not with_optimizer:
                self.adam.restart()
            if self.adapter is not None:
                load_adapter_weights(
                    self.host.model, self.adapter, ckpt.load_lora_tensors(folder, self.host.device)
                )
                if with_optimizer:
                    ckpt.load_optimizer(folder, self.adam.optimizer)
            else:
                self._load_full(folder, with_optimizer)
            if with_optimizer:
                self.adam.step = meta.step
        return types.LoadWeightsResponse(path=str(folder), model_id=self.model_id)

    def save_sampler(self, name: str) -> types.SaveWeightsForSamplerResponse:
        def fill(folder: Path) -> None:
            if self.adapter is not None:
                self._write_weights(folder)
            elif self.sharded_full:  # gathered on rank 0, the folder one process writes
                self.engine.host_with(self.host, self.whole_weights()).base.save_pretrained(folder)
            else:
                with self.host.lock:
                    self.host.base.save_pretrained(folder)
            if self.adapter is None:
                self.host.tokenizer.save_pretrained(folder)
            self._meta("sampler").write(folder)

        dest = ckpt.checkpoint_folder(self.engine.settings.checkpoint_root, "sampler", name)
        return types.SaveWeightsForSamplerResponse(path=str(ckpt.write_folder(dest, fill)))

    def sampler(self) -> LocalSamplingClient:
        """A sampler on an in-memory copy of the weights as they are now."""
        if self.adapter is not None:
            snapshot = self.snapshot()
            # every rank samples from it (its copy of the same weights)
            self.ranks.share(snapshot, TakeSnapshot(self.model_id, snapshot.snapshot_id))
            return self.engine.sampling_client_for(self.host, snapshot)
        if self.sharded_full:
            # Rank 0 holds the weights whole and samples alone, as one process does.
            copy = self.engine.host_with(self.host, self.whole_weights())
        else:
            copy = self.engine.copy_host(self.host)
        return self.engine.sampling_client_for(copy, None)

    def snapshot(self, snapshot_id: int | None = None) -> LoraSnapshot:
        """A copy of the adapter's weights as they are now (`snapshot_id`: rank 0's, world.py)."""
        assert self.adapter is not None
        with self.host.lock:
            tensors = snapshot_adapter(self.host.model, self.adapter)
        return LoraSnapshot.of(self.peft_config, tensors, snapshot_id)

    def whole_weights(self) -> dict[str, Any]:
        """Every rank (full fine-tuning at N > 1): the whole weights on rank 0's CPU, gathered one
        at a time (empty elsewhere)."""
        self.ranks.tell(GatherWeights(self.model_id))
        from kitchen.adapters.local.distributed.sharded_model import whole_weights

        with self.host.lock:
            return whole_weights(self.host.base)

    def _meta(self, kind: str) -> ckpt.CheckpointMeta:
        return ckpt.CheckpointMeta(
            kind=kind,
            base_model=self.host.model_name,
            model_path=str(self.host.model_path),
            lora=self.lora.to_dict() if self.lora else None,
            seed=self.seed,
            step=self.adam.step,
            world_size=self.ranks.size,
            base_quantization=self.host.quantization,
        )

    def _write_weights(self, folder: Path) -> None:
        with self.host.lock:
            if self.adapter is not None:
                tensors = adapter_parameters(self.host.model, self.adapter)
                ckpt.save_lora(folder, tensors, self.peft_config, str(self.host.model_path))
            else:
                ckpt.save_full_state(folder, self.host.base)

    def _load_full(self, folder: Path, with_optimizer: bool) -> None:
        """Full fine-tuning's weights (and optimizer state) from a folder written at any N: its
        shards (torch.distributed.checkpoint reshards them for this N), else one process's files."""
        from kitchen.adapters.local.distributed import sharded_model

        model, optimizer = self.host.base, self.adam.optimizer if with_optimizer else None
        if (folder / ckpt.SHARDED_DIR).is_dir():
            sharded_model.load_sharded(folder / ckpt.SHARDED_DIR, model, optimizer)
        elif not self.sharded_full:
            ckpt.load_full_state(folder, model)
            if optimizer is not None:
                ckpt.load_optimizer(folder, optimizer)
        else:  # one process's files, read whole by every rank into its shards
            sharded_model.set_whole_weights(model, ckpt.load_full_tensors(folder))
            if optimizer is not None:
                sharded_model.set_whole_optimizer(model, optimizer, ckpt.read_optimizer(folder))
