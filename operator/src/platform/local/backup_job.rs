//! The folder store run inside a Kubernetes backup Job: the backup claim,
//! mounted at `/state`, is the state folder of a [`LocalBackups`],
//! so a snapshot on Kubernetes is saved, verified (SHA-256 trailer, then
//! `etcdutl` and `etcdctl snapshot status`, which must agree), kept, set
//! aside (with the delta segments of continuous backups replayed into the
//! copy, by a scratch member in the Job's pod) and proven to restore (a
//! scratch member too) by the very code that does it locally.
//! `etcd-operator backup-job` calls [`run`] and prints its [`Report`].

use std::path::Path;
use std::sync::Arc;

use super::backups::LocalBackups;
use super::binaries::Binaries;
use crate::backup::job::{Op, Place, Report};
use crate::backup::object::client::StoreEnv;
use crate::backup::{BackupStore, Location, RestoreSource, Source};

/// Does `op` on the backups `place` names (a cluster's, whose uid it
/// gives: only its own are listed, kept and deleted; or another cluster's,
/// for a restore of them; in the claim, or in an object store reached with
/// the environment and `env` over it) with the state folder `state` (the
/// claim's mount point in a Job, [`STATE_MOUNT`]) and the etcd tools of
/// `binaries`. Never fails: what went wrong is the report's `error`.
///
/// [`STATE_MOUNT`]: crate::backup::job::STATE_MOUNT
pub async fn run(
    state: &Path,
    place: &Place,
    op: &Op,
    binaries: Arc<Binaries>,
    env: StoreEnv,
) -> Report {
    let mut report = Report::default();
    let loc = match place.location() {
        Ok(loc) => loc,
        Err(e) => {
            report.error = Some(e);
            return report;
        }
    };
    let cluster = loc.cluster.as_str();
    let store = LocalBackups::new(state, binaries).with_store_env(env);
    let done = match op {
        Op::Save { member, url, tls } => match tls.load().await {
            Ok(tls) => {
                let source = Source {
                    member,
                    url,
                    tls: tls.as_ref(),
                };
                store
                    .save(&loc, source)
                    .await
                    .map(|m| report.saved = Some(m))
            }
            Err(e) => Err(crate::backup::Error::Tool(e)),
        },
        Op::List => Ok(()),
        Op::Retain { keep } => store
            .retain(&loc, *keep)
            .await
            .map(|r| report.retained = Some(r)),
        Op::NewestGood => store.newest_good(&loc).await.map(|(m, skipped)| {
            report.newest = m;
            report.skipped = skipped;
        }),
        Op::Check { backup } => store.check_restorable(&loc, backup).await,
        Op::Delete { backup } => match store.list(&loc).await {
            Ok(metas) => match metas.iter().find(|m| m.name == *backup) {
                Some(meta) => store.delete(&loc, meta).await,
                None => Ok(()),
            },
            Err(e) => Err(e),
        },
        Op::Open { backup } => store
            .open_for_restore(&loc, backup)
            .await
            .map(|source| report.source = Some(in_claim(state, source.as_str()))),
        Op::Prove {
            backup,
            member,
            url,
            tls,
        } => prove(&store, &loc, backup, (member, url), tls)
            .await
            .map(|check| report.restore_check = Some(check)),
        Op::OpenChain { backup } => {
            store
                .open_named_for_restore(&loc, backup)
                .await
                .map(|restore| {
                    report.source = Some(in_claim(state, restore.source.as_str()));
                    report.replayed = Some(restore.replayed);
                    report.replay_problem = restore.problem;
                })
        }
        Op::Close => {
            let own = state.join("clusters").join(cluster).join("restore.db");
            store
                .close_restore(&RestoreSource::new(own.to_string_lossy()))
                .await;
            Ok(())
        }
    };
    if let Err(e) = done {
        report.error = Some(e.to_string());
    }
    match store.list(&loc).await {
        Ok(backups) => report.backups = backups,
        Err(e) => {
            report.error.get_or_insert_with(|| e.to_string());
        }
    }
    report
}

/// Where the copy set aside at `path` is, relative to the claim's root
/// `state` (the operator names it by claim and path).
fn in_claim(state: &Path, path: &str) -> String {
    let path = Path::new(path);
    let inside = path.strip_prefix(state).unwrap_or(path);
    inside.to_string_lossy().into_owned()
}

