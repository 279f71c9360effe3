"""What runs a service: the app factory and its lifespan (``app``), the service's definition,
its periodic jobs and its runtime (``service``), running the jobs (``jobs``), HTTP error
handlers (``http_errors``), the operational endpoints (``operations``), the process's settings
(``settings``), the HTTP server (``http_server``), a per-client rate limit (``rate_limit``) and
the garbage collector's settings (``gc_tuning``).

A service imports what it uses from here; the modules are the runtime's own.
"""

from sagakit.runtime.app import create_app, serve
from sagakit.runtime.rate_limit import RateLimiter
from sagakit.runtime.service import (
    PeriodicJob,
    RunAgainIn,
    Runtime,
    ServiceDefinition,
    runtime_of,
)
from sagakit.runtime.settings import ServiceSettings

__all__ = ["PeriodicJob", "RateLimiter", "RunAgainIn", "Runtime", "ServiceDefinition",
           "ServiceSettings", "create_app", "runtime_of", "serve"]
