"""Sampling in the local engine: the running decode batch (`decode_batch.py`) and the one compute
thread that steps it between training calls (`compute_thread.py`), the sampling rules
(`sampling.py`), a request's random numbers (`seed_stream.py`) and its asked prompt logprobs
(`target_logprobs.py`). It builds on the model room and the training pass's batching, never on
the clients or the ranks."""
