import logging
import os

import uvicorn

from fake_gateway.app import create_app
from fake_gateway.secret_key import MissingSecretKey

if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format='{"service":"gateway","message":"%(message)s"}')
    try:
        app = create_app()
    except (MissingSecretKey, OSError) as exc:
        raise SystemExit(f"fake gateway: invalid configuration: {exc}") from None
    uvicorn.run(app, host=os.environ.get("GATEWAY_HOST", "127.0.0.1"),
                port=int(os.environ.get("GATEWAY_PORT", "8010")), log_config=None,
                access_log=False,
                # Longer than the tests' clients keep an idle connection (httpx: 5 s), like the
                # services (sagakit.runtime.ServiceSettings.http_keep_alive_s).
                timeout_keep_alive=int(os.environ.get("GATEWAY_KEEP_ALIVE_S", "75")))
