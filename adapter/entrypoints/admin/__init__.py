"""The admin side of the HTTP app: the JSON API (``api.py``) and the dashboard (``ui.py``)."""

from __future__ import annotations

from fastapi import APIRouter

from adapter.entrypoints.admin.api import router as api_router
from adapter.entrypoints.admin.ui import router as ui_router

__all__ = ["admin_router"]


def admin_router() -> APIRouter:
    router = APIRouter()
    router.include_router(api_router)
    router.include_router(ui_router)
    return router
