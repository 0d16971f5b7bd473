"""docs/architecture.md's glossary gives "rank" one meaning: a process of a --nproc N run. Past
the SDK boundary a LoRA adapter's inner size is its r (`LoraSpec.rank`, the SDK's `rank`
argument, in backticks), and full fine-tuning is `lora` None, never "LoRA rank 0". This test
reads every docstring of the local engine and flags a sentence that says LoRA and, outside
backticks, rank."""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ENGINE = ROOT / "kitchen" / "adapters" / "local"
SENTENCE_END = re.compile(r"(?<=[.;!?])\s+|\n\s*\n")
CODE = re.compile(r"`[^`]*`")
RANK = re.compile(r"\branks?\b", re.IGNORECASE)
LORA = re.compile(r"\blora\b", re.IGNORECASE)


def rank_beside_lora(source: str) -> list[tuple[int, str]]:
    """(line of the docstring's owner, sentence) for each docstring sentence of `source` that
    names LoRA and, outside `code`, a rank."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        doc = ast.get_docstring(node, clean=False)
        for sentence in SENTENCE_END.split(doc or ""):
            prose = CODE.sub("", sentence)
            if RANK.search(prose) and LORA.search(prose):
                found.append((getattr(node, "lineno", 1), " ".join(sentence.split())))
    return found


def test_no_docstring_of_the_engine_says_rank_beside_lora():
    bad = [
        f"{path.relative_to(ROOT)}:{line}: {sentence}"
        for path in sorted(ENGINE.rglob("*.py"))
        for line, sentence in rank_beside_lora(path.read_text())
    ]
    assert not bad, "\n".join(bad)


def test_the_check_flags_a_lora_rank_and_spares_the_sdk_argument():
    source = '''"""A fully fine-tuned model (LoRA rank 0) of a run.

Each rank holds its share."""


def create(rank):
    """A LoRA adapter of r = `rank` (the SDK's name); `rank` 0: full fine-tuning."""


class Snapshot:
    """This rank's copy of a client's LoRA weights. Another sentence."""
'''
    assert rank_beside_lora(source) == [
        (1, "A fully fine-tuned model (LoRA rank 0) of a run."),
        (10, "This rank's copy of a client's LoRA weights."),
    ]
