"""Sampling in the local engine: the running decode batch (`decode_batch.py`) and the one compute
thread that steps it between training calls (`compute_thread.py`), the sampling rules
(`sampling.py`) and a request's random numbers (`seed_stream.py`); its asked prompt logprobs
are checked by kitchen/ports/sample_request.py, shared with the fake. It builds on the model
room and the training pass's batching, never on the clients or the ranks."""
