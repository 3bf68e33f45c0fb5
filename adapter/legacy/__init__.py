"""Concrete legacy ports. ``simulator.SimulatorPort`` is the reference implementation (for ``legacy_sim``).

Nothing is imported here on purpose: importing ``adapter.legacy`` must not load the simulator for a
deployment that wraps its own system.
"""
