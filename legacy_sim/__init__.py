"""A simulated stateful legacy import system (the thing the kit wraps), plus its own client.

Standalone: nothing here imports ``adapter``. Modules:

* ``protocol``: the line protocol (the only module shared by server and client);
* ``faults``: latency / transient errors / drop-after-commit knobs;
* ``engine``: semantics and SQLite storage, one ``EngineSession`` per connection;
* ``server``: TCP server (``start_server``); ``client``: plain TCP client (``LegacyClient``);
* ``inprocess``: the same semantics without sockets (``InProcessClient``);
* ``__main__``: ``python -m legacy_sim serve|dump``.
"""

from legacy_sim.client import ConnectFailedError, ConnectionLostError, LegacyClient, LegacySimError, SimClient
from legacy_sim.engine import LegacyEngine
from legacy_sim.faults import Faults
from legacy_sim.inprocess import InProcessClient
from legacy_sim.server import SimulatorServer, start_server

__all__ = [
    "ConnectFailedError",
    "ConnectionLostError",
    "Faults",
    "InProcessClient",
    "LegacyClient",
    "LegacyEngine",
    "LegacySimError",
    "SimClient",
    "SimulatorServer",
    "start_server",
]
