//! A gap in the source's chains under a standby (issue 36), against real
//! etcd. The standby reads a folder this test fills from the primary's
//! backups (a copy, so the test decides what the store holds): the primary's
//! full backup and its delta segments but one. The standby is created
//! from the chain as far as it is intact; once a newer full backup is in
//! the folder and the gap has outlived its grace, the standby stops and
//! says which revisions are missing (`status.standby.missing`), and
//! applies nothing more. With `onGap: Rebootstrap` it is created again from
//! the newer backup: its old data moved aside, `status.standby.rebootstrapped`
//! and a Warning Event say which revisions it never applied one by one, and
//! it follows again to the primary's last revision with an equal `HashKV`.

#[allow(dead_code)]
#[path = "common/store.rs"]
mod store;

#[allow(dead_code)]
#[path = "common/standby.rs"]
mod standby;

use std::path::Path;
use std::time::{Duration, Instant};

use etcd_operator::backup::chain;
use etcd_operator::crd::StandbyStatus;
use etcd_operator::platform::NoticeType;
use etcd_operator::platform::local::events::load;
use etcd_operator::testing::acked::Writer;
use etcd_operator::testing::{Env, client_urls};
use standby::{assert_same_as_primary, primary, revision, standby_status};

/// Copies the primary's backups in `from` to `to`, but the segments in
/// `skip`: snapshots and segments first, each meta last (a backup is
/// listed once its meta is there).
fn mirror(from: &Path, to: &Path, skip: &[String]) {
    std::fs::create_dir_all(to).expect("the mirror");
    let mut names: Vec<String> = std::fs::read_dir(from)
        .expect("the primary's backups")
        .flatten()
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .filter(|n| !n.starts_with('.') && !skip.contains(n))
        .filter(|n| n.ends_with(".db") || n.ends_with(".seg") || n.ends_with(".json"))
        .collect();
    names.sort_by_key(|n| n.ends_with(".json"));
    for n in names {
        let tmp = to.join(format!(".{n}.tmp"));
        if std::fs::copy(from.join(&n), &tmp).is_ok() {
            std::fs::rename(&tmp, to.join(&n)).expect("renamed");
        }
    }
}

/// The standby manifest reading `dir`, with `on_gap` when given.
fn gap_standby(dir: &Path, on_gap: Option<&str>) -> String {
    let location = format!("      path: {}\n", dir.display());
    let mut m = standby::standby("dr", 1, "src", Some(location), false);
    if let Some(g) = on_gap {
        m.push_str(&format!("    onGap: {g}\n"));
    }
    m
}

/// Waits up to `limit` for `f` (the gap's grace is longer than
/// [`Env::wait_for`]'s bound).
fn wait_long<T>(env: &Env, what: &str, limit: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = f() {
            return v;
        }
        if Instant::now() > deadline {
            // Panics with the operator's log.
            return env.wait_for(what, &mut f);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn a_gap_stops_the_standby_and_rebootstrap_creates_it_again_past_it() {
    let mut env = Env::new();
    env.write_manifest("src.yaml", &primary("src", None));
    env.start_operator();
    let src = env.wait_running("src", 3);
    let first = env.wait_for("a full backup of the primary", || {
        env.status("src")?.status?.backup?.last_backup
    });
    let writer = Writer::start(client_urls(&src), "w/");
    env.wait_for("4 segments on the first backup", || {
        let c = env.status("src")?.status?.backup?.continuous?;
        (c.base == first && c.segments >= 4).then_some(())
    });

    // The store the standby reads: the first backup and its segments, but
    // the third.
    let primary_dir = env.layout().backups_dir("src");
    let dir = env.state.join("mirror");
    let lost = chain::segment_file(&first, 3);
    mirror(&primary_dir, &dir, std::slice::from_ref(&lost));
    env.write_manifest("dr.yaml", &gap_standby(&dir, None));
    env.wait_running("dr", 1);
    let created = env.wait_for("the standby following", || {
        standby_status(&env, "dr").filter(|s| s.state == "Following" && s.applied_revision > 0)
    });

    // A newer full backup of the primary reaches the store.
    let out = env.operator_cli(&["backup", "src"]);
    assert!(out.status.success(), "a backup now: {out:?}");
    let said = String::from_utf8_lossy(&out.stdout).to_string();
    let second = said
        .strip_prefix("backup ")
        .and_then(|s| s.split_whitespace().next())
        .map(str::to_string);
    assert!(second.is_some(), "{said}");
    mirror(&primary_dir, &dir, std::slice::from_ref(&lost));
    let stopped: StandbyStatus = wait_long(
        &env,
        "the standby stopped at the gap",
        Duration::from_secs(150),
        || standby_status(&env, "dr").filter(|s| s.state == "Stopped"),
    );
    let missing = stopped.missing.expect("the revisions missing");
    assert_eq!(missing.from, stopped.applied_revision + 1, "{stopped:?}");
    assert!(missing.to > missing.from, "{stopped:?}");
    let message = stopped.message.clone().unwrap_or_default();
    assert!(message.contains("are in no chain"), "{message}");
    assert!(stopped.applied_revision >= created.applied_revision);
    println!(
        "MEASURED: stopped at {}, missing {missing:?}: {message}",
        stopped.applied_revision
    );

    // Allowed to start again past the gap.
    env.write_manifest("dr.yaml", &gap_standby(&dir, Some("Rebootstrap")));
    let again = env.wait_for("the standby created again", || {
        standby_status(&env, "dr").filter(|s| s.rebootstrapped.is_some() && s.state == "Following")
    });
    let r = again.rebootstrapped.clone().expect("said");
    assert_eq!(r.skipped, missing, "{again:?}");
    assert!(r.revision >= missing.to, "{again:?}");
    assert_eq!(
        Some(&r.backup),
        second.as_ref(),
        "from the newest backup: {again:?}"
    );
    assert!(
        Path::new(&r.old_data).exists(),
        "the old data is kept: {}",
        r.old_data
    );
    assert_eq!(again.missing, None, "{again:?}");
    let events = load(&env.layout().events_path("dr"));
    let said = events
        .iter()
        .find(|e| e.reason == "StandbyRebootstrapped")
        .unwrap_or_else(|| panic!("no StandbyRebootstrapped Event: {events:#?}"));
    assert_eq!(said.type_, NoticeType::Warning, "{said:?}");
    let skipped = format!("revisions {} to {}", missing.from, missing.to);
    assert!(said.message.contains(&skipped), "{said:?}");

    // It follows again, to the primary's last revision.
    writer.stop();
    let target = revision(&client_urls(&src));
    env.wait_for("the primary's chain at its last revision", || {
        let c = env.status("src")?.status?.backup?.continuous?;
        (c.last_revision >= target).then_some(())
    });
    mirror(&primary_dir, &dir, std::slice::from_ref(&lost));
    assert_same_as_primary(&env, "dr", &src, target);
}
