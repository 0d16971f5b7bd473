"""Programs the graders run inside the sandbox around a solution (stdlib only, any Python 3.8+).

Both load `solution.py` into a module namespace, after LiveCodeBench's preamble of imports
(LeetCode-style starter code uses `List`, `heapq`, ... without importing them), with the
solution's own prints captured so they cannot interleave with the harness's report lines.

- CALL_HARNESS calls `fn_name` (a top-level function, else a method of `Solution()`) with each
  case's arguments and reports each return value as JSON. The expected values never enter the
  sandbox: the host compares, so a solution cannot fake a pass without producing the answer.
- ASSERT_HARNESS executes each assert snippet in the solution's namespace. Here the expected
  values are in the sandbox, so each report line carries a nonce read from a file the harness
  deletes before the solution loads; exiting early, or printing "pass", does not count.
  (Code in the same process can still dig the nonce out of memory: asserts are weaker against
  a determined adversary than call cases, whose verdict never leaves the host.)

Each case runs under two `signal.setitimer` timers, so one slow case times out without hiding the
others: ITIMER_PROF counts the process's CPU time (the case's time limit, which machine load does
not eat into) and ITIMER_REAL the wall clock, a backstop for a case that waits instead of computing.
"""

from __future__ import annotations

from kitchen.ports.sandbox import wall_backstop_s

PREAMBLE = """\
from string import *
from re import *
from datetime import *
from collections import *
from heapq import *
from bisect import *
from copy import *
from math import *
from random import *
from statistics import *
from itertools import *
from functools import *
from operator import *
from io import *
from sys import *
from json import *
from builtins import *
from typing import *
import string, re, datetime, collections, heapq, bisect, copy, math, random, statistics
import itertools, functools, operator, io, sys, json
sys.setrecursionlimit(6 * 10**5)
"""

CASE_PREFIX = "@@kitchen-case@@ "

_COMMON = r"""
import io, json, os, signal, sys, traceback

REAL_STDOUT = sys.stdout
CASE_TIMEOUT_S = %(case_timeout_s)r  # CPU seconds
CASE_WALL_S = %(case_wall_s)r  # wall-clock backstop
PREAMBLE = %(preamble)r


class CaseTimeout(BaseException):
    def __init__(self, signum):
        self.cpu = signum == signal.SIGPROF


def _on_timer(signum, frame):
    raise CaseTimeout(signum)


signal.signal(signal.SIGPROF, _on_timer)
signal.signal(signal.SIGALRM, _on_timer)


def report(tag, **fields):
    REAL_STDOUT.write(%(prefix)r + tag + " " + json.dumps(fields) + "\n")
    REAL_STDOUT.flush()


def describe(exc):
    if isinstance(exc, CaseTimeout) and exc.cpu:
        return "timeout: case used more than %%gs of CPU time" %% CASE_TIMEOUT_S
    if isinstance(exc, CaseTimeout):
        return "timeout: case ran %%gs of wall-clock time, waiting rather than computing" %% CASE_WALL_S
    if isinstance(exc, SystemExit):
        return "exited (SystemExit %%r) instead of returning" %% (exc.code,)
    last = traceback.extract_tb(exc.__traceback__)[-1:] if exc.__traceback__ else []
    where = " (%%s line %%d)" %% (last[0].filename, last[0].lineno) if last else ""
    text = ("%%s: %%s" %% (type(exc).__name__, exc))[:300]
    return text + where


def load_solution():
    # the solution's namespace, and the preamble's names (which the solution did not define)
    namespace = {"__name__": "solution"}
    exec(compile(PREAMBLE, "<preamble>", "exec"), namespace)
    preamble = dict(namespace)
    with open("solution.py", encoding="utf-8") as f:
        source = f.read()
    sys.stdout = io.StringIO()
    try:
        exec(compile(source, "solution.py", "exec"), namespace)
    finally:
        sys.stdout = io.StringIO()
    return namespace, preamble


def run_case(fn):
    signal.setitimer(signal.ITIMER_PROF, CASE_TIMEOUT_S)
    signal.setitimer(signal.ITIMER_REAL, CASE_WALL_S)
    try:
        return fn()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.setitimer(signal.ITIMER_PROF, 0)
"""

CALL_HARNESS = (
    _COMMON
    + r"""
def main():
    with open("cases.json", encoding="utf-8") as f:
        spec = json.load(f)
    try:
        namespace, preamble = load_solution()
    except BaseException as e:
        report("load", error=describe(e))
        return
    name = spec["fn_name"]
    fn = namespace.get(name)
    if name in preamble and fn is preamble[name]:
        fn = None  # operator.add from the preamble is not the solution's add
    if not callable(fn) and isinstance(namespace.get("Solution"), type):
        fn = getattr(namespace["Solution"](), name, None)
    if not callable(fn):
        report("load", error="no function %%r in the solution" %% name)
        return
    for index, args in enumerate(spec["args"]):
        try:
            value = run_case(lambda: fn(*args))
        except BaseException as e:
            report("case", index=index, error=describe(e))
            continue
        try:
            report("case", index=index, value=json.loads(json.dumps(value)))
        except (TypeError, ValueError) as e:
            report("case", index=index, error="return value is not JSON: %%s" %% e)


main()
"""
)

ASSERT_HARNESS = (
    _COMMON
    + r"""
def main():
    with open(".nonce", encoding="ascii") as f:
        nonce = f.read().strip()
    os.remove(".nonce")
    with open("asserts.json", encoding="utf-8") as f:
        snippets = json.load(f)
    try:
        namespace, _ = load_solution()
    except BaseException as e:
        report("load", nonce=nonce, error=describe(e))
        return
    for index, snippet in enumerate(snippets):
        code = compile(snippet, "<test %%d>" %% index, "exec")
        try:
            run_case(lambda: exec(code, namespace))
        except AssertionError as e:
            line = traceback.extract_tb(e.__traceback__)[-1]
            text = snippet.splitlines()[line.lineno - 1].strip() if line.filename.startswith("<test") else str(e)
            report("case", nonce=nonce, index=index, error="assertion failed: " + text[:300])
        except BaseException as e:
            report("case", nonce=nonce, index=index, error=describe(e))
        else:
            report("case", nonce=nonce, index=index, passed=True)


main()
"""
)


def _filled(template: str, case_timeout_s: float) -> str:
    return template % {
        "case_timeout_s": case_timeout_s,
        "case_wall_s": wall_backstop_s(case_timeout_s),
        "prefix": CASE_PREFIX,
        "preamble": PREAMBLE,
    }


def call_harness(case_timeout_s: float) -> str:
    return _filled(CALL_HARNESS, case_timeout_s)


def assert_harness(case_timeout_s: float) -> str:
    return _filled(ASSERT_HARNESS, case_timeout_s)
