"""opskit's Kafka wire codec: requests byte-for-byte equal to kafka-python's (the
reference, used here only), answers encoded by kafka-python or by hand decoded
right (tagged fields skipped, null arrays, cut-short answers), record batches."""

from __future__ import annotations

import gzip
import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.admin import DescribeLogDirsRequest, DescribeLogDirsResponse
from kafka.protocol.admin.configs import DescribeConfigsRequest, DescribeConfigsResponse
from kafka.protocol.admin.groups import (
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    ListGroupsRequest,
    ListGroupsResponse,
)
from kafka.protocol.consumer.fetch import FetchRequest, FetchResponse
from kafka.protocol.consumer.group import OffsetFetchRequest, OffsetFetchResponse
from kafka.protocol.consumer.offsets import ListOffsetsRequest, ListOffsetsResponse
from kafka.protocol.metadata.api_versions import ApiVersionsRequest, ApiVersionsResponse
from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from kafka.protocol.metadata.metadata import MetadataRequest, MetadataResponse
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from opskit.adapters.kafka.protocol import codec as kp
from opskit.adapters.kafka.protocol.client import WireUnsupported
from opskit.adapters.kafka.protocol.offsets import first_record_at_or_after

CID, CLIENT = 0x1234, "opskit-test"


def _reference(req: Any, version: int) -> bytes:
    req.with_header(correlation_id=CID, client_id=CLIENT)
    return bytes(req.encode(version=version, header=True, framed=True))


def _ours(req: kp.Request) -> bytes:
    return kp.encode_request(req, CID, CLIENT)


def _answer(req: kp.Request, body: bytes, header_tags: bytes = b"\x00") -> Any:
    """Decode ``body`` as the answer to ``req`` (response header added as a broker would)."""
    flexible = req.version >= kp.FLEXIBLE_FROM[req.api_key] and req.api_key != kp.API_API_VERSIONS
    cid, decoded = kp.decode_response(req, struct.pack(">i", CID) + (header_tags if flexible else b"")
                                      + body)
    assert cid == CID
    return decoded


def _body(resp: Any, version: int) -> bytes:
    return bytes(resp.encode(version=version))


# ----- requests: byte-for-byte kafka-python's -----
def test_find_coordinator_v4_request() -> None:
    keys = ["g1", "gröup-2", "x" * 300]
    want = _reference(FindCoordinatorRequest(key_type=0, coordinator_keys=keys), 4)
    assert _ours(kp.find_coordinator(4, keys)) == want


@pytest.mark.parametrize("version", range(6))
def test_describe_groups_request(version: int) -> None:
    groups = ["a", "bb", "ccc-" * 40]
    want = _reference(DescribeGroupsRequest(groups=groups, include_authorized_operations=False),
                      version)
    assert _ours(kp.describe_groups(version, groups)) == want


def test_offset_fetch_v8_request_all_partitions_and_some() -> None:
    G = OffsetFetchRequest.OffsetFetchRequestGroup
    groups = [f"group-{i}" for i in range(130)]  # > 127: a two-byte array length
    want = _reference(OffsetFetchRequest(groups=[G(group_id=g, topics=None) for g in groups],
                                         require_stable=False), 8)
    assert _ours(kp.offset_fetch(8, groups)) == want
    T = G.OffsetFetchRequestTopics
    want = _reference(OffsetFetchRequest(groups=[G(group_id="g", topics=[
        T(name="t1", partition_indexes=[0, 3]), T(name="t2", partition_indexes=[])])],
        require_stable=True), 8)
    assert _ours(kp.offset_fetch(8, ["g"], {"t1": [0, 3], "t2": []}, require_stable=True)) == want


@pytest.mark.parametrize("version", range(1, 6))
@pytest.mark.parametrize("timestamp", [-2, -1, 1_700_000_000_000])
def test_list_offsets_request(version: int, timestamp: int) -> None:
    T = ListOffsetsRequest.ListOffsetsTopic
    P = T.ListOffsetsPartition
    topics = {"alpha": [0, 1, 2], "beta": [7]}
    want = _reference(ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[
        T(name=t, partitions=[P(partition_index=p, current_leader_epoch=-1, timestamp=timestamp)
                              for p in ps]) for t, ps in topics.items()]), version)
    assert _ours(kp.list_offsets(version, topics, timestamp)) == want


