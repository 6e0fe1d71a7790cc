"""`--debug` (text and json logs) never prints a SASL password: health, throughput and the
exporter on the secured sandbox, whose kafka-python client logs its whole configuration
at DEBUG (the password masked by opskit's logging filter)."""

from __future__ import annotations

import pytest

from tests.helpers import run_cli

COMMANDS = (("health",), ("throughput", "--interval", "1s"), ("exporter", "--once"),
            ("lag", "--all-groups"))


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_debug_logs_never_print_the_password(kafka_sasl_ssl, log_format):
    password = kafka_sasl_ssl.password("admin")
    masked_config_lines = logged = 0
    for cmd in COMMANDS:
        r = run_cli("--debug", "--log-format", log_format, *cmd, *kafka_sasl_ssl.cli_args("admin"))
        assert r.code in (0, 1, 2), (cmd, r.err[-2000:])
        assert password not in r.out and password not in r.err, cmd
        logged += r.err.count("\n")
        masked_config_lines += sum(1 for line in r.err.splitlines()
                                   if "with configuration" in line and "********" in line)
    assert logged > 20  # --debug did log
    # kafka-python's "Starting KafkaAdminClient with configuration" line was there, masked
    assert masked_config_lines >= 1
