//! A source revision lands on a standby once, against real etcd (3.5.1):
//! a transaction of the pipelined applier sent again (by a pass that gave
//! up on it while etcd still held it) writes nothing, also for a revision
//! that only deletes whose key a later revision put back, which "the key
//! exists" alone would let through (the delete applied twice: the
//! standby past the source, said as Diverged).

use std::collections::HashSet;
use std::process::Stdio;
use std::time::{Duration, Instant};

use etcd_operator::backup::delta::{Event, Revision};
use etcd_operator::standby::pipeline::{Applied, apply};
use etcd_operator::testing::{etcd_binary, free_loopback, single_member_args};

/// One etcd member on a loopback address of its own, killed when dropped.
struct Member {
    url: String,
    _data: tempfile::TempDir,
    _process: tokio::process::Child,
}

async fn member() -> Member {
    let ip = free_loopback("standby-once", &HashSet::new());
    let data = tempfile::tempdir().expect("a folder");
    let process = tokio::process::Command::new(etcd_binary("3.5.1"))
        .args(single_member_args("once", ip, data.path()))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("etcd starts");
    Member {
        url: format!("http://{ip}:2379"),
        _data: data,
        _process: process,
    }
}

/// A client once the member answers (bounded).
async fn connect(url: &str) -> etcd_client::Client {
    let since = Instant::now();
    loop {
        if let Ok(mut c) = etcd_client::Client::connect([url], None).await
            && c.get("x", None).await.is_ok()
        {
            return c;
        }
        assert!(
            since.elapsed() < Duration::from_secs(30),
            "etcd at {url} never answered"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn rev(revision: i64, events: Vec<Event>) -> Revision {
    Revision { revision, events }
}

async fn head(c: &mut etcd_client::Client) -> (i64, Option<Vec<u8>>) {
    let r = c.get("k", None).await.expect("a read");
    let at = r.header().map_or(0, |h| h.revision());
    (at, r.kvs().first().map(|kv| kv.value().to_vec()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_sent_again_never_lands_twice() {
    let m = member().await;
    let mut c = connect(&m.url).await;
    let put = |v: &str| Event::Put {
        key: b"k".to_vec(),
        value: v.as_bytes().to_vec(),
    };
    let del = Event::Delete { key: b"k".to_vec() };
    // The source's revisions 2 to 4: k put, deleted, put again.
    let revs = [
        rev(2, vec![put("first")]),
        rev(3, vec![del.clone()]),
        rev(4, vec![put("again")]),
    ];
    let all: Vec<&Revision> = revs.iter().collect();
    let done = apply(&c, &all, |_| {}).await.expect("applied");
    assert_eq!(done, Applied::All);
    assert_eq!(head(&mut c).await, (4, Some(b"again".to_vec())));

    // Each sent again: refused by its own guard, nothing written.
    for r in &revs {
        let again = apply(&c, &[r], |_| {}).await;
        let why = again.expect_err("a revision already here is refused");
        assert!(why.contains("on the standby already"), "{why}");
        assert_eq!(
            head(&mut c).await,
            (4, Some(b"again".to_vec())),
            "revision {} sent again wrote nothing",
            r.revision
        );
    }
}