@pytest.mark.parametrize("version", range(4, 12))
def test_fetch_request(version: int) -> None:
    T = FetchRequest.FetchTopic
    P = T.FetchPartition
    topics = {"alpha": [(0, 5, 16384), (3, 0, 16384)], "beta": [(1, 1 << 40, 1 << 20)]}
    want = _reference(FetchRequest(
        replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=32 << 20, isolation_level=0,
        session_id=0, session_epoch=-1, rack_id="", forgotten_topics_data=[],
        topics=[T(topic=t, partitions=[
            P(partition=p, current_leader_epoch=-1, log_start_offset=-1, fetch_offset=o,
              partition_max_bytes=m) for p, o, m in ps]) for t, ps in topics.items()]), version)
    assert _ours(kp.fetch(version, topics, max_wait_ms=0, min_bytes=0, max_bytes=32 << 20)) == want


@pytest.mark.parametrize("version", range(1, 9))
def test_metadata_request(version: int) -> None:
    names = ["alpha", "beta"]
    want = _reference(MetadataRequest(
        topics=[MetadataRequest.MetadataRequestTopic(name=t) for t in names],
        allow_auto_topic_creation=False, include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False), version)
    assert _ours(kp.metadata(version, names)) == want
    want_all = _reference(MetadataRequest(
        topics=None, allow_auto_topic_creation=False, include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False), version)
    assert _ours(kp.metadata(version, None)) == want_all


def test_api_versions_v0_request() -> None:
    assert _ours(kp.api_versions()) == _reference(ApiVersionsRequest(), 0)


def test_versions_outside_the_codec_are_refused() -> None:
    for build in (lambda: kp.find_coordinator(3, ["g"]), lambda: kp.offset_fetch(9, ["g"]),
                  lambda: kp.fetch(12, {}, 0, 0, 1), lambda: kp.list_offsets(6, {}, -1),
                  lambda: kp.metadata(9, None), lambda: kp.describe_groups(6, ["g"])):
        with pytest.raises(WireUnsupported):
            build()


# ----- answers encoded by kafka-python -----
def test_api_versions_v0_answer() -> None:
    A = ApiVersionsResponse.ApiVersion
    resp = ApiVersionsResponse(error_code=0, api_keys=[
        A(api_key=1, min_version=4, max_version=17), A(api_key=9, min_version=1, max_version=9)])
    assert _answer(kp.api_versions(), _body(resp, 0)) == (0, {1: (4, 17), 9: (1, 9)})


def test_find_coordinator_v4_answer() -> None:
    C = FindCoordinatorResponse.Coordinator
    resp = FindCoordinatorResponse(throttle_time_ms=0, coordinators=[
        C(key="g1", node_id=3, host="broker-3", port=9093, error_code=0, error_message=None),
        C(key="g2", node_id=-1, host="", port=-1, error_code=15, error_message="not available")])
    got = _answer(kp.find_coordinator(4, ["g1", "g2"]), _body(resp, 4))
    assert got == [kp.Coordinator("g1", 3, "broker-3", 9093, 0), kp.Coordinator("g2", -1, "", -1, 15)]


@pytest.mark.parametrize("version", range(6))
def test_describe_groups_answer(version: int) -> None:
    G = DescribeGroupsResponse.DescribedGroup
    M = G.DescribedGroupMember
    resp = DescribeGroupsResponse(throttle_time_ms=0, groups=[
        G(error_code=0, group_id="g", group_state="Stable", protocol_type="consumer",
          protocol_data="range", authorized_operations=None, members=[
              M(member_id="m-1", group_instance_id="inst" if version >= 4 else None,
                client_id="c", client_host="/10.0.0.1", member_metadata=b"\x00\x01",
                member_assignment=b"\x00\x00" + bytes(range(200)))]),
        G(error_code=69, group_id="gone", group_state="Dead", protocol_type="", protocol_data="",
          authorized_operations=None, members=[])])
    got = _answer(kp.describe_groups(version, ["g", "gone"]), _body(resp, version))
    assert got == [
        kp.DescribedGroup(0, "g", "Stable", "consumer", "range", [kp.GroupMember(
            "m-1", "inst" if version >= 4 else None, "c", "/10.0.0.1", b"\x00\x01",
            b"\x00\x00" + bytes(range(200)))]),
        kp.DescribedGroup(69, "gone", "Dead", "", "", [])]


