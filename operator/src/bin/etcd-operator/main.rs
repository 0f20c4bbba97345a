//! `etcd-operator`: the command line (`run` in [`run`], the backup
//! subcommands in [`backups`]). Everything else is in the library.

mod backups;
mod deleted;
mod run;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::SystemTime;

use anyhow::Context;
use clap::{Args, CommandFactory, Parser, Subcommand, ValueEnum};
use etcd_operator::{cli, crd};
use kube::CustomResourceExt;

use crate::backups::{
    BackupArgs, BackupFollowArgs, BackupJobArgs, BackupsArgs, CheckBackupArgs, backup_follow,
    backup_job, backup_now, backups, check_backup,
};
use crate::run::{RunArgs, run};

/// Keeps etcd clusters in the state their EtcdCluster spec declares:
/// creates them, replaces dead members, and removes them when their
/// manifest goes.
#[derive(Parser, Debug)]
#[command(version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Log format.
    #[arg(
        long,
        global = true,
        value_enum,
        default_value = "text",
        env = "ETCD_OPERATOR_LOG_FORMAT"
    )]
    log_format: LogFormat,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the operator until interrupted (Ctrl-C or SIGTERM). etcd members
    /// keep running after it stops and are adopted again on the next start.
    #[command(
        after_long_help = "Examples:\n  etcd-operator run --platform local --manifests clusters --state-dir .state\n  etcd-operator run --platform kube --namespace etcd --metrics-addr 0.0.0.0:8080"
    )]
    Run(RunArgs),
    /// Show the clusters the operator manages: asked of the running
    /// operator (its latest status, kept in memory, through the socket
    /// STATE/operator.sock), else read from the status files in the state
    /// folder; the output says which (the table's last line; on stderr
    /// with -o json|yaml). For one cluster the table also lists its newest
    /// events (steps begun and ended, failures), as `kubectl describe`
    /// lists Events.
    #[command(
        after_long_help = "Examples:\n  etcd-operator status --state-dir .state\n  etcd-operator status demo --state-dir .state -o json"
    )]
    Status(StatusArgs),
    /// List a cluster's backups (newest first) and the chains of delta
    /// segments after them (the point-in-time window). In a folder each
    /// file is checked again; in an object store the listing reads metas
    /// only and compares sizes (`check-backup` downloads and verifies a
    /// backup whole). With --location it lists a bucket directly, no state
    /// folder needed: every cluster's backups there (or CLUSTER's), with
    /// each cluster's identity (name and uid), to pick one to restore
    /// after everything but the bucket was lost.
    #[command(
        after_long_help = "Examples:\n  etcd-operator backups demo --state-dir .state\n  AWS_ACCESS_KEY_ID=... AWS_SECRET_ACCESS_KEY=... etcd-operator backups --location s3://backups/prod --endpoint https://minio.example:9000"
    )]
    Backups(BackupsArgs),
    /// Take a verified backup of a cluster now (from a ready follower),
    /// into its backup folder, applying its retention.
    #[command(after_long_help = "Example:\n  etcd-operator backup demo --state-dir .state")]
    Backup(BackupArgs),
    /// Prove a backup restores: restore it (the newest that checks out,
    /// or BACKUP) into a scratch single-member etcd on a free loopback
    /// address, compare its KV hash at the backup's revision with a live
    /// member's (etcd HashKV), and record the result in the backup's meta
    /// (shown by `backups`). The scratch member and its folder
    /// (STATE/clusters/CLUSTER/restore-check) are removed afterwards. Exit
    /// code: 0 verified, 3 mismatch, 4 unverifiable (the live cluster
    /// compacted past the backup's revision), 1 the check could not run,
    /// 2 bad input (no such cluster or backup).
    #[command(after_long_help = "Example:\n  etcd-operator check-backup demo --state-dir .state")]
    CheckBackup(CheckBackupArgs),
    /// Print the EtcdCluster CustomResourceDefinition (YAML), or with
    /// --reference the user guide's spec reference generated from it
    /// (Markdown).
    #[command(
        after_long_help = "Examples:\n  etcd-operator crd > deploy/base/crd.yaml\n  etcd-operator crd --reference > docs/src/reference/spec.md"
    )]
    Crd(CrdArgs),
    /// One piece of backup work, as the Kubernetes platform's backup Jobs
    /// run it (in the operator's image, the backup claim mounted at
    /// /state): save, list, retain, check, delete, set aside or prove (a
    /// restore check in a scratch member) a cluster's backups there, then
    /// print a report line for the operator. Not meant to be run by hand.
    #[command(
        after_long_help = "Example (as a Job runs it):\n  etcd-operator backup-job --cluster demo save --member demo-1 --url http://10.0.0.7:2379"
    )]
    BackupJob(BackupJobArgs),
    /// The follower of continuous backups on Kubernetes (a Deployment of
    /// the operator's image, the backup claim mounted at /state): follows
    /// the cluster's changes into delta segments beside the newest good
    /// full backup in the claim, until stopped. Not meant to be run by hand.
    #[command(
        after_long_help = "Example (as the follower Deployment runs it):\n  etcd-operator backup-follow --cluster demo --url http://demo-client:2379 --segment-interval 1s"
    )]
    BackupFollow(BackupFollowArgs),
    /// List the deleted clusters kept aside (local platform): a cluster
    /// whose manifest was removed is moved whole, data included, to
    /// STATE/deleted/NAME-STAMP and kept for `run --keep-deleted`.
    #[command(after_long_help = "Example:\n  etcd-operator deleted --state-dir .state")]
    Deleted(deleted::StateArg),
    /// Put a deleted cluster back (local platform): its folder returns to
    /// STATE/clusters/NAME and its last manifest to the manifests folder,
    /// and the running operator adopts it with its data.
    #[command(
        after_long_help = "Example:\n  etcd-operator undelete demo-20261205T044501Z --state-dir .state --manifests clusters"
    )]
    Undelete(deleted::UndeleteArgs),
    /// Delete a kept deleted cluster's folder for good (local platform).
    #[command(
        after_long_help = "Example:\n  etcd-operator purge demo-20261205T044501Z --state-dir .state"
    )]
    Purge(deleted::PurgeArgs),
    /// Ask the running operator to delete a cluster whose manifest vanished
    /// together with every other one (such clusters are held, not deleted:
    /// an emptied folder is taken for a folder problem). Its folder is kept
    /// aside like any deleted cluster's.
    #[command(after_long_help = "Example:\n  etcd-operator delete demo --state-dir .state")]
    Delete(deleted::DeleteArgs),
    /// Print a shell completion script for etcd-operator.
    #[command(
        after_long_help = "Examples:\n  etcd-operator completions bash > /etc/bash_completion.d/etcd-operator\n  etcd-operator completions zsh > ~/.zfunc/_etcd-operator"
    )]
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: cli::docs::Shell,
    },
    /// Write man pages for etcd-operator and each of its subcommands into
    /// a folder (etcd-operator.1, etcd-operator-run.1, ...).
    #[command(
        after_long_help = "Example:\n  etcd-operator man target/man && man target/man/etcd-operator-run.1"
    )]
    Man {
        /// The folder to write them to (created when missing).
        dir: PathBuf,
    },
}

