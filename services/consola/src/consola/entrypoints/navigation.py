"""The console's sections, as the navigation bar lists them. A section not built yet is shown,
greyed, so that the layout is the one the finished console has."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Section:
    key: str
    title: str
    path: str | None
    """None while the section is not built."""


NAVIGATION = (
    Section("overview", "Overview", "/"),
    Section("sagas", "Sagas", "/sagas"),
    Section("dead-letters", "Dead letters", "/dead-letters"),
    Section("payments", "Payments needing action", "/payments"),
)
