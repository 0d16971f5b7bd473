"""The local engine over several processes (`kitchen run RECIPE --nproc N`): torch.distributed.

`relaunch.py` relaunches the command under `torch.distributed.run`; `world.py` is a rank's view of
the group (the calls rank 0 sends, the base sharded with FSDP2, gradients summed); `commands.py`
types those calls; `ranked_executor.py` is the executor the backend picks at N > 1; `worker.py` is
what ranks > 0 run instead of the recipe. docs/distributed.md says what is sharded and what is not.
"""
