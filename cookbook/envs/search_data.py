"""The bundled search task (bundled:search): passages about invented people and towns, and
questions whose answers only those passages hold. Every name is made of random syllables, so
no model knows an answer before it searches, and each name occurs in one passage only, so a
query naming the subject finds it. Splits: `passages` ({"id", "text"}), `train` and `test`
(Search-R1's row shape: {"question", "golden_answers", "data_source"}).

`write_bundled(folder)` writes the three files; the committed ones in cookbook/data are its
output (a test regenerates and compares them)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

SEED = 48
ONSETS = ["b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "th", "br", "kr",
          "st", "dr", "vel", "mor", "quen", "tal", "sor"]  # fmt: skip
VOWELS = ["a", "e", "i", "o", "u", "ae", "io", "ou"]
CODAS = ["", "", "n", "r", "l", "s", "th", "m", "sk", "nd"]
PROFESSIONS = ["inventor", "painter", "astronomer", "composer", "cartographer", "botanist",
               "architect", "poet", "engineer", "chemist"]  # fmt: skip
WORKS = ["lantern", "atlas", "engine", "garden", "symphony", "bridge", "telescope", "almanac",
         "loom", "compass"]  # fmt: skip
INSTITUTIONS = ["Academy", "Library", "Observatory", "Guild", "Museum", "Conservatory",
                "Hospital", "Society", "College", "Theatre"]  # fmt: skip
PEOPLE, TOWNS, TEST, TEST_TWO_HOP = 120, 80, 60, 40


def _word(rng: random.Random, syllables: int) -> str:
    parts = [rng.choice(ONSETS) + rng.choice(VOWELS) + rng.choice(CODAS) for _ in range(syllables)]
    return "".join(parts).capitalize()


def _names(rng: random.Random, n: int, syllables: int, taken: set[str]) -> list[str]:
    out: list[str] = []
    while len(out) < n:
        name = _word(rng, syllables)
        if name.lower() not in taken and len(name) >= 4:
            taken.add(name.lower())
            out.append(name)
    return out


def _one_hop(rng: random.Random, taken: set[str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[tuple[str, str]]]:  # fmt: skip
    """The towns' and people's passages, their one-hop questions, and each person's name and
    town of birth."""
    towns = _names(rng, TOWNS, 2, taken)
    rivers = _names(rng, TOWNS, 2, taken)
    firsts, lasts = _names(rng, PEOPLE, 2, taken), _names(rng, PEOPLE, 3, taken)
    titles = _names(rng, PEOPLE, 2, taken)
    passages, questions, people = [], [], []
    for i, (town, river) in enumerate(zip(towns, rivers, strict=True)):
        founded = rng.randint(1100, 1890)
        passages.append({"id": f"town-{i}", "text": f"{town} is a market town on the {river} "
                         f"river, founded in {founded}. Its people are known for their fairs."})  # fmt: skip
        questions.append({"question": f"On which river does the town of {town} lie?",
                          "golden_answers": [river, f"{river} river"], "data_source": "town"})  # fmt: skip
    for i in range(PEOPLE):
        name = f"{firsts[i]} {lasts[i]}"
        job, work, town = rng.choice(PROFESSIONS), rng.choice(WORKS), rng.choice(towns)
        work_name = f"{titles[i]} {work.capitalize()}"
        passages.append({"id": f"person-{i}", "text": f"{name} was a {job} born in {town}. "
                         f"{firsts[i]} is best remembered for the {work_name}."})  # fmt: skip
        questions.append({"question": f"In which town was the {job} {name} born?",
                          "golden_answers": [town], "data_source": "person"})  # fmt: skip
        questions.append({"question": f"What is {name} best remembered for?",
                          "golden_answers": [f"the {work_name}", work_name],
                          "data_source": "person"})  # fmt: skip
        people.append((name, town))
    return passages, questions, people


def generate(seed: int = SEED) -> dict[str, list[dict[str, Any]]]:
    rng = random.Random(seed)
    passages, questions, _ = _one_hop(rng, set())
    rng.shuffle(questions)
    return {"passages": passages, "train": questions[TEST:], "test": questions[:TEST]}


def generate_two_hop(seed: int = SEED) -> dict[str, list[dict[str, Any]]]:
    """bundled:search_two_hop: the same world plus one institution per person, founded by that
    person. Its question ("In which town was the founder of the Velmor Academy born?") names the
    institution only; the institution's passage names the founder but not the town, the
    founder's passage names the town but not the institution, so the answer needs a search for
    the institution, then one for the founder read from its result."""
    rng = random.Random(seed)
    taken: set[str] = set()
    passages, _, people = _one_hop(rng, taken)
    places = _names(rng, PEOPLE, 2, taken)
    questions = []
    for i, ((founder, town), place) in enumerate(zip(people, places, strict=True)):
        institution = f"{place} {rng.choice(INSTITUTIONS)}"
        passages.append({"id": f"institution-{i}", "text": f"The {institution} was established "
                         f"by {founder} in {rng.randint(1500, 1900)}. Its halls are open to visitors on most "
                         "days of the week."})  # fmt: skip
        questions.append({"question": f"In which town was the founder of the {institution} "
                          "born?", "golden_answers": [town],
                          "data_source": "two_hop"})  # fmt: skip
    rng.shuffle(questions)
    return {"passages": passages, "train": questions[TEST_TWO_HOP:],
            "test": questions[:TEST_TWO_HOP]}  # fmt: skip


FILES = {"passages": "search_passages.jsonl", "train": "search.jsonl", "test": "search_test.jsonl"}
TWO_HOP = "search_two_hop"
# name -> (generator, split -> file); the bundled store finds split S of bundled:NAME in NAME_S.jsonl
DATASETS = {
    "search": (generate, FILES),
    TWO_HOP: (generate_two_hop, {s: f"{TWO_HOP}{'' if s == 'train' else '_' + s}.jsonl"
                                 for s in FILES}),
}  # fmt: skip


def write_bundled(folder: Path, seed: int = SEED, name: str = "search") -> list[Path]:
    make, files = DATASETS[name]
    written = []
    for split, rows in make(seed).items():
        path = folder / files[split]
        with path.open("w", encoding="utf-8", newline="\n") as f:
            for row in rows:
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
        written.append(path)
    return written


if __name__ == "__main__":
    for name in DATASETS:
        for path in write_bundled(Path(__file__).resolve().parents[1] / "data", name=name):
            print(path)
