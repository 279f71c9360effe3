"""A refused request is a 422 naming the field, whatever its input held: FastAPI's own handler
echoes the input into strict JSON, and a NaN, an Infinity or a lone surrogate made it a 500."""

from __future__ import annotations

import httpx
import pytest
from fastapi import FastAPI
from pydantic import BaseModel, Field

from sagakit.runtime.http_errors import install_request_validation_handler, json_safe


class _Body(BaseModel):
    quantity: int = Field(ge=0)
    name: str = Field(max_length=3)


def _app() -> FastAPI:
    app = FastAPI()
    install_request_validation_handler(app)

    @app.post("/things")
    async def create(body: _Body) -> dict[str, str]:
        return {"ok": "yes"}

    return app


@pytest.mark.parametrize(("raw", "loc", "echoed"), [
    ('{"quantity": NaN, "name": "a"}', ["body", "quantity"], "NaN"),
    ('{"quantity": Infinity, "name": "a"}', ["body", "quantity"], "Infinity"),
    ('{"quantity": -Infinity, "name": "a"}', ["body", "quantity"], "-Infinity"),
    ('{"quantity": 1, "name": "ab\\ud800cd"}', ["body", "name"], "ab\\ud800cd"),
])
async def test_an_input_json_cannot_carry_is_refused_with_its_field(
        raw: str, loc: list[str], echoed: str) -> None:
    transport = httpx.ASGITransport(app=_app(), raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://app") as client:
        r = await client.post("/things", content=raw,
                              headers={"content-type": "application/json"})
    assert r.status_code == 422, r.text
    [error] = r.json()["detail"]
    assert error["loc"] == loc and error["input"] == echoed


def test_json_safe_keeps_what_json_holds() -> None:
    value = {"a": [1, 2.5, None, True, "x"], "b": {"c": "ü"}}
    assert json_safe(value) == value
    assert json_safe({"k\udc80": float("nan")}) == {"k\\udc80": "NaN"}
