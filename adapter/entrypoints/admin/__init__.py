"""The admin side of the HTTP app: the JSON API (``api.py``) and the dashboard (``ui.py``).

The routes are imported when the router is built, not with the package: the ops CLI imports
``schemas.py`` from here and should not load the web stack for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fastapi import APIRouter

__all__ = ["admin_router"]


def admin_router() -> APIRouter:
    from fastapi import APIRouter

    from adapter.entrypoints.admin.api import router as api_router
    from adapter.entrypoints.admin.ui import router as ui_router

    router = APIRouter()
    router.include_router(api_router)
    router.include_router(ui_router)
    return router
