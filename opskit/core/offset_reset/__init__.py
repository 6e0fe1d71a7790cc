"""Planning core of ``opskit offsets reset``: pure, no Kafka client, no clock.

Semantics follow Apache Kafka's ``kafka-consumer-groups.sh --reset-offsets``,
read from its source: Kafka 3.7 ``core/.../kafka/admin/ConsumerGroupCommand.scala``
(``ConsumerGroupService``) and Kafka 4.x
``tools/.../consumer/group/ConsumerGroupCommand.java`` plus
``tools/.../GroupOffsetsResetter.java`` (where 4.x moved the reset logic) and
``clients/.../common/utils/Utils.getDateTime``. Each rule below names the method
it was read from. Where opskit deliberately differs (it refuses instead of
guessing), the comment says so.

Adapter flow (the adapter does the I/O, this module decides):

1. describe the group -> ``GroupDescription``; list its committed offsets ->
   ``committed`` (only partitions that *have* a commit; drop null / -1 answers).
2. ``topics_to_describe(request, committed)`` -> describe those topics and read
   log start (``OffsetSpec.earliest``) and log end (``OffsetSpec.latest``, the
   high watermark) of **every** partition of them -> ``log_offsets``. A
   partition missing from ``log_offsets`` means "does not exist"; a partition
   without a leader is the adapter's error to raise, not a missing entry.
3. ``ts = timestamp_lookups_needed(request, now_ms)``; when not None, ask
   ListOffsets ``OffsetSpec.forTimestamp(ts)`` for each partition of
   ``partitions_in_scope(...)``; a ``-1`` (UNKNOWN_OFFSET) answer becomes None
   -> ``offsets_for_times``.
4. ``plan_offset_reset(...)`` -> ``ResetPlan``; show or save it.
5. Before applying: ``plan.raise_if_refused()``, re-read group and committed
   offsets, ``check_unchanged(plan, group_now, committed_now)``, save an
   ``OffsetsBackup.of_plan(...)``, then AlterConsumerGroupOffsets with
   ``plan.offsets_to_commit()``.
"""

