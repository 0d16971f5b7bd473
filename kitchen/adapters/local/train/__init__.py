"""The training pass of the local engine: a call's data as micro-batches (`batching.py`), the
pass over them (`forward.py`) with the target logprobs (`logprobs.py`), the loss it names
(`loss_fns.py`), what it holds in memory (`memory.py`), each rank's share of it (`deal.py`), and
the optimizer step (`optimizer.py`). It builds on the model room alone: never on sampling, the
clients or the ranks (`Deal` reads them through a protocol)."""