def test_offset_fetch_v8_answer() -> None:
    G = OffsetFetchResponse.OffsetFetchResponseGroup
    T = G.OffsetFetchResponseTopics
    P = T.OffsetFetchResponsePartitions
    resp = OffsetFetchResponse(throttle_time_ms=0, groups=[
        G(group_id="g1", error_code=0, topics=[
            T(name="t", partitions=[
                P(partition_index=0, committed_offset=42, committed_leader_epoch=3, metadata="",
                  error_code=0),
                P(partition_index=1, committed_offset=-1, committed_leader_epoch=-1, metadata=None,
                  error_code=0),
                P(partition_index=2, committed_offset=1 << 50, committed_leader_epoch=-1,
                  metadata="m" * 500, error_code=0),  # a two-byte length to skip
                P(partition_index=3, committed_offset=-1, committed_leader_epoch=-1, metadata=None,
                  error_code=12)])]),
        G(group_id="g2", error_code=16, topics=[])])
    got = _answer(kp.offset_fetch(8, ["g1", "g2"]), _body(resp, 8))
    assert got == [kp.GroupOffsets("g1", 0, [("t", [(0, 42, 0), (1, -1, 0), (2, 1 << 50, 0),
                                                    (3, -1, 12)])]),
                   kp.GroupOffsets("g2", 16, [])]


@pytest.mark.parametrize("version", range(1, 6))
def test_list_offsets_answer(version: int) -> None:
    T = ListOffsetsResponse.ListOffsetsTopicResponse
    P = T.ListOffsetsPartitionResponse
    resp = ListOffsetsResponse(throttle_time_ms=0, topics=[
        T(name="alpha", partitions=[
            P(partition_index=0, error_code=0, timestamp=-1, offset=17, leader_epoch=2),
            P(partition_index=1, error_code=6, timestamp=-1, offset=-1, leader_epoch=-1)]),
        T(name="beta", partitions=[])])
    got = _answer(kp.list_offsets(version, {"alpha": [0, 1], "beta": []}, -1), _body(resp, version))
    assert got == [("alpha", [(0, 0, -1, 17), (1, 6, -1, -1)]), ("beta", [])]


@pytest.mark.parametrize("version", range(4, 12))
def test_fetch_answer(version: int) -> None:
    T = FetchResponse.FetchableTopicResponse
    P = T.PartitionData
    A = P.AbortedTransaction
    records = _batch(10, [(0, 1_000), (1, 2_000)])
    resp = FetchResponse(throttle_time_ms=0, error_code=0, session_id=0, responses=[
        T(topic="alpha", partitions=[
            P(partition_index=0, error_code=0, high_watermark=12, last_stable_offset=12,
              log_start_offset=0, aborted_transactions=[A(producer_id=7, first_offset=3)],
              preferred_read_replica=-1, records=records),
            P(partition_index=1, error_code=1, high_watermark=-1, last_stable_offset=-1,
              log_start_offset=-1, aborted_transactions=None, preferred_read_replica=-1,
              records=None)])])
    got = _answer(kp.fetch(version, {"alpha": [(0, 10, 100), (1, 0, 100)]}, 0, 0, 1000),
                  _body(resp, version))
    (topic, parts), = got
    assert topic == "alpha"
    assert [(p.partition, p.error_code, p.high_watermark) for p in parts] == [(0, 0, 12), (1, 1, -1)]
    assert bytes(parts[0].records) == records and parts[1].records is None


