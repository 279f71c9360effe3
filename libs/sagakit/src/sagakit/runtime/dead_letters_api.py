"""``/operator/dead-letters`` of every service: a dead letter as the service kept it, and the
operator's actions on it (``sagakit.operations.dead_letter_actions``), each recorded with the
caller's token ``sub`` as who did it."""

from __future__ import annotations

import uuid
from typing import Annotated, Any, Literal

from fastapi import APIRouter, HTTPException, Request, Security
from pydantic import BaseModel, Field

from sagakit.auth import AUTH_RESPONSES, OPERATOR, Principal, require
from sagakit.observability import metrics
from sagakit.operations.dead_letter_actions import (
    FORGED_REASON,
    NoSuchLetter,
    NotAllowed,
    claim_replay,
    letter_state,
    record,
)
from sagakit.runtime.service import runtime_of


class Archive(BaseModel):
    reason: str = Field(..., min_length=1, max_length=500,
                        description="Why the letter is put aside (required).")


class ReplayRecord(BaseModel):
    message_id: uuid.UUID = Field(..., description="The message id the replay is to be "
                                                   "published under.")
    topic: str = Field(..., min_length=1, max_length=249)
    reason: str | None = Field(None, max_length=500)


class Forgery(BaseModel):
    reason: str = Field(..., min_length=1, max_length=500,
                        description="What of the letter does not match the broker.")
    detail: dict[str, Any] = Field(default_factory=dict)


class ActionResult(BaseModel):
    dead_letter_id: str
    action: str
    state: str
    operator: str


class ReplayClaim(ActionResult):
    message_id: str = Field(..., description="The message id to publish the replay under: the "
                                             "one asked for, or the one the letter's replay was "
                                             "claimed under first.")


def dead_letter_router() -> APIRouter:
    """``/operator/dead-letters``: a letter as kept, and the actions on it, operators only."""
    router = APIRouter(prefix="/operator/dead-letters", tags=["dead letters"])
    responses: dict[int | str, dict[str, Any]] = {
        **AUTH_RESPONSES, 404: {"description": "No such dead letter in this service"},
        409: {"description": "The action does not apply to the letter in its state"}}

    async def act(request: Request, dead_letter_id: uuid.UUID, caller: Principal,
                  action: Literal["replayed", "archived", "forged"], reason: str | None,
                  detail: dict[str, Any]) -> ActionResult:
        rt = runtime_of(request)
        try:
            async with rt.engine.begin() as conn:
                state = await record(conn, rt.name, str(dead_letter_id), caller.subject,
                                     action, reason, detail)
        except NoSuchLetter:
            raise HTTPException(404, detail=f"no dead letter {dead_letter_id}") from None
        except NotAllowed as exc:
            raise HTTPException(409, detail=str(exc)) from None
        if action == "forged":
            metrics.FORGED_REPLAYS.labels(rt.name, FORGED_REASON).inc()
        return ActionResult(dead_letter_id=str(dead_letter_id), action=action, state=state,
                            operator=caller.subject)

    @router.get("/{dead_letter_id}", responses=responses)
    async def get_letter(request: Request, dead_letter_id: uuid.UUID,
                         caller: Annotated[Principal, Security(require(OPERATOR))]
                         ) -> dict[str, Any]:
        """The letter as the service kept it (its original included, as it came: a payment
        token in it is sealed) and its state."""
        rt = runtime_of(request)
        try:
            async with rt.engine.connect() as conn:
                letter, state = await letter_state(conn, rt.name, str(dead_letter_id))
        except NoSuchLetter:
            raise HTTPException(404, detail=f"no dead letter {dead_letter_id}") from None
        return {"id": str(dead_letter_id), "service": rt.name, "state": state,
                "letter": letter}

    @router.post("/{dead_letter_id}/archive", responses=responses)
    async def archive(request: Request, dead_letter_id: uuid.UUID, body: Archive,
                      caller: Annotated[Principal, Security(require(OPERATOR))]
                      ) -> ActionResult:
        return await act(request, dead_letter_id, caller, "archived", body.reason, {})

    @router.post("/{dead_letter_id}/replays", responses=responses)
    async def replayed(request: Request, dead_letter_id: uuid.UUID, body: ReplayRecord,
                       caller: Annotated[Principal, Security(require(OPERATOR))]
                       ) -> ReplayClaim:
        """Claims the letter's replay, before the tool publishes it (409: archived or forged,
        publish nothing); answers the message id to publish it under."""
        rt = runtime_of(request)
        try:
            async with rt.engine.begin() as conn:
                message_id = await claim_replay(conn, rt.name, str(dead_letter_id),
                                                caller.subject, str(body.message_id),
                                                body.topic, body.reason)
        except NoSuchLetter:
            raise HTTPException(404, detail=f"no dead letter {dead_letter_id}") from None
        except NotAllowed as exc:
            raise HTTPException(409, detail=str(exc)) from None
        return ReplayClaim(dead_letter_id=str(dead_letter_id), action="replayed",
                           state="replayed", operator=caller.subject, message_id=message_id)

    @router.post("/{dead_letter_id}/forgeries", responses=responses)
    async def forged(request: Request, dead_letter_id: uuid.UUID, body: Forgery,
                     caller: Annotated[Principal, Security(require(OPERATOR))]
                     ) -> ActionResult:
        return await act(request, dead_letter_id, caller, "forged", body.reason, body.detail)

    return router

