//! The data of a run: what the runner records and the report is written
//! from (so neither imports the other).

use etcd_operator::faults::FaultRecord;

use crate::history::{Checkpoint, Ms, Sample};
use crate::invariants::recovery::FaultEvent;
use crate::invariants::{Violation, lost};
use crate::load;
use crate::ops::series::Second;
use crate::scenario::Scenario;
use crate::{lin, watch};

/// Where the cluster runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum PlatformKind {
    /// etcd processes on loopback addresses, run by the runner's own operator.
    Local,
    /// Kubernetes, with the operator already deployed.
    Kube,
}

/// Everything a run recorded.
#[derive(Debug)]
pub struct RunData {
    /// The scenario.
    pub scenario: Scenario,
    /// Where it ran.
    pub platform: PlatformKind,
    /// Seed override.
    pub seed: Option<u64>,
    /// Load started (unix ms).
    pub started: Ms,
    /// Load and chaos stopped.
    pub run_end: Ms,
    /// Everything torn down.
    pub ended: Ms,
    /// Stopped early by Ctrl-C or SIGTERM.
    pub interrupted: bool,
    /// The chaos monkey was started.
    pub chaos_started: bool,
    /// Probe samples.
    pub samples: Vec<Sample>,
    /// KV hash checkpoints.
    pub checkpoints: Vec<Checkpoint>,
    /// The fault log.
    pub faults: Vec<FaultRecord>,
    /// Spec changes the runner made.
    pub changes: Vec<FaultEvent>,
    /// What the runner noticed (operator restarts, the monkey's exit).
    pub notes: Vec<(Ms, String)>,
    /// Violations found while running (leaders, revisions, stale reads, hashes).
    pub live_violations: Vec<Violation>,
    /// Distinct raft terms seen.
    pub leader_terms: usize,
    /// Load counters and latencies.
    pub load: load::Stats,
    /// Writes acknowledged and uncertain.
    pub ledger_acked: u64,
    /// Writes whose outcome is unknown.
    pub ledger_uncertain: u64,
    /// The final read-back, when done.
    pub lost: Option<lost::Outcome>,
    /// Operations recorded in history.jsonl.
    pub history_ops: u64,
    /// The linearizability check of the history (`None`: not done; why is
    /// among `errors`).
    pub linearizability: Option<lin::Report>,
    /// The watch checks (`None`: not done).
    pub watch: Option<watch::check::Report>,
    /// Client throughput and latency per second.
    pub series: Vec<Second>,
    /// The chains of continuous backups read back from the run's object
    /// store at the end (`None`: no store, or no continuous backups).
    pub store_chains: Option<StoreChains>,
    /// The standby (scenario `standby`): its status samples, its fault
    /// log and the comparison with the primary at the end.
    pub standby: Option<StandbyRun>,
    /// The primary's loss and the standby's promotion
    /// (`standby.losePrimaryAt`), once it happened.
    pub promotion: Option<crate::invariants::promotion::Promotion>,
    /// Things that made the run itself fail.
    pub errors: Vec<String>,
    /// The operator's `/metrics` at the end of the run, or why it was not
    /// read.
    pub operator_metrics: Result<String, String>,
}

impl RunData {
    /// Nothing recorded yet.
    pub fn new(scenario: Scenario, platform: PlatformKind, seed: Option<u64>) -> Self {
        let now = crate::history::now_ms();
        RunData {
            scenario,
            platform,
            seed,
            started: now,
            run_end: now,
            ended: now,
            interrupted: false,
            chaos_started: false,
            samples: Vec::new(),
            checkpoints: Vec::new(),
            faults: Vec::new(),
            changes: Vec::new(),
            notes: Vec::new(),
            live_violations: Vec::new(),
            leader_terms: 0,
            load: load::Stats::default(),
            ledger_acked: 0,
            ledger_uncertain: 0,
            lost: None,
            history_ops: 0,
            linearizability: None,
            watch: None,
            series: Vec::new(),
            store_chains: None,
            standby: None,
            promotion: None,
            errors: Vec::new(),
            operator_metrics: Err("the run ended before it was read".into()),
        }
    }
}

/// The chains of delta segments in the run's object store, as a restore
/// from the store would read them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StoreChains {
    /// Full backups read.
    pub bases: usize,
    /// Intact segments after them.
    pub segments: usize,
    /// Each hole or damaged segment found, or why the store could not be read.
    pub problems: Vec<String>,
}

impl StoreChains {
    /// What was found, in words for the report's row.
    pub fn measured(&self) -> String {
        let found = format!(
            "{} chains, {} segments read back from the store",
            self.bases, self.segments
        );
        match self.problems.len() {
            0 => found,
            n => format!("{found}; {n} problems"),
        }
    }
}

/// What a run recorded of its standby (scenario `standby`).
#[derive(Clone, Debug, Default)]
pub struct StandbyRun {
    /// Its cluster's name.
    pub name: String,
    /// When it was created (unix ms).
    pub created: Ms,
    /// Its published status, every probe interval from its creation.
    pub samples: Vec<crate::invariants::standby::Sample>,
    /// The comparison with the primary at the end (`None`: not made, the
    /// run having been interrupted or failed).
    pub final_check: Option<crate::invariants::standby::Final>,
    /// The fault log of the monkey on the standby.
    pub faults: Vec<FaultRecord>,
}
