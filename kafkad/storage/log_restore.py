"""Restoring an opened PartitionLog's state from its segments: offsets, leader epochs, producer state.

`restore_log` runs after log_loader opened (and possibly recovered) the segments and PartitionLog
installed them (a new empty segment at the log start if there were none): the log end comes
from the active segment, the log start from the checkpoint bounded by the segments, the recovery point
from the checkpoint bounded by the log end. Leader epochs: the checkpoint is trusted up to the
recovered part, which is rebuilt from the recovered batch headers. Producer state: the newest snapshot,
then the batch headers after it are replayed (`load_producer_state`, also after a truncation); headers
recovery already read are reused instead of a second pass over the files.
Blocking (reads checkpoints, snapshots and batch headers).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from kafkad.protocol.errors import KafkaError
from kafkad.storage import log_txn
from kafkad.storage.leader_epoch import CHECKPOINT_FILE as EPOCH_CHECKPOINT
from kafkad.storage.leader_epoch import LeaderEpochCache
from kafkad.storage.log_loader import LoadedSegments
from kafkad.storage.records import BatchHeader

if TYPE_CHECKING:
    from kafkad.storage.partition_log import PartitionLog

log = logging.getLogger(__name__)

__all__ = ["headers_from", "load_producer_state", "restore_log"]


def restore_log(
    plog: PartitionLog, loaded: LoadedSegments, *, recovery_point: int, log_start_offset: int
) -> None:
    """Restore `plog`'s offsets, leader epochs and producer state from its installed segments."""
    d = plog.directory
    recovered, first_recovered = loaded.recovered, loaded.first_recovered
    active = plog.active_segment
    active.resize_indexes(plog.config.segment_index_bytes)
    # The loader's clean-start check already walked the active segment's tail: do not walk it twice.
    plog.log_end_offset = active.read_next_offset() if loaded.next_offset is None else loaded.next_offset
    plog.log_start_offset = max(log_start_offset, plog.segments.first_base)
    plog.log_start_offset = min(plog.log_start_offset, plog.log_end_offset)
    plog.recovery_point = min(recovery_point, plog.log_end_offset)
    plog.high_watermark = plog.log_start_offset  # the setter's clamp keeps it: start <= end
    # Leader epochs: trust the checkpoint up to the recovered part, rebuild that from headers.
    try:
        cache = LeaderEpochCache.load(d)
    except KafkaError as exc:  # torn: every batch header carries its epoch, so rebuild it from all of them
        log.warning("%s; rebuilding it from the batch headers", exc.message)
        cache = LeaderEpochCache(d / EPOCH_CHECKPOINT)
        recovered, first_recovered = headers_from(plog, plog.log_start_offset), plog.log_start_offset
    else:
        if first_recovered is not None and not _epochs_agree(plog, cache, first_recovered):
            # Older than the log (its last update was lost with the power) or from another history:
            # an epoch's start offset would be wrong, and followers truncate by it.
            log.warning(
                "%s: disagrees with the log below %d; rebuilding it from the batch headers",
                cache.path,
                first_recovered,
            )
            cache.clear()
            recovered, first_recovered = headers_from(plog, plog.log_start_offset), plog.log_start_offset
    plog.leader_epoch_cache = cache
    with cache.deferred_writes():  # one checkpoint write (none if nothing changed), not one per step
        if first_recovered is not None:
            cache.truncate_from_end(first_recovered)
            previous = None
            for h in recovered:
                # assign() of the epoch just assigned at a higher offset is a no-op: skip the call.
                if h.partition_leader_epoch != previous:
                    previous = h.partition_leader_epoch
                    cache.assign(previous, h.base_offset)
        cache.truncate_from_end(plog.log_end_offset)
        cache.truncate_from_start(plog.log_start_offset)
    load_producer_state(plog, recovered if first_recovered is not None else None, first_recovered)


def load_producer_state(
    plog: PartitionLog, known: list[BatchHeader] | None = None, known_from: int | None = None
) -> None:
    """Newest snapshot, then replay batch headers up to the log end (`known`: headers from
    `known_from` to the end, already read by recovery, spare a second pass over the files)."""
    # After a recovery the newest snapshot at or below the recovered part: the replay derives the
    # recovered segments' aborted transactions (their .txnindex was reset) as it goes.
    replay_from = plog.producer_state.load(plog.log_start_offset, plog.log_end_offset, known_from)
    if known is not None and known_from is not None and known_from <= replay_from:
        headers = [h for h in known if h.base_offset + h.last_offset_delta >= replay_from]
    else:
        headers = headers_from(plog, replay_from)
    replay = log_txn.replay_batch
    for header in headers:
        if header.producer_id >= 0:  # the producer state ignores the others
            replay(plog, header)
    plog.stats.replayed_batches += len(headers)


def headers_from(plog: PartitionLog, offset: int) -> list[BatchHeader]:
    """Headers of the batches holding offsets >= `offset` (pread of headers only)."""
    out: list[BatchHeader] = []
    if offset >= plog.log_end_offset:
        return out
    for seg in plog.segments.from_offset(offset):
        header = seg.translate_offset(offset)
        while header is not None:
            out.append(header)
            position = header.position + header.size
            header = seg.header_at(position) if position < seg.size else None
    return out


def _epochs_agree(plog: PartitionLog, cache: LeaderEpochCache, first_recovered: int) -> bool:
    """Whether the checkpoint's epoch at the last batch before the recovered part is that batch's epoch.

    The part below `first_recovered` is trusted from the checkpoint, so it must at least end in the
    epoch of the log there (one walk over the headers after the previous segment's last index entry).
    """
    if first_recovered <= plog.log_start_offset:
        return True  # everything is rebuilt from the headers anyway
    previous = [seg for seg in plog.segments if seg.base_offset < first_recovered]
    if not previous:
        return True
    seg = previous[-1]
    position = seg.offset_index.lookup(2**62)[1] if seg.offset_index.entries else 0
    last: BatchHeader | None = None
    while position < seg.size:
        last = seg.header_at(position)
        position += last.size
    if last is None or last.base_offset + last.last_offset_delta < plog.log_start_offset:
        return True
    return cache.epoch_for_offset(last.base_offset) == last.partition_leader_epoch
