//! `soak`: the command line. Everything else is in the library.
//!
//! Exit codes: 0 every bound held; 1 a bound or invariant was violated (the
//! report lists each violation with its time); 2 bad input (scenario, flags,
//! a missing binary), before anything started; 3 the run could not be done
//! (the cluster never came up, a spec change or the chaos monkey's start
//! failed, a Kubernetes API call failed; a partial report is still written,
//! with a `run` violation naming the error); 130 interrupted (the report is
//! still written, marked interrupted).

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, Subcommand};
use soak::paths;
use soak::runner::{self, Options, PlatformKind};
use soak::scenario::{self, Dur};

/// Soak tests for etcd-operator: a cluster under the operator, a chaos
/// monkey and client load, checked continuously against invariants and at
/// the end against the scenario's bounds.
#[derive(Parser, Debug)]
#[command(version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run a scenario and write its report. Exit 0 only when every bound held.
    #[command(
        after_long_help = "Examples:\n  soak run scenarios/smoke.yaml --out soak-out/smoke\n  soak run scenarios/kill-one-every-30s.yaml --duration 5m --seed 3\n  soak run scenarios/kill-one-every-30s-kube.yaml --platform kube --namespace default"
    )]
    Run(Box<RunArgs>),
    /// Check scenario files without running them.
    #[command(after_long_help = "Example:\n  soak check scenarios/*.yaml")]
    Check(CheckArgs),
    /// Measure the load generator's write throughput and latency on a fresh
    /// 3-member cluster beside `etcdctl check perf` on the same cluster.
    /// Prints numbers and the ratio, never pass/fail.
    #[command(after_long_help = "Example:\n  soak bench")]
    Bench(soak::bench::Args),
    /// Print two runs side by side: verdict, every bound, the latency
    /// histograms, with the change. OLD and NEW are report folders (or their
    /// summary.json).
    #[command(after_long_help = "Example:\n  soak compare soak-out/nightly-old soak-out/nightly")]
    Compare(CompareArgs),
    /// Check a history.jsonl for linearizability on its own (say, again
    /// with a longer time bound). Exit 0: linearizable; 1: a violation, or
    /// unknown within the time bound; 2: the file cannot be read.
    #[command(after_long_help = "Example:\n  soak lincheck soak-out/smoke/history.jsonl")]
    Lincheck(LincheckArgs),
    /// Print a shell completion script for soak.
    #[command(after_long_help = "Example:\n  soak completions bash > /etc/bash_completion.d/soak")]
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: etcd_operator::cli::docs::Shell,
    },
    /// Write man pages for soak and each of its subcommands into a folder.
    #[command(after_long_help = "Example:\n  soak man target/man")]
    Man {
        /// The folder to write them to (created when missing).
        dir: PathBuf,
    },
}

#[derive(clap::Args, Debug)]
struct CompareArgs {
    /// The earlier run: its report folder or summary.json.
    old: PathBuf,
    /// The later run.
    new: PathBuf,
}

#[derive(clap::Args, Debug)]
struct LincheckArgs {
    /// The history (a run's history.jsonl).
    history: PathBuf,
    /// Longest the search may take; keys not done by then are unknown.
    #[arg(long, default_value = "10m", env = "SOAK_LINCHECK_TIMEOUT")]
    timeout: Dur,
    /// Violations shown in full.
    #[arg(long, default_value_t = 20)]
    show: usize,
}

#[derive(clap::Args, Debug)]
struct RunArgs {
    /// The scenario file (YAML), such as scenarios/smoke.yaml.
    #[arg(env = "SOAK_SCENARIO")]
    scenario: PathBuf,
    /// Where the cluster runs. `local`: the runner starts the operator,
    /// etcd processes on loopback addresses and the chaos monkey itself.
    /// `kube`: the operator is deployed already; the kubeconfig is used.
    #[arg(long, value_enum, default_value = "local", env = "SOAK_PLATFORM")]
    platform: PlatformKind,
    /// Run this long instead of the scenario's duration, such as 5m
    /// (bounds.minFaults and bounds.restoreChecks.min shrink in proportion
    /// when shorter).
    #[arg(long, env = "SOAK_DURATION")]
    duration: Option<Dur>,
    /// Output folder for the report. Default: soak-out/SCENARIO-NAME.
    #[arg(long, env = "SOAK_OUT")]
    out: Option<PathBuf>,
    /// Seed for the chaos monkey and the load (overrides the scenario's).
    #[arg(long, env = "SOAK_SEED")]
    seed: Option<u64>,
    /// The etcd-operator binary. Default: beside this program.
    #[arg(long, env = "SOAK_OPERATOR_BIN")]
    operator_bin: Option<PathBuf>,
    /// The chaos-monkey binary. Default: beside this program.
    #[arg(long, env = "SOAK_CHAOS_BIN")]
    chaos_bin: Option<PathBuf>,
    /// Folder of etcd binaries as VERSION/etcd (local platform). Default:
    /// ./.etcd, else the workspace's .etcd (filled by `bash ci/setup`).
    #[arg(long, env = "SOAK_ETCD_BINARIES")]
    etcd_binaries: Option<PathBuf>,
    /// Work folder for manifests and the operator's state (local platform).
    /// Default: a temporary folder, removed at the end.
    #[arg(long, env = "SOAK_WORK_DIR")]
    work_dir: Option<PathBuf>,
    /// Kubeconfig file (kube platform). Default: $KUBECONFIG or ~/.kube/config.
    #[arg(long, env = "SOAK_KUBECONFIG")]
    kubeconfig: Option<PathBuf>,
    /// Namespace of the EtcdCluster (kube platform).
    #[arg(long, default_value = "default", env = "SOAK_NAMESPACE")]
    namespace: String,
    /// Plain log lines even on a terminal (no live view).
    #[arg(long, env = "SOAK_NO_PROGRESS")]
    no_progress: bool,
    /// Deliberately break the client, to show that the soak catches it
    /// (for testing the soak itself; such a run must fail).
    /// `ack-unsent-writes`: one put in 20 is acknowledged without being sent.
    #[arg(long, value_enum, env = "SOAK_SABOTAGE")]
    sabotage: Option<soak::load::Sabotage>,
}

