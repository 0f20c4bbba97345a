//! The backup subcommands: `backups`, `backup` and `check-backup` for
//! users, and `backup-job` and `backup-follow`, which the Kubernetes
//! platform's Jobs and follower Deployment run in the operator's image.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use etcd_operator::backup::object::client::StoreEnv;
use etcd_operator::platform::local::binaries::Binaries;
use etcd_operator::{cli, crd};

use crate::out;

#[derive(clap::Args, Debug)]
pub(crate) struct BackupFollowArgs {
    /// The cluster whose changes are followed.
    #[arg(long)]
    pub(crate) cluster: String,
    /// Its client URL (the client Service); repeat to try several in turn.
    #[arg(long, required = true)]
    pub(crate) url: Vec<String>,
    /// spec.backup.continuous.segmentInterval.
    #[arg(long)]
    pub(crate) segment_interval: String,
    /// spec.backup.continuous.maxEvents.
    #[arg(long)]
    pub(crate) max_events: Option<i64>,
    /// Where the full backups are and the segments go, when not in the
    /// claim.
    #[command(flatten)]
    pub(crate) store: etcd_operator::backup::job::StoreArgs,
    /// The client certificate for `https://` URLs.
    #[command(flatten)]
    pub(crate) tls: etcd_operator::backup::job::JobTls,
    /// The state folder holding `backups/CLUSTER/` (the claim's mount).
    #[arg(long, default_value = etcd_operator::backup::job::STATE_MOUNT)]
    pub(crate) state: PathBuf,
    /// Folders holding etcd binaries as VERSION/etcd (the image's
    /// /opt/etcd).
    #[arg(
        long = "etcd-binaries",
        env = "ETCD_OPERATOR_BINARIES",
        value_delimiter = ':',
        default_value = ".etcd"
    )]
    pub(crate) etcd_binaries: Vec<PathBuf>,
}

#[derive(clap::Args, Debug)]
pub(crate) struct BackupJobArgs {
    /// Whose backups, where.
    #[command(flatten)]
    pub(crate) place: etcd_operator::backup::job::Place,
    /// The state folder holding `backups/CLUSTER/` (the claim's mount).
    #[arg(long, default_value = etcd_operator::backup::job::STATE_MOUNT)]
    pub(crate) state: PathBuf,
    /// Folders holding etcd binaries as VERSION/etcd (the image's
    /// /opt/etcd), for etcdutl and etcdctl.
    #[arg(
        long = "etcd-binaries",
        env = "ETCD_OPERATOR_BINARIES",
        value_delimiter = ':',
        default_value = ".etcd"
    )]
    pub(crate) etcd_binaries: Vec<PathBuf>,
    #[command(subcommand)]
    pub(crate) op: etcd_operator::backup::job::Op,
}

#[derive(clap::Args, Debug)]
pub(crate) struct CheckBackupArgs {
    #[command(flatten)]
    pub(crate) common: BackupArgs,
    /// The backup to check (a name from `backups CLUSTER`); default: the
    /// newest backup that checks out.
    pub(crate) backup: Option<String>,
}

#[derive(clap::Args, Debug)]
pub(crate) struct BackupArgs {
    /// The cluster.
    pub(crate) cluster: String,
    /// The operator's state folder.
    #[arg(long, default_value = ".state", env = "ETCD_OPERATOR_STATE_DIR")]
    pub(crate) state_dir: PathBuf,
    /// Folders holding etcd binaries as VERSION/etcd (used to check
    /// snapshots with etcdutl / etcdctl).
    #[arg(
        long = "etcd-binaries",
        env = "ETCD_OPERATOR_BINARIES",
        value_delimiter = ':',
        default_value = ".etcd"
    )]
    pub(crate) etcd_binaries: Vec<PathBuf>,
}

#[derive(clap::Args, Debug)]
pub(crate) struct BackupsArgs {
    /// The cluster (with --location: list only its backups there).
    #[arg(required_unless_present = "location")]
    pub(crate) cluster: Option<String>,
    /// The operator's state folder.
    #[arg(long, default_value = ".state", env = "ETCD_OPERATOR_STATE_DIR")]
    pub(crate) state_dir: PathBuf,
    /// List this object store instead of a cluster's backup location:
    /// `s3://BUCKET/PREFIX`, `gs://BUCKET/PREFIX` or `az://CONTAINER/PREFIX`
    /// (as `spec.backup.location.objectStore.url`); credentials come from
    /// the environment, as the operator's do. Needs no state folder.
    #[arg(long, value_name = "URL")]
    pub(crate) location: Option<String>,
    /// The store's endpoint (`objectStore.endpoint`), with --location.
    #[arg(long, requires = "location")]
    pub(crate) endpoint: Option<String>,
    /// The store's region (`objectStore.region`), with --location.
    #[arg(long, requires = "location")]
    pub(crate) region: Option<String>,
    /// Folders holding etcd binaries as VERSION/etcd (accepted as the other
    /// backup commands take it; a listing runs no etcd tool).
    #[arg(
        long = "etcd-binaries",
        env = "ETCD_OPERATOR_BINARIES",
        value_delimiter = ':',
        default_value = ".etcd"
    )]
    pub(crate) etcd_binaries: Vec<PathBuf>,
}

