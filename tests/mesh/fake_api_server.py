"""Launch the real mesh server with the FAKE API layer (tests/mesh/fake_api.py) installed.

Only ``mmo_kernel.api`` is replaced; stdin/stdout, identity, the state dir
and every other module are the real ones.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fake_api  # noqa: E402

sys.modules["mmo_kernel.api"] = fake_api

from mmo_kernel.mesh.server import main  # noqa: E402

raise SystemExit(main())