/// The restore check of backup `backup` against the live member `member`
/// at `url`: the local platform's own ([`LocalBackups::restore_check`]),
/// its scratch member in the Job's pod (a loopback address of the pod,
/// its folder in the claim, deleted afterwards), and the result kept in
/// the backup's meta as locally.
async fn prove(
    store: &LocalBackups,
    loc: &Location,
    backup: &str,
    (member, url): (&str, &str),
    tls: &crate::backup::job::JobTls,
) -> crate::backup::Result<crate::backup::proof::RestoreCheck> {
    let tls = tls.load().await.map_err(crate::backup::Error::Tool)?;
    let metas = store.list(loc).await?;
    let Some(meta) = metas.iter().find(|m| m.name == backup) else {
        return Err(crate::backup::Error::NotFound {
            name: backup.into(),
            dir: format!("backups/{} in the claim", loc.owner()),
            known: metas
                .iter()
                .map(|m| m.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        });
    };
    let live = Source {
        member,
        url,
        tls: tls.as_ref(),
    };
    store.restore_check(loc, meta, live).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backup::tests::{fake_snapshot, meta};
    use crate::backup::{check_file, write_meta};

    fn binaries() -> Arc<Binaries> {
        Arc::new(Binaries::new(vec![]))
    }

    fn place(cluster: &str, source: Option<&str>) -> Place {
        Place {
            cluster: cluster.into(),
            source: source.map(str::to_string),
            ..Place::default()
        }
    }

    #[tokio::test]
    async fn a_job_lists_retains_sets_aside_and_drops_in_its_claim() {
        let claim = tempfile::tempdir().expect("a claim");
        let dir = claim.path().join("backups/demo");
        std::fs::create_dir_all(&dir).expect("mkdir");
        for (i, name) in [
            "demo-20260101-000000-001",
            "demo-20260101-000000-002",
            "demo-20260101-000000-003",
        ]
        .iter()
        .enumerate()
        {
            let p = dir.join(format!("{name}.db"));
            fake_snapshot(&p, name.as_bytes());
            let sha = check_file(&p, None).expect("good");
            write_meta(&dir, &meta(name, i as u64, sha)).expect("meta");
        }
        let list = run(
            claim.path(),
            &place("demo", None),
            &Op::List,
            binaries(),
            StoreEnv::default(),
        )
        .await;
        let names: Vec<&str> = list.backups.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "demo-20260101-000000-003",
                "demo-20260101-000000-002",
                "demo-20260101-000000-001"
            ]
        );
        assert_eq!(list.error, None);

        let kept = run(
            claim.path(),
            &place("demo", None),
            &Op::Retain { keep: 2 },
            binaries(),
            StoreEnv::default(),
        )
        .await;
        assert_eq!(
            kept.retained.map(|r| r.deleted),
            Some(vec!["demo-20260101-000000-001".to_string()])
        );
        assert_eq!(kept.backups.len(), 2);

        let open = Op::Open {
            backup: "demo-20260101-000000-002".into(),
        };
        // Another cluster's backup is found only when the Job is told
        // whose it is (spec.restore.cluster), never by scanning folders.
        let unnamed = run(
            claim.path(),
            &place("other", None),
            &open,
            binaries(),
            StoreEnv::default(),
        )
        .await;
        let e = unnamed.error.expect("not other's backup");
        assert!(e.contains("backups/other"), "{e}");
        let opened = run(
            claim.path(),
            &place("other", Some("demo")),
            &open,
            binaries(),
            StoreEnv::default(),
        )
        .await;
        assert_eq!(opened.error, None, "found in demo's folder");
        assert_eq!(opened.source.as_deref(), Some("clusters/other/restore.db"));
        let copy = claim.path().join("clusters/other/restore.db");
        check_file(&copy, None).expect("a good copy");
        run(
            claim.path(),
            &place("other", None),
            &Op::Close,
            binaries(),
            StoreEnv::default(),
        )
        .await;
        assert!(!copy.exists());

        let missing = Op::Check {
            backup: "nope".into(),
        };
        let e = run(
            claim.path(),
            &place("demo", None),
            &missing,
            binaries(),
            StoreEnv::default(),
        )
        .await;
        assert!(
            e.error
                .is_some_and(|e| e.contains("demo-20260101-000000-003")),
            "names what exists"
        );
        let bad = run(
            claim.path(),
            &place("../x", None),
            &Op::List,
            binaries(),
            StoreEnv::default(),
        )
        .await;
        assert!(
            bad.error
                .is_some_and(|e| e.contains("not a valid cluster name"))
        );
    }

    #[tokio::test]
    async fn a_restore_check_of_a_backup_not_in_the_claim_names_what_is_there() {
        let claim = tempfile::tempdir().expect("a claim");
        let dir = claim.path().join("backups/demo");
        std::fs::create_dir_all(&dir).expect("mkdir");
        let p = dir.join("demo-20260101-000000-001.db");
        fake_snapshot(&p, b"demo-20260101-000000-001");
        let sha = check_file(&p, None).expect("good");
        write_meta(&dir, &meta("demo-20260101-000000-001", 1, sha)).expect("meta");
        let prove = Op::Prove {
            backup: "gone".into(),
            member: "demo-0".into(),
            url: "http://127.0.0.1:1".into(),
            tls: crate::backup::job::JobTls::default(),
        };
        let r = run(
            claim.path(),
            &place("demo", None),
            &prove,
            binaries(),
            StoreEnv::default(),
        )
        .await;
        let e = r.error.expect("an error");
        assert!(
            e.contains("gone") && e.contains("demo-20260101-000000-001"),
            "{e}"
        );
        assert_eq!(r.restore_check, None);
        assert_eq!(r.backups.len(), 1, "the list is reported all the same");
    }
}
