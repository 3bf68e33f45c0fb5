"""Acme ERP: an example of wrapping an HTTP system with the kit (port, fake server, contract tests)."""
