//! The run's network faults (started on a tick, healed after --fault-for,
//! when their condition is met, or when the run ends) and disk faults.

use std::collections::HashSet;

use etcd_operator::faults::{Fault, FaultRecord, Role};
use tokio::time::{Duration, Instant};

use super::{Error, Run, fault_of};
use crate::netplan;
use crate::rng::{Rng, Stream};
use crate::roles::RoleSource;
use crate::select::Pick;
use crate::target::{self, LastingPlan, MemberKey, ObservedCluster, Platform};

/// How often a fault that ends on a condition is looked at.
pub const POLL: Duration = Duration::from_millis(200);

/// A member a network fault is aimed at, as the fault log names it.
#[derive(Clone, Debug)]
pub(super) struct Hit {
    pub key: MemberKey,
    pub role: Role,
    pub role_source: Option<RoleSource>,
}

/// A network fault in force.
pub(super) struct Active<L> {
    pub fault: Fault,
    pub cluster: String,
    pub hits: Vec<Hit>,
    pub lasting: L,
    pub started: Instant,
    pub until: Instant,
    pub polls: bool,
}

impl<P: Platform> Run<'_, P> {
    /// Clusters with a network fault in force take no other.
    pub(super) fn busy(&self) -> HashSet<&str> {
        self.lasting.iter().map(|a| a.cluster.as_str()).collect()
    }

    /// When the loop must wake for the network faults.
    pub(super) fn lasting_wake(&self, now: Instant) -> Option<Instant> {
        self.lasting
            .iter()
            .map(|a| {
                if a.polls {
                    a.until.min(now + POLL)
                } else {
                    a.until
                }
            })
            .min()
    }

    /// Starts the network fault of this tick on the picks' cluster.
    pub(super) async fn start_network(
        &mut self,
        tick: u64,
        observed: &[ObservedCluster<P::Handle>],
        picks: &[Pick],
    ) -> Result<(), Error> {
        let cfg = self.cfg;
        let fault = fault_of(cfg.fault);
        let Some(first) = picks.first() else {
            return Ok(());
        };
        let c = &observed[first.cluster];
        let running: Vec<usize> = (0..c.members.len())
            .filter(|&i| c.members[i].view.running && c.members[i].handle.is_some())
            .collect();
        let mine: Vec<usize> = picks
            .iter()
            .filter(|p| p.cluster == first.cluster)
            .map(|p| p.member)
            .collect();
        let mut rng = Rng::for_tick(cfg.seed, tick, Stream::Split);
        let Some(cut) = netplan::cut(&mine, &running, c.members.len(), cfg.faults.split, &mut rng)
        else {
            tracing::info!(
                tick,
                "nothing to cut: {} has no other running member",
                c.name
            );
            return Ok(());
        };
        // Indexes into the plan's members (the running ones).
        let at = |i: usize| running.iter().position(|&r| r == i).unwrap_or(0);
        let plan = LastingPlan {
            fault,
            cluster: c.name.clone(),
            members: running
                .iter()
                .filter_map(|&i| {
                    let m = &c.members[i];
                    Some((m.view.name.clone(), m.handle.clone()?))
                })
                .collect(),
            pairs: cut.pairs.iter().map(|&(a, b)| (at(a), at(b))).collect(),
            victims: cut.victims.iter().map(|&v| at(v)).collect(),
            options: cfg.faults.clone(),
            seed: Rng::for_tick(cfg.seed, tick, Stream::Damage).next_u64(),
        };
        let hits: Vec<Hit> = cut
            .victims
            .iter()
            .map(|&v| Hit {
                key: (c.name.clone(), c.members[v].view.name.clone()),
                role: c.members[v].view.role,
                role_source: c.members[v].role_source,
            })
            .collect();
        let details: Vec<String> = plan
            .victims
            .iter()
            .map(|&v| {
                let verb = if fault == Fault::Partition || fault == Fault::BlackholeUntilSnapshot {
                    "cut from"
                } else {
                    "on its links to"
                };
                format!("{verb} {}", plan.cut_from(v).join(", "))
            })
            .collect();
        let mut records: Vec<(FaultRecord, Option<RoleSource>, String)> = hits
            .iter()
            .zip(&details)
            .map(|(h, d)| {
                let r = FaultRecord::now(fault, &h.key.0, &h.key.1, h.role, "dry-run");
                (r, h.role_source, d.clone())
            })
            .collect();
        if !cfg.dry_run {
            match self.platform.start(&plan).await {
                Ok((lasting, how)) => {
                    for (r, _, d) in &mut records {
                        r.outcome = "injected".into();
                        *d = format!("{d}; {how}");
                    }
                    let now = Instant::now();
                    self.lasting.push(Active {
                        fault,
                        cluster: c.name.clone(),
                        hits,
                        lasting,
                        started: now,
                        until: now + cfg.faults.fault_for,
                        polls: fault == Fault::BlackholeUntilSnapshot,
                    });
                }
                Err(e) => {
                    for (r, _, _) in &mut records {
                        r.outcome = format!("failed: {e}");
                    }
                }
            }
        }
        for (r, source, d) in records {
            self.log.write_detailed(r, source, Some(&d))?;
        }
        Ok(())
    }

    /// Starts a clock-skew or slow-disk on the picks of the first picked
    /// cluster (one lasting fault per cluster).
    pub(super) async fn start_on_members(
        &mut self,
        observed: &[ObservedCluster<P::Handle>],
        picks: &[Pick],
    ) -> Result<(), Error> {
        let cfg = self.cfg;
        let fault = fault_of(cfg.fault);
        let Some(first) = picks.first() else {
            return Ok(());
        };
        let c = &observed[first.cluster];
        let mut members = Vec::new();
        let mut hits = Vec::new();
        for p in picks.iter().filter(|p| p.cluster == first.cluster) {
            let m = &c.members[p.member];
            if let Some(h) = &m.handle {
                members.push((m.view.name.clone(), h.clone()));
                hits.push(Hit {
                    key: (c.name.clone(), m.view.name.clone()),
                    role: m.view.role,
                    role_source: m.role_source,
                });
            }
        }
        let plan = LastingPlan {
            fault,
            cluster: c.name.clone(),
            victims: (0..members.len()).collect(),
            members,
            pairs: Vec::new(),
            options: cfg.faults.clone(),
            seed: 0,
        };
        let mut outcome = "dry-run".to_string();
        let mut detail = None;
        if !cfg.dry_run {
            match self.platform.start(&plan).await {
                Ok((lasting, how)) => {
                    outcome = "injected".into();
                    detail = Some(how);
                    let now = Instant::now();
                    self.lasting.push(Active {
                        fault,
                        cluster: c.name.clone(),
                        hits: hits.clone(),
                        lasting,
                        started: now,
                        until: now + cfg.faults.fault_for,
                        polls: false,
                    });
                }
                Err(e) => outcome = format!("failed: {e}"),
            }
        }
        for h in hits {
            let r = FaultRecord::now(fault, &h.key.0, &h.key.1, h.role, &outcome);
            self.log
                .write_detailed(r, h.role_source, detail.as_deref())?;
        }
        Ok(())
    }

    /// Heals the network faults that are due (time, or their condition).
    pub(super) async fn heal_due(&mut self, now: Instant) -> Result<(), Error> {
        let mut due = Vec::new();
        let mut keep = Vec::new();
        for mut a in std::mem::take(&mut self.lasting) {
            let why = if a.polls {
                self.platform.settled(&mut a.lasting).await
            } else {
                None
            };
            match why {
                Some(w) => due.push((a, w)),
                None if a.until <= Instant::now().max(now) => {
                    let w = match a.fault {
                        Fault::BlackholeUntilSnapshot => format!(
                            "--fault-for {} passed before the leader compacted past the victim \
                             (no snapshot was needed)",
                            humantime::format_duration(self.cfg.faults.fault_for)
                        ),
                        _ => format!(
                            "after {}",
                            humantime::format_duration(self.cfg.faults.fault_for)
                        ),
                    };
                    due.push((a, w));
                }
                None => keep.push(a),
            }
        }
        self.lasting = keep;
        for (a, why) in due {
            let r = self.platform.heal(&a.lasting).await;
            self.log_heal(&a, &r, &why)?;
        }
        Ok(())
    }

    fn log_heal(
        &mut self,
        a: &Active<P::Lasting>,
        r: &Result<(), target::Error>,
        why: &str,
    ) -> Result<(), Error> {
        let outcome = super::outcome(r);
        let lasted = a.started.elapsed();
        for h in &a.hits {
            let rec = FaultRecord::now(Fault::Heal, &h.key.0, &h.key.1, h.role, &outcome);
            let detail = format!(
                "{} ended {why} (lasted {:.1}s)",
                a.fault.as_str(),
                lasted.as_secs_f64()
            );
            self.log.write_detailed(rec, h.role_source, Some(&detail))?;
        }
        Ok(())
    }

    /// Heals every network fault in force; returns those that could not be.
    pub(super) async fn heal_all(&mut self, why: &str) -> Vec<String> {
        let mut left = Vec::new();
        for a in std::mem::take(&mut self.lasting) {
            let r = self.platform.heal(&a.lasting).await;
            if let Err(e) = &r {
                left.push(format!(
                    "{} of {} ({e}; run chaos-monkey --cleanup)",
                    a.fault.as_str(),
                    a.cluster
                ));
            }
            if let Err(e) = self.log_heal(&a, &r, why) {
                tracing::error!("{e}");
            }
        }
        left
    }

    /// corrupt and disk-full on each pick.
    pub(super) async fn damage(
        &mut self,
        tick: u64,
        observed: &[ObservedCluster<P::Handle>],
        picks: &[Pick],
    ) -> Result<(), Error> {
        let cfg = self.cfg;
        let fault = fault_of(cfg.fault);
        let mut rng = Rng::for_tick(cfg.seed, tick, Stream::Damage);
        for p in picks {
            let c = &observed[p.cluster];
            let m = &c.members[p.member];
            let Some(h) = &m.handle else { continue };
            let mut rec = FaultRecord::now(fault, &c.name, &m.view.name, m.view.role, "dry-run");
            let mut detail = None;
            if !cfg.dry_run {
                let r = self
                    .platform
                    .damage(fault, h, &cfg.faults, Rng::new(rng.next_u64()))
                    .await;
                match r {
                    Ok(d) if fault == Fault::DiskFull => {
                        // The alarm is raised at the burst's end, not its
                        // start: the record says when the fault took hold,
                        // which is where recovery is measured from.
                        rec =
                            FaultRecord::now(fault, &c.name, &m.view.name, m.view.role, "injected");
                        detail = Some(d);
                    }
                    Ok(d) => {
                        rec.outcome = "injected".into();
                        detail = Some(d);
                    }
                    Err(e) => rec.outcome = format!("failed: {e}"),
                }
            }
            self.log
                .write_detailed(rec, m.role_source, detail.as_deref())?;
        }
        Ok(())
    }
}
