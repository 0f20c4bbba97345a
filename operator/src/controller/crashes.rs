//! Starts and fast exits of the members the controller restarts itself:
//! crash-loop detection ([`super::CRASH_WINDOW`]) and restart backoff.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use super::CRASH_WINDOW;

/// Starts and fast exits of members, for crash-loop detection and backoff.
#[derive(Debug, Default)]
pub(super) struct Crashes {
    members: HashMap<String, (Instant, u32)>,
}

impl Crashes {
    pub(super) fn started(&mut self, member: &str) {
        let fast = self.members.get(member).map_or(0, |(_, n)| *n);
        self.members
            .insert(member.to_string(), (Instant::now(), fast));
    }

    pub(super) fn exited(&mut self, member: &str, crashed: bool) {
        if let Some((at, n)) = self.members.get_mut(member) {
            *n = if crashed && at.elapsed() < CRASH_WINDOW {
                *n + 1
            } else {
                0
            };
        }
    }

    /// A member that is healthy well after its last start is no longer
    /// failing.
    pub(super) fn healthy(&mut self, member: &str) {
        if let Some((at, n)) = self.members.get_mut(member)
            && at.elapsed() >= CRASH_WINDOW
        {
            *n = 0;
        }
    }

    /// Members that failed by themselves soon after their last start.
    pub(super) fn failing(&self) -> Vec<(String, u32)> {
        let mut out: Vec<(String, u32)> = self
            .members
            .iter()
            .filter(|(_, (_, n))| *n > 0)
            .map(|(m, (_, n))| (m.clone(), *n))
            .collect();
        out.sort();
        out
    }

    pub(super) fn looping(&self, exits: u32) -> HashSet<String> {
        let looping = self.members.iter().filter(|(_, (_, n))| *n >= exits);
        looping.map(|(m, _)| m.clone()).collect()
    }

    /// How long to hold off restarting `member`: 200 ms after its first
    /// crash soon after start, doubling up to 5 s.
    pub(super) fn hold_off(&self, member: &str) -> Duration {
        match self.members.get(member) {
            Some((at, n)) if *n > 0 => {
                let wait = Duration::from_millis(100 << (*n).min(6)).min(Duration::from_secs(5));
                wait.saturating_sub(at.elapsed())
            }
            _ => Duration::ZERO,
        }
    }

    pub(super) fn forget(&mut self, member: &str) {
        self.members.remove(member);
    }
}
