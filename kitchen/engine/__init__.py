"""The generic machinery, no algorithm: graph, validation, rendering, the runner, stages, state,
futures, telemetry, plugin tables, recipes and errors."""