@pytest.mark.parametrize("version", range(1, 9))
def test_metadata_answer(version: int) -> None:
    B = MetadataResponse.MetadataResponseBroker
    T = MetadataResponse.MetadataResponseTopic
    P = T.MetadataResponsePartition
    resp = MetadataResponse(
        throttle_time_ms=0, cluster_id="c", controller_id=1,
        brokers=[B(node_id=1, host="h1", port=9092, rack=None), B(node_id=2, host="h2", port=9093,
                                                                rack="rack-b")],
        topics=[T(error_code=0, name="alpha", is_internal=False, authorized_operations=None,
                  partitions=[
                      P(error_code=0, partition_index=0, leader_id=2, leader_epoch=5,
                        replica_nodes=[2, 1], isr_nodes=[2], offline_replicas=[1]),
                      P(error_code=5, partition_index=1, leader_id=-1, leader_epoch=-1,
                        replica_nodes=[1], isr_nodes=[], offline_replicas=[])]),
                T(error_code=3, name="missing", is_internal=False, authorized_operations=set(),
                  partitions=[])])
    brokers, topics = _answer(kp.metadata(version, ["alpha", "missing"]), _body(resp, version))
    assert brokers == [kp.Broker(1, "h1", 9092), kp.Broker(2, "h2", 9093)]
    assert topics == [kp.TopicMetadata(0, "alpha", [(0, 0, 2), (5, 1, -1)]),
                      kp.TopicMetadata(3, "missing", [])]


@pytest.mark.parametrize("version", range(1, 9))
def test_metadata_answer_with_replicas(version: int) -> None:
    B = MetadataResponse.MetadataResponseBroker
    T = MetadataResponse.MetadataResponseTopic
    P = T.MetadataResponsePartition
    resp = MetadataResponse(
        throttle_time_ms=0, cluster_id="cid-1", controller_id=2,
        brokers=[B(node_id=1, host="h1", port=9092, rack=None)],
        topics=[T(error_code=0, name="alpha", is_internal=False, authorized_operations=None,
                  partitions=[
                      P(error_code=0, partition_index=0, leader_id=2, leader_epoch=5,
                        replica_nodes=[2, 1, 3], isr_nodes=[2, 3], offline_replicas=[1]),
                      P(error_code=5, partition_index=1, leader_id=-1, leader_epoch=-1,
                        replica_nodes=[1], isr_nodes=[], offline_replicas=[])])])
    md = _answer(kp.metadata(version, None, replicas=True), _body(resp, version))
    assert md.brokers == [kp.Broker(1, "h1", 9092)]
    assert md.cluster_id == ("cid-1" if version >= 2 else None)
    assert md.controller_id == 2
    assert md.topics == [kp.TopicMetadata(0, "alpha", [(0, 0, 2, (2, 1, 3), (2, 3)),
                                                       (5, 1, -1, (1,), ())])]


@pytest.mark.parametrize("version", range(5))
def test_list_groups_request(version: int) -> None:
    ref = ListGroupsRequest(states_filter=[]) if version >= 4 else ListGroupsRequest()
    assert _ours(kp.list_groups(version)) == _reference(ref, version)


@pytest.mark.parametrize("version", range(5))
def test_list_groups_answer(version: int) -> None:
    G = ListGroupsResponse.ListedGroup
    groups = [G(group_id="analytics-ingest", protocol_type="consumer", group_state="Stable"),
              G(group_id="g\u00e9", protocol_type="", group_state="Empty")]
    resp = ListGroupsResponse(throttle_time_ms=7, error_code=0, groups=groups)
    err, got = _answer(kp.list_groups(version), _body(resp, version))
    assert err == 0
    want_state = ["Stable", "Empty"] if version >= 4 else [None, None]
    assert got == [kp.ListedGroup("analytics-ingest", "consumer", want_state[0]),
                   kp.ListedGroup("g\u00e9", "", want_state[1])]


@pytest.mark.parametrize("version", [1, 2, 3])
@pytest.mark.parametrize("keys", [None, ["retention.ms", "cleanup.policy"]])
def test_describe_configs_request(version: int, keys: list[str] | None) -> None:
    Res = DescribeConfigsRequest.DescribeConfigsResource
    ref = DescribeConfigsRequest(
        resources=[Res(resource_type=2, resource_name=t, configuration_keys=keys)
                   for t in ("alpha", "beta")],
        include_synonyms=False, include_documentation=False)
    assert _ours(kp.describe_configs(version, ["alpha", "beta"], keys)) == _reference(ref, version)


