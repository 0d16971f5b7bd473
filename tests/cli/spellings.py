"""Today's spellings of config values, each with the field (its path) and the value it must set.
Recorded from `kitchen run RECIPE WORDS...` as main resolved them before resolve_config; the
fields renamed since are named here by their new path (register_model was no_register, inverted;
log_dir was log_path; registered_model was base_model)."""

from __future__ import annotations

from typing import Any

# (recipe, command-line words, {path: value})
FLAGS: list[tuple[str, list[str], dict[str, Any]]] = [
    # a top-level field: flag, flag=value, key=value, short flag, crucible_kitchen's alias
    ("sl_basic", ["--batch-size", "4"], {"batch_size": 4}),
    ("sl_basic", ["--batch-size=4"], {"batch_size": 4}),
    ("sl_basic", ["batch_size=4"], {"batch_size": 4}),
    ("sl_basic", ["-b", "4"], {"batch_size": 4}),
    ("sl_basic", ["-m", "kitchen/tiny-qwen"], {"model_name": "kitchen/tiny-qwen"}),
    ("sl_basic", ["--model", "kitchen/tiny-qwen"], {"model_name": "kitchen/tiny-qwen"}),
    ("sl_basic", ["model=kitchen/tiny-qwen"], {"model_name": "kitchen/tiny-qwen"}),
    ("sl_basic", ["--model-name", "kitchen/tiny-qwen"], {"model_name": "kitchen/tiny-qwen"}),
    ("sl_basic", ["-d", "bundled:prefs"], {"dataset": "bundled:prefs"}),
    ("sl_basic", ["-e", "3"], {"num_epochs": 3}),
    ("sl_basic", ["--epochs", "3"], {"num_epochs": 3}),
    ("sl_basic", ["epochs=3"], {"num_epochs": 3}),
    ("sl_basic", ["--num-epochs=3"], {"num_epochs": 3}),
    ("sl_basic", ["-r", "8"], {"lora_rank": 8}),
    ("sl_basic", ["--seed", "7"], {"seed": 7}),
    ("sl_basic", ["--dtype", "bfloat16"], {"dtype": "bfloat16"}),
    ("sl_basic", ["--backend", "fake"], {"backend": "fake"}),
    ("sl_basic", ["--test-dataset", "none"], {"test_dataset": None}),
    ("sl_basic", ["test_dataset=null"], {"test_dataset": None}),
    # booleans
    ("sl_basic", ["--eval-labels"], {"eval_labels": True}),
    ("sl_basic", ["--eval-labels", "true"], {"eval_labels": True}),
    ("sl_basic", ["--eval-labels=false"], {"eval_labels": False}),
    ("sl_basic", ["--no-eval-labels"], {"eval_labels": False}),
    ("sl_basic", ["eval_labels=true"], {"eval_labels": True}),
    # a section's field: its flag (flat name), its path, a short flag
    ("sl_basic", ["--learning-rate", "3e-4"], {"optimizer.learning_rate": 3e-4}),
    ("sl_basic", ["-l", "3e-4"], {"optimizer.learning_rate": 3e-4}),
    ("sl_basic", ["learning_rate=3e-4"], {"optimizer.learning_rate": 3e-4}),
    ("sl_basic", ["optimizer.learning_rate=3e-4"], {"optimizer.learning_rate": 3e-4}),
    ("sl_basic", ["--lr-schedule", "cosine"], {"optimizer.schedule": "cosine"}),
    ("sl_basic", ["lr_schedule=cosine"], {"optimizer.schedule": "cosine"}),
    ("sl_basic", ["optimizer.schedule=cosine"], {"optimizer.schedule": "cosine"}),
    ("sl_basic", ["--lr-schedule", "warmup_linear"],
     {"optimizer.schedule": "linear", "optimizer.warmup_steps": 10}),
    ("sl_basic", ["--adam-beta1", "0.8"], {"optimizer.beta1": 0.8}),
    ("sl_basic", ["adam_beta1=0.8"], {"optimizer.beta1": 0.8}),
    ("sl_basic", ["optimizer.beta1=0.8"], {"optimizer.beta1": 0.8}),
    ("sl_basic", ["--eval-every", "3"], {"evaluation.every": 3}),
    ("sl_basic", ["--eval-every=3"], {"evaluation.every": 3}),
    ("sl_basic", ["eval_every=3"], {"evaluation.every": 3}),
    ("sl_basic", ["evaluation.every=3"], {"evaluation.every": 3}),
    ("sl_basic", ["--save-every", "3"], {"checkpoint.save_every": 3}),
    ("sl_basic", ["checkpoint.save_every=3"], {"checkpoint.save_every": 3}),
    ("sl_basic", ["--load-checkpoint-path", "/ckpt"], {"checkpoint.load_path": "/ckpt"}),
    ("sl_basic", ["checkpoint.load_path=/ckpt"], {"checkpoint.load_path": "/ckpt"}),
    ("sl_basic", ["load_checkpoint_path=/ckpt"], {"checkpoint.load_path": "/ckpt"}),
    # renamed fields: the old spellings still set them
    ("sl_basic", ["--no-register"], {"register_model": False}),
    ("sl_basic", ["--no-register", "true"], {"register_model": False}),
    ("sl_basic", ["--no-register=false"], {"register_model": True}),
    ("sl_basic", ["no_register=true"], {"register_model": False}),
    ("sl_basic", ["no_register=false"], {"register_model": True}),
    ("sl_basic", ["--log-path", "runs/x"], {"log_dir": "runs/x"}),
    ("sl_basic", ["log_path=runs/x"], {"log_dir": "runs/x"}),
    ("sl_basic", ["--base-model", "registry:m"], {"registered_model": "registry:m"}),
    ("sl_basic", ["base_model=registry:m"], {"registered_model": "registry:m"}),
    # recipe fields and other sections
    ("dpo", ["--dpo-beta", "0.2"], {"dpo_beta": 0.2}),
    ("dpo", ["dpo_beta=0.2"], {"dpo_beta": 0.2}),
    ("dpo", ["--reference-model", "m"], {"reference_model_name": "m"}),
    ("dpo", ["reference_model=m"], {"reference_model_name": "m"}),
    ("dpo", ["--reference-model-name", "m"], {"reference_model_name": "m"}),
    ("rl_basic", ["--kl-penalty-coef", "0.1"], {"kl.penalty_coef": 0.1}),
    ("rl_basic", ["kl_penalty_coef=0.1"], {"kl.penalty_coef": 0.1}),
    ("rl_basic", ["kl.penalty_coef=0.1"], {"kl.penalty_coef": 0.1}),
    ("rl_basic", ["--kl-reference-model", "m"], {"kl.reference_model": "m"}),
    ("rl_basic", ["--eval-temperature", "0.5"], {"evaluation.temperature": 0.5}),
    ("rl_basic", ["evaluation.temperature=0.5"], {"evaluation.temperature": 0.5}),
    ("rl_basic", ["--num-rollouts", "3"], {"num_batches": 3}),
    ("rl_basic", ["num_rollouts=3"], {"num_batches": 3}),
    ("rl_basic", ["--num-batches", "3"], {"num_batches": 3}),
    ("rl_basic", ["--loss-fn", "ppo", "loss_fn_config.clip_low_threshold=0.8",
                  "loss_fn_config.clip_high_threshold=1.2"],
     {"loss_fn": "ppo", "loss_fn_config": {"clip_low_threshold": 0.8, "clip_high_threshold": 1.2}}),
    ("rl_basic", ["--loss-fn-config", '{"beta": 0.5}'], {"loss_fn_config": {"beta": 0.5}}),
    ("rl_basic", ["--coalesce-samples", "false"], {"coalesce_samples": False}),
]  # fmt: skip

