"""What a user touches: the CLI, launching a run, config overrides, the run directory, metric
sinks and progress."""
