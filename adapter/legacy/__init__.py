"""Concrete legacy ports. ``SimulatorPort`` is the reference implementation (for ``legacy_sim``)."""

from adapter.legacy.simulator import SimulatorPort, SimulatorSession, parse_legacy_url

__all__ = ["SimulatorPort", "SimulatorSession", "parse_legacy_url"]
