//! The `status` command: a table, JSON or YAML of the statuses of the
//! local controller: asked of the running operator first (its latest, kept
//! in memory, see [`crate::controller::live`]), else read from the files it
//! publishes in its state folder.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, SystemTime};

use super::table::{printable, render};
use crate::controller::local::{FileProblem, problems_path};
use crate::crd::EtcdCluster;
use crate::platform::local::events::ClusterEvent;
use crate::platform::local::layout::{Layout, read_json};
use crate::platform::local::status_file::STATUS_FILE_REFRESH;

/// Why statuses could not be shown.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Nothing at the state folder.
    #[error("{0} holds no etcd-operator state; pass the --state-dir the operator runs with")]
    NoState(String),
    /// No such cluster.
    #[error("no cluster named {name:?} in {state} (clusters: {known})")]
    NoCluster {
        /// The name asked for.
        name: String,
        /// The state folder.
        state: String,
        /// The clusters there.
        known: String,
    },
    /// A file could not be read.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// Where the statuses shown came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// The running operator answered (process id).
    Operator(u32),
    /// The status files, because no operator answered (why).
    Files(String),
}

/// An `observedAt` older than this, in a status the running operator
/// gave, is stale (it refreshes what it keeps every pass, every few
/// seconds).
pub const STALE_LIVE: Duration = Duration::from_secs(30);

impl Source {
    /// How old an `observedAt` may be before the table says it is stale:
    /// the files are rewritten only when they change or every
    /// [`STATUS_FILE_REFRESH`], so they get that much more.
    pub fn stale_after(&self) -> Duration {
        match self {
            Source::Operator(_) => STALE_LIVE,
            Source::Files(_) => STATUS_FILE_REFRESH + STALE_LIVE,
        }
    }
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Operator(pid) => write!(f, "the running operator (pid {pid}), from memory"),
            Source::Files(why) => write!(
                f,
                "the status files in the state folder: no running operator answered ({why}); \
                 they may be old"
            ),
        }
    }
}

/// What `status` shows.
#[derive(Debug)]
pub struct Loaded {
    /// The statuses (all, or the one named).
    pub clusters: Vec<EtcdCluster>,
    /// Manifest problems that name no cluster.
    pub problems: Vec<FileProblem>,
    /// Where they came from.
    pub source: Source,
    /// What was announced about each cluster, oldest first.
    pub events: BTreeMap<String, Vec<ClusterEvent>>,
}

/// The statuses (all, or the one named), the manifest problems that name
/// no cluster and the clusters' events: from the running operator when one
/// answers, else from the files.
pub fn load_live(state_dir: &Path, name: Option<&str>) -> Result<Loaded, Error> {
    let answer = match crate::controller::live::ask(state_dir) {
        Ok(a) => a,
        Err(why) => {
            let clusters = load(state_dir, name)?;
            let layout = Layout::new(state_dir);
            let events = clusters
                .iter()
                .filter_map(|c| c.metadata.name.clone())
                .map(|n| {
                    let events = crate::platform::local::events::load(&layout.events_path(&n));
                    (n, events)
                })
                .collect();
            return Ok(Loaded {
                clusters,
                problems: file_problems(state_dir),
                source: Source::Files(why),
                events,
            });
        }
    };
    let known: Vec<String> = answer
        .clusters
        .iter()
        .filter_map(|c| c.metadata.name.clone())
        .collect();
    let clusters: Vec<EtcdCluster> = answer
        .clusters
        .into_iter()
        .filter(|c| name.is_none_or(|n| c.metadata.name.as_deref() == Some(n)))
        .collect();
    if let Some(want) = name
        && clusters.is_empty()
    {
        return Err(Error::NoCluster {
            name: want.into(),
            state: state_dir.display().to_string(),
            known: if known.is_empty() {
                "none".into()
            } else {
                known.join(", ")
            },
        });
    }
    Ok(Loaded {
        clusters,
        problems: answer.problems,
        source: Source::Operator(answer.pid),
        events: answer.events,
    })
}

/// Reads the published resources (all, or the one named).
pub fn load(state_dir: &Path, name: Option<&str>) -> Result<Vec<EtcdCluster>, Error> {
    let layout = Layout::new(state_dir);
    if !layout.clusters_dir().is_dir() {
        return Err(Error::NoState(state_dir.display().to_string()));
    }
    let names = layout.cluster_names()?;
    let mut out = Vec::new();
    for n in &names {
        if name.is_some_and(|want| want != n) {
            continue;
        }
        if let Some(c) = read_json::<EtcdCluster>(&layout.status_path(n))? {
            out.push(c);
        }
    }
    if let Some(want) = name
        && out.is_empty()
    {
        return Err(Error::NoCluster {
            name: want.into(),
            state: state_dir.display().to_string(),
            known: if names.is_empty() {
                "none".into()
            } else {
                names.join(", ")
            },
        });
    }
    Ok(out)
}

/// Manifest problems not tied to a cluster.
pub fn file_problems(state_dir: &Path) -> Vec<FileProblem> {
    read_json(&problems_path(state_dir))
        .ok()
        .flatten()
        .unwrap_or_default()
}

