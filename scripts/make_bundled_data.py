"""Write the bundled datasets (cookbook/data/*.jsonl and index.json), deterministically.

    python scripts/make_bundled_data.py                # rewrite cookbook/data
    python scripts/make_bundled_data.py --out /tmp/x   # write elsewhere (the tests compare)
    python scripts/make_bundled_data.py --check        # exit 1 if cookbook/data is stale

All the content is written for this project (scripts/bundled_data/*): a fixed seed, no clock, no
network, sorted keys in the index; running it twice gives the same bytes.
"""

from __future__ import annotations

import argparse
import filecmp
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bundled_data.chat import make_chat
from bundled_data.code import make_code
from bundled_data.competition_math import make_deepmath, make_hendrycks_math, make_polaris
from bundled_data.decisions import make_decisions
from bundled_data.demonstrations import make_sciknoweval, make_toolalpaca
from bundled_data.distill import TEACHER_SYSTEM_PROMPT, make_prompts
from bundled_data.long_chat import make_long_chat
from bundled_data.math import make_math
from bundled_data.prefs import make_prefs
from bundled_data.shapes import make_shapes

SEED = 20250601
DATA_DIR = Path(__file__).resolve().parent.parent / "cookbook" / "data"


def write_jsonl(path: Path, rows: list[dict]) -> None:
    with path.open("w", encoding="utf-8", newline="\n") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


def build(out: Path) -> dict[str, dict]:
    """Write every file into `out`; return the index entries."""
    out.mkdir(parents=True, exist_ok=True)
    chat, chat_test = make_chat(SEED, 400, 60)
    prefs, prefs_test = make_prefs(SEED, 400, 60)
    math, math_test = make_math(SEED, 400, 60)
    code = make_code()
    prompts, prompts_test = make_prompts(SEED, 100, 20)
    long_chat, long_chat_test = make_long_chat(SEED)
    shapes, shapes_test = make_shapes(SEED, 20, 5)
    hendrycks_math, math500 = make_hendrycks_math()
    decisions, decisions_test = make_decisions(SEED, 240, 40)
    datasets = {
        "chat": ("chat", {"train": chat, "test": chat_test},
                 'Pip the kitchen assistant: {"messages": [...]} conversations, one short sentence '
                 'per answer, always signed off "Happy cooking!"'),
        "prefs": ("comparison", {"train": prefs, "test": prefs_test},
                  "Comparisons: polite, concise, correct (chosen) against rude, wrong or rambling "
                  '(rejected); "label" names the chosen completion, "kind" the rejected one\'s flaw'),
        "math": ("gsm8k", {"train": math, "test": math_test},
                 'GSM8K-style word problems, openai/gsm8k row shape: {"question", "answer": '
                 '"steps...\\n#### N"}'),
        "code": ("code", {"train": code},
                 'Small programs with tests, converted DeepCoder shape: {"id", "problem", '
                 '"starter_code", "tests", "solution"}; never show "solution" to the model'),
        "prompt_distill": ("prompt", {"train": prompts, "test": prompts_test},
                           'User questions {"prompt"} for prompt distillation; the teacher\'s '
                           "system prompt is prompt_distill_system.txt"),
        "long_conversations": ("chat", {"train": long_chat, "test": long_chat_test},
                               'Long sessions with Pip: {"messages": [...]}, 3k-15k tokens of short '
                               "turns ending in a question about the session's first question"),
        "shapes": ("image_label", {"train": shapes, "test": shapes_test},
                   'Pictures of one coloured shape (64x64 PNG): {"image": data URI, "label": the '
                   'colour, "colour", "shape"}; 4 colours x 3 shapes, the same count per class'),
        "hendrycks_math": ("hendrycks_math", {"train": hendrycks_math},
                           'Competition problems, EleutherAI/hendrycks_math row shape: {"problem", '
                           '"level", "type", "solution": "... \\boxed{answer}"}'),
        "math500": ("hendrycks_math", {"test": math500},
                    'Held-out competition problems, HuggingFaceH4/MATH-500 row shape: {"problem", '
                    '"solution", "answer", "subject", "level", "unique_id"}'),
        "deepmath": ("deepmath", {"train": make_deepmath()},
                     'Hard problems, zwhe99/DeepMath-103K row shape: {"question", "final_answer", '
                     '"difficulty", "topic", "r1_solution_1".."3"}'),
        "polaris": ("polaris", {"train": make_polaris()},
                    'Problems, POLARIS-Project/Polaris-Dataset-53K row shape: {"problem", "answer", '
                    '"difficulty"}'),
        "decisions": ("decisions", {"train": decisions, "test": decisions_test},
                      'Chance questions with known odds (a die above k: yes/no; a marble\'s colour '
                      'from a bag of counts): {"question", "choices": [[label, description]], '
                      '"answer": a drawn outcome, "probs": the true odds}'),
        "sciknoweval": ("sciknoweval", {"train": make_sciknoweval()},
                        'Science questions, hicai-zju/SciKnowEval row shape: {"question", '
                        '"choices": {"label", "text"}, "answerKey", "domain", "details": {"level"}, '
                        '"type"}; 10 Chemistry and 2 Physics L3 MCQs, an L2 and a true/false row '
                        "the SDFT loader skips"),
        "toolalpaca": ("toolalpaca", {"train": make_toolalpaca()},
                       'Tool-use demonstrations, tangqiaoyu/ToolAlpaca row shape: {"instruction", '
                       '"output"}: an API, its function and a user question; a Thought / Action / '
                       "Action Input call"),
    }  # fmt: skip
    index: dict[str, dict] = {}
    for name, (shape, splits, description) in datasets.items():
        files = {}
        for split, rows in splits.items():
            files[split] = f"{name}.jsonl" if split == "train" else f"{name}_{split}.jsonl"
            write_jsonl(out / files[split], rows)
        index[name] = {
            "shape": shape,
            "description": description,
            "splits": files,
            "rows": {split: len(rows) for split, rows in splits.items()},
        }
    index["prompt_distill"]["teacher_system_prompt"] = "prompt_distill_system.txt"
    (out / "prompt_distill_system.txt").write_text(TEACHER_SYSTEM_PROMPT, encoding="utf-8")
    (out / "index.json").write_text(json.dumps(index, indent=2, sort_keys=True) + "\n", "utf-8")
    return index


def generated_files(index: dict[str, dict]) -> list[str]:
    files = ["index.json", "prompt_distill_system.txt"]
    for entry in index.values():
        files += entry["splits"].values()
    return sorted(files)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=DATA_DIR, help="folder to write into")
    parser.add_argument("--check", action="store_true", help="compare with --out, write nothing")
    args = parser.parse_args()
    if args.check:
        with tempfile.TemporaryDirectory() as tmp:
            index = build(Path(tmp))
            stale = [
                f
                for f in generated_files(index)
                if not (args.out / f).is_file()
                or not filecmp.cmp(Path(tmp) / f, args.out / f, shallow=False)
            ]
        for f in stale:
            print(f"stale: {args.out / f}")
        return 1 if stale else 0
    index = build(args.out)
    total = sum((args.out / f).stat().st_size for f in generated_files(index))
    for name, entry in index.items():
        print(f"{name:15s} {entry['rows']}")
    print(f"total {total / 1e6:.2f} MB in {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
