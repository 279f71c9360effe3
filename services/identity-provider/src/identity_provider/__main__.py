import logging

import uvicorn

from identity_provider.app import create_app
from identity_provider.settings import IdentityProviderSettings

if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO,
                        format='{"service":"identity-provider","message":"%(message)s"}')
    settings = IdentityProviderSettings()
    uvicorn.run(create_app(settings), host=settings.host, port=settings.port, log_config=None,
                access_log=False,
                # Longer than the tests' clients keep an idle connection (httpx: 5 s), like the
                # services (sagakit.runtime.ServiceSettings.http_keep_alive_s).
                timeout_keep_alive=75)
