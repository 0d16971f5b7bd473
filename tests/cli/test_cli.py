import json
from pathlib import Path

from typer.testing import CliRunner

from kitchen.app.cli import app
from tests.helpers import chat_files

runner = CliRunner()


def fake_run(recipe: str, dataset: str, log_dir: Path, *flags: str) -> list[str]:
    """`kitchen run RECIPE` on the fake backend and the tiny model, into `log_dir`."""
    fixed = ["--backend", "fake", "-m", "kitchen/tiny-llama", "--log-dir", str(log_dir)]
    return ["run", recipe, *fixed, "-d", dataset, "--no-progress", *flags]


def test_list_shows_recipes_and_backends():
    result = runner.invoke(app, ["list"])
    assert result.exit_code == 0
    assert "sl_basic" in result.output and "fake" in result.output and "local" in result.output


def test_show_lists_fields_with_flags_and_cookbook_preset():
    result = runner.invoke(app, ["show", "sl_basic"], terminal_width=400)
    assert result.exit_code == 0
    assert "--learning-rate, -l" in result.output and "cookbook" in result.output
    assert "Qwen/Qwen3.5-9B-Base" in result.output


def test_dry_run_validates_prints_plan_and_exits_zero():
    result = runner.invoke(app, ["run", "sl_basic", "--dry-run", "-b", "4", "learning_rate=3e-4"])
    assert result.exit_code == 0, result.output
    assert "config valid" in result.output
    assert "submit_train_step(loss=CrossEntropyLoss(), learning_rate=0.0003" in result.output
    assert "get_batch(batch_size=4, group_size=1)" in result.output


def test_unknown_flag_suggests_the_closest_option():
    result = runner.invoke(app, ["run", "sl_basic", "--learning-rat", "1e-4"])
    assert result.exit_code == 2
    assert (
        "--learning-rat is not an option of recipe sl_basic; did you mean --learning-rate?"
        in result.output
    )


def test_unknown_key_value_suggests_the_closest_option():
    result = runner.invoke(app, ["run", "sl_basic", "batchsize=3", "--dry-run"])
    assert result.exit_code == 2
    assert "did you mean batch_size" in result.output


def test_bad_value_names_the_field_and_constraint():
    result = runner.invoke(app, ["run", "sl_basic", "--batch-size", "0", "--dry-run"])
    assert result.exit_code == 2
    assert "--batch-size: Input should be greater than 0 (got 0)" in result.output


def test_unknown_recipe():
    result = runner.invoke(app, ["run", "sl_basik", "--dry-run"])
    assert result.exit_code == 2
    assert "unknown recipe 'sl_basik'; did you mean 'sl_basic'?" in result.output


def test_precedence_defaults_then_config_file_then_flags(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text("learning_rate = 5e-4\nbatch_size = 2\n")
    result = runner.invoke(app, ["graph", "sl_basic", "--config", str(cfg), "--batch-size", "6"])
    assert result.exit_code == 0, result.output
    assert (
        "learning_rate=0.0005" in result.output
        and "get_batch(batch_size=6, group_size=1)" in result.output
    )


def test_config_file_with_unknown_field(tmp_path):
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"learning_rat": 1}))
    result = runner.invoke(app, ["run", "sl_basic", "--config", str(cfg), "--dry-run"])
    assert result.exit_code == 2
    assert "'learning_rat' is not a field of recipe sl_basic" in result.output


def test_boolean_and_none_values_and_preset():
    result = runner.invoke(
        app, ["graph", "sl_basic", "--preset", "cookbook", "--test-dataset", "none"]
    )
    assert result.exit_code == 0, result.output
    assert "Qwen/Qwen3.5-9B-Base" in result.output
    assert "evaluate_nll" not in result.output


def test_run_on_fake_backend_writes_the_run_directory(tmp_path):
    train, test = chat_files(tmp_path)
    log_dir = tmp_path / "run"
    args = fake_run(
        "sl_basic", train, log_dir, "--test-dataset", test, "-b", "4", "--save-every", "2"
    )
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert {p.name for p in log_dir.iterdir()} >= {
        "config.json",
        "plan.txt",
        "metrics.jsonl",
        "checkpoints.jsonl",
        "logs.log",
    }
    steps = [
        json.loads(line)["step"] for line in (log_dir / "metrics.jsonl").read_text().splitlines()
    ]
    assert steps == sorted(set(steps)) and steps[:6] == [0, 1, 2, 3, 4, 5]
    # running again into the same directory without --if-exists is refused, nothing is lost
    again = runner.invoke(app, args)
    assert again.exit_code == 2 and "already exists" in again.output
    assert len((log_dir / "metrics.jsonl").read_text().splitlines()) == len(steps)


def test_secrets_never_reach_config_json(tmp_path, monkeypatch):
    train, _ = chat_files(tmp_path)
    monkeypatch.setenv("TINKER_API_KEY", "tml-supersecretvalue123")
    log_dir = tmp_path / "run"
    args = fake_run("sl_loop", train, log_dir, "-b", "8", "--wandb-name", "tml-supersecretvalue123")
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    for f in log_dir.iterdir():
        assert "tml-supersecretvalue123" not in f.read_text(), f.name
    config = json.loads((log_dir / "config.json").read_text())["config"]
    assert config["max_length"] == 1024 and config["sample_max_tokens"] == 48  # not secrets


def test_an_error_line_is_printed_as_it_is(tmp_path):
    """An error message is text, not rich markup: gloo's name their source file in brackets
    ("[/path/pair.cc:129]"), which rich took for a closing tag and answered with a traceback."""
    missing = tmp_path / "[/a]" / "x.jsonl"
    result = runner.invoke(app, fake_run("sl_basic", str(missing), tmp_path / "run"))
    assert result.exit_code == 2
    assert result.output.strip() == f"error: dataset file {missing} does not exist"
