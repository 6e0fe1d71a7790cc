"""The explicit static -> dynamic controller quorum upgrade (``kraft.version`` 0 -> 1).

Kafka 4.1 is the first release whose UpdateFeatures accepts ``kraft.version`` (the
leader writes the voter set into the metadata log, after which voters can be added
and removed). It cannot be undone. ``kafka-features upgrade --release-version`` does
it too, silently (KAFKA-21426): opskit never does it implicitly; this is its own step,
dry run by default.

After the upgrade Kafka's documentation expects ``controller.quorum.bootstrap.servers``
and no ``controller.quorum.voters`` on every node; nodes that still carry the static
list keep running (the voter set now comes from the log), so the files are rewritten
for the nodes' next restart.
"""

from __future__ import annotations

from dataclasses import dataclass

from opskit.errors import RefusedError

#: the first Kafka release whose UpdateFeatures upgrades kraft.version (KAFKA-16538)
MIN_VERSION = (4, 1)


@dataclass(frozen=True)
class QuorumUpgradePlan:
    kafka_version: str
    kraft_version: int            # finalized now (0: static)
    voters: tuple[int, ...]
    #: the cluster is dynamic already but the nodes' files still name static voters
    #: (upgraded outside opskit, e.g. by --release-version): only the files change
    files_only: bool = False

    @property
    def actions(self) -> tuple[str, ...]:
        upgrade = ("UpdateFeatures kraft.version=1 (irreversible): the controller leader "
                   f"writes the voter set ({', '.join(map(str, self.voters))}) into the "
                   "metadata log")
        files = ("every node's server.properties: controller.quorum.voters replaced by "
                 "controller.quorum.bootstrap.servers (applied at its next restart; running "
                 "nodes keep working meanwhile)")
        acts = () if self.files_only else (
            upgrade, "verify: kraft.version finalized at 1, the same voters")
        return (*acts, files, "record what was done in the playbook directory")


def _version(text: str) -> tuple[int, int]:
    parts = (text.split(".") + ["0", "0"])[:2]
    try:
        return int(parts[0]), int(parts[1])
    except ValueError:
        return (0, 0)


def plan_quorum_upgrade(kafka_version: str, kraft_version: int, voters: tuple[int, ...],
                        files_static: bool) -> QuorumUpgradePlan:
    """What ``playbook upgrade-quorum`` would do, or RefusedError (nothing is changed)."""
    if _version(kafka_version) < MIN_VERSION:
        raise RefusedError(
            f"Kafka {kafka_version} cannot change kraft.version on a live cluster (Kafka 4.1 "
            "is the first that can): the quorum stays static; upgrade Kafka first, or keep "
            "the broker-only scale-out")
    if kraft_version >= 1 and not files_static:
        raise RefusedError(f"the quorum is already dynamic (kraft.version {kraft_version}); "
                           "nothing to upgrade: scale out with --controllers")
    if not voters:
        raise RefusedError("no controller voter found; is the quorum reachable?")
    return QuorumUpgradePlan(kafka_version, kraft_version, tuple(sorted(voters)),
                             files_only=kraft_version >= 1)