@pytest.mark.parametrize("version", [1, 2, 3])
def test_describe_configs_answer(version: int) -> None:
    Result = DescribeConfigsResponse.DescribeConfigsResult
    C = Result.DescribeConfigsResourceResult
    S = C.DescribeConfigsSynonym
    resp = DescribeConfigsResponse(throttle_time_ms=0, results=[
        Result(error_code=0, error_message=None, resource_type=2, resource_name="alpha", configs=[
            C(name="retention.ms", value="60000", read_only=False, config_source=1,
              is_sensitive=False, synonyms=[S(name="log.retention.ms", value="1", source=5)],
              config_type=5, documentation="doc"),
            C(name="cleanup.policy", value="delete", read_only=False, config_source=5,
              is_sensitive=False, synonyms=[], config_type=2, documentation=None),
            C(name="secret", value=None, read_only=True, config_source=4, is_sensitive=True,
              synonyms=[], config_type=9, documentation=None)]),
        Result(error_code=3, error_message="unknown", resource_type=2, resource_name="gone",
               configs=[])])
    got = _answer(kp.describe_configs(version, ["alpha", "gone"]), _body(resp, version))
    assert got == [
        kp.ConfigResult(0, None, 2, "alpha", {"retention.ms": ("60000", False),
                                              "cleanup.policy": ("delete", True),
                                              "secret": (None, False)}),
        kp.ConfigResult(3, "unknown", 2, "gone", {})]


@pytest.mark.parametrize("version", [1, 2, 3, 4, 5])
def test_describe_log_dirs_request(version: int) -> None:
    T = DescribeLogDirsRequest.DescribableLogDirTopic
    ref = DescribeLogDirsRequest(topics=[T(topic="alpha", partitions=[0, 1, 7]),
                                         T(topic="béta", partitions=[])])
    ours = kp.describe_log_dirs(version, {"alpha": [0, 1, 7], "béta": []})
    assert _ours(ours) == _reference(ref, version)


@pytest.mark.parametrize("version", [1, 2, 3, 4, 5])
def test_describe_log_dirs_answer(version: int) -> None:
    Result = DescribeLogDirsResponse.DescribeLogDirsResult
    Topic = Result.DescribeLogDirsTopic
    Part = Topic.DescribeLogDirsPartition
    resp = DescribeLogDirsResponse(throttle_time_ms=0, error_code=0, results=[
        Result(error_code=0, log_dir="/data/a", topics=[
            Topic(name="alpha", partitions=[
                Part(partition_index=0, partition_size=1 << 40, offset_lag=0, is_future_key=False),
                Part(partition_index=1, partition_size=17, offset_lag=3, is_future_key=True)])],
            total_bytes=10, usable_bytes=5, is_cordoned=False),
        Result(error_code=57, log_dir="/data/b", topics=[], total_bytes=-1, usable_bytes=-1,
               is_cordoned=True)])
    err, dirs = _answer(kp.describe_log_dirs(version, {"alpha": [0, 1]}), _body(resp, version))
    assert err == 0
    volume = (10, 5) if version >= 4 else (-1, -1)  # total and usable bytes from v4 on
    assert dirs == [
        kp.LogDir(0, "/data/a", [("alpha", [kp.LogDirPartition(0, 1 << 40, 0, False),
                                            kp.LogDirPartition(1, 17, 3, True)])], *volume),
        kp.LogDir(57, "/data/b", [])]


