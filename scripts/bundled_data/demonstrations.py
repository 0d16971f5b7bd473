"""SDFT's demonstration sets in the shapes of the hub datasets the cookbook loads, written for
this project (a handful each, so `sdft --dataset sciknoweval|toolalpaca` runs offline):
SciKnowEval (hicai-zju/SciKnowEval: multiple-choice science questions with a domain and a
level; an L2 row and a true/false row the SDFT loader skips) and ToolAlpaca
(tangqiaoyu/ToolAlpaca: an instruction naming an API and a user question, the output a
Thought / Action / Action Input call)."""

from __future__ import annotations

import json

# (domain, level, type, question, choice texts, answer letter)
SCIKNOWEVAL = [
    ("Chemistry", "L3", "mcq-4-choices", "Which gas is produced when zinc reacts with dilute hydrochloric acid?", ["Oxygen", "Hydrogen", "Chlorine", "Carbon dioxide"], "B"),
    ("Chemistry", "L3", "mcq-4-choices", "What is the pH of a 0.001 M solution of hydrochloric acid at 25 C?", ["1", "2", "3", "11"], "C"),
    ("Chemistry", "L3", "mcq-4-choices", "Which element has the highest electronegativity?", ["Fluorine", "Oxygen", "Chlorine", "Nitrogen"], "A"),
    ("Chemistry", "L3", "mcq-4-choices", "How many moles of water form when 2 moles of hydrogen gas burn completely in oxygen?", ["1", "4", "0.5", "2"], "D"),
    ("Chemistry", "L3", "mcq-4-choices", "Which bond type holds the atoms of sodium chloride together in its crystal?", ["Ionic", "Covalent", "Metallic", "Hydrogen"], "A"),
    ("Chemistry", "L3", "mcq-4-choices", "What is the hybridization of the carbon atom in methane?", ["sp", "sp2", "sp3", "sp3d"], "C"),
    ("Chemistry", "L3", "mcq-4-choices", "Which of these is a strong base?", ["Ammonia", "Sodium hydroxide", "Acetic acid", "Methanol"], "B"),
    ("Chemistry", "L3", "mcq-4-choices", "What is the molar mass of carbon dioxide, to the nearest gram per mole?", ["28", "32", "44", "56"], "C"),
    ("Chemistry", "L3", "mcq-4-choices", "Which process turns a solid directly into a gas?", ["Melting", "Sublimation", "Condensation", "Freezing"], "B"),
    ("Chemistry", "L3", "mcq-4-choices", "Which catalyst speeds up the Haber process for ammonia?", ["Iron", "Platinum", "Nickel", "Copper"], "A"),
    ("Physics", "L3", "mcq-4-choices", "What is the SI unit of force?", ["Joule", "Watt", "Newton", "Pascal"], "C"),
    ("Physics", "L3", "mcq-4-choices", "A car moves at a constant 20 m/s for 5 s. How far does it travel?", ["4 m", "25 m", "100 m", "200 m"], "C"),
    ("Chemistry", "L2", "mcq-4-choices", "What is the chemical symbol of sodium?", ["S", "So", "Na", "Sd"], "C"),
    ("Chemistry", "L3", "true_or_false", "Water boils at 100 C at sea level.", ["True", "False"], "A"),
]  # fmt: skip

# (API name, function, its argument, the user's question, the argument's value)
TOOLALPACA = [
    ("WeatherNow", "getCurrentWeather", "city", "What's the weather like in Lisbon right now?", "Lisbon"),
    ("RecipeBox", "searchRecipes", "query", "Find me a recipe for lemon risotto.", "lemon risotto"),
    ("CurrencyRates", "convert", "amount_from_to", "How many euros is 150 US dollars today?", "150 USD EUR"),
    ("BookFinder", "searchBooks", "title", "Is there a book called 'The Salt Road'?", "The Salt Road"),
    ("TimeZones", "getTime", "zone", "What time is it in Tokyo?", "Asia/Tokyo"),
    ("TranslateIt", "translate", "text", "Translate 'good morning' into French.", "good morning"),
    ("StockQuote", "getQuote", "symbol", "What is Apple's stock price?", "AAPL"),
    ("HolidayAPI", "listHolidays", "country", "Which public holidays does Portugal have this year?", "PT"),
]  # fmt: skip


def make_sciknoweval() -> list[dict]:
    return [
        {
            "question": question,
            "choices": {"label": [chr(65 + j) for j in range(len(texts))], "text": texts},
            "answerKey": key,
            "domain": domain,
            "details": {"level": level, "task": "sample_task", "subtask": f"sample_{i}",
                        "source": "hand-made"},
            "type": kind,
            "answer": "",
        }
        for i, (domain, level, kind, question, texts, key) in enumerate(SCIKNOWEVAL)
    ]  # fmt: skip


def make_toolalpaca() -> list[dict]:
    rows = []
    for name, fn, arg, query, value in TOOLALPACA:
        instruction = (
            f"Answer the user's question with the {name} API.\n"
            f"Functions:\n- {fn}({arg}: string): {name}'s {fn} endpoint\n"
            f"User: {query}"
        )
        output = (
            f"Thought: I should call {fn} with the user's {arg}.\n"
            f"Action: {fn}\nAction Input: {json.dumps({arg: value})}"
        )
        rows.append({"Name": name, "Category": "hand-made", "instruction": instruction, "output": output})  # fmt: skip
    return rows
