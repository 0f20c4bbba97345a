//! The commands for deleted clusters on the local platform: list the ones
//! kept aside, put one back, purge one, and ask the running operator to
//! delete a cluster whose manifest vanished with every other one (held).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use etcd_operator::controller::local::folder;
use etcd_operator::platform::local::deleted;
use etcd_operator::platform::local::layout::Layout;

/// The longest `--keep-deleted` (ten years).
const KEEP_MAX: Duration = Duration::from_secs(10 * 365 * 86_400);

/// Parses `--keep-deleted`: a Go-style duration from 0s to ten years.
pub(crate) fn keep_deleted(s: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(s)
        .map_err(|e| format!("{s:?} is not a duration such as 7d or 36h: {e}"))?;
    if d > KEEP_MAX {
        return Err(format!(
            "{s} is longer than ten years; keep deleted clusters at most 3650d"
        ));
    }
    Ok(d)
}

/// The longest `--delete-grace` (a day).
const GRACE_MAX: Duration = Duration::from_secs(86_400);

/// Parses `--delete-grace`: a Go-style duration from 0s to a day.
pub(crate) fn delete_grace(s: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(s)
        .map_err(|e| format!("{s:?} is not a duration such as 10s or 1m: {e}"))?;
    if d > GRACE_MAX {
        return Err(format!(
            "{s} is longer than a day: a cluster whose manifest is gone would run on that long; \
             give at most 24h"
        ));
    }
    Ok(d)
}

/// `deleted`, `undelete`, `purge` and `delete`'s state folder.
#[derive(clap::Args, Debug)]
pub(crate) struct StateArg {
    /// The operator's state folder.
    #[arg(long, default_value = ".state", env = "ETCD_OPERATOR_STATE_DIR")]
    pub(crate) state_dir: PathBuf,
}

/// `undelete`'s arguments.
#[derive(clap::Args, Debug)]
pub(crate) struct UndeleteArgs {
    /// The kept cluster, as `deleted` lists it (NAME-YYYYMMDDTHHMMSSZ).
    pub(crate) entry: String,
    #[command(flatten)]
    pub(crate) state: StateArg,
    /// The manifests folder the operator watches: the cluster's last
    /// manifest is written back there, so the operator adopts it.
    #[arg(long, default_value = "clusters", env = "ETCD_OPERATOR_MANIFESTS")]
    pub(crate) manifests: PathBuf,
}

/// `purge`'s arguments.
#[derive(clap::Args, Debug)]
pub(crate) struct PurgeArgs {
    /// The kept cluster, as `deleted` lists it (NAME-YYYYMMDDTHHMMSSZ).
    pub(crate) entry: String,
    #[command(flatten)]
    pub(crate) state: StateArg,
}

/// `delete`'s arguments.
#[derive(clap::Args, Debug)]
pub(crate) struct DeleteArgs {
    /// The cluster to delete.
    pub(crate) cluster: String,
    #[command(flatten)]
    pub(crate) state: StateArg,
}

pub(crate) fn list(args: &StateArg) -> anyhow::Result<ExitCode> {
    let kept = deleted::list(&Layout::new(&args.state_dir))?;
    if kept.is_empty() {
        println!(
            "no deleted cluster is kept in {}",
            deleted::dir(&Layout::new(&args.state_dir)).display()
        );
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "{:<40} {:<22} {:<22} FOLDER",
        "DELETED CLUSTER", "DELETED AT", "KEPT UNTIL"
    );
    for k in kept {
        let (at, until) = k
            .meta
            .map_or(("?".into(), "?".into()), |m| (m.deleted_at, m.keep_until));
        println!("{:<40} {at:<22} {until:<22} {}", k.entry, k.path.display());
    }
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn undelete(args: &UndeleteArgs) -> anyhow::Result<ExitCode> {
    let layout = Layout::new(&args.state.state_dir);
    let cluster = deleted::entry_name(&args.entry)?.to_string();
    let manifest_file = args.manifests.join(format!("{cluster}.yaml"));
    if manifest_file.exists() {
        anyhow::bail!(
            "{} exists: the operator would make a new cluster {cluster} of it; move it away first",
            manifest_file.display()
        );
    }
    let (cluster, manifest) = deleted::undelete(&layout, &args.entry)?;
    match manifest {
        Some(text) => {
            std::fs::write(&manifest_file, text)?;
            println!(
                "cluster {cluster} is back in {} with its data, and its manifest in {}: the \
                 running operator adopts it and restarts its members",
                layout.cluster_dir(&cluster).display(),
                manifest_file.display()
            );
        }
        None => println!(
            "cluster {cluster} is back in {} with its data; no manifest was kept: write one named \
             {cluster} into the manifests folder within the operator's --delete-grace (10s by \
             default), or the operator takes it for deleted again",
            layout.cluster_dir(&cluster).display()
        ),
    }
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn purge(args: &PurgeArgs) -> anyhow::Result<ExitCode> {
    let path = deleted::purge(&Layout::new(&args.state.state_dir), &args.entry)?;
    println!("purged {}", path.display());
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn delete(args: &DeleteArgs) -> anyhow::Result<ExitCode> {
    let file = folder::request_delete(&args.state.state_dir, &args.cluster)?;
    println!(
        "asked the running operator to delete cluster {} ({}); it does so at its next scan, \
         without waiting for --delete-grace, if no manifest names the cluster, and keeps its \
         folder aside (see `etcd-operator deleted`)",
        args.cluster,
        file.display()
    );
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_delete_grace_is_a_duration_up_to_a_day() {
        assert_eq!(delete_grace("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(delete_grace("0s"), Ok(Duration::ZERO));
        assert_eq!(delete_grace("24h"), Ok(GRACE_MAX));
        let e = delete_grace("25h").expect_err("too long");
        assert!(e.contains("at most 24h"), "{e}");
        let e = delete_grace("10").expect_err("no unit");
        assert!(e.contains("not a duration such as 10s"), "{e}");
    }
}
