"""Kitchen's code-execution sandboxes: a local bubblewrap adapter and a SandboxFusion HTTP adapter
of the sandbox port (`kitchen.ports.sandbox`). Grading a program against test
cases through either lives with the code envs, in `cookbook/envs/sandbox_grading.py`.

    from kitchen.adapters.sandbox import make_sandbox
    from kitchen.ports.sandbox import Limits
    sandbox = make_sandbox("local")                      # or "http" with SANDBOX_URL
    result = sandbox.run("print(input()[::-1])", stdin="abc", limits=Limits(wall_s=2))
    result.reason, result.stdout                         # ('ok', 'cba\\n')
"""

from kitchen.adapters.sandbox.factory import KINDS, make_sandbox

__all__ = ["KINDS", "make_sandbox"]
