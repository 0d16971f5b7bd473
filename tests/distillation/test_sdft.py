"""sdft: the plan, the cookbook preset and demonstration template, and a 2-step run on tiny-llama
where the frozen base, shown the golden answer, supplies [N, K] targets for the student's own
samples, and the held-out teacher-student cross-entropy is measured before and after."""

from __future__ import annotations

import math

import pytest
from typer.testing import CliRunner

from cookbook.recipes.sdft import demonstrations
from kitchen.app.cli import app
from kitchen.app.launch import run
from kitchen.app.resolve import get_recipe, resolve_config
from kitchen.engine.errors import DataError
from train_core.distillation.sdft import DEFAULT_DEMO_TEMPLATE


def test_dry_run_plans_teacher_targets_then_a_soft_target_step() -> None:
    result = CliRunner().invoke(app, ["run", "sdft", "--dry-run", "topk=5"], terminal_width=300)
    assert result.exit_code == 0, result.output
    plan = result.output
    assert "sdft_targets(topk=5" in plan and "soft_target_step(" in plan
    assert plan.index("do_rollouts") < plan.index("sdft_targets") < plan.index("soft_target_step")
    assert "TeacherSpec(model='HuggingFaceTB/SmolLM2-135M-Instruct'" in plan  # its own base


def test_cookbook_preset_and_template_are_the_cookbooks() -> None:
    cookbook_sdft = pytest.importorskip("tinker_cookbook.distillation.sdft")
    assert DEFAULT_DEMO_TEMPLATE == cookbook_sdft.DEFAULT_DEMO_TEMPLATE
    cfg = resolve_config(get_recipe("sdft"), preset="cookbook").config
    assert (cfg.model_name, cfg.lora_rank, cfg.group_size, cfg.groups_per_batch) == (
        "Qwen/Qwen3-8B", 128, 1, 32,
    )  # fmt: skip
    assert (cfg.optimizer.learning_rate, cfg.max_tokens, cfg.topk, cfg.max_context_length) == (
        2e-5, 2048, 20, 32768,
    )  # fmt: skip


def test_demonstrations_pair_the_first_question_with_its_reply() -> None:
    rows = [
        {"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "q"},
                      {"role": "assistant", "content": "a"}, {"role": "user", "content": "q2"}]},
        {"messages": [{"role": "user", "content": "alone"}]},
    ]  # fmt: skip
    assert demonstrations(rows, "x.jsonl") == [("q", "a")]
    with pytest.raises(DataError, match=r"x\.jsonl"):
        demonstrations(rows[1:], "x.jsonl")


@pytest.mark.slow
def test_two_steps_on_tiny_llama_distil_the_demonstration_prompted_base(
    tmp_path, monkeypatch
) -> None:
    from kitchen.adapters.local.clients.sampling_client import LocalSamplingClient
    from kitchen.adapters.local.clients.training_client import LocalTrainingClient

    teacher_prompts: list[str] = []
    shapes: list[tuple[int, ...]] = []
    sample, forward_backward = LocalSamplingClient.sample, LocalTrainingClient.forward_backward

    def recording_sample(self, prompt, *args, **kwargs):
        if kwargs.get("topk_prompt_logprobs"):
            teacher_prompts.append(self.get_tokenizer().decode(prompt.to_ints()))
        return sample(self, prompt, *args, **kwargs)

    def recording_fb(self, data, loss_fn, *args, **kwargs):
        assert loss_fn == "cross_entropy"
        shapes.extend(tuple(d.loss_fn_inputs["target_tokens"].shape) for d in data)
        return forward_backward(self, data, loss_fn, *args, **kwargs)

    monkeypatch.setattr(LocalSamplingClient, "sample", recording_sample)
    monkeypatch.setattr(LocalTrainingClient, "forward_backward", recording_fb)
    overrides = {
        "model_name": "kitchen/tiny-llama", "save_every": 0, "no_register": True, "num_batches": 2,
        "groups_per_batch": 2, "max_tokens": 8, "topk": 4, "eval_every": 1, "num_test_demos": 3,
    }  # fmt: skip
    result = run("sdft", overrides, backend="local", log_dir=tmp_path)
    assert result.steps == 2
    assert len(shapes) == 4 and all(len(s) == 2 and s[1] == 4 for s in shapes)
    assert len(teacher_prompts) == 3 + 2 * 2  # held-out demonstrations once, then 2 per step
    assert all("This is an example for a response to the question:" in p for p in teacher_prompts)

    ce = [m["test/teacher_ce"] for m in result.metrics if "test/teacher_ce" in m]
    assert len(ce) == 3 and all(math.isfinite(x) for x in ce)
    assert all(m["sdft/total_completion_tokens"] > 0 for m in result.metrics if "sdft/topk" in m)
