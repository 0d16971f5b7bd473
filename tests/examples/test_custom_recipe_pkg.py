"""examples/custom_recipe_pkg: a recipe in its own installable package reaches `kitchen run`
through its `kitchen.recipes` entry point. Installed into a temporary target directory (entry
points need the installed dist-info) put on PYTHONPATH, so the project's venv is never changed;
deleting the directory uninstalls it."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from .helpers import EXAMPLES, KITCHEN, run

# one pytest-xdist worker: `installed` pip-installs the package once per worker it runs on
pytestmark = pytest.mark.xdist_group("custom_recipe_pkg")


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory):
    work = tmp_path_factory.mktemp("recipe-pkg")
    source = work / "src"
    # a copy: an in-tree build would leave build/ and *.egg-info in examples/
    shutil.copytree(EXAMPLES / "custom_recipe_pkg", source)
    target = work / "site"
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation"]
    out = run([*pip, "--target", str(target), str(source)], cwd=work)
    assert out.returncode == 0, out.stderr[-3000:]
    assert (target / "kitchen_example_recipe-0.1.0.dist-info" / "entry_points.txt").is_file()
    yield {"PYTHONPATH": str(target)}
    shutil.rmtree(target)  # the uninstall


def kitchen(args: list[str], env: dict[str, str], cwd: Path):
    return run([str(KITCHEN), *args], cwd=cwd, env=env)


@pytest.mark.slow
def test_the_installed_recipe_is_listed_shown_and_dry_runs(installed, tmp_path: Path) -> None:
    listed = kitchen(["list"], installed, tmp_path)
    assert listed.returncode == 0 and "sign_off_sft" in listed.stdout
    shown = kitchen(["show", "sign_off_sft"], installed, tmp_path)
    assert "--sign-off" in shown.stdout and "Bon appetit!" in shown.stdout
    dry = kitchen(["run", "sign_off_sft", "--dry-run", "--sign-off", "Enjoy!"], installed, tmp_path)
    assert dry.returncode == 0, dry.stderr
    assert "recipe sign_off_sft: config valid" in dry.stdout and "workflow supervised" in dry.stdout
    bad = kitchen(["run", "sign_off_sft", "--dry-run", "--sign-of", "x"], installed, tmp_path)
    assert bad.returncode == 2 and "--sign-off" in bad.stderr  # the did-you-mean names its flag


@pytest.mark.slow
def test_the_installed_recipe_trains_two_steps(installed, tmp_path: Path) -> None:
    args = ["run", "sign_off_sft", "--sign-off", "Enjoy!", "--max-steps", "2"]
    out = kitchen([*args, "--log-dir", "run", "--no-progress"], installed, tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "done: 2 steps" in out.stdout
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["recipe"] == "sign_off_sft" and config["config"]["sign_off"] == "Enjoy!"
    metrics = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics if "train_mean_nll" in m] == [0, 1]


def test_without_the_package_the_recipe_is_unknown(tmp_path: Path) -> None:
    out = kitchen(["run", "sign_off_sft", "--dry-run"], {}, tmp_path)
    assert out.returncode == 2 and "unknown recipe 'sign_off_sft'" in out.stderr
