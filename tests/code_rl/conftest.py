# The real local sandbox: the sandbox suite's session fixture (it fails, never skips, where
# bubblewrap cannot run), defined once there.
from tests.sandbox.conftest import sandbox

__all__ = ["sandbox"]
