"""Resource-server mode: the MCP server as an OAuth 2.1 resource server of a company's identity provider.

Selected by ``ADAPTER_OAUTH_ISSUER`` (docs/operations.md, "Signing in through an identity provider").

* ``keys.py``: the issuer's metadata and signing keys (JWKS): cached, refetched on an unknown
  ``kid``, rate-limited;
* ``verify.py``: a token checked: a JWT (signature, ``alg`` allow-list, ``iss``, ``aud``, ``exp``,
  ``nbf``) or RFC 7662 introspection;
* ``callers.py``: claims -> the kit's ``Principal`` (MCP) or an operator role (the admin side);
* ``scopes.py``: the one table of which scope each tool and method needs;
* ``guard.py``: the ASGI layer before the SDK: 401 / 403 / 503 with ``WWW-Authenticate``, else the
  caller;
* ``wiring.py``: ``ResourceServer``, the above built from the settings, and the RFC 9728 metadata.

stdio never uses any of this: the host that started the process is the one local principal.
"""

from adapter.entrypoints.oauth.wiring import ResourceServer, check_oauth_settings

__all__ = ["ResourceServer", "check_oauth_settings"]
