"""One file name per job where a reader meets both: the local engine's modules (in every room)
never share a file name, none is named as a file of kitchen/app (app/launch.py launches a run,
distributed/relaunch.py starts the ranks), and no two app files differ by a plural (the old
app/rank.py beside app/ranks.py)."""

from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def name_clashes(root: Path) -> list[str]:
    local = root / "kitchen" / "adapters" / "local"
    app = root / "kitchen" / "app"
    by_name: dict[str, list[str]] = defaultdict(list)
    for path in sorted(local.rglob("*.py")):
        if path.name != "__init__.py":
            by_name[path.name].append(path.relative_to(root).as_posix())
    clashes = [f"{name}: {paths}" for name, paths in sorted(by_name.items()) if len(paths) > 1]
    app_names = {p.name for p in app.glob("*.py")}
    clashes += [f"{name}: in kitchen/app and {by_name[name]}" for name in sorted(app_names)
                if name in by_name]  # fmt: skip
    stems = {Path(n).stem for n in app_names}
    clashes += [f"kitchen/app: {s}.py beside {s}s.py" for s in sorted(stems) if f"{s}s" in stems]
    return clashes


def test_no_two_modules_share_a_name_for_different_jobs():
    assert name_clashes(ROOT) == []


def test_the_name_check_catches_a_repeated_name(tmp_path):
    for rel in (
        "kitchen/adapters/local/train/losses.py",
        "kitchen/adapters/local/clients/losses.py",
        "kitchen/adapters/local/distributed/launch.py",
        "kitchen/app/launch.py",
        "kitchen/app/rank.py",
        "kitchen/app/ranks.py",
        "kitchen/adapters/local/model/__init__.py",
        "kitchen/adapters/local/train/__init__.py",
    ):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("")
    assert name_clashes(tmp_path) == [
        "losses.py: ['kitchen/adapters/local/clients/losses.py', "
        "'kitchen/adapters/local/train/losses.py']",
        "launch.py: in kitchen/app and ['kitchen/adapters/local/distributed/launch.py']",
        "kitchen/app: rank.py beside ranks.py",
    ]


def shadowed_packages(folder: Path) -> list[str]:
    """The scripts in `folder` named as an installed top-level module: a bench script puts its own
    folder first on sys.path, so one named `agents.py` became the OpenAI Agents SDK for every later
    import in that process (a test that loaded bench/serve_load.py broke the Agents SDK tests)."""
    import importlib.util

    names = sorted(p.stem for p in folder.glob("*.py"))
    return [n for n in names if (spec := importlib.util.find_spec(n)) and spec.origin
            and Path(spec.origin).parent != folder]  # fmt: skip


def test_no_bench_or_script_is_named_as_an_installed_module():
    for folder in ("bench", "scripts"):
        assert shadowed_packages(ROOT / folder) == [], folder


def test_the_shadow_check_finds_a_script_named_as_a_package(tmp_path):
    (tmp_path / "pytest.py").write_text("")
    (tmp_path / "no_such_module_here.py").write_text("")
    assert shadowed_packages(tmp_path) == ["pytest"]
