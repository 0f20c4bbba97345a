use std::time::Instant;

use super::*;
use crate::backup::{BackupMeta, RestoreSource, Result, Source};

/// A store with a bug: every save panics.
struct Panics;

impl BackupStore for Panics {
    fn describe(&self, _: &Location) -> String {
        "a store with a bug".into()
    }
    async fn save(&self, _: &Location, _: Source<'_>) -> Result<BackupMeta> {
        panic!("a bug in the store");
    }
    async fn list(&self, _: &Location) -> Result<Vec<BackupMeta>> {
        Ok(vec![])
    }
    async fn verify(&self, _: &Location, _: &BackupMeta) -> Result<()> {
        Ok(())
    }
    async fn delete(&self, _: &Location, _: &BackupMeta) -> Result<()> {
        Ok(())
    }
    async fn check_restorable(&self, _: &Location, _: &str) -> Result<()> {
        Ok(())
    }
    async fn open_for_restore(&self, _: &Location, b: &str) -> Result<RestoreSource> {
        Ok(RestoreSource::new(b))
    }
    async fn close_restore(&self, _: &RestoreSource) {}
}

#[tokio::test]
async fn a_backup_task_that_panics_stops_the_schedule_so_it_is_started_again() {
    let policy = BackupPolicy {
        interval: Duration::from_secs(1),
        max_backups: 1,
        path: None,
        persistent_volume_claim: None,
        claim_size: None,
        storage_class: None,
        object: None,
        restore_check: None,
        continuous: None,
    };
    let location = Location::of("demo", Some(&policy));
    let metrics = Arc::new(crate::metrics::Metrics::new()).cluster("", "demo");
    let s = Schedule::start(
        policy.clone(),
        location.clone(),
        Arc::new(Panics),
        metrics,
        true,
    );
    assert!(s.runs(&policy, &location));
    s.offer(vec![("demo-0".into(), "http://127.0.0.1:1".into(), None)]);
    let deadline = Instant::now() + Duration::from_secs(30);
    while s.runs(&policy, &location) {
        assert!(
            Instant::now() < deadline,
            "the schedule still says it runs after its task panicked"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
