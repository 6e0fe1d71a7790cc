"""A sandbox node's files: ``server.properties`` (KRaft roles, listeners, quorum,
security, rack) and its log4j configuration."""

from __future__ import annotations

import os

from opskit.sandbox.security import CLIENT_LISTENER, SandboxSecurity
from opskit.sandbox.state import Node, SandboxState


def server_properties(st: SandboxState, node: Node, sec: SandboxSecurity) -> str:
    n = st.brokers
    rf = min(3, n)
    lines = [
        f"process.roles={node.roles}",
        f"node.id={node.node_id}",
        (f"controller.quorum.voters=0@127.0.0.1:{st.controller_port}"
         if st.quorum == "static" else
         "controller.quorum.bootstrap.servers=" + ",".join(
             f"127.0.0.1:{st.controller_port_of(c)}" for c in st.controllers)),
        "controller.listener.names=CONTROLLER",
        "inter.broker.listener.name=PLAINTEXT",
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        f"advertised.listeners=PLAINTEXT://127.0.0.1:{node.port}",
        "log.dirs=" + ",".join(str(d) for d in st.data_dirs(node)),
        "auto.create.topics.enable=false",
        "num.partitions=1",
        "default.replication.factor=1",
        f"offsets.topic.replication.factor={rf}",
        "offsets.topic.num.partitions=12",
        f"transaction.state.log.replication.factor={rf}",
        "transaction.state.log.min.isr=1",
        "group.initial.rebalance.delay.ms=0",
        "log.retention.hours=168",
        # small segments so retention tests can delete data within seconds
        "log.retention.check.interval.ms=5000",
        "log.segment.delete.delay.ms=1000",
        "num.io.threads=4",
        "num.network.threads=2",
        "delete.topic.enable=true",
    ]
    if node.rack is not None:
        lines.append(f"broker.rack={node.rack}")
    client = "PLAINTEXT"
    if sec.enabled:
        client = CLIENT_LISTENER
        drop = ("inter.broker.listener.name=", "listener.security.protocol.map=")
        lines = [ln for ln in lines if not ln.startswith(drop)] + sec.broker_properties()
        lines = [ln.replace("PLAINTEXT://", f"{client}://") for ln in lines]
    listeners = f"{client}://127.0.0.1:{node.port}"
    if "controller" in node.roles:
        listeners += f",CONTROLLER://127.0.0.1:{st.controller_port_of(node)}"
    lines.insert(3, f"listeners={listeners}")
    return "\n".join(lines) + "\n"


def log4j_properties(node: Node) -> str:
    request_log = ""
    if os.environ.get("OPSKIT_SANDBOX_REQUEST_LOG"):
        # every request the broker completes, for counting round trips in benchmarks
        request_log = (
            "log4j.logger.kafka.request.logger=DEBUG, R\n"
            "log4j.additivity.kafka.request.logger=false\n"
            "log4j.appender.R=org.apache.log4j.FileAppender\n"
            f"log4j.appender.R.File={node.dir / 'requests.log'}\n"
            "log4j.appender.R.layout=org.apache.log4j.PatternLayout\n"
            "log4j.appender.R.layout.ConversionPattern=%m%n\n"
            # SASL logins are not requests the request logger sees: one line per login
            "log4j.logger.org.apache.kafka.common.security.authenticator."
            "SaslServerAuthenticator=DEBUG, R\n"
            "log4j.additivity.org.apache.kafka.common.security.authenticator."
            "SaslServerAuthenticator=false\n"
        )
    return request_log + (
        "log4j.rootLogger=INFO, F\n"
        "log4j.appender.F=org.apache.log4j.RollingFileAppender\n"
        f"log4j.appender.F.File={node.log_path}\n"
        "log4j.appender.F.MaxFileSize=20MB\n"
        "log4j.appender.F.MaxBackupIndex=2\n"
        "log4j.appender.F.layout=org.apache.log4j.PatternLayout\n"
        "log4j.appender.F.layout.ConversionPattern=[%d] %p %m (%c)%n\n"
        + ("" if request_log else "log4j.logger.kafka.request.logger=WARN\n")
        + "log4j.logger.state.change.logger=WARN\n"
        "log4j.logger.org.apache.kafka.clients=WARN\n"
    )
