"""A warehouse system of the tests' own, wrapped the way a user wraps theirs: a separate process
(``server.py``: TCP, JSON lines, one batch per connection, a COMMIT that is not idempotent, fault
knobs), the port a user would write for it (``port.py``) and ports that break one promise each
(``broken.py``), for ``check-port`` to catch."""
