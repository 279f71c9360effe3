"""The console's pages. Every page but ``/health`` and the sign-in's own is for a signed-in
operator (``session``). The overview, the payments needing action and the dead letters are read
from the services' published views as ``console_reader`` (``adapters.read_views``); a saga's
timeline and every action go through the services' APIs with the operator's own token.

Pages are drawn on the server (Jinja2 templates, the swimlanes as SVG): nothing runs in the
browser, and the page's Content-Security-Policy allows no script at all.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any

import httpx
from authlib.integrations.starlette_client import OAuthError
from fastapi import FastAPI, Form, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates
from starlette.middleware.sessions import SessionMiddleware

from consola.adapters.read_views import ReadViews
from consola.adapters.service_apis import ServiceApis
from consola.domain.outcomes import STATES
from consola.entrypoints import swimlanes
from consola.entrypoints.navigation import NAVIGATION
from consola.entrypoints.session import (
    CsrfRefused,
    FormPoster,
    IssuerDown,
    NotAnOperator,
    Operator,
    SignedIn,
    SignInNeeded,
    safe_next,
    start_session,
    token_box,
)
from consola.entrypoints.sign_in import issuer_client
from consola.settings import ConsolaSettings
from consola.usecases.dead_letters import archive, open_letter_groups
from consola.usecases.outcome import BadField, Outcome
from consola.usecases.overview import overview
from consola.usecases.payments_needing_action import payments_needing_action, resolve_payment
from consola.usecases.ports import NotFound, ServiceUnavailable, SignInAgain
from consola.usecases.replays import CannotSign, ReplayTools, replay_group, replay_one, summary
from consola.usecases.search_sagas import parse as parse_search
from consola.usecases.search_sagas import search as search_sagas
from consola.usecases.view_saga import NotAnId, find_saga, saga_timeline
from sagakit import settings as sagakit_settings
from sagakit.auth import AuthSettings, InvalidToken, IssuerUnavailable, TokenVerifier
from sagakit.settings import KafkaClientSettings

log = logging.getLogger("consola.http")

HERE = Path(__file__).parent
NEXT = "next"
# The error codes of an authorization response (RFC 6749 §4.1.2.1) and Authlib's own for a
# callback whose state does not match.
OAUTH_ERROR_CODES = frozenset({
    "invalid_request", "unauthorized_client", "access_denied", "unsupported_response_type",
    "invalid_scope", "server_error", "temporarily_unavailable", "mismatching_state"})
SECURITY_HEADERS = {
    # No script, no frame, no form posted anywhere but here.
    "Content-Security-Policy": "default-src 'none'; style-src 'self'; img-src 'self'; "
                               "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}
# A hard cap on a form's text field; the use cases hold the real limits (pagos' and the
# services' own) and say which field is wrong on the page.
FORM_TEXT = 5000


def create_app(settings: ConsolaSettings | None = None, auth: AuthSettings | None = None,
               kafka: KafkaClientSettings | None = None) -> FastAPI:
    settings = settings or ConsolaSettings()
    auth = auth or AuthSettings()
    # Replays: the console's own signing key, published as the principal KAFKA_* names (the
    # least-privilege ``operator``, never the admin).
    replay_tools = ReplayTools(settings.replay_signing_key(),
                               kafka or sagakit_settings.load(KafkaClientSettings))
    templates = Jinja2Templates(directory=HERE / "templates")
    issuer = issuer_client(settings, auth)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.verifier = TokenVerifier(auth)
        app.state.views = ReadViews(settings.database_url.get_secret_value(),
                                    settings.database_pool_size, settings.api_timeout_s)
        async with httpx.AsyncClient(timeout=settings.api_timeout_s) as http:
            app.state.http = http
            try:
                yield
            finally:
                await app.state.verifier.close()
                await app.state.views.close()

    app = FastAPI(title="operator console", version="1.0.0", lifespan=lifespan,
                  docs_url=None, redoc_url=None, openapi_url=None)
    app.add_middleware(SessionMiddleware, secret_key=settings.session_key(),
                       session_cookie="consola_session", max_age=settings.session_max_age_s,
                       same_site="lax", https_only=settings.cookie_secure)
    app.state.token_box = token_box(settings.session_key())
    app.mount("/static", StaticFiles(directory=HERE / "static"), name="static")

    @app.middleware("http")
    async def security_headers(request: Request, call_next: Any) -> Response:
        response: Response = await call_next(request)
        for name, value in SECURITY_HEADERS.items():
            response.headers.setdefault(name, value)
        return response

    def page(request: Request, template: str, status: int = 200,
             operator: Operator | None = None, **context: Any) -> HTMLResponse:
        return templates.TemplateResponse(request, template, status_code=status, context={
            "operator": operator, "navigation": NAVIGATION, "active": None, **context})

    def apis(request: Request, operator: Operator) -> ServiceApis:
        return ServiceApis(request.app.state.http, operator.token,
                           pedidos_url=settings.pedidos_url, pagos_url=settings.pagos_url,
                           inventario_url=settings.inventario_url)

    def views(request: Request) -> ReadViews:
        read: ReadViews = request.app.state.views
        return read

    def answered(outcome: Outcome) -> int:
        return 200 if outcome.done else outcome.status

    @app.exception_handler(SignInNeeded)
    async def sign_in_needed(request: Request, _: SignInNeeded) -> Response:
        wanted = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        if request.method == "GET":
            request.session[NEXT] = safe_next(wanted)
        return RedirectResponse("/login", status_code=303)

    @app.exception_handler(NotAnOperator)
    async def not_an_operator(request: Request, exc: NotAnOperator) -> Response:
        return page(request, "refused.html", 403, subject=exc.subject,
                    roles=", ".join(sorted(exc.roles)) or "none")

    @app.exception_handler(IssuerDown)
    async def issuer_down(request: Request, _: IssuerDown) -> Response:
        return page(request, "error.html", 503, title="The identity provider does not answer",
                    message="Its keys could not be fetched, so no sign-in can be checked. "
                            "Try again in a moment.")

    @app.exception_handler(CsrfRefused)
    async def csrf_refused(request: Request, _: CsrfRefused) -> Response:
        return page(request, "error.html", 403, title="Form refused",
                    message="The form did not carry this session's token (it may come from "
                            "another site, or from a session that ended). Reload the page "
                            "and send it again.")

    @app.exception_handler(SignInAgain)
    async def sign_in_again(request: Request, _: SignInAgain) -> Response:
        request.session.clear()
        return await sign_in_needed(request, SignInNeeded())

    @app.exception_handler(ServiceUnavailable)
    async def service_unavailable(request: Request, exc: ServiceUnavailable) -> Response:
        return page(request, "error.html", 502, title=f"{exc.service} did not answer",
                    message=f"{exc.service}: {exc.reason}. Try again in a moment.")

    @app.get("/health", include_in_schema=False)
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/login", response_model=None)
    async def login(request: Request) -> Response:
        try:
            redirect: Response = await issuer.authorize_redirect(
                request, f"{settings.base_url}/auth/callback")
        except (httpx.HTTPError, OAuthError) as exc:
            log.warning("no sign-in: the issuer's discovery document could not be read: %s",
                        type(exc).__name__)
            raise IssuerDown from None
        return redirect

    @app.get("/auth/callback", response_model=None)
    async def callback(request: Request) -> Response:
        try:
            answer = await issuer.authorize_access_token(request)
        except OAuthError as exc:
            # The error may come from the query string of anyone's link, not from the issuer:
            # a known code is named, nothing of the request's own text is shown.
            code = exc.error if exc.error in OAUTH_ERROR_CODES else "sign-in not completed"
            return page(request, "error.html", 400, title="Sign-in failed",
                        message=f"{code}: sign in again.", sign_in=True)
        except httpx.HTTPError:
            raise IssuerDown from None
        token = str(answer.get("access_token", ""))
        try:
            principal = await request.app.state.verifier.verify(token)
        except InvalidToken as exc:
            return page(request, "error.html", 400, title="Sign-in failed",
                        message=f"the issuer's token is not one the console believes: {exc}",
                        sign_in=True)
        except IssuerUnavailable:
            raise IssuerDown from None
        wanted = safe_next(request.session.get(NEXT))
        if not principal.is_operator:
            request.session.clear()
            raise NotAnOperator(principal.subject, principal.roles)
        start_session(request, principal.subject, token)
        log.info("operator signed in", extra={"operator": principal.subject})
        return RedirectResponse(wanted, status_code=303)

    @app.post("/logout", response_model=None)
    async def logout(request: Request, operator: FormPoster) -> Response:
        request.session.clear()
        log.info("operator signed out", extra={"operator": operator.subject})
        return RedirectResponse("/signed-out", status_code=303)

    @app.get("/signed-out", response_class=HTMLResponse)
    async def signed_out(request: Request) -> HTMLResponse:
        return page(request, "signed_out.html")

    @app.get("/", response_class=HTMLResponse)
    async def overview_page(request: Request, operator: SignedIn) -> HTMLResponse:
        return page(request, "overview.html", operator=operator, active="overview",
                    overview=await overview(views(request)))

    @app.get("/sagas", response_class=HTMLResponse)
    async def home(request: Request, operator: SignedIn,
                   saga_id: Annotated[str, Query(max_length=200)] = "",
                   order_id: Annotated[str, Query(max_length=200)] = "",
                   customer_id: Annotated[str, Query(max_length=300)] = "",
                   state: Annotated[str, Query(max_length=100)] = "",
                   older_than_min: Annotated[str, Query(max_length=20)] = "",
                   stuck: Annotated[str, Query(max_length=10)] = "") -> HTMLResponse:
        asked = {"saga_id": saga_id, "order_id": order_id, "customer_id": customer_id,
                 "state": state, "older_than_min": older_than_min, "stuck": stuck}
        try:
            wanted = parse_search(**asked)
        except BadField as bad:
            return page(request, "home.html", 422, operator=operator, active="sagas",
                        asked=asked, states=STATES, bad=bad)
        if not wanted.given:  # the form alone: a search is asked for, never a whole table
            return page(request, "home.html", operator=operator, active="sagas", asked=asked,
                        states=STATES)
        return page(request, "home.html", operator=operator, active="sagas", asked=asked,
                    states=STATES, wanted=wanted,
                    sagas=await search_sagas(views(request), wanted))

    async def payments_page(request: Request, operator: Operator, status: int = 200,
                            **context: Any) -> HTMLResponse:
        return page(request, "payments.html", status, operator=operator, active="payments",
                    payments=await payments_needing_action(views(request)), **context)

    @app.get("/payments", response_class=HTMLResponse)
    async def payments(request: Request, operator: SignedIn) -> HTMLResponse:
        return await payments_page(request, operator)

    @app.post("/payments/{payment_id}/resolution", response_class=HTMLResponse)
    async def resolve(request: Request, payment_id: str, operator: FormPoster,
                      reference: Annotated[str, Form(max_length=FORM_TEXT)] = "",
                      note: Annotated[str, Form(max_length=FORM_TEXT)] = "") -> HTMLResponse:
        try:
            outcome = await resolve_payment(apis(request, operator), payment_id, reference,
                                            note)
        except BadField as bad:
            return await payments_page(request, operator, 422, bad=bad, target=payment_id)
        log.info("payment resolution sent", extra={
            "operator": operator.subject, "payment_id": payment_id, "status": outcome.status})
        return await payments_page(request, operator, answered(outcome), outcome=outcome,
                                   target=payment_id)

    async def dead_letters_page(request: Request, operator: Operator, status: int = 200,
                                **context: Any) -> HTMLResponse:
        return page(request, "dead_letters.html", status, operator=operator,
                    active="dead-letters", groups=await open_letter_groups(views(request)),
                    **context)

    @app.get("/dead-letters", response_class=HTMLResponse)
    async def dead_letters(request: Request, operator: SignedIn) -> HTMLResponse:
        return await dead_letters_page(request, operator)

    @app.post("/dead-letters/{service}/{dead_letter_id}/archive",
              response_class=HTMLResponse)
    async def archive_letter(request: Request, service: str, dead_letter_id: str,
                             operator: FormPoster,
                             reason: Annotated[str, Form(max_length=FORM_TEXT)] = ""
                             ) -> HTMLResponse:
        try:
            outcome = await archive(apis(request, operator), service, dead_letter_id, reason)
        except BadField as bad:
            return await dead_letters_page(request, operator, 422, bad=bad,
                                           target=dead_letter_id)
        log.info("dead letter archive sent", extra={
            "operator": operator.subject, "service": service, "dead_letter_id": dead_letter_id,
            "status": outcome.status})
        return await dead_letters_page(request, operator, answered(outcome), outcome=outcome,
                                       target=dead_letter_id)

    @app.exception_handler(CannotSign)
    async def cannot_sign(request: Request, exc: CannotSign) -> Response:
        return page(request, "error.html", 503, title="This console cannot replay",
                    message=str(exc))

    def replay_page(request: Request, operator: Operator, outcomes: list[Any], *,
                    dry_run: bool, status: int = 200, **context: Any) -> HTMLResponse:
        return page(request, "replay.html", status, operator=operator, active="dead-letters",
                    outcomes=outcomes, dry_run=dry_run,
                    outcome=summary(outcomes, dry_run=dry_run), **context)

    @app.get("/dead-letters/{service}/{dead_letter_id}/replay", response_class=HTMLResponse)
    async def dry_run_letter(request: Request, service: str, dead_letter_id: str,
                             operator: SignedIn) -> HTMLResponse:
        try:
            done = await replay_one(replay_tools, apis(request, operator), service,
                                    dead_letter_id, dry_run=True)
        except BadField as bad:
            return await dead_letters_page(request, operator, 422, bad=bad)
        return replay_page(request, operator, [done], dry_run=True, service=service,
                           confirm=f"/dead-letters/{service}/{done.id}/replay")

    @app.post("/dead-letters/{service}/{dead_letter_id}/replay", response_class=HTMLResponse)
    async def replay_letter(request: Request, service: str, dead_letter_id: str,
                            operator: FormPoster) -> HTMLResponse:
        try:
            done = await replay_one(replay_tools, apis(request, operator), service,
                                    dead_letter_id, dry_run=False)
        except BadField as bad:
            return await dead_letters_page(request, operator, 422, bad=bad)
        log.info("dead letter replay", extra={
            "operator": operator.subject, "service": service, "dead_letter_id": done.id,
            "outcome": done.outcome, "message_id": done.message_id})
        return replay_page(request, operator, [done], dry_run=False, service=service)

    @app.get("/dead-letters/{service}/group-replay", response_class=HTMLResponse)
    async def dry_run_group(request: Request, service: str, operator: SignedIn,
                            event_type: Annotated[str, Query(max_length=200)],
                            error_class: Annotated[str, Query(max_length=200)]
                            ) -> HTMLResponse:
        try:
            found, outcomes = await replay_group(
                replay_tools, apis(request, operator), views(request), service, event_type,
                error_class, dry_run=True)
        except BadField as bad:
            return await dead_letters_page(request, operator, 422, bad=bad)
        return replay_page(request, operator, outcomes, dry_run=True, group=found,
                           confirm=f"/dead-letters/{found.service}/group-replay")

    @app.post("/dead-letters/{service}/group-replay", response_class=HTMLResponse)
    async def replay_letters(request: Request, service: str, operator: FormPoster,
                             event_type: Annotated[str, Form(max_length=200)],
                             error_class: Annotated[str, Form(max_length=200)],
                             letter: Annotated[list[str] | None, Form()] = None
                             ) -> HTMLResponse:
        try:
            found, outcomes = await replay_group(
                replay_tools, apis(request, operator), views(request), service, event_type,
                error_class, dry_run=False, chosen=letter or [])
        except BadField as bad:
            return await dead_letters_page(request, operator, 422, bad=bad)
        log.info("dead letter group replay", extra={
            "operator": operator.subject, "service": service, "event_type": event_type,
            "error_class": error_class,
            "outcomes": {o.id: o.outcome for o in outcomes}})
        return replay_page(request, operator, outcomes, dry_run=False, group=found)

    @app.get("/search", response_model=None)
    async def search(request: Request, operator: SignedIn,
                     q: Annotated[str, Query(max_length=200)] = "") -> Response:
        if not q.strip():
            return RedirectResponse("/sagas", status_code=303)
        try:
            saga_id = await find_saga(apis(request, operator), q)
        except NotAnId:
            return page(request, "home.html", 422, operator=operator, active="sagas", query=q,
                        error="q: a saga id or an order id is a UUID "
                              "(e.g. 3f2b8c1e-5d4a-4b7e-9c1d-2a6f8e0b7c45)")
        if saga_id is None:
            return page(request, "home.html", 404, operator=operator, active="sagas", query=q,
                        error=f"no saga and no order has the id {q.strip()}")
        return RedirectResponse(f"/sagas/{saga_id}", status_code=303)

    @app.get("/sagas/{saga_id}", response_class=HTMLResponse)
    async def saga(request: Request, saga_id: str, operator: SignedIn) -> HTMLResponse:
        try:
            timeline = await saga_timeline(apis(request, operator), str(uuid.UUID(saga_id)))
        except (ValueError, NotFound):
            return page(request, "home.html", 404, operator=operator, active="sagas",
                        query=saga_id, error=f"no saga {saga_id}")
        return page(request, "timeline.html", operator=operator, active="sagas",
                    timeline=timeline, drawing=swimlanes.draw(timeline))

    return app
