"""legacy-mcp-adapter: wrap a stateful legacy system as a stateless, safe MCP server.

The public surface is small on purpose:

* :class:`adapter.services.ImportService` - every use case, called by every transport;
* :mod:`adapter.ports.legacy` - the interface to implement to wrap your own system;
* :func:`adapter.bootstrap.build` - wire settings, store, legacy port and services.
"""

__version__ = "0.1.0"
__all__ = ["__version__"]
