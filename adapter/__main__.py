"""``python -m adapter``: see ``adapter/entrypoints/cli.py``."""

from adapter.entrypoints.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
