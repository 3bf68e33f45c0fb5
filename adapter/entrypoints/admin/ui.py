"""The dashboard under /admin/ui (being built)."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter(prefix="/admin/ui", tags=["dashboard"], include_in_schema=False)
