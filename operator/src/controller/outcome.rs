//! One step carried out, and what comes of it: when the next pass comes
//! (at once after a step, soon after etcd refused one, backing off after
//! errors), the failure kept for status until the same thing succeeds,
//! and the members the step moved on purpose.

use std::time::{Duration, Instant};

use super::facts::{Failed, Failure};
use super::story::Seen;
use super::{Cluster, Outcome, REFUSED_RETRY, SpecState, act};
use crate::observe::Observation;
use crate::plan::Step;
use crate::platform::Platform;

impl<P: Platform> Cluster<P> {
    pub(super) async fn act(&mut self, step: Step, obs: &Observation) -> Outcome {
        let SpecState::Valid { spec, .. } = &self.spec else {
            return self.retry();
        };
        let spec = spec.clone();
        tracing::info!("{step}");
        self.pass_acted = true;
        // What it does may change the membership: the next pass reads it.
        self.lists.forget();
        self.metrics.step(step.kind());
        let adding = self.next_member_name();
        match act::run(self, &step, obs, &spec).await {
            Ok(()) => {
                let added = (step == Step::AddLearner).then_some(adding.as_str());
                // Told with the moves before the step (a removal forgets its
                // member's), then noted.
                let seen = Seen {
                    obs,
                    step: Some(&step),
                    size: Some(spec.size),
                    formed: self.formed,
                    lost: self.lost.as_ref(),
                    ended: &[],
                    failing: &[],
                    moves: &self.moves,
                    backup: None,
                };
                let notices = self.story.acted(&step, &seen, added);
                self.moves.acted(&step, obs, added, Instant::now());
                self.tell(notices).await;
                if self
                    .failure
                    .as_ref()
                    .is_some_and(|f| matches!(f.what, Failed::Step(_)))
                {
                    self.failure = None;
                }
                self.errors_in_row = 0;
                Outcome {
                    step: Some(step),
                    next: Duration::ZERO,
                }
            }
            Err(e) => {
                if let act::Error::Platform(p) = &e {
                    self.note_storage(p);
                }
                let refused = e.is_refused();
                let message = format!("{step} failed: {e}");
                self.failed(Failed::Step(step.clone()), e.category(), message, refused);
                match &e {
                    // A restore whose backup is not there waits for the
                    // spec to change (said as its own Warning).
                    act::Error::Backup(b @ crate::backup::Error::NotFound { .. })
                        if step == Step::Bootstrap =>
                    {
                        self.refuse_restore(b).await;
                    }
                    _ => {
                        let failure = self.failure.clone();
                        if let Some(n) = failure.as_ref().and_then(|f| self.story.failed(f)) {
                            self.tell(vec![n]).await;
                        }
                    }
                }
                // etcd refuses membership changes for a few seconds after a
                // member reconnects; it will accept soon, so ask often.
                let next = if refused {
                    REFUSED_RETRY
                } else {
                    self.retry().next
                };
                Outcome {
                    step: Some(step),
                    next,
                }
            }
        }
    }

    pub(super) fn failed(
        &mut self,
        what: Failed,
        category: &'static str,
        message: String,
        refused: bool,
    ) {
        self.pass_failed = true;
        self.metrics.error(category);
        let last = self.failure.as_ref();
        if last.is_none_or(|l| l.message != message) {
            tracing::warn!(category, "{message}");
        }
        self.failure = Some(Failure::new(what, message, refused, last, Instant::now()));
        self.errors_in_row += 1;
    }

    /// The name the next member added gets: the one an add etcd refused
    /// took, else the next index (see [`ClusterRecord::adding`]).
    pub(super) fn next_member_name(&self) -> String {
        self.record
            .adding
            .clone()
            .unwrap_or_else(|| format!("{}-{}", self.name, self.record.next_index))
    }

    /// The longest hold-off of the initial members a bootstrap would start.
    pub(super) fn bootstrap_hold_off(&self) -> Duration {
        let initial = self.record.initial.iter();
        initial
            .map(|a| self.crashes.hold_off(&a.name))
            .max()
            .unwrap_or_default()
    }

    /// Backoff after errors: 100 ms doubling to 2 s.
    pub(super) fn retry(&self) -> Outcome {
        let n = self.errors_in_row.clamp(1, 6) - 1;
        Outcome {
            step: None,
            next: Duration::from_millis(100 << n).min(Duration::from_secs(2)),
        }
    }

    pub(super) async fn save_record(&mut self) {
        match self.platform.save_record(&self.name, &self.record).await {
            Ok(()) => {
                if self
                    .failure
                    .as_ref()
                    .is_some_and(|f| f.what == Failed::Record)
                {
                    self.failure = None;
                }
            }
            Err(e) => {
                self.note_storage(&e);
                let message = format!("cannot save the cluster record: {e}");
                self.failed(Failed::Record, e.category(), message, false);
            }
        }
    }
}