# ----- hand-built answers: tagged fields, null arrays, cut-short answers -----
def _uv(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _cs(s: str | None) -> bytes:
    return b"\x00" if s is None else _uv(len(s.encode()) + 1) + s.encode()


#: two unknown tagged fields (tag 0: 3 bytes, tag 200: 130 bytes)
TAGS = _uv(2) + _uv(0) + _uv(3) + b"abc" + _uv(200) + _uv(130) + bytes(130)


def test_tagged_fields_are_skipped_everywhere() -> None:
    body = (struct.pack(">i", 0) + _uv(3)  # compact array: length + 1
            + _cs("g1") + struct.pack(">i", 4) + _cs("h") + struct.pack(">ih", 1, 0) + _cs(None) + TAGS
            + _cs("g2") + struct.pack(">i", 5) + _cs("k") + struct.pack(">ih", 2, 0) + _cs("x") + b"\x00"
            + TAGS)
    got = _answer(kp.find_coordinator(4, ["g1", "g2"]), body, header_tags=TAGS)
    assert got == [kp.Coordinator("g1", 4, "h", 1, 0), kp.Coordinator("g2", 5, "k", 2, 0)]


def test_offset_fetch_tags_and_null_arrays() -> None:
    part = struct.pack(">iqi", 4, 99, -1) + _cs(None) + struct.pack(">h", 0)
    part5 = struct.pack(">iqi", 5, 99, -1) + _cs("") + struct.pack(">h", 0)
    body = (struct.pack(">i", 0) + _uv(4)
            + _cs("g1") + _uv(2) + _cs("t") + _uv(3) + part + TAGS + part5 + b"\x00"
            + TAGS + struct.pack(">h", 0) + TAGS
            + _cs("g2") + b"\x00" + struct.pack(">h", 0) + b"\x00"  # null topics array
            + _cs("g3") + _uv(1) + struct.pack(">h", 0) + b"\x00"  # empty topics array
            + TAGS)
    got = _answer(kp.offset_fetch(8, ["g1", "g2", "g3"]), body)
    assert got == [kp.GroupOffsets("g1", 0, [("t", [(4, 99, 0), (5, 99, 0)])]),
                   kp.GroupOffsets("g2", 0, []), kp.GroupOffsets("g3", 0, [])]


def test_describe_groups_v5_tags_and_null_members() -> None:
    member = _cs("m") + _cs(None) + _cs("c") + _cs("/h") + _uv(1) + _uv(3) + b"\x00\x00" + TAGS
    body = (struct.pack(">i", 0) + _uv(4)
            + struct.pack(">h", 0) + _cs("g") + _cs("Stable") + _cs("consumer") + _cs("range")
            + _uv(2) + member + struct.pack(">i", 0) + TAGS
            + struct.pack(">h", 0) + _cs("e") + _cs("Empty") + _cs("") + _cs("")
            + b"\x00" + struct.pack(">i", 0) + b"\x00"  # null members array
            + struct.pack(">h", 0) + _cs("f") + _cs("Empty") + _cs("") + _cs("")
            + _uv(1) + struct.pack(">i", 0) + b"\x00"
            + TAGS)
    got = _answer(kp.describe_groups(5, ["g", "e", "f"]), body)
    assert got[0] == kp.DescribedGroup(0, "g", "Stable", "consumer", "range",
                                       [kp.GroupMember("m", None, "c", "/h", b"", b"\x00\x00")])
    assert got[1] == kp.DescribedGroup(0, "e", "Empty", "", "", [])
    assert got[2] == kp.DescribedGroup(0, "f", "Empty", "", "", [])


def test_metadata_v1_null_rack_and_null_replica_arrays() -> None:
    body = (struct.pack(">i", 1) + struct.pack(">i", 7) + struct.pack(">h", 1) + b"h"
            + struct.pack(">i", 9092) + struct.pack(">h", -1)  # null rack
            + struct.pack(">i", 7)  # controller
            + struct.pack(">i", 1) + struct.pack(">h", 0) + struct.pack(">h", 1) + b"t" + b"\x00"
            + struct.pack(">i", 1) + struct.pack(">hii", 0, 0, 7)
            + struct.pack(">i", -1) + struct.pack(">i", -1))  # null replicas / isr
    brokers, topics = _answer(kp.metadata(1, ["t"]), body)
    assert brokers == [kp.Broker(7, "h", 9092)]
    assert topics == [kp.TopicMetadata(0, "t", [(0, 0, 7)])]


def test_cut_short_answers_are_malformed() -> None:
    C = FindCoordinatorResponse.Coordinator
    body = _body(FindCoordinatorResponse(throttle_time_ms=0, coordinators=[
        C(key="group", node_id=3, host="broker", port=1, error_code=0, error_message=None)]), 4)
    req = kp.find_coordinator(4, ["group"])
    for cut in (3, 9, len(body) - 3):
        with pytest.raises(kp.MalformedResponse):
            _answer(req, body[:cut])
    with pytest.raises(ValueError):  # what the transport turns into WireUnsupported
        kp.decode_response(req, b"\x00\x00")


# ----- record batches -----
def _zz(n: int) -> bytes:
    return _uv((n << 1) ^ (n >> 63))


def _batch(base: int, records: list[tuple[int, int]], *, attributes: int = 0, magic: int = 2,
           max_ts: int | None = None, compress: bool = False) -> bytes:
    """A record batch written by hand: records as (offset delta, timestamp)."""
    base_ts = records[0][1] if records else 0
    body = b""
    for off_delta, ts in records:
        rec = (b"\x00" + _zz(ts - base_ts) + _zz(off_delta) + _zz(-1) + _zz(3) + b"val" + _zz(0))
        body += _zz(len(rec)) + rec
    if compress:
        body = gzip.compress(body)
        attributes |= kp.CODEC_GZIP
    last_delta = records[-1][0] if records else 0
    top = max((ts for _, ts in records), default=0) if max_ts is None else max_ts
    after_length = struct.pack(">ibIhiqqqhii", 0, magic, 0, attributes, last_delta, base_ts, top,
                               -1, -1, -1, len(records)) + body
    return struct.pack(">qi", base, len(after_length)) + after_length


def _all(data: bytes) -> list[tuple[int, int]]:
    return [r for b in kp.record_batches(data) for r in kp.batch_records(data, b)]


def test_batches_equal_kafka_pythons_reading() -> None:
    for codec in (0, 1):
        builder = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=False,
                                            producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                            batch_size=1 << 20)
        for i in range(50):
            builder.append(i * 3, timestamp=1_700_000_000_000 + i * 977 - (i % 7) * 5000,
                           key=None if i % 2 else b"k", value=b"v" * i, headers=[("h", b"x")])
        data = bytes(builder.build())
        mr = MemoryRecords(data)
        want = [(r.offset, r.timestamp) for r in mr.next_batch()]
        (batch,) = kp.record_batches(data)
        assert batch.codec == codec and batch.last_offset == 147
        assert list(kp.batch_records(data, batch)) == want


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 1 << 50), st.lists(st.tuples(st.integers(0, 1 << 20), st.integers(0, 1 << 45)),
                                         min_size=1, max_size=30), st.booleans())