/// A table of clusters, then (for one cluster) its members and the rest
/// of its status ([`super::status_detail::details`]); an
/// `observedAt` older than `stale_after` is flagged
/// ([`Source::stale_after`]).
pub fn table(
    clusters: &[EtcdCluster],
    with_members: bool,
    now: SystemTime,
    stale_after: Duration,
) -> String {
    let mut rows = vec![vec![
        "CLUSTER".to_string(),
        "PHASE".into(),
        "MEMBERS".into(),
        "LEADER".into(),
        "VERSION".into(),
        "OBSERVED".into(),
        "MESSAGE".into(),
    ]];
    for c in clusters {
        let s = c.status.clone().unwrap_or_default();
        let pending = crate::controller::local::pending::CONDITION;
        let degraded = s
            .condition(pending)
            .filter(|d| d.status == "True")
            .map(|d| format!("deletion pending: {}", d.message))
            .or_else(|| {
                s.condition("Degraded")
                    .filter(|d| d.status == "True")
                    .map(|d| d.message.clone())
            })
            .or_else(|| {
                let b = s.backup.as_ref()?;
                let e = b.last_error.as_ref()?;
                Some(format!("backups failing: {e}"))
            })
            .unwrap_or_default();
        let members = format!("{}/{}", s.ready_members, c.spec.size);
        let stale = s
            .observed_at
            .as_deref()
            .and_then(|t| humantime::parse_rfc3339_weak(t).ok())
            .and_then(|t| now.duration_since(t).ok())
            .filter(|d| *d > stale_after);
        // A status not refreshed for that long says nothing about now: a
        // cluster whose task is stuck must not read as Running 3/3.
        let (phase, members, message) = match stale {
            Some(d) => (
                "Unknown".to_string(),
                format!("?/{}", c.spec.size),
                format!(
                    "no pass for {}: last seen {} {members}; its task in the operator is \
                     stuck or busy with a long action (see the operator's log)",
                    humantime::format_duration(Duration::from_secs(d.as_secs())),
                    s.phase.as_str()
                ),
            ),
            None => (s.phase.as_str().to_string(), members, degraded),
        };
        rows.push(vec![
            c.metadata.name.clone().unwrap_or_default(),
            phase,
            members,
            s.leader.clone().unwrap_or_else(|| "-".into()),
            s.current_version
                .clone()
                .unwrap_or_else(|| c.spec.version.clone()),
            s.observed_at
                .as_deref()
                .map(|t| age(t, now, stale_after))
                .unwrap_or_else(|| "-".into()),
            message,
        ]);
    }
    let mut out = render(&rows);
    if with_members {
        for c in clusters {
            let s = c.status.clone().unwrap_or_default();
            let mut rows = vec![vec![
                "MEMBER".to_string(),
                "ID".into(),
                "CLIENT URL".into(),
                "PEER URL".into(),
                "READY".into(),
                "LEADER".into(),
                "VERSION".into(),
            ]];
            for m in &s.members {
                rows.push(vec![
                    m.name.clone(),
                    m.id.clone().unwrap_or_else(|| "-".into()),
                    m.client_url.clone(),
                    m.peer_url.clone(),
                    yes(m.ready).into(),
                    if m.learner { "learner" } else { yes(m.leader) }.into(),
                    m.version.clone().unwrap_or_default(),
                ]);
            }
            out.push('\n');
            out.push_str(&render(&rows));
            if let Some(a) = &s.last_action {
                let _ = writeln!(out, "\nlast action: {}", printable(a));
            }
            let more = super::status_detail::details(c, now);
            if !more.is_empty() {
                out.push('\n');
                out.push_str(&more);
            }
        }
    }
    out
}

/// How many of a cluster's events the table shows (the newest).
pub const EVENTS_SHOWN: usize = 20;

/// A cluster's newest events as a table, oldest first, as `kubectl
/// describe` lists Events: type, reason, when (and how many times), what.
pub fn events_table(events: &[ClusterEvent], now: SystemTime) -> String {
    if events.is_empty() {
        return "\nevents: none yet\n".into();
    }
    let mut rows = vec![vec![
        "TYPE".to_string(),
        "REASON".into(),
        "AGE".into(),
        "MESSAGE".into(),
    ]];
    let skip = events.len().saturating_sub(EVENTS_SHOWN);
    for e in &events[skip..] {
        let age = humantime::parse_rfc3339_weak(&e.last_time)
            .ok()
            .and_then(|t| now.duration_since(t).ok())
            .map(|d| humantime::format_duration(Duration::from_secs(d.as_secs())).to_string())
            .unwrap_or_else(|| e.last_time.clone());
        let age = if e.count > 1 {
            format!("{age} (x{})", e.count)
        } else {
            age
        };
        rows.push(vec![
            e.type_.as_str().to_string(),
            e.reason.clone(),
            age,
            printable(&e.message),
        ]);
    }
    format!("\nevents (oldest first):\n{}", render(&rows))
}

fn yes(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}