pub(crate) fn backups(args: BackupsArgs) -> anyhow::Result<ExitCode> {
    if let Some(url) = &args.location {
        return backups_at(&args, url);
    }
    let cluster = args.cluster.unwrap_or_default();
    match cli::backup::list(&args.state_dir, &cluster) {
        Ok((dir, list)) => {
            if list.is_empty() {
                out(&format!("no backups of {cluster} in {}\n", dir.display()))?;
            } else {
                let table = cli::backup::table(&list);
                let chains = cli::backup::chains_for(&args.state_dir, &cluster, &dir, &list);
                out(&format!("{table}\n{chains}folder: {}\n", dir.display()))?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            eprintln!("error: {e}");
            Ok(ExitCode::from(2))
        }
    }
}

/// `backups --location URL [CLUSTER]`.
fn backups_at(args: &BackupsArgs, url: &str) -> anyhow::Result<ExitCode> {
    use cli::store_listing::{list_location, place_from_flags};
    let listed = place_from_flags(url, args.endpoint.as_deref(), args.region.as_deref())
        .and_then(|place| Ok((list_location(&place, args.cluster.as_deref())?, place)));
    let (found, place) = match listed {
        Ok(f) => f,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(ExitCode::from(2));
        }
    };
    if found.is_empty() {
        let whose = args
            .cluster
            .as_deref()
            .map_or(String::new(), |c| format!(" of {c}"));
        out(&format!("no backups{whose} in {place}\n"))?;
        return Ok(ExitCode::SUCCESS);
    }
    let text = cli::store_listing::render(&found, &place);
    out(&text)?;
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn check_backup(args: CheckBackupArgs) -> anyhow::Result<ExitCode> {
    use etcd_operator::backup::proof::Verdict;
    let common = args.common;
    let binaries = Arc::new(Binaries::new(common.etcd_binaries));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let cluster = common.cluster;
    match rt.block_on(cli::check_backup::run(
        &common.state_dir,
        &cluster,
        args.backup.as_deref(),
        binaries,
    )) {
        Ok((meta, check)) => {
            out(&format!(
                "backup {} of {} (revision {}): {}: {}\n",
                meta.name, cluster, meta.revision, check.result, check.message
            ))?;
            Ok(ExitCode::from(match check.result {
                Verdict::Verified => 0,
                Verdict::Mismatch => 3,
                Verdict::Unverifiable => 4,
            }))
        }
        Err(e) => {
            eprintln!("error: restore check of {cluster} failed: {e}");
            let bad_input = matches!(
                e,
                cli::backup::Error::Name(_)
                    | cli::backup::Error::Status(_)
                    | cli::backup::Error::Backup(etcd_operator::backup::Error::NotFound { .. })
            );
            Ok(ExitCode::from(if bad_input { 2 } else { 1 }))
        }
    }
}

pub(crate) fn backup_now(args: BackupArgs) -> anyhow::Result<ExitCode> {
    let binaries = std::sync::Arc::new(Binaries::new(args.etcd_binaries));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    match rt.block_on(cli::backup::take_now(
        &args.state_dir,
        &args.cluster,
        binaries,
    )) {
        Ok(meta) => {
            let mut text = format!(
                "backup {} of {}: revision {}, {} keys, {} bytes, from {}; verified by:\n",
                meta.name, meta.cluster, meta.revision, meta.total_keys, meta.size, meta.member
            );
            for v in &meta.verified_by {
                text.push_str(&format!("  {v}\n"));
            }
            out(&text)?;
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            eprintln!("error: backup of {} failed: {e}", args.cluster);
            Ok(ExitCode::from(1))
        }
    }
}

pub(crate) fn backup_job(args: BackupJobArgs) -> anyhow::Result<ExitCode> {
    let binaries = Arc::new(Binaries::new(args.etcd_binaries));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let report = rt.block_on(etcd_operator::platform::local::backup_job::run(
        &args.state,
        &args.place,
        &args.op,
        binaries,
        StoreEnv::default(),
    ));
    if let Some(e) = &report.error {
        let cluster = &args.place.cluster;
        tracing::error!(%cluster, "backup job {} failed: {e}", args.op.word());
    }
    out(&format!("{}\n", report.line()))?;
    Ok(if report.error.is_some() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

pub(crate) fn backup_follow(args: BackupFollowArgs) -> anyhow::Result<ExitCode> {
    etcd_operator::names::check_cluster_name(&args.cluster)?;
    let spec = crd::ContinuousSpec {
        segment_interval: args.segment_interval,
        max_events: args.max_events,
    };
    let policy = etcd_operator::validate::continuous::check(&spec).map_err(|errors| {
        let said: Vec<String> = errors.iter().map(|(f, m)| format!("{f}: {m}")).collect();
        anyhow::anyhow!("{}", said.join("; "))
    })?;
    let object = args.store.location().map_err(|e| anyhow::anyhow!("{e}"))?;
    let binaries = Arc::new(Binaries::new(args.etcd_binaries));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let emit = |line: &str| {
        let _ = out(&format!("{line}\n"));
    };
    let mut location = etcd_operator::backup::Location::of(&args.cluster, None);
    location.object = object;
    let members = etcd_operator::platform::local::follow_job::Members {
        urls: args.url,
        tls: args.tls,
    };
    rt.block_on(etcd_operator::platform::local::follow_job::run(
        &args.state,
        location,
        members,
        policy,
        binaries,
        StoreEnv::default(),
        &emit,
    ));
    Ok(ExitCode::SUCCESS)
}
