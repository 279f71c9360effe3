import logging
import os

import uvicorn

from fake_gateway.app import create_app

if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format='{"service":"gateway","message":"%(message)s"}')
    uvicorn.run(create_app(), host=os.environ.get("GATEWAY_HOST", "127.0.0.1"),
                port=int(os.environ.get("GATEWAY_PORT", "8010")), log_config=None,
                access_log=False)
