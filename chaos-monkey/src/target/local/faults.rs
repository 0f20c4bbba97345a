//! The local platform's network and disk faults: kernel rules around the
//! members' processes and addresses ([`crate::net`]), bytes flipped in a
//! stopped member's files and a write burst ([`crate::disk`]).

use std::path::PathBuf;

use etcd_operator::faults::Fault;
use rustix::process::Signal;

use super::{Handle, Local, send, wait_gone};
use crate::cli::FaultKind;
use crate::config::{Config, FaultOptions};
use crate::net::{self, Shape, delay, snapshot};
use crate::rng::Rng;
use crate::target::{Error, LastingPlan};

/// A lasting fault in force on the local platform.
#[derive(Debug)]
pub enum Lasting {
    /// A network fault.
    Net(Box<NetLasting>),
    /// Shifted clocks (clock-skew).
    Clock(Vec<crate::clock::Skewed>),
    /// Throttled disks (slow-disk).
    Disk(Vec<crate::disk::slow::Slowed>),
}

/// A network fault in force on the local platform.
#[derive(Debug)]
pub struct NetLasting {
    /// The kernel rules and cgroups, as recorded in its ledger.
    pub applied: net::Applied,
    /// For blackhole-until-snapshot: the wait for the leader's compaction.
    pub watch: Option<snapshot::Watch>,
    /// For delay: the thread holding the packets.
    pub delayer: Option<delay::Delayer>,
}

fn setup(e: net::Error) -> Error {
    match e {
        net::Error::Missing(_) | net::Error::Leftovers(_) => Error::Setup(e.to_string()),
        other => Error::Net(other),
    }
}

/// Checks rights, tools and leftovers for network faults.
pub fn prepare(local: &Local, cfg: &Config) -> Result<Option<String>, Error> {
    if cfg.fault.on_member() && !cfg.dry_run {
        return super::member::prepare(cfg.fault);
    }
    if !cfg.fault.network() || cfg.dry_run {
        return Ok(None);
    }
    let root = net::sys::preflight().map_err(setup)?;
    if let Some(warning) = net::check_clean(local.state_dir()).map_err(setup)? {
        tracing::warn!("{warning}");
    }
    let line = format!(
        "network faults touch: iptables chains CM-{pid}-N (mangle OUTPUT and filter INPUT, \
         comment \"{c} CM-{pid}-N\"), a cgroup cm-{pid}-n-i per member involved under {root}{q}, \
         records in {ledger}; the kernel holds no rules a gone monkey left on these members",
        pid = std::process::id(),
        c = net::COMMENT,
        root = root.display(),
        q = if cfg.fault == FaultKind::Delay {
            ", an NFQUEUE per fault (packets held in this process)"
        } else {
            ""
        },
        ledger = net::LEDGER_DIR,
    );
    let _ = local.cgroup_root.set(root);
    Ok(Some(line))
}

fn member(name: &str, h: &Handle) -> Result<net::Member, Error> {
    let ip =
        h.ip.ok_or_else(|| Error::Unsupported(format!("{name} has no address of its own")))?;
    Ok(net::Member {
        name: name.to_string(),
        process: h.process,
        ip,
    })
}

