//! `kubectl-etcd`: the kubectl plugin (`kubectl etcd status demo`). kubectl
//! runs any program named `kubectl-NAME` on PATH as `kubectl NAME`, passing
//! the rest of the command line and none of its own flags, so this one
//! reads the kubeconfig itself (`KUBECONFIG`, `~/.kube/config`, or the
//! pod's service account) and takes `-n` and `--context`.
//!
//! A binary of its own rather than `etcd-operator` answering to a second
//! name: kubectl finds plugins by file name, and a krew-style install is
//! one file named `kubectl-etcd` on PATH, which a symlink, a copy or a
//! rename would each keep or lose differently if the program chose its
//! behaviour by `argv[0]`; its `--help`, completions and man page then
//! describe the plugin's commands only. Everything it does is in the
//! library ([`etcd_operator::kubectl`]).

use std::process::ExitCode;
use std::time::SystemTime;

use anyhow::Context;
use clap::{Args, CommandFactory, Parser, Subcommand, ValueEnum};
use etcd_operator::cli;
use etcd_operator::kubectl::{self, Plugin, restore::Request};

/// The etcd operator's commands for EtcdClusters on Kubernetes: a
/// cluster's status in one screen, its backups, a backup now, a restore
/// into a new cluster.
#[derive(Parser, Debug)]
#[command(name = "kubectl-etcd", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// The namespace of the clusters (default: the kubeconfig context's).
    #[arg(short = 'n', long, global = true, env = "KUBECTL_ETCD_NAMESPACE")]
    namespace: Option<String>,
    /// The kubeconfig context to use (default: the current one).
    #[arg(long, global = true, env = "KUBECTL_ETCD_CONTEXT")]
    context: Option<String>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Show the namespace's clusters, or one cluster in one screen: its
    /// members, leader, revision, backups and their age, restore checks
    /// and conditions (what `etcd-operator status` shows locally).
    #[command(
        after_long_help = "Examples:\n  kubectl etcd status\n  kubectl etcd status demo -n etcd\n  kubectl etcd status demo -o yaml"
    )]
    Status(StatusArgs),
    /// A cluster's backups: what its status says (the newest, its age,
    /// how many are kept, the chain of continuous backups, the last
    /// restore check) and where they are; for an object store, the
    /// bucket's listing with each backup's size checked, as `etcd-operator
    /// backups --location` gives it (with the credentials of your
    /// environment: AWS_*, GOOGLE_*, AZURE_*).
    #[command(after_long_help = "Example:\n  kubectl etcd backups demo -n etcd")]
    Backups(NameArg),
    /// Take a backup of a cluster now: the operator's own backup Job
    /// (its image) saves a snapshot from a ready follower into the
    /// cluster's backup claim or object store, verified there. The
    /// operator applies retention at its next backup.
    #[command(
        after_long_help = "Examples:\n  kubectl etcd backup demo\n  kubectl etcd backup demo --image ghcr.io/example/etcd-operator:0.1.0"
    )]
    Backup(BackupArgs),
    /// Write a new EtcdCluster that restores a cluster's backup (to a
    /// point in time with --to-revision or --to-time): the source's spec
    /// with spec.restore naming the backup where the source keeps its
    /// backups. Printed as YAML, or created with --apply.
    #[command(
        after_long_help = "Examples:\n  kubectl etcd restore demo --backup demo.0b1c9a4e-20261206-100000-000 --into demo-restored\n  kubectl etcd restore demo --backup demo.0b1c9a4e-20261206-100000-000 --to-time 2026-12-06T10:41:59Z --into demo-before --apply"
    )]
    Restore(RestoreArgs),
    /// Print a shell completion script for kubectl-etcd.
    #[command(
        after_long_help = "Example:\n  kubectl-etcd completions bash > /etc/bash_completion.d/kubectl-etcd"
    )]
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: cli::docs::Shell,
    },
}

#[derive(Args, Debug)]
struct StatusArgs {
    /// Show only this cluster, in one screen.
    name: Option<String>,
    /// Output format: the table, or the resources as JSON or YAML.
    #[arg(
        short = 'o',
        long,
        value_enum,
        default_value = "table",
        env = "KUBECTL_ETCD_OUTPUT"
    )]
    output: Output,
}

#[derive(Args, Debug)]
struct NameArg {
    /// The cluster.
    name: String,
}

#[derive(Args, Debug)]
struct BackupArgs {
    /// The cluster.
    name: String,
    /// The image of the backup Job: the operator's (its
    /// ETCD_OPERATOR_BACKUP_IMAGE). Default: read from the operator's
    /// Deployment (labelled app.kubernetes.io/name=etcd-operator).
    #[arg(long, env = "ETCD_OPERATOR_BACKUP_IMAGE")]
    image: Option<String>,
}

