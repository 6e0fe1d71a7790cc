"""The finalized features (KIP-584) from ApiVersions v3, opskit's codec: the request
byte-for-byte kafka-python's, answers encoded by kafka-python decoded right (min and max
levels not swapped, unknown tags skipped, UNSUPPORTED_VERSION with a v0 body), and the
reads that use it name an unreachable cluster as they did with kafka-python's client."""

from __future__ import annotations

import socket
import struct
import threading
from typing import Any

import pytest
from kafka.protocol.metadata.api_versions import ApiVersionsRequest, ApiVersionsResponse

from opskit.adapters.kafka.protocol import codec as kp
from opskit.adapters.kafka.protocol import features
from opskit.adapters.reassign.admin import ReassignAdmin
from opskit.core.connection import ConnectionConfig
from opskit.errors import KafkaUnavailableError

CID, CLIENT = 0x1234, "opskit-test"


def _decode(body: bytes) -> Any:
    req = features.api_versions_v3()
    cid, answer = kp.decode_response(req, struct.pack(">i", CID) + body)  # header v0
    assert cid == CID
    return answer


def _response(**kw: Any) -> ApiVersionsResponse:
    A = ApiVersionsResponse.ApiVersion
    base: dict[str, Any] = {"error_code": 0, "throttle_time_ms": 0, "api_keys": [
        A(api_key=18, min_version=0, max_version=4), A(api_key=3, min_version=0, max_version=13)]}
    base.update(kw)
    return ApiVersionsResponse(**base)


def test_request_is_kafka_pythons() -> None:
    req = ApiVersionsRequest(client_software_name="opskit",
                             client_software_version=features.__version__)
    req.with_header(correlation_id=CID, client_id=CLIENT)
    want = bytes(req.encode(version=3, header=True, framed=True))
    assert kp.encode_request(features.api_versions_v3(), CID, CLIENT) == want


def test_finalized_and_supported_features_decoded() -> None:
    F = ApiVersionsResponse.FinalizedFeatureKey
    S = ApiVersionsResponse.SupportedFeatureKey
    resp = _response(
        supported_features=[S(name="metadata.version", min_version=1, max_version=30),
                            S(name="kraft.version", min_version=0, max_version=1)],
        finalized_features_epoch=4711,
        # min and max differ here (a broker finalizes them equal): a swap would show
        finalized_features=[F(name="metadata.version", max_version_level=30, min_version_level=7),
                            F(name="kraft.version", max_version_level=1, min_version_level=0)],
        zk_migration_ready=True)
    err, got = _decode(bytes(resp.encode(version=3)))
    assert err == 0
    assert got.finalized == {"metadata.version": (7, 30), "kraft.version": (0, 1)}
    assert got.supported == {"metadata.version": (1, 30), "kraft.version": (0, 1)}
    assert got.epoch == 4711
    assert got.apis == {18: (0, 4), 3: (0, 13)}


def test_no_features_and_unknown_tags() -> None:
    err, got = _decode(bytes(_response().encode(version=3)))
    assert (err, got.finalized, got.supported, got.epoch) == (0, {}, {}, None)
    # an unknown tag (99) after the known ones is skipped; a tagged field on an ApiVersion too
    finalized = b"\x02" + b"\x11metadata.version" + struct.pack(">hh", 19, 19) + b"\x00"
    body = (struct.pack(">h", 0) + b"\x02" + struct.pack(">hhh", 18, 0, 3) + b"\x01\x05\x02ab"
            + struct.pack(">i", 0)
            + b"\x02" + b"\x02" + bytes((len(finalized),)) + finalized + b"\x63\x03xyz")
    err, got = _decode(body)
    assert err == 0 and got.finalized == {"metadata.version": (19, 19)}
    assert got.apis == {18: (0, 3)}


def test_unsupported_version_answers_v0() -> None:
    """A broker without ApiVersions v3 answers error 35 with a v0 body (KIP-511)."""
    A = ApiVersionsResponse.ApiVersion
    v0 = ApiVersionsResponse(error_code=35, api_keys=[A(api_key=18, min_version=0, max_version=2)])
    err, got = _decode(bytes(v0.encode(version=0)))
    assert err == features.UNSUPPORTED_VERSION and got.finalized == {}


def _serve_once(answer: bytes) -> tuple[socket.socket, threading.Thread]:
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)

    def run() -> None:
        conn, _ = srv.accept()
        with conn:
            (size,) = struct.unpack(">i", conn.recv(4))
            got = b""
            while len(got) < size:
                got += conn.recv(size - len(got))
            (cid,) = struct.unpack_from(">i", got, 4)
            frame = struct.pack(">i", cid) + answer
            conn.sendall(struct.pack(">i", len(frame)) + frame)

    th = threading.Thread(target=run, daemon=True)
    th.start()
    return srv, th


def test_read_features_over_a_socket_and_old_brokers() -> None:
    F = ApiVersionsResponse.FinalizedFeatureKey
    srv, th = _serve_once(bytes(_response(finalized_features=[
        F(name="metadata.version", max_version_level=19, min_version_level=19)]).encode(version=3)))
    with srv:
        conn = ConnectionConfig(f"127.0.0.1:{srv.getsockname()[1]}")
        assert features.read_features(conn, 5).finalized == {"metadata.version": (19, 19)}
        th.join(5)
    A = ApiVersionsResponse.ApiVersion
    old = ApiVersionsResponse(error_code=35, api_keys=[A(api_key=18, min_version=0, max_version=2)])
    srv, th = _serve_once(bytes(old.encode(version=0)))
    with srv:
        conn = ConnectionConfig(f"127.0.0.1:{srv.getsockname()[1]}")
        with pytest.raises(kp.WireUnsupported, match="does not speak ApiVersions v3"):
            features.read_features(conn, 5)
        th.join(5)


def test_metadata_level_of_an_old_broker_is_none() -> None:
    A = ApiVersionsResponse.ApiVersion
    old = ApiVersionsResponse(error_code=35, api_keys=[A(api_key=18, min_version=0, max_version=2)])
    srv, th = _serve_once(bytes(old.encode(version=0)))
    with srv, ReassignAdmin(ConnectionConfig(f"127.0.0.1:{srv.getsockname()[1]}"),
                            timeout=5) as ra:
        assert ra.metadata_level() is None
        assert ra.fully_cordoned([0, 1]) == set()
        th.join(5)


def test_unreachable_cluster_is_named_not_nothing_cordoned() -> None:
    """A failed look is "cannot reach Kafka", never "no broker cordoned"."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    with ReassignAdmin(ConnectionConfig(f"127.0.0.1:{port}"), timeout=2) as ra, \
            pytest.raises(KafkaUnavailableError,
                          match=rf"cannot reach Kafka at 127\.0\.0\.1:{port} \(DescribeFeatures, "
                                r"timeout 2s\)"):
        ra.fully_cordoned([0])
