"""Non-Apache brokers on loopback, for compatibility tests.

Installed by ``scripts/install-compat.sh`` under
``${OPSKIT_CACHE:-~/.cache/opskit}/compat/bin`` (see docs/compat-notes.md):

* Tansu, the Hanzo Stream gateway and Heraclitus speak Kafka's protocol
  (:mod:`opskit.sandbox.compat.kafka_brokers`);
* StreamNest speaks HTTP only (:mod:`opskit.sandbox.compat.streamnest`).

Brokers that bind every interface run in a private network namespace and are
reached through a relay on ``127.0.0.1`` (:mod:`opskit.sandbox.compat.base`,
:mod:`opskit.sandbox.compat.relay`): nothing is reachable off the host.
"""

from __future__ import annotations

from opskit.sandbox.compat.apis import API_NAMES
from opskit.sandbox.compat.base import (
    CompatBroker,
    api_versions,
    compat_bin_dir,
    find_binary,
    free_port,
)
from opskit.sandbox.compat.kafka_brokers import (
    start_hanzo_stream,
    start_heraclitus,
    start_tansu,
)
from opskit.sandbox.compat.streamnest import StreamNestCluster, start_streamnest

__all__ = [
    "API_NAMES",
    "CompatBroker",
    "StreamNestCluster",
    "api_versions",
    "compat_bin_dir",
    "find_binary",
    "free_port",
    "start_hanzo_stream",
    "start_heraclitus",
    "start_streamnest",
    "start_tansu",
]
