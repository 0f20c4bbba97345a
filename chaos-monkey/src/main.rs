//! `chaos-monkey`: the command line. Everything else is in the library.

use std::process::ExitCode;

use anyhow::Context;
use chaos_monkey::cli::{Args, LogFormat};
use chaos_monkey::monkey::Error;
use chaos_monkey::{Config, FaultLog, app};
use clap::Parser;

fn main() -> ExitCode {
    etcd_operator::tls::install_crypto_provider();
    let args = Args::parse();
    init_tracing(args.log_format);
    for flag in args.ignored() {
        eprintln!("warning: {flag} applies to --platform kube only; ignored");
    }
    if let Some(shell) = args.completions {
        let cmd = <Args as clap::CommandFactory>::command();
        etcd_operator::cli::docs::completions(cmd, shell, &mut std::io::stdout());
        return ExitCode::SUCCESS;
    }
    if let Some(dir) = &args.man {
        let cmd = <Args as clap::CommandFactory>::command();
        return match etcd_operator::cli::docs::man_pages(cmd, dir) {
            Ok(files) => {
                eprintln!("wrote {} into {}", files.len(), dir.display());
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!(
                    "error: cannot write the man page into {}: {e}",
                    dir.display()
                );
                ExitCode::from(1)
            }
        };
    }
    if args.cleanup {
        return cleanup(&args);
    }
    let cfg = match Config::from_args(args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    match run(&cfg) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(1)
        }
    }
}

fn run(cfg: &Config) -> anyhow::Result<ExitCode> {
    let rt = etcd_operator::cli::runtime().context("cannot start the async runtime")?;
    rt.block_on(async {
        // Listen before anything is touched, so a signal always gets the
        // paused members resumed.
        let shutdown = shutdown_signal().context("cannot listen for SIGINT/SIGTERM")?;
        let mut log = FaultLog::open(cfg.fault_log.as_deref())?;
        match app::execute(cfg, &mut log, shutdown).await {
            Ok(summary) => {
                eprintln!("{}", summary.line(&log));
                Ok(
                    if summary.left_paused.is_empty() && summary.left_unhealed.is_empty() {
                        ExitCode::SUCCESS
                    } else {
                        ExitCode::from(1)
                    },
                )
            }
            Err(Error::BadInput(message)) => {
                eprintln!("error: {message}");
                Ok(ExitCode::from(2))
            }
            // The message already holds its causes.
            Err(e) => {
                eprintln!("error: {e}");
                Ok(ExitCode::from(1))
            }
        }
    })
}

/// `--cleanup`: removes what killed monkeys left behind, says what.
fn cleanup(args: &Args) -> ExitCode {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    match rt.block_on(app::cleanup(args)) {
        Ok(lines) if lines.is_empty() => {
            eprintln!("chaos-monkey: --cleanup: nothing left behind");
            ExitCode::SUCCESS
        }
        Ok(lines) => {
            for l in lines {
                eprintln!("chaos-monkey: --cleanup: {l}");
            }
            ExitCode::SUCCESS
        }
        Err(Error::BadInput(m)) => {
            eprintln!("error: {m}");
            ExitCode::from(2)
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}

/// Completes on SIGINT or SIGTERM; the handlers are installed at once.
fn shutdown_signal() -> std::io::Result<impl Future<Output = ()>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut int = signal(SignalKind::interrupt())?;
    let mut term = signal(SignalKind::terminate())?;
    Ok(async move {
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
        }
    })
}

fn init_tracing(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        // kube-client logs each failed request; the monkey reports them itself.
        .unwrap_or_else(|_| {
            tracing_subscriber::EnvFilter::new("chaos_monkey=info,kube_client=off,warn")
        });
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}
