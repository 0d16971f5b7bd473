"""The vocabulary of a --nproc N base, sharded by rows (distributed/sharded_base.py): no rank keeps
the embedding or the head whole, and the head, run by vocabulary blocks gathered from the ranks,
gives what one process gives, bit for bit, although the ranks' passes hold different numbers of
positions (the head's chunks run in step: TargetLogprobs(lockstep=True)).

One launch of two gloo ranks checks it all (each rank compares with a one-process copy of the
model it holds): a training call, a custom loss's backward, compute_logprobs on shared prefixes,
and a forward of the whole model (as the decode batch runs), with the head tied to the embedding
and untied."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.distributed.test_nproc import launches

ROOT = Path(__file__).resolve().parents[2]


@launches
def test_the_vocabulary_is_never_whole_and_the_head_equals_one_process():
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        "HF_HUB_OFFLINE": "1",
        "OMP_NUM_THREADS": "1",
        # MKL's products differ in their last bits with the alignment of their operands unless
        # asked not to (docs/distributed.md): the ranks compute from gathered blocks.
        "MKL_CBWR": "AUTO,STRICT",
    }
    launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    ran = subprocess.run(
        [*launcher, "--nproc-per-node=2", __file__],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert "rank-0-ok" in ran.stdout and "rank-1-ok" in ran.stdout, ran.stdout


def _rank() -> None:
    """One rank: every check, tied then untied."""
    import datetime

    import torch
    import torch.distributed as dist

    from kitchen.adapters.local.distributed.sharded_base import ShardedBase
    from kitchen.adapters.local.distributed.world import World
    from kitchen.adapters.local.model.host import ModelHost, load_host
    from kitchen.adapters.local.model.lora import LoraSpec, adapter_parameters, peft_config
    from kitchen.adapters.local.model.settings import EngineSettings
    from kitchen.adapters.local.train import logprobs
    from kitchen.adapters.local.train.deal import Deal
    from kitchen.ports import BackendSettings

    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    world = World(dist.get_rank(), dist.get_world_size())
    # 8 positions a chunk: the ranks' passes below hold 1 to 4 chunks of positions with a
    # gradient and 1 or 2 without.
    logprobs.LOGIT_CHUNK_TOKENS = 8
    settings = EngineSettings.from_backend_settings(BackendSettings())

    def host(tied: bool) -> ModelHost:
        loaded = load_host("kitchen/tiny-llama", settings)
        if not tied:
            head = loaded.base.get_output_embeddings()
            loaded.base.config.tie_word_embeddings = False
            head.weight = torch.nn.Parameter(head.weight.detach() * 1.5, requires_grad=False)
        return loaded

    def adapted(loaded: ModelHost) -> dict[str, Any]:
        loaded.add_adapter("a", peft_config(loaded.base, LoraSpec(rank=4)), seed=3)
        params = adapter_parameters(loaded.model, "a")
        with torch.no_grad():
            for p in params.values():
                p.add_(0.01)  # B starts at 0: the head's LoRA must count
        return params

    for tied in (True, False):
        one = host(tied)
        one.freeze()
        mine = host(tied)
        vocab = mine.base.get_input_embeddings().num_embeddings
        base = ShardedBase(mine.base, world.size)
        whole = [p for p in one.base.parameters() if p.shape[0] == vocab]
        assert len(whole) == (1 if tied else 2)  # one process holds them whole
        assert not [p for p in mine.base.parameters() if p.shape[0] >= vocab]
        params_one, params = adapted(one), adapted(mine)
        inputs = _inputs(vocab, world.leader)
        with one.use("a") as model:
            want = _calls(model, Deal(None, list(params_one.values())), *inputs)
        with mine.use("a") as model, base.call():
            got = _calls(model, Deal(world, list(params.values())), *inputs)
        # The call's metrics and logprobs and the scores are rank 0's; the rest every rank's.
        leaders = {0, 1, len(want) - 2}
        for i, (a, b) in enumerate(zip(want, got, strict=True)):
            if world.leader or i not in leaders:
                same = torch.equal(a, b) if isinstance(a, torch.Tensor) else a == b
                assert same, (tied, i, a, b)
    print(f"rank-{world.rank}-ok", flush=True)
    dist.destroy_process_group()


def _inputs(vocab: int, leader: bool) -> tuple[Any, ...]:
    """The same data on every rank: 3 datums that are micro-batches of their own (41 padded tokens
    at most), a custom loss's gradient for each, sequences with a shared prefix to score, and a
    forward's tokens (3 rows on rank 0, as the decode batch; one token on rank 1, as beside it)."""
    import numpy as np
    import torch
    from tinker import types

    rng = np.random.default_rng(0)
    lengths = [42, 24, 10]
    data = []
    for n in lengths:
        tokens = rng.integers(0, vocab, n)
        weights = (np.arange(n - 1) >= n // 3).astype(np.float32)  # a prompt, then trained
        data.append(
            types.Datum(
                model_input=types.ModelInput.from_ints(tokens[:-1].tolist()),
                loss_fn_inputs={"target_tokens": tokens[1:], "weights": weights},
            )
        )
    grads = [rng.standard_normal(n - 1).astype(np.float32) for n in lengths]
    prefix = rng.integers(0, vocab, 12).tolist()
    sequences = [prefix + rng.integers(0, vocab, n).tolist() for n in (3, 20, 9, 25)]
    ids = torch.from_numpy(rng.integers(0, vocab, (3, 7) if leader else (1, 1)))  # drawn last
    return data, grads, sequences, ids


def _calls(model: Any, deal: Any, data: Any, grads: Any, sequences: Any, ids: Any) -> list[Any]:
    """A training call's metrics, logprobs and gradients; a custom loss's gradients; the scores of
    `sequences`; the logits of a forward of `ids`."""
    import torch

    from kitchen.adapters.local.train.deal import Deal
    from kitchen.adapters.local.train.forward import (
        backprop_gradients,
        run_builtin_loss,
        score_sequences,
    )
    from kitchen.adapters.local.train.pass_settings import PassSettings

    out = run_builtin_loss(model, data, "cross_entropy", None, True, PassSettings(41, share=deal))
    got = [out.metrics, [o["logprobs"].tolist() for o in out.loss_fn_outputs]]
    got += [p.grad.clone() for p in deal.params]
    for p in deal.params:
        p.grad = None
    backprop_gradients(model, data, grads, PassSettings(41, share=deal))
    got += [p.grad.clone() for p in deal.params]
    scored = score_sequences(model, sequences, 41, share=Deal(deal.ranks, []))
    got += [None if scored is None else [s.tolist() for s in scored]]
    with torch.no_grad():
        return [*got, model(input_ids=ids).logits]


if __name__ == "__main__":
    _rank()
