"""Kitchen's code-execution sandbox: a port, a local bubblewrap adapter and a SandboxFusion HTTP
adapter, plus test-case grading on top of either.

    from kitchen.adapters.sandbox import make_sandbox, Limits
    sandbox = make_sandbox("local")                      # or "http" with SANDBOX_URL
    result = sandbox.run("print(input()[::-1])", stdin="abc", limits=Limits(wall_s=2))
    result.reason, result.stdout                         # ('ok', 'cba\\n')
"""

from kitchen.adapters.sandbox.factory import BACKENDS, make_sandbox
from kitchen.adapters.sandbox.types import (
    REASONS,
    ExecutionResult,
    Limits,
    Reason,
    SandboxError,
    SandboxPort,
    SandboxUnavailable,
)

__all__ = [
    "BACKENDS",
    "REASONS",
    "ExecutionResult",
    "Limits",
    "Reason",
    "SandboxError",
    "SandboxPort",
    "SandboxUnavailable",
    "make_sandbox",
]
