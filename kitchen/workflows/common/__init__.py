"""What every paradigm shares: the base config and state, setup (training client, datasets),
checkpoints, evaluation, samples, and registering the finished model."""
