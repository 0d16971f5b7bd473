"""The model room of the local engine: where a model's files are (`locate.py`, the built-in tiny
models, GGUF), how it loads and is held in memory (`host.py`, `settings.py`), and what shapes its
forward (attention kernels, LoRA, 4-bit weights, context extension, images, the vocabulary head).
It imports nothing else of the engine: the training pass, sampling and the clients build on it."""
