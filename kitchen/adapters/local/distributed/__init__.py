"""The local engine over several processes (`kitchen run RECIPE --nproc N`): torch.distributed.

`relaunch.py` relaunches the command under `torch.distributed.run`; `world.py` is a rank's view of
the group (the calls rank 0 sends, the base sharded with FSDP2, gradients summed); `worker.py` is
what ranks > 0 run instead of the recipe. docs/distributed.md says what is sharded and what is not.
"""