#[derive(Args, Debug)]
struct RestoreArgs {
    /// The cluster whose backup is restored.
    name: String,
    /// The backup (a name `kubectl etcd backups NAME` lists).
    #[arg(long)]
    backup: String,
    /// Replay the backup's chain up to exactly this revision.
    #[arg(long, conflicts_with = "to_time")]
    to_revision: Option<i64>,
    /// Replay the chain up to the last revision committed at or before
    /// this time (RFC 3339, such as 2026-12-06T10:41:59Z).
    #[arg(long)]
    to_time: Option<String>,
    /// The new cluster's name.
    #[arg(long)]
    into: String,
    /// Create it in the namespace instead of printing it.
    #[arg(long)]
    apply: bool,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Output {
    Table,
    Json,
    Yaml,
}

fn main() -> ExitCode {
    etcd_operator::tls::install_crypto_provider();
    let cli = Cli::parse();
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    if let Command::Completions { shell } = &cli.command {
        cli::docs::completions(Cli::command(), *shell, &mut std::io::stdout());
        return ExitCode::SUCCESS;
    }
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            let refused = e.downcast_ref::<kubectl::Error>().is_some_and(|e| {
                matches!(
                    e,
                    kubectl::Error::NoCluster { .. } | kubectl::Error::Refused(_)
                )
            });
            ExitCode::from(if refused { 2 } else { 1 })
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let rt = cli::runtime().context("cannot start the async runtime")?;
    let plugin = rt.block_on(connect(cli.context.as_deref(), cli.namespace.as_deref()))?;
    let now = SystemTime::now();
    match cli.command {
        Command::Status(args) => {
            let one = args.name.is_some();
            let clusters = rt.block_on(plugin.status(args.name.as_deref()))?;
            let text = match (args.output, one) {
                (Output::Table, _) => kubectl::status_text(&clusters, one, plugin.namespace(), now),
                (Output::Json, true) => {
                    format!("{}\n", serde_json::to_string_pretty(&clusters[0])?)
                }
                (Output::Yaml, true) => serde_saphyr::to_string(&clusters[0])?,
                (format, false) => {
                    let list =
                        serde_json::json!({"apiVersion": "v1", "kind": "List", "items": clusters});
                    match format {
                        Output::Json => format!("{}\n", serde_json::to_string_pretty(&list)?),
                        _ => serde_saphyr::to_string(&list)?,
                    }
                }
            };
            out(&text)?;
        }
        Command::Backups(args) => {
            let (cluster, object) = rt.block_on(plugin.backups(&args.name))?;
            drop(rt);
            let mut text = kubectl::backups_text(&cluster, now);
            if let Some(place) = object {
                // Its own runtime: not inside another one.
                text.push('\n');
                match cli::store_listing::list_location(&place, Some(&args.name)) {
                    Ok(found) if found.is_empty() => {
                        text.push_str(&format!("no backups of {} in {place}\n", args.name));
                    }
                    Ok(found) => text.push_str(&cli::store_listing::render(&found, &place)),
                    Err(e) => text.push_str(&format!(
                        "the store's listing could not be read with the credentials of this \
                         environment: {e}\n"
                    )),
                }
            }
            out(&text)?;
        }
        Command::Backup(args) => {
            let meta = rt.block_on(async {
                let image = match args.image {
                    Some(i) => i,
                    None => plugin.operator_image().await?,
                };
                eprintln!("taking a backup of {} in a Job of {image}...", args.name);
                plugin.backup_now(&args.name, &image).await
            })?;
            out(&format!(
                "backup {} of {}: revision {}, {} keys, {} bytes, from {}; verified by: {}\n",
                meta.name,
                meta.cluster,
                meta.revision,
                meta.total_keys,
                meta.size,
                meta.member,
                meta.verified_by.join(", ")
            ))?;
        }
        Command::Restore(args) => {
            let request = Request {
                backup: args.backup,
                into: args.into,
                to_revision: args.to_revision,
                to_time: args.to_time,
            };
            let new = rt.block_on(plugin.restore(&args.name, &request, args.apply))?;
            if args.apply {
                out(&format!(
                    "etcdcluster {} created in namespace {}: `kubectl etcd status {}` follows \
                     the restore\n",
                    request.into,
                    plugin.namespace(),
                    request.into
                ))?;
            } else {
                out(&serde_saphyr::to_string(&new)?)?;
            }
        }
        Command::Completions { .. } => {}
    }
    Ok(ExitCode::SUCCESS)
}

/// A client from the kubeconfig (`context`, or the current one) and the
/// namespace to work in.
async fn connect(context: Option<&str>, namespace: Option<&str>) -> anyhow::Result<Plugin> {
    let config = match context {
        Some(ctx) => {
            let options = kube::config::KubeConfigOptions {
                context: Some(ctx.to_string()),
                ..Default::default()
            };
            kube::Config::from_kubeconfig(&options)
                .await
                .map_err(anyhow::Error::from)
        }
        None => kube::Config::infer().await.map_err(anyhow::Error::from),
    }
    .context(
        "cannot read a kubeconfig (KUBECONFIG, ~/.kube/config, or a pod's service account); \
         kubectl etcd uses the same as kubectl",
    )?;
    let namespace = namespace.map_or_else(|| config.default_namespace.clone(), str::to_string);
    let client = kube::Client::try_from(config).context("cannot make an API client")?;
    Ok(Plugin::new(client, &namespace))
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
    fn bash_completes_the_plugins_commands_and_flags() {
        let got = |words: &[&str]| {
            etcd_operator::cli::docs::bash_complete(Cli::command(), words)
                .unwrap_or_else(|e| panic!("{e}"))
        };
        assert_eq!(got(&["kubectl-etcd", "rest"]), ["restore"]);
        assert_eq!(
            got(&["kubectl-etcd", "restore", "--to-r"]),
            ["--to-revision"]
        );
        assert_eq!(
            got(&["kubectl-etcd", "status", "-o", ""]),
            ["table", "json", "yaml"]
        );
    }
}
