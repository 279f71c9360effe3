import logging

import uvicorn

from consola.entrypoints.http import create_app
from consola.settings import ConsolaSettings

if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO,
                        format='{"service":"consola","level":"%(levelname)s",'
                               '"message":"%(message)s"}')
    settings = ConsolaSettings()
    uvicorn.run(create_app(settings), host=settings.host, port=settings.port, log_config=None,
                access_log=False, timeout_keep_alive=75)
