"""One rank of `kitchen run --nproc N`, as torch.distributed.run starts it: the same command again,
read from the environment (the launcher's parser would take our flags for its own)."""

from __future__ import annotations

import json
import os
import sys

from kitchen.adapters.local.distributed.launch import ARGV_ENV
from kitchen.app.cli import main

if __name__ == "__main__":
    sys.argv = ["kitchen", *json.loads(os.environ[ARGV_ENV])]
    main()