#[derive(clap::Args, Debug)]
struct CheckArgs {
    /// Scenario files.
    #[arg(required = true)]
    scenarios: Vec<PathBuf>,
}

/// The soak's default log filter. kube-rs logs every 5xx answer at ERROR
/// from its HTTP layer; a port-forward to a member's pod that a fault is
/// taking away answers 500, 53 times in a passing 5-minute run. The soak
/// sees each of those failures itself and says what they mean (routes,
/// notes), so that layer is left out.
const SOAK_LOG: &str = "soak=info,warn,kube_client::client::builder=off";

fn main() -> ExitCode {
    etcd_operator::tls::install_crypto_provider();
    let cli = Cli::parse();
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(SOAK_LOG));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    let result = match cli.command {
        Command::Run(args) => run(*args),
        Command::Check(args) => Ok(check(&args)),
        Command::Bench(args) => bench(args),
        Command::Compare(args) => Ok(compare(&args)),
        Command::Lincheck(args) => Ok(lincheck(&args)),
        Command::Completions { shell } => {
            let cmd = <Cli as clap::CommandFactory>::command();
            etcd_operator::cli::docs::completions(cmd, shell, &mut std::io::stdout());
            Ok(ExitCode::SUCCESS)
        }
        Command::Man { dir } => {
            let cmd = <Cli as clap::CommandFactory>::command();
            etcd_operator::cli::docs::man_pages(cmd, &dir)
                .with_context(|| format!("cannot write man pages into {}", dir.display()))
                .map(|files| {
                    eprintln!("wrote {} man pages into {}", files.len(), dir.display());
                    ExitCode::SUCCESS
                })
        }
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(3)
        }
    }
}

fn check(args: &CheckArgs) -> ExitCode {
    let mut ok = true;
    for f in &args.scenarios {
        match scenario::load(f) {
            Ok(s) => println!("{}: ok ({})", f.display(), s.name),
            Err(e) => {
                ok = false;
                eprintln!("error: {e}");
            }
        }
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(2)
    }
}

