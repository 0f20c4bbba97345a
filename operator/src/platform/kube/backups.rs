//! Backups on Kubernetes: not supported yet. Every call says so; the
//! Kubernetes controller refuses `spec.backup` and `spec.restore` (and so
//! `spec.recovery.restoreFromBackup`, which needs `spec.backup`) before any
//! is made, as the README says. A store on a volume claim comes next.

use crate::backup::{BackupMeta, BackupStore, Error, Location, RestoreSource, Result, Source};

/// The Kubernetes platform's backup store, which keeps none yet.
#[derive(Clone, Copy, Debug, Default)]
pub struct KubeBackups;

fn unsupported() -> Error {
    Error::Unsupported("backups are not supported on the Kubernetes platform yet".into())
}

impl BackupStore for KubeBackups {
    fn describe(&self, location: &Location) -> String {
        format!(
            "no backups of {} (not supported on Kubernetes yet)",
            location.cluster
        )
    }

    async fn save(&self, _: &Location, _: Source<'_>) -> Result<BackupMeta> {
        Err(unsupported())
    }

    async fn list(&self, _: &Location) -> Result<Vec<BackupMeta>> {
        Err(unsupported())
    }

    async fn verify(&self, _: &Location, _: &BackupMeta) -> Result<()> {
        Err(unsupported())
    }

    async fn delete(&self, _: &Location, _: &BackupMeta) -> Result<()> {
        Err(unsupported())
    }

    async fn check_restorable(&self, _: &Location, _: &str) -> Result<()> {
        Err(unsupported())
    }

    async fn open_for_restore(&self, _: &Location, _: &str) -> Result<RestoreSource> {
        Err(unsupported())
    }

    async fn close_restore(&self, _: &RestoreSource) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn every_call_says_backups_are_not_supported_yet() {
        let loc = Location::of("demo", None);
        let e = KubeBackups.list(&loc).await.expect_err("unsupported");
        assert_eq!(e.category(), "unsupported");
        assert!(
            e.to_string().contains("not supported on the Kubernetes"),
            "{e}"
        );
        assert!(!KubeBackups.any_good(&loc).await);
        assert!(KubeBackups.newest_good(&loc).await.is_err());
        assert!(KubeBackups.retain(&loc, 3).await.is_err());
        assert!(KubeBackups.open_for_restore(&loc, "b1").await.is_err());
    }
}
