//! When a member that keeps failing counts as crash looping (its data no
//! longer trusted): a policy both platforms apply (the local one to the
//! exits it sees, the Kubernetes one to the kubelet's restarts) and the
//! controller judges with, so it lives here, below both.

use std::time::Duration;

/// A member that fails by itself this soon after start, three times running,
/// is crash looping: its data is not trusted and it is replaced. Kills from
/// outside (SIGKILL, as the chaos monkey does) never count.
pub const CRASH_WINDOW: Duration = Duration::from_secs(5);
/// Fast exits in a row that make a crash loop.
pub const CRASH_LOOP_EXITS: u32 = 3;
/// The same while the cluster has no quorum, where giving up on a member's
/// data may mean a rebuild from a backup (writes since it lost): a longer
/// proof, about 30 s of restarts with backoff, so a passing cause (a port
/// briefly taken, a full disk freed) does not cost data.
pub const CRASH_LOOP_EXITS_WITHOUT_QUORUM: u32 = 10;