def test_record_round_trip(base: int, recs: list[tuple[int, int]], compress: bool) -> None:
    recs = sorted(set(recs))
    data = _batch(base, recs, compress=compress)
    assert _all(data) == [(base + d, ts) for d, ts in recs]


def test_truncated_last_batch_is_ignored() -> None:
    data = _batch(0, [(0, 100), (1, 200)]) + _batch(2, [(0, 300), (1, 400)])
    for cut in (len(data) - 1, len(data) - 30, len(data) // 2 + 5):
        assert _all(data[:cut]) == [(0, 100), (1, 200)]
    assert first_record_at_or_after(data[:-1], [1, 3]) == {1: (1, 200, "create")}


def test_gzip_batch() -> None:
    data = _batch(5, [(0, 1000), (1, 2000), (2, 3000)], compress=True)
    assert first_record_at_or_after(data, [6]) == {6: (6, 2000, "create")}


def test_control_batch_skipped_and_log_append_time() -> None:
    data = (_batch(0, [(0, 10)])
            + _batch(1, [(0, 20)], attributes=kp.CONTROL | kp.TRANSACTIONAL)
            + _batch(2, [(0, 30), (1, 31)], attributes=kp.TIMESTAMP_LOG_APPEND, max_ts=99))
    assert first_record_at_or_after(data, [0, 1, 3]) == {
        0: (0, 10, "create"), 1: (2, 99, "log_append"), 3: (3, 99, "log_append")}
    assert first_record_at_or_after(data, [4]) == {}  # past the last batch


def test_other_codecs_and_old_formats_are_unsupported() -> None:
    lz4 = _batch(0, [(0, 10)], attributes=3)
    with pytest.raises(WireUnsupported, match="lz4"):
        first_record_at_or_after(lz4, [0])
    old = _batch(0, [(0, 10)], magic=1)
    with pytest.raises(WireUnsupported):
        first_record_at_or_after(old, [0])


def test_batches_before_the_wanted_offset_are_not_decoded() -> None:
    # an lz4 batch we could not decode lies wholly before the wanted offset: skipped
    data = _batch(0, [(0, 1), (1, 2)], attributes=4) + _batch(2, [(0, 5), (1, 6)])
    assert first_record_at_or_after(data, [3]) == {3: (3, 6, "create")}
    assert first_record_at_or_after(b"", [3]) == {}
