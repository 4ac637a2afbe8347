"""Write the daemon's OpenAPI schema to docs/service/openapi.json, which the REST reference page is
rendered from (tests/docs/test_references.py checks that it matches the app).

    python docs/gen/openapi.py
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parents[1] / "service" / "openapi.json"


def schema() -> dict[str, Any]:
    """What the daemon serves at /openapi.json (a service that starts no worker is enough to build the app)."""
    from despina.server.config import ServiceConfig
    from despina.server.core import CompileService
    from despina.server.http_transport import create_app

    return create_app(CompileService(ServiceConfig(workers=1))).openapi()


def text() -> str:
    return json.dumps(schema(), indent=2, ensure_ascii=False) + "\n"


def main() -> None:
    OUT.write_text(text())
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