fn age(rfc3339: &str, now: SystemTime, stale_after: Duration) -> String {
    match humantime::parse_rfc3339_weak(rfc3339) {
        Ok(t) => {
            let d = now.duration_since(t).unwrap_or_default();
            let d = Duration::from_secs(d.as_secs());
            if d > stale_after {
                format!(
                    "{} ago (is the operator running?)",
                    humantime::format_duration(d)
                )
            } else {
                format!("{}s ago", d.as_secs())
            }
        }
        Err(_) => rfc3339.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::{EtcdClusterSpec, EtcdClusterStatus, MemberStatus, Phase};

    #[test]
    fn table_shows_cluster_and_members() {
        let mut c = EtcdCluster::new("demo", EtcdClusterSpec::minimal(3, "3.4.23"));
        c.status = Some(EtcdClusterStatus {
            phase: Phase::Running,
            ready_members: 1,
            leader: Some("demo-0".into()),
            members: vec![MemberStatus {
                name: "demo-0".into(),
                id: Some("abc".into()),
                client_url: "http://127.1.2.3:2379".into(),
                peer_url: "http://127.1.2.3:2380".into(),
                ready: true,
                leader: true,
                learner: false,
                version: Some("3.4.23".into()),
                volume_size: None,
                storage_class_name: None,
            }],
            ..EtcdClusterStatus::default()
        });
        let t = table(&[c], true, SystemTime::now(), STALE_LIVE);
        assert!(t.contains("demo     Running  1/3"), "{t}");
        assert!(t.contains("http://127.1.2.3:2379"), "{t}");
        assert!(
            t.lines()
                .any(|l| l.starts_with("demo-0") && l.contains("yes")),
            "{t}"
        );
    }

    #[test]
    fn a_pending_deletion_shows_in_the_table() {
        let mut c = EtcdCluster::new("demo", EtcdClusterSpec::minimal(1, "3.4.23"));
        c.status = Some(EtcdClusterStatus {
            phase: Phase::Running,
            ready_members: 1,
            conditions: vec![crate::controller::local::pending::condition(
                "demo",
                SystemTime::UNIX_EPOCH,
                Duration::from_secs(10),
            )],
            ..EtcdClusterStatus::default()
        });
        let t = table(&[c], false, SystemTime::now(), STALE_LIVE);
        assert!(
            t.contains("Running  1/1")
                && t.contains("deletion pending: no manifest names demo since")
                && t.contains("deleted at 1970-01-01T00:00:10Z"),
            "{t}"
        );
    }

    #[test]
    fn a_failing_backup_shows_in_the_table() {
        let mut c = EtcdCluster::new("demo", EtcdClusterSpec::minimal(3, "3.4.23"));
        c.status = Some(EtcdClusterStatus {
            phase: Phase::Running,
            ready_members: 3,
            backup: Some(crate::crd::BackupStatus {
                last_error: Some("/b: the file system there is mounted read-only".into()),
                ..Default::default()
            }),
            ..EtcdClusterStatus::default()
        });
        let t = table(&[c], false, SystemTime::now(), STALE_LIVE);
        assert!(
            t.contains("Running  3/3") && t.contains("backups failing: /b: the file system"),
            "{t}"
        );
    }

    #[test]
    fn a_status_not_refreshed_reads_as_unknown_not_running() {
        let mut c = EtcdCluster::new("demo", EtcdClusterSpec::minimal(3, "3.4.23"));
        let at = "2026-12-04T05:00:00Z";
        c.status = Some(EtcdClusterStatus {
            phase: Phase::Running,
            ready_members: 3,
            observed_at: Some(at.into()),
            ..EtcdClusterStatus::default()
        });
        let t0 = humantime::parse_rfc3339_weak(at).expect("time");
        let fresh = table(&[c.clone()], false, t0 + Duration::from_secs(5), STALE_LIVE);
        assert!(fresh.contains("Running  3/3"), "{fresh}");
        let stuck = table(&[c], false, t0 + Duration::from_secs(300), STALE_LIVE);
        assert!(!stuck.contains("Running  3/3"), "{stuck}");
        assert!(stuck.contains("Unknown  ?/3"), "{stuck}");
        assert!(
            stuck.contains("no pass for 5m: last seen Running 3/3"),
            "{stuck}"
        );
    }

    #[test]
    fn files_get_their_refresh_before_they_count_as_stale() {
        let at = "2026-12-04T05:00:00Z";
        let t0 = humantime::parse_rfc3339_weak(at).expect("time");
        let live = Source::Operator(1).stale_after();
        let files = Source::Files("no answer".into()).stale_after();
        assert!(files > STATUS_FILE_REFRESH, "{files:?}");
        let after = |d: Duration, stale| age(at, t0 + d, stale);
        assert_eq!(after(Duration::from_secs(20), live), "20s ago");
        let old = after(Duration::from_secs(45), live);
        assert!(old.contains("is the operator running?"), "{old}");
        // The same age read from a file refreshed every 30 s is normal.
        assert_eq!(after(Duration::from_secs(45), files), "45s ago");
        let older = after(files + Duration::from_secs(1), files);
        assert!(older.contains("is the operator running?"), "{older}");
    }
}
