"""The one test harness: what more than one test folder needs, written once.

* :mod:`tests.support.constants`: secrets, bearer tokens, principals, the protocol version, timeouts,
  and the PostgreSQL parameter (with its skip mark) for ``db_url``.
* :mod:`tests.support.kit`: the kit factory, through ``adapter.bootstrap.build`` like the entry points.
* :mod:`tests.support.servers`: real servers: uvicorn in a thread or in the event loop, and
  ``python -m adapter stdio`` as a subprocess (raw or under the SDK's client).
* :mod:`tests.support.mcp`: the 2026-07-28 headers and ``_meta``, and the SSE parser for responses.
* :mod:`tests.support.wait`: ``wait_until``, so no test synchronises by sleeping.

Conftests turn these into fixtures; tests import constants and helpers from here directly.
"""
