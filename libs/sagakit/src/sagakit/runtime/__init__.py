"""What runs a service: the app factory and its lifespan (``app``), the service's definition and
its runtime (``service``), periodic jobs (``jobs``), HTTP error handlers (``http_errors``), the
operational endpoints (``operations``), the process's settings (``settings``), the HTTP server
(``http_server``) and the garbage collector's settings (``gc_tuning``).
"""

from sagakit.runtime.app import create_app, serve
from sagakit.runtime.jobs import PeriodicJob, RunAgainIn
from sagakit.runtime.service import Runtime, ServiceDefinition, runtime_of
from sagakit.runtime.settings import ServiceSettings

__all__ = ["PeriodicJob", "RunAgainIn", "Runtime", "ServiceDefinition", "ServiceSettings",
           "create_app", "runtime_of", "serve"]
