"""inspect-ai as an evaluator: KitchenModelAPI answers inspect's tasks from a sampling client,
tool calls included; the shipped offline tasks run against a checkpoint through `kitchen eval`
and inline in chat_sl at their own cadence."""

import asyncio
import json
import re
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from cookbook.evals.inspect_tasks import SCALINGS, inspect_tasks
from kitchen.app.cli import app
from kitchen.app.launch import run
from tests.helpers import tiny_sft_config
from train_core.evaluation.inspect_evaluator import InspectEvaluator


@pytest.fixture(scope="module")
def chatml():
    from transformers import AutoTokenizer

    from kitchen.adapters.local import resolve_model
    from train_core.renderers import get_renderer

    tokenizer = AutoTokenizer.from_pretrained(str(resolve_model("kitchen/tiny-llama")))
    return get_renderer("chatml", tokenizer)


class ToolUser:
    """A scripted model: asked a scaling question, it calls scale_grams with the question's
    numbers; shown the tool's result, it answers with that result (never computing it itself).
    Records every prompt it saw."""

    def __init__(self, tokenizer):
        self.tokenizer, self.prompts = tokenizer, []

    def sample(self, prompt, num_samples, params):
        text = self.tokenizer.decode(prompt.to_ints())
        self.prompts.append(text)
        results = re.findall(r"<\|im_start\|>tool\n(.*?)<\|im_end\|>", text, re.S)
        if results:
            reply = f"That is {results[-1].strip()} g. Happy cooking!<|im_end|>"
        else:
            grams, servings, wanted = re.findall(r"(\d+)", text.split("<|im_start|>user")[-1])[:3]
            args = {"grams": int(servings), "servings": int(grams), "wanted": int(wanted)}
            # the question reads "for {servings} uses {grams} g": the first number is servings
            reply = "<tool_call>\n" + json.dumps({"name": "scale_grams", "arguments": args}) + \
                    "\n</tool_call><|im_end|>"  # fmt: skip
        tokens = self.tokenizer.encode(reply, add_special_tokens=False)
        seqs = [SimpleNamespace(tokens=tokens)] * num_samples
        return SimpleNamespace(result=lambda: SimpleNamespace(sequences=seqs))


def test_a_tool_task_runs_the_calls_the_model_makes_and_scores_the_answer(chatml):
    client = ToolUser(chatml.tokenizer)
    evaluator = InspectEvaluator(tasks=inspect_tasks(["pip_tools"]))
    metrics = asyncio.run(evaluator(client, renderer=chatml))
    assert metrics["inspect/pip_tools/accuracy"] == 1.0
    # the tools were declared to the model, and each sample took two turns (call, then answer)
    assert all("scale_grams" in p and "<tools>" in p for p in client.prompts)
    assert len(client.prompts) == 2 * len(SCALINGS)


def test_a_wrong_tool_argument_fails_the_sample_not_the_run(chatml):
    class BadArgs(ToolUser):
        def sample(self, prompt, num_samples, params):
            tokens = self.tokenizer.encode('<tool_call>\n{"name": "scale_grams", "arguments": [1]}'
                                           "\n</tool_call><|im_end|>", add_special_tokens=False)  # fmt: skip
            seqs = [SimpleNamespace(tokens=tokens)] * num_samples
            return SimpleNamespace(result=lambda: SimpleNamespace(sequences=seqs))

    evaluator = InspectEvaluator(tasks=inspect_tasks(["pip_tools"]), limit=2)
    metrics = asyncio.run(evaluator(BadArgs(chatml.tokenizer), renderer=chatml))
    assert metrics["inspect/pip_tools/accuracy"] == 0.0


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("inspect_run")
    log_dir = tmp_path / "run"
    cfg = tiny_sft_config(tmp_path, batch_size=4, num_samples_to_show=0, eval_every=0,
                          test_dataset=None, save_every=2, no_register=True)  # fmt: skip
    run("sl_basic", cfg, log_dir=log_dir, max_steps=2)
    return log_dir


@pytest.mark.slow
def test_kitchen_eval_runs_the_offline_inspect_tasks_against_each_checkpoint(tiny_run):
    args = ["eval", str(tiny_run), "--harness", "inspect", "--tasks", "pip_signoff,pip_tools",
            "--limit", "2", "--max-tokens", "8"]  # fmt: skip
    out = CliRunner().invoke(app, args)
    assert out.exit_code == 0, out.output
    store = [json.loads(x) for x in (tiny_run / "eval_store.jsonl").read_text().splitlines()]
    saved = [
        json.loads(x)["name"] for x in (tiny_run / "checkpoints.jsonl").read_text().splitlines()
    ]
    assert sorted((r["checkpoint"], r["benchmark"]) for r in store) == sorted(
        (c, t) for c in saved for t in ("pip_signoff", "pip_tools")
    )
    for r in store:
        accuracy = r["metrics"][f"inspect/{r['benchmark']}/accuracy"]
        assert 0.0 <= accuracy <= 1.0


def test_an_unknown_inspect_task_names_itself(tiny_run):
    out = CliRunner().invoke(
        app, ["eval", str(tiny_run), "--harness", "inspect", "--tasks", "nope"]
    )
    assert out.exit_code == 2 and "unknown inspect task 'nope'" in out.output


@pytest.mark.slow
def test_chat_sl_runs_inspect_inline_at_its_cadence(tmp_path):
    cfg = tiny_sft_config(tmp_path, held_out=True, batch_size=4, num_samples_to_show=0,
                          eval_every=0, infrequent_eval_every=2, inline_evals="inspect",
                          inline_eval_limit=2, sample_max_tokens=4, save_every=0,
                          no_register=True)  # fmt: skip
    log_dir = tmp_path / "run"
    result = run("chat_sl", cfg, log_dir=log_dir, max_steps=3)
    records = [json.loads(x) for x in (log_dir / "metrics.jsonl").read_text().splitlines()]
    steps = [r["step"] for r in records
             if "inspect/pip_signoff/accuracy" in r and "train_mean_nll" in r]  # fmt: skip
    assert steps == [0, 2]
    assert "inspect/pip_tools/accuracy" in result.state.eval_results  # type: ignore[attr-defined]