/// Applies the rules of `plan`.
pub async fn start(local: &Local, plan: &LastingPlan<Handle>) -> Result<(Lasting, String), Error> {
    match plan.fault {
        Fault::ClockSkew => {
            let (done, detail) = super::member::skew(plan).await?;
            return Ok((Lasting::Clock(done), detail));
        }
        Fault::SlowDisk => {
            let (done, detail) = super::member::slow(plan).await?;
            return Ok((Lasting::Disk(done), detail));
        }
        _ => {}
    }
    let root: PathBuf = match local.cgroup_root.get() {
        Some(r) => r.clone(),
        None => net::sys::preflight().map_err(setup)?,
    };
    let members = plan
        .members
        .iter()
        .map(|(n, h)| member(n, h))
        .collect::<Result<Vec<_>, _>>()?;
    let o = &plan.options;
    let shape = match plan.fault {
        Fault::Delay => Shape::Delay {
            latency: o.latency,
            jitter: o.latency_jitter,
            seed: plan.seed,
        },
        Fault::Loss => Shape::Loss(o.loss_percent / 100.0),
        _ => Shape::Drop,
    };
    let pairs = plan.pairs.clone();
    let state = local.state_dir().to_path_buf();
    let applied =
        tokio::task::spawn_blocking(move || net::apply(&root, &state, &members, &pairs, shape))
            .await
            .map_err(|e| Error::Unsupported(format!("the rule task failed: {e}")))??;
    let mut delayer = None;
    if let (
        Shape::Delay {
            latency,
            jitter,
            seed,
        },
        Some(q),
    ) = (shape, applied.queue)
    {
        match delay::Delayer::start(q, latency, jitter, seed) {
            Ok(d) => delayer = Some(d),
            Err(e) => {
                let _ = net::heal(&applied);
                return Err(Error::Net(e));
            }
        }
    }
    let mut watch = None;
    if plan.fault == Fault::BlackholeUntilSnapshot {
        let victim = plan.victims.first().and_then(|&v| plan.members.get(v));
        let index = match victim.and_then(|(_, h)| h.client_url.as_deref()) {
            Some(url) => local.clients.status(url).await.map(|s| s.raft_index).ok(),
            None => None,
        };
        let Some(index) = index else {
            let _ = net::heal(&applied);
            return Err(Error::Unsupported(
                "the victim's raft index could not be read: cannot tell when the leader has \
                 compacted past it"
                    .into(),
            ));
        };
        let peers = plan
            .members
            .iter()
            .enumerate()
            .filter(|(i, _)| !plan.victims.contains(i))
            .filter_map(|(_, (n, h))| {
                Some(snapshot::Peer {
                    name: n.clone(),
                    client_url: h.client_url.clone()?,
                })
            })
            .collect();
        watch = Some(snapshot::Watch::new(index, peers));
    }
    let what = match shape {
        Shape::Drop => "packets dropped".to_string(),
        Shape::Loss(p) => format!("{:.1}% of the packets dropped at random", p * 100.0),
        Shape::Delay {
            latency, jitter, ..
        } => format!(
            "packets held {} ± {} (NFQUEUE {})",
            humantime::format_duration(latency),
            humantime::format_duration(jitter),
            applied.queue.unwrap_or(0)
        ),
    };
    let detail = format!(
        "{what}; iptables chains {}{}",
        applied.tag,
        watch
            .as_ref()
            .map(|w| format!("; victim cut off at raft index {}", w.victim_index))
            .unwrap_or_default()
    );
    Ok((
        Lasting::Net(Box::new(NetLasting {
            applied,
            watch,
            delayer,
        })),
        detail,
    ))
}

/// Polls a blackhole's wait.
pub async fn settled(local: &Local, lasting: &mut Lasting) -> Option<String> {
    match lasting {
        Lasting::Net(n) => match &mut n.watch {
            Some(w) => w.poll(&local.clients).await,
            None => None,
        },
        _ => None,
    }
}

/// Removes the rules.
pub fn heal(lasting: &Lasting) -> Result<(), Error> {
    let lasting = match lasting {
        Lasting::Net(n) => n,
        Lasting::Clock(c) => return super::member::unskew(c),
        Lasting::Disk(d) => return super::member::unslow(d),
    };
    // Held packets go first (then the queue closes and the rules' NFQUEUE
    // lets new ones bypass it): removing the rules would make the kernel
    // drop what is still queued.
    if let Some(d) = &lasting.delayer {
        d.stop();
    }
    net::heal(&lasting.applied).map_err(Error::Net)
}

/// corrupt and disk-full.
pub async fn damage(
    fault: Fault,
    h: &Handle,
    options: &FaultOptions,
    mut rng: Rng,
) -> Result<String, Error> {
    let Some(data) = h.data_dir.clone() else {
        return Err(Error::Unsupported("the operator has no data".into()));
    };
    match fault {
        Fault::Corrupt => {
            // Frozen first, so the operator cannot restart it before the
            // damage is done; killed after, so it starts on damaged files.
            send(h, Signal::STOP)?;
            let part = options.corrupt;
            let dir = data.clone();
            let done =
                tokio::task::spawn_blocking(move || crate::disk::corrupt(&dir, part, &mut rng))
                    .await;
            let done = match done {
                Ok(Ok(d)) => d,
                Ok(Err(e)) => {
                    let _ = send(h, Signal::CONT);
                    return Err(Error::Io {
                        what: format!(
                            "cannot corrupt the {} under {}",
                            part.as_str(),
                            data.display()
                        ),
                        source: e,
                    });
                }
                Err(e) => {
                    let _ = send(h, Signal::CONT);
                    return Err(Error::Unsupported(format!("the corrupt task failed: {e}")));
                }
            };
            send(h, Signal::KILL)?;
            wait_gone(h).await?;
            Ok(done)
        }
        Fault::DiskFull => {
            let url = h
                .client_url
                .as_deref()
                .ok_or_else(|| Error::Unsupported("no client URL".into()))?;
            crate::disk::fill::fill(url, &data, options.fill_max)
                .await
                .map_err(|e| Error::Unsupported(e.to_string()))
        }
        other => Err(Error::Unsupported(format!(
            "{} is not a disk fault",
            other.as_str()
        ))),
    }
}