#[derive(clap::Args, Debug)]
struct StatusArgs {
    /// Show only this cluster, with its members.
    cluster: Option<String>,
    /// The operator's state folder.
    #[arg(long, default_value = ".state", env = "ETCD_OPERATOR_STATE_DIR")]
    state_dir: PathBuf,
    /// Output format: a table (with manifest problems that name no
    /// cluster), or the published resources as JSON or YAML (one resource,
    /// or a `kind: List`).
    #[arg(
        short = 'o',
        long,
        value_enum,
        default_value = "table",
        env = "ETCD_OPERATOR_OUTPUT"
    )]
    output: Output,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Output {
    Table,
    Json,
    Yaml,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum LogFormat {
    Text,
    Json,
}

fn main() -> ExitCode {
    etcd_operator::tls::install_crypto_provider();
    let cli = Cli::parse();
    init_tracing(cli.log_format);
    let result = match cli.command {
        Command::Run(args) => run(args),
        Command::Status(args) => status(args),
        Command::Backups(args) => backups(args),
        Command::Backup(args) => backup_now(args),
        Command::CheckBackup(args) => check_backup(args),
        Command::Crd(args) => crd(&args),
        Command::BackupJob(args) => backup_job(args),
        Command::BackupFollow(args) => backup_follow(args),
        Command::Deleted(args) => deleted::list(&args),
        Command::Undelete(args) => deleted::undelete(&args),
        Command::Purge(args) => deleted::purge(&args),
        Command::Delete(args) => deleted::delete(&args),
        Command::Completions { shell } => {
            cli::docs::completions(Cli::command(), shell, &mut std::io::stdout());
            Ok(ExitCode::SUCCESS)
        }
        Command::Man { dir } => man(&dir),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(1)
        }
    }
}

