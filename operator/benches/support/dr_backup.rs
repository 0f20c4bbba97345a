//! The hand-driven floor of the backup rebuild (`benches/recovery.rs`,
//! section `backup`), doing the steps the operator must do: the changes
//! made after the full snapshot are followed by a watch (as the operator's
//! delta segments are), and after the loss the snapshot is restored into a
//! scratch member, the changes replayed into it (one transaction per
//! revision, the operator's replay), the scratch member stopped and its
//! database sealed as a snapshot file, then 3 members restored from that
//! and started (without the initial corruption check, as the operator now
//! starts members it restored). Nothing is verified beyond what the tools
//! do themselves: this is the cheapest way through those steps.

use std::collections::HashSet;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use etcd_client::{Client, EventType, WatchOptions};

use etcd_operator::backup::chain::Chain;
use etcd_operator::backup::delta::{Event, Revision, Segment};
use etcd_operator::backup::{Source, replay, snapshot};
use etcd_operator::etcd::Clients;
use etcd_operator::member::InitialState;
use etcd_operator::member::flags::INITIAL_CORRUPT_CHECK;
use etcd_operator::platform::local::process;

use super::dr::{etcdctl_34, snapshot_restore};
use super::{BOUND, Hand, hand, until_healthy};

/// The changes after a snapshot, as a watch delivers them.
pub struct Changes {
    revisions: Arc<Mutex<Vec<Revision>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Changes {
    /// Follows every key of the cluster at `urls` from revision `from`.
    pub async fn follow(urls: &[String], from: i64) -> Changes {
        let client = Client::connect(urls, None).await.unwrap();
        let options = WatchOptions::new()
            .with_all_keys()
            .with_start_revision(from);
        let mut stream = client
            .watch_client()
            .watch("", Some(options))
            .await
            .unwrap();
        let revisions: Arc<Mutex<Vec<Revision>>> = Arc::default();
        let into = revisions.clone();
        let task = tokio::spawn(async move {
            let _client = client;
            while let Ok(Some(msg)) = stream.message().await {
                let mut got = into.lock().unwrap();
                for e in msg.events() {
                    let Some(kv) = e.kv() else { continue };
                    let event = match e.event_type() {
                        EventType::Put => Event::Put {
                            key: kv.key().to_vec(),
                            value: kv.value().to_vec(),
                        },
                        EventType::Delete => Event::Delete {
                            key: kv.key().to_vec(),
                        },
                    };
                    match got.last_mut() {
                        Some(r) if r.revision == kv.mod_revision() => r.events.push(event),
                        _ => got.push(Revision {
                            revision: kv.mod_revision(),
                            events: vec![event],
                        }),
                    }
                }
            }
        });
        Changes { revisions, task }
    }

    /// How many revisions were followed until now.
    pub fn followed(&self) -> i64 {
        i64::try_from(self.revisions.lock().unwrap().len()).unwrap_or(i64::MAX)
    }

    /// What was followed until now, as a chain of one segment on a base
    /// at `base_revision`; the watch ends.
    pub fn take(self, base_revision: i64) -> Chain {
        self.task.abort();
        let revisions = std::mem::take(&mut *self.revisions.lock().unwrap());
        Chain {
            base: "floor".into(),
            base_revision,
            segments: vec![Segment {
                base: "floor".into(),
                seq: 1,
                unix_ms: 0,
                revisions,
                prev: [0; 32],
            }],
            ..Chain::default()
        }
    }
}

/// Polls until `url` answers a read.
async fn serving(url: &str, since: Instant) {
    loop {
        if let Ok(mut c) = Client::connect([url], None).await
            && c.get("x", None).await.is_ok()
        {
            return;
        }
        assert!(since.elapsed() < BOUND, "{url} did not serve");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Times of the floor's phases from the loss.
pub struct Phases {
    /// Scratch member restored, serving, changes replayed.
    pub replayed: Duration,
    /// Its database sealed as a snapshot file.
    pub sealed: Duration,
    /// The 3 members restored from it.
    pub restored: Duration,
}

/// The floor from the loss on (every member of `hands` killed, data
/// wiped): `snapshot` (at `base_revision`) restored into a scratch member
/// in `dir`, `chain` replayed into it, its database sealed and restored
/// into every member, all started. Returns the time from `since` to 3
/// healthy, and its phases.
pub async fn rebuild(
    clients: &Clients,
    hands: &mut [Hand],
    dir: &Path,
    snapshot_file: &Path,
    chain: &Chain,
    since: Instant,
) -> (Duration, Phases) {
    let mut taken: HashSet<_> = hands
        .iter()
        .filter_map(|h| {
            etcd_operator::tls::url_host(&h.record.addr.peer_url)?
                .parse()
                .ok()
        })
        .collect();
    let mut scratch = hand(dir, &format!("{}-scratch", dir.display()), "s", &mut taken);
    let (peer, url) = (
        scratch.record.addr.peer_url.clone(),
        scratch.record.addr.client_url.clone(),
    );
    let ic = format!("s={peer}");
    snapshot_restore(&etcdctl_34(), snapshot_file, &scratch.data, "s", &peer, &ic);
    scratch.record.initial_cluster = ic;
    scratch.record.token = "floor-restored".into();
    scratch.start_without(&[INITIAL_CORRUPT_CHECK]);
    serving(&url, since).await;
    let source = Source {
        member: "s",
        url: &url,
        tls: None,
    };
    let replayed = replay::apply(source, chain).await.unwrap();
    assert_eq!(replayed.revision, chain.last_revision());
    let replayed_at = since.elapsed();
    let id = scratch.process.take().unwrap();
    process::signal(&id, rustix::process::Signal::TERM).unwrap();
    tokio::time::timeout(BOUND, process::wait_exit(id))
        .await
        .unwrap()
        .unwrap();
    let merged = dir.join("merged.db");
    snapshot::seal_db(&scratch.data.join("member/snap/db"), &merged).unwrap();
    let sealed = since.elapsed();
    let ic = hands
        .iter()
        .map(|h| format!("{}={}", h.record.addr.name, h.record.addr.peer_url))
        .collect::<Vec<_>>()
        .join(",");
    for h in hands.iter_mut() {
        let _ = std::fs::remove_dir_all(&h.data);
        snapshot_restore(
            &etcdctl_34(),
            &merged,
            &h.data,
            &h.record.addr.name,
            &h.record.addr.peer_url,
            &ic,
        );
        h.record.initial_cluster = ic.clone();
        h.record.initial_state = InitialState::New;
        h.record.token = "floor-restored".into();
    }
    let restored = since.elapsed();
    for h in hands.iter_mut() {
        h.start_without(&[INITIAL_CORRUPT_CHECK]);
    }
    let urls: Vec<String> = hands
        .iter()
        .map(|h| h.record.addr.client_url.clone())
        .collect();
    let took = until_healthy(clients, &urls, since).await;
    (
        took,
        Phases {
            replayed: replayed_at,
            sealed,
            restored,
        },
    )
}
