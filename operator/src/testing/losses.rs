//! Losses a test inflicts on the members the operator runs, and the wait
//! for the rebuild that follows.

use super::{Env, kill9};
use crate::crd::{EtcdCluster, RecoveryStatus};

impl Env {
    /// Destroys member `member` of `cluster`: its data wiped, then its
    /// process killed (SIGKILL).
    pub fn destroy(&self, cluster: &str, member: &str) {
        let pid = self.pid(cluster, member).expect("runs");
        std::fs::remove_dir_all(self.layout().data_dir(cluster, member)).expect("wipe");
        kill9(pid);
    }

    /// Waits (for `what`) until `cluster` is Running with `size` ready
    /// members and its status tells of a recovery; returns its resource
    /// and that recovery.
    pub fn wait_rebuilt(
        &self,
        what: &str,
        cluster: &str,
        size: usize,
    ) -> (EtcdCluster, RecoveryStatus) {
        self.wait_for(what, || {
            let c = self.wait_running(cluster, size);
            let r = c.status.as_ref()?.last_recovery.clone()?;
            Some((c, r))
        })
    }
}
