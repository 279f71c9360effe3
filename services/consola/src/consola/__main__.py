import uvicorn

from consola.entrypoints.http import create_app
from consola.settings import ConsolaSettings
from sagakit.observability.structured_logging import configure

if __name__ == "__main__":
    # JSON lines like the services' (sagakit): who signed in and out is in them, never a token.
    configure("consola")
    settings = ConsolaSettings()
    uvicorn.run(create_app(settings), host=settings.host, port=settings.port, log_config=None,
                access_log=False, timeout_keep_alive=75)