# kitchen.run(recipe, VALUES): the names Python callers and tests pass today
PYTHON: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    ("sl_basic", {"no_register": True}, {"register_model": False}),
    ("sl_basic", {"log_path": "runs/x"}, {"log_dir": "runs/x"}),
    ("sl_basic", {"base_model": "registry:m"}, {"registered_model": "registry:m"}),
    ("sl_basic", {"eval_every": 2}, {"evaluation.every": 2}),
    ("sl_basic", {"evaluation": {"every": 2}}, {"evaluation.every": 2}),
    ("sl_basic", {"evaluation.every": 2}, {"evaluation.every": 2}),
    ("sl_basic", {"optimizer": {"beta2": 0.9}},
     {"optimizer.beta2": 0.9, "optimizer.learning_rate": 2e-4}),
    ("sl_basic", {"learning_rate": 3e-4, "adam_beta1": 0.8},
     {"optimizer.learning_rate": 3e-4, "optimizer.beta1": 0.8}),
    ("sl_basic", {"model": "kitchen/tiny-qwen", "epochs": 2},
     {"model_name": "kitchen/tiny-qwen", "num_epochs": 2}),
    ("dpo", {"reference_model": "m"}, {"reference_model_name": "m"}),
    ("rl_basic", {"kl": {"penalty_coef": 0.1}, "num_rollouts": 2},
     {"kl.penalty_coef": 0.1, "num_batches": 2}),
]  # fmt: skip

# --config FILE (TOML): (recipe, file text, {path: value})
FILES: list[tuple[str, str, dict[str, Any]]] = [
    ("sl_basic", "eval_every = 3\nno_register = true\nlog_path = 'runs/x'\n",
     {"evaluation.every": 3, "register_model": False, "log_dir": "runs/x"}),
    ("sl_basic", "[evaluation]\nevery = 3\n[optimizer]\nbeta1 = 0.8\n",
     {"evaluation.every": 3, "optimizer.beta1": 0.8}),
    ("sl_basic", "'optimizer.learning_rate' = 3e-4\nepochs = 2\n",
     {"optimizer.learning_rate": 3e-4, "num_epochs": 2}),
]  # fmt: skip
