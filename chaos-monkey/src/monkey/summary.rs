//! How a run went, and its closing line.

use etcd_operator::faults::Fault;

use super::Stop;
use crate::faultlog::FaultLog;

/// How a run went.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Summary {
    /// Ticks that came (fired or not).
    pub ticks: u64,
    /// What ended it.
    pub stop: Stop,
    /// Members that could not be resumed at the end (left stopped).
    pub left_paused: Vec<String>,
    /// Network faults that could not be healed at the end (rules left).
    pub left_unhealed: Vec<String>,
}

impl Summary {
    /// One line for standard error.
    pub fn line(&self, log: &FaultLog) -> String {
        let records = log.records();
        let faults = log.faults();
        let count = |outcome: &str| {
            records
                .iter()
                .filter(|r| !r.fault.is_end() && r.outcome.starts_with(outcome))
                .count()
        };
        let resumes = records.iter().filter(|r| r.fault == Fault::Resume).count();
        let heals = records.iter().filter(|r| r.fault == Fault::Heal).count();
        let stop = match self.stop {
            Stop::Signal => "stopped by signal",
            Stop::Duration => "--duration reached",
            Stop::MaxFaults => "--max-faults reached",
        };
        let mut line = format!(
            "chaos-monkey: {stop} after {} ticks: {faults} faults ({} injected, {} dry-run, {} failed), {resumes} resumed",
            self.ticks,
            count("injected"),
            count("dry-run"),
            count("failed"),
        );
        if heals > 0 {
            line.push_str(&format!(", {heals} healed"));
        }
        if !self.left_paused.is_empty() {
            line.push_str(&format!("; LEFT PAUSED: {}", self.left_paused.join(", ")));
        }
        if !self.left_unhealed.is_empty() {
            line.push_str(&format!("; NOT HEALED: {}", self.left_unhealed.join(", ")));
        }
        line
    }
}