fn init_tracing(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

fn status(args: StatusArgs) -> anyhow::Result<ExitCode> {
    let loaded = match cli::status::load_live(&args.state_dir, args.cluster.as_deref()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(ExitCode::from(2));
        }
    };
    let cli::status::Loaded {
        clusters,
        problems,
        source,
        events,
    } = loaded;
    let single = args.cluster.is_some();
    match args.output {
        Output::Table => {
            let now = SystemTime::now();
            let mut text = cli::status::table(&clusters, single, now, source.stale_after());
            if let Some(name) = args.cluster.as_deref().filter(|_| single) {
                let none = Vec::new();
                let events = events.get(name).unwrap_or(&none);
                text.push_str(&cli::status::events_table(events, now));
            }
            for p in &problems {
                text.push_str(&format!(
                    "\nmanifest problem: {}: {}\n",
                    cli::table::printable(&p.file.display().to_string()),
                    cli::table::printable(&p.message)
                ));
            }
            text.push_str(&format!("\nsource: {source}\n"));
            out(&text)?;
        }
        Output::Json => {
            let text = if single {
                serde_json::to_string_pretty(&clusters[0])?
            } else {
                serde_json::to_string_pretty(&list(&clusters, &problems))?
            };
            out(&format!("{text}\n"))?;
        }
        Output::Yaml => {
            let text = if single {
                serde_saphyr::to_string(&clusters[0])?
            } else {
                serde_saphyr::to_string(&list(&clusters, &problems))?
            };
            out(&text)?;
        }
    }
    if args.output != Output::Table {
        eprintln!("source: {source}");
    }
    Ok(ExitCode::SUCCESS)
}

/// A `kind: List` like kubectl prints, with the manifest problems that name
/// no cluster (a file that cannot be read, an invalid name) beside it.
fn list(
    items: &[crd::EtcdCluster],
    problems: &[etcd_operator::controller::local::FileProblem],
) -> serde_json::Value {
    let mut list = serde_json::json!({ "apiVersion": "v1", "kind": "List", "items": items });
    if !problems.is_empty() {
        list["manifestProblems"] = serde_json::json!(problems);
    }
    list
}

/// `crd`'s flags.
#[derive(Args, Debug)]
struct CrdArgs {
    /// Print the spec reference (Markdown, docs/src/reference/spec.md)
    /// instead of the CRD.
    #[arg(long)]
    reference: bool,
}

fn crd(args: &CrdArgs) -> anyhow::Result<ExitCode> {
    if args.reference {
        out(&crd::reference::markdown())?;
    } else {
        out(&serde_saphyr::to_string(&crd::EtcdCluster::crd())?)?;
    }
    Ok(ExitCode::SUCCESS)
}

fn man(dir: &std::path::Path) -> anyhow::Result<ExitCode> {
    let files = cli::docs::man_pages(Cli::command(), dir)
        .with_context(|| format!("cannot write man pages into {}", dir.display()))?;
    eprintln!("wrote {} man pages into {}", files.len(), dir.display());
    Ok(ExitCode::SUCCESS)
}

/// Writes to stdout; a closed pipe (`status | head`) is not an error.
fn out(text: &str) -> anyhow::Result<()> {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => Ok(other?),
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::Cli;

    #[test]
    fn every_subcommand_help_ends_with_an_example() {
        Cli::command().debug_assert();
        let missing = etcd_operator::cli::docs::missing_examples(&Cli::command());
        assert!(
            missing.is_empty(),
            "no example at the end of --help: {missing:?}"
        );
    }

    #[test]
    fn bash_completes_subcommands_their_flags_and_values() {
        let got = |words: &[&str]| {
            etcd_operator::cli::docs::bash_complete(Cli::command(), words)
                .unwrap_or_else(|e| panic!("{e}"))
        };
        assert_eq!(got(&["etcd-operator", "run", "--plat"]), ["--platform"]);
        assert_eq!(
            got(&["etcd-operator", "run", "--platform", ""]),
            ["local", "kube"]
        );
        assert_eq!(
            got(&["etcd-operator", "status", "-o", ""]),
            ["table", "json", "yaml"]
        );
        assert_eq!(got(&["etcd-operator", "check-b"]), ["check-backup"]);
        let flags = got(&["etcd-operator", "backup-job", "--"]);
        assert!(flags.iter().any(|f| f == "--cluster"), "{flags:?}");
    }
}
