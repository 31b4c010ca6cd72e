"""Leader-epoch checkpoint writes off the event loop.

A broker that becomes follower of 1,000 partitions at a new epoch appends the new leader's first batches of
all of them in one Fetch answer, and each append of a new epoch rewrote that partition's
`leader-epoch-checkpoint` (a file create and rename, ~1-4 ms on a busy ext4) on the loop: 1,000 of them held
the follower for 1-4 s after a failover while acks=all Produce waited for it (py-spy of issue 21's
failover bench: 63 % of the follower's loop samples). The fetcher defers those writes
(`LeaderEpochCache.writes_deferred_to`) and has them done here on a thread, as the ReplicaManager does for a
LeaderAndIsr. None of these writes is fsynced on either path: recovery rebuilds a lost checkpoint from the
batch headers, and the cache's lock makes the newest entries land last.
"""

from __future__ import annotations

import asyncio
import logging

from kafkad.storage.leader_epoch import LeaderEpochCache

log = logging.getLogger(__name__)


def write_epochs(caches: list[LeaderEpochCache]) -> None:
    """Blocking: write each changed checkpoint (a failure costs a warning: recovery rebuilds it)."""
    for cache in caches:
        try:
            cache.write_if_changed()
        except FileNotFoundError:  # the partition was deleted meanwhile (its dir renamed)
            continue
        except OSError as e:
            log.warning("%s: cannot write the leader-epoch checkpoint: %s", cache.path, e)


def write_epochs_off_loop(caches: list[LeaderEpochCache]) -> asyncio.Future[None] | None:
    """Have `caches` written on the default executor; without a running loop (tools), write them now."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        write_epochs(caches)
        return None
    return loop.run_in_executor(None, write_epochs, caches)