fn run(a: RunArgs) -> anyhow::Result<ExitCode> {
    let mut scenario = match scenario::load(&a.scenario) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(ExitCode::from(2));
        }
    };
    if let Some(d) = a.duration {
        if d.get() == Duration::ZERO {
            eprintln!("error: --duration must be more than 0s");
            return Ok(ExitCode::from(2));
        }
        // A shorter run can inject fewer faults: scale the floor with it.
        let ratio = d.get().as_secs_f64() / scenario.duration.get().as_secs_f64().max(1e-9);
        if ratio < 1.0 {
            scenario.bounds.min_faults = scenario::scaled_floor(scenario.bounds.min_faults, ratio);
            // So can it see fewer restore checks; at least one stays asked for.
            if let Some(rc) = &mut scenario.bounds.restore_checks {
                rc.min = ((rc.min as f64 * ratio).floor() as u64).max(1);
            }
        }
        scenario.duration = d;
        if let Err(problems) = scenario::validate(&scenario) {
            eprintln!(
                "error: {} (with --duration {d}): {}",
                a.scenario.display(),
                problems.join("; ")
            );
            return Ok(ExitCode::from(2));
        }
    }
    let out = a
        .out
        .unwrap_or_else(|| Path::new("soak-out").join(&scenario.name));
    let opts = Options {
        scenario,
        scenario_file: a.scenario,
        platform: a.platform,
        out: out.clone(),
        seed: a.seed,
        operator_bin: a
            .operator_bin
            .unwrap_or_else(|| paths::beside("etcd-operator")),
        chaos_bin: a.chaos_bin.unwrap_or_else(|| paths::beside("chaos-monkey")),
        etcd_binaries: a.etcd_binaries.unwrap_or_else(paths::etcd_binaries),
        work_dir: a.work_dir,
        kubeconfig: a.kubeconfig,
        namespace: a.namespace,
        tty: !a.no_progress,
        sabotage: a.sabotage,
    };
    if let Err(e) = runner::check_binaries(&opts) {
        eprintln!("error: {e}");
        return Ok(ExitCode::from(2));
    }
    let rt = etcd_operator::cli::runtime().context("cannot start the async runtime")?;
    let data = rt.block_on(async {
        let (tx, rx) = tokio::sync::watch::channel(false);
        tokio::spawn(async move {
            for n in 0.. {
                shutdown_signal().await;
                if n == 0 {
                    eprintln!(
                        "\nsoak: stopping (tearing everything down; the report is still written)"
                    );
                } else {
                    eprintln!("\nsoak: already stopping");
                }
                let _ = tx.send(true);
            }
        });
        runner::run(&opts, rx).await
    });
    let (data, error) = match data {
        Ok(d) => (Some(d), None),
        Err(f) => (f.partial.map(|d| *d), Some(f.error)),
    };
    if let Some(e) = &error {
        eprintln!("error: {e}");
    }
    // Exit 2: bad input; 3: the run could not be done. Either way a partial
    // report is written when the run got as far as its output folder.
    let failed = error.as_ref().map(|e| match e {
        runner::Error::Setup(_) => ExitCode::from(2),
        _ => ExitCode::from(3),
    });
    let Some(data) = data else {
        return Ok(failed.unwrap_or(ExitCode::from(3)));
    };
    let summary = match soak::report::write(&out, &data) {
        Ok(s) => s,
        Err(e) if failed.is_some() => {
            eprintln!("error: cannot write the partial report: {e}");
            return Ok(failed.unwrap_or(ExitCode::from(3)));
        }
        Err(e) => return Err(e).context("cannot write the report"),
    };
    let report = out.join("report.md");
    let text = std::fs::read_to_string(&report).unwrap_or_default();
    if let Some(table) = soak::report::summary_table(&text) {
        println!("{table}");
    }
    println!("report: {}", report.display());
    Ok(if let Some(code) = failed {
        code
    } else if data.interrupted {
        ExitCode::from(130)
    } else if summary.pass {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn compare(a: &CompareArgs) -> ExitCode {
    use soak::report::compare;
    match (compare::load(&a.old), compare::load(&a.new)) {
        (Ok(old), Ok(new)) => {
            let names = (a.old.display().to_string(), a.new.display().to_string());
            print!("{}", compare::render(&old, &new, (&names.0, &names.1)));
            ExitCode::SUCCESS
        }
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

fn lincheck(a: &LincheckArgs) -> ExitCode {
    let mut h = soak::lin::History::new();
    let mut invalid = None;
    let read = soak::ops::file::read(&a.history, |r| {
        if invalid.is_none()
            && let Err(e) = h.add(&r)
        {
            invalid = Some(e);
        }
    });
    if let Err(e) = read {
        eprintln!("error: {e}");
        return ExitCode::from(2);
    }
    if let Some(e) = invalid {
        eprintln!("error: {}: {e}", a.history.display());
        return ExitCode::from(2);
    }
    h.patch(false);
    let report = soak::lin::check(
        &h,
        &soak::lin::Options {
            timeout: a.timeout.get(),
            max_findings: a.show,
            ..soak::lin::Options::default()
        },
    );
    for f in &report.findings {
        println!("{}\n{}", f.message, f.timeline);
    }
    let c = &report.counts;
    println!(
        "{} operations over {} keys ({} unknown outcomes, {} seen applied; {} failed reads) checked in {:.1}s: {} violations, {} keys unknown",
        c.ops,
        report.keys,
        c.unknown_writes,
        c.seen_applied,
        c.failed_reads,
        report.elapsed_ms as f64 / 1000.0,
        report.violations,
        report.unknown_keys.len()
    );
    if !report.unknown_keys.is_empty() {
        println!(
            "unknown (time bound {}): {}",
            a.timeout,
            report.unknown_keys.join(", ")
        );
    }
    if report.pass() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

fn bench(args: soak::bench::Args) -> anyhow::Result<ExitCode> {
    let rt = etcd_operator::cli::runtime().context("cannot start the async runtime")?;
    match rt.block_on(soak::bench::run(args)) {
        Ok(report) => {
            print!("{report}");
            Ok(ExitCode::SUCCESS)
        }
        Err(e @ soak::bench::Error::Setup(_)) => {
            eprintln!("error: {e}");
            Ok(ExitCode::from(2))
        }
        Err(e) => {
            eprintln!("error: {e}");
            Ok(ExitCode::from(3))
        }
    }
}

async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
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
        assert_eq!(got(&["soak", "run", "--plat"]), ["--platform"]);
        assert_eq!(got(&["soak", "run", "--platform", ""]), ["local", "kube"]);
        assert_eq!(got(&["soak", "lin"]), ["lincheck"]);
    }
}
