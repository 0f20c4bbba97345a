//! The chaos monkeys of a run: one on the scenario's cluster (its fault log
//! `faults.jsonl`, the one recovery and `minFaults` are measured from), and
//! with a standby whose chaos is on, a second one on the standby with the
//! same options (its own fault log, `faults-standby.jsonl`, and log), so
//! that faults in the standby never count as the primary's.

use std::path::Path;
use std::time::Duration;

use super::platform::Platform;
use super::procs::Proc;
use super::steps::start_chaos;
use super::{CHAOS_GRACE, Error, Options};
use crate::data::RunData;
use crate::history::now_ms;

/// The fault log of the monkey on the standby, in the output folder.
pub const STANDBY_FAULT_LOG: &str = "faults-standby.jsonl";

/// The name of the monkey on the scenario's cluster.
const PRIMARY: &str = "chaos-monkey";

/// The running monkeys, each with the name notes give it.
#[derive(Debug, Default)]
pub(super) struct Monkeys(Vec<(&'static str, Proc)>);

impl Monkeys {
    /// Starts the monkey on the scenario's cluster and, when `standby`
    /// names one, on it too; each for `left`.
    pub(super) fn start(
        o: &Options,
        platform: &Platform,
        c: &crate::scenario::Chaos,
        standby: Option<&str>,
        left: Duration,
    ) -> Result<Monkeys, Error> {
        let mut all = Vec::new();
        let cluster = o.scenario.cluster.name.as_str();
        let log = o.out.join("faults.jsonl");
        let primary = start_chaos(o, platform, c, (cluster, "chaos-monkey"), &log, left)?;
        all.push((PRIMARY, primary));
        if let Some(name) = standby {
            let log = o.out.join(STANDBY_FAULT_LOG);
            let at = (name, "chaos-monkey-standby");
            all.push((
                "chaos-monkey on the standby",
                start_chaos(o, platform, c, at, &log, left)?,
            ));
        }
        Ok(Monkeys(all))
    }

    /// Notes each monkey that exited before the end (and an error when it
    /// rejected its input), and forgets it.
    pub(super) fn check(&mut self, data: &mut RunData) {
        self.0.retain_mut(|(name, m)| {
            let Some(st) = m.exited() else {
                return true;
            };
            let note = format!(
                "{name} exited before the end of the run ({st}): {}",
                m.log_tail(5)
            );
            if st.code() == Some(2) {
                data.errors
                    .push(format!("{name} rejected its input: {}", m.log_tail(5)));
            }
            data.notes.push((now_ms(), note));
            false
        });
    }

    /// Stops the monkey on the scenario's cluster (SIGTERM), leaving the
    /// standby's running: the primary is about to be destroyed, and no
    /// monkey may restart or resume anything of it. Notes how it stopped.
    pub(super) async fn stop_primary(&mut self, data: &mut RunData) {
        let Some(i) = self.0.iter().position(|(name, _)| *name == PRIMARY) else {
            return;
        };
        let (name, mut m) = self.0.remove(i);
        let how = match m.stop_async(CHAOS_GRACE).await {
            Some(st) if st.success() => "stopped".to_string(),
            Some(st) => format!("stopped with {st}"),
            None => "had to be killed".into(),
        };
        data.notes
            .push((now_ms(), format!("{name} {how} before the primary's loss")));
    }

    /// Stops every monkey (SIGTERM: each resumes what it paused), noting
    /// one that stopped badly or had to be killed.
    pub(super) async fn stop(&mut self, data: &mut RunData) {
        for (name, mut m) in std::mem::take(&mut self.0) {
            match m.stop_async(CHAOS_GRACE).await {
                Some(st) if st.success() => {}
                Some(st) => data.notes.push((
                    now_ms(),
                    format!("{name} stopped with {st}: {}", m.log_tail(5)),
                )),
                None => data
                    .notes
                    .push((now_ms(), format!("{name} had to be killed"))),
            }
        }
    }
}

/// Removes what an earlier run into `out` left of the monkeys' fault logs.
pub(super) fn clear_fault_logs(out: &Path) {
    for f in ["faults.jsonl", STANDBY_FAULT_LOG] {
        let _ = std::fs::remove_file(out.join(f));
    }
}
