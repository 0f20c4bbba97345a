//! Backups in an object store (`spec.backup.location.objectStore`), against
//! a real S3 server (moto, started by the test) and real etcd: scheduled
//! backups and retention in the bucket, `backups`/`backup` through the
//! store, a restore into a new cluster from the bucket, a rebuild with the
//! delta chain after losing a majority, a store that is down said in
//! status while the cluster stays healthy; the secret never printed. The
//! same backups, restore and rebuild in an Azure container (Azurite) and
//! through Google Cloud Storage's client (its XML API, answered by moto).

#[allow(dead_code)]
#[path = "common/store.rs"]
mod store;

use std::collections::HashMap;
use std::time::Instant;

use etcd_operator::crd::RecoverySource;
use etcd_operator::testing::acked::{Writer, not_found, read_prefix};
use etcd_operator::testing::azure::Azurite;
use etcd_operator::testing::s3::S3Server;
use etcd_operator::testing::{client_urls, kill9, manifest};
use store::{BUCKET, Place, assert_no_secret, env_with, listed, object_store, reader};

#[test]
fn backups_retention_and_a_restore_go_through_an_s3_bucket() {
    let s3 = S3Server::start();
    s3.create_bucket(BUCKET);
    let place = Place::s3(&s3);
    backups_retention_and_a_restore(&place);
}

#[test]
fn backups_retention_and_a_restore_go_through_an_azure_container() {
    let az = Azurite::start();
    az.create_container(BUCKET);
    let place = Place {
        url: format!("az://{BUCKET}/prod"),
        endpoint: az.endpoint(),
        credentials: az.credentials(),
    };
    backups_retention_and_a_restore(&place);
}

/// `gs://` through the crate's Google Cloud Storage client, which speaks
/// GCS's XML API, the S3-interoperable one; answered by moto's S3 app
/// behind a shim for the client's bearer token (`S3Server::start_for_gcs`).
/// No GCS emulator on the registries answers that API
/// (`gcp-storage-emulator` has the JSON API only): this is GCS's client and
/// request path against an S3 server, not GCS itself.
#[test]
fn backups_retention_and_a_restore_go_through_gcs_xml_api() {
    let gcs = S3Server::start_for_gcs();
    gcs.create_bucket("etcdbackups");
    let place = Place {
        url: "gs://etcdbackups/prod".into(),
        endpoint: gcs.endpoint(),
        credentials: gcs.gcs_credentials(),
    };
    backups_retention_and_a_restore(&place);
}

fn backups_retention_and_a_restore(place: &Place) {
    let mut env = env_with(place);
    let src = |interval: &str| {
        let mut m = manifest("src", 3, "3.4.23");
        m.push_str(&format!(
            "  backup:\n    interval: {interval}\n    maxBackups: 2\n    location:\n"
        ));
        m.push_str(&object_store(place, "      "));
        m
    };
    env.write_manifest("src.yaml", &src("1s"));
    env.start_operator();
    let c = env.wait_running("src", 3);
    let urls = client_urls(&c);
    let w = Writer::start(urls.clone(), "k/");
    env.wait_for("100 writes", || (w.acked().len() >= 100).then_some(()));
    let acked = w.stop();

    // Backups land in the bucket; retention keeps two there.
    let mut seen = std::collections::BTreeSet::new();
    let kept = env.wait_for("four backups taken, two kept in the bucket", || {
        let list = listed(&env, place, "src");
        seen.extend(list.iter().map(|m| m.name.clone()));
        (seen.len() >= 4 && list.len() == 2).then_some(list)
    });
    assert!(
        !env.state.join("backups").join("src").exists(),
        "nothing in the default folder"
    );
    let status = env.wait_for("backup status", || {
        let b = env.status("src")?.status?.backup?;
        (b.kept == 2 && b.last_backup.is_some()).then_some(b)
    });
    assert!(status.last_error.is_none(), "{status:?}");

    // A new cluster restored from the newest backup in the bucket, once
    // backups are hourly: at one a second, retention deletes any backup
    // named within two seconds.
    drop(kept);
    env.write_manifest("src.yaml", &src("1h"));
    env.wait_for("the hourly schedule in effect", || {
        let next = env.status("src")?.status?.backup?.next_backup_time?;
        let next = humantime::parse_rfc3339_weak(&next).ok()?;
        let later = std::time::SystemTime::now() + std::time::Duration::from_secs(30 * 60);
        (next > later).then_some(())
    });
    let chosen = listed(&env, place, "src")
        .first()
        .cloned()
        .expect("a backup");
    // `backups` lists them from the bucket, sizes checked, and creates
    // nothing in the state folder.
    let entries = |dir: &std::path::Path| -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .map(|d| {
                d.flatten()
                    .map(|e| e.file_name().to_string_lossy().to_string())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    };
    let src_dir = env.state.join("clusters/src");
    let before = entries(&src_dir);
    let out = env.operator_cli(&["backups", "src"]);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "{out:?}");
    assert!(text.contains(&place.url), "{text}");
    assert!(text.contains("ok") && !text.contains("DAMAGED"), "{text}");
    assert_eq!(entries(&src_dir), before, "a listing writes nothing there");
    // With everything but the bucket lost: `backups --location` lists it
    // with no state folder, each cluster with its identity.
    let nowhere = env.dir.path().join("no-state-here");
    let out = std::process::Command::new(etcd_operator::testing::workspace_binary("etcd-operator"))
        .args([
            "backups",
            "--location",
            &place.url,
            "--endpoint",
            &place.endpoint,
        ])
        .arg("--state-dir")
        .arg(&nowhere)
        .output()
        .expect("run etcd-operator");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "{out:?}");
    let uid = chosen
        .uid
        .clone()
        .expect("backups carry their cluster's uid");
    assert!(
        text.contains(&format!("cluster src (uid {uid})")) && text.contains(&chosen.name),
        "{text}"
    );
    assert!(!nowhere.exists(), "no state folder was made");

    let mut copy = manifest("copy", 3, "3.4.23");
    copy.push_str(&format!(
        "  restore:\n    backup: {}\n    location:\n",
        chosen.name
    ));
    copy.push_str(&object_store(place, "      "));
    env.write_manifest("copy.yaml", &copy);
    let restored = env.wait_running("copy", 3);
    let found: HashMap<String, String> = read_prefix(&client_urls(&restored), "k/")
        .into_iter()
        .collect();
    let missing = acked
        .iter()
        .filter(|a| a.revision <= chosen.revision && found.get(&a.key) != Some(&a.value))
        .count();
    assert_eq!(
        missing, 0,
        "every write up to the backup's revision is restored"
    );
    assert!(!found.is_empty());
    let leftovers = ["restoring", "checking", "upload"]
        .iter()
        .filter(|p| {
            env.state
                .join("clusters/copy")
                .join(p)
                .read_dir()
                .is_ok_and(|mut d| d.next().is_some())
        })
        .count();
    assert_eq!(leftovers, 0, "downloads are deleted once used");
    assert_no_secret(&env, place);
}

#[test]
fn a_majority_lost_is_rebuilt_from_the_bucket_with_its_chain() {
    let s3 = S3Server::start();
    s3.create_bucket(BUCKET);
    rebuilt_from_the_bucket(&Place::s3(&s3));
}

/// The same through GCS's client (see
/// `backups_retention_and_a_restore_go_through_gcs_xml_api`).
#[test]
fn a_majority_lost_is_rebuilt_from_the_bucket_with_its_chain_through_gcs_xml_api() {
    let gcs = S3Server::start_for_gcs();
    gcs.create_bucket("etcdbackups");
    rebuilt_from_the_bucket(&Place {
        url: "gs://etcdbackups/prod".into(),
        endpoint: gcs.endpoint(),
        credentials: gcs.gcs_credentials(),
    });
}

fn rebuilt_from_the_bucket(place: &Place) {
    let mut env = env_with(place);
    let mut m = manifest("dl", 3, "3.4.23");
    m.push_str("  backup:\n    interval: 1h\n    maxBackups: 2\n");
    m.push_str("    continuous:\n      segmentInterval: 1s\n    location:\n");
    m.push_str(&object_store(place, "      "));
    m.push_str("  recovery:\n    restoreFromBackup: true\n    fromSurvivor: false\n");
    env.write_manifest("dl.yaml", &m);
    env.start_operator();
    let c = env.wait_running("dl", 3);
    let base = env.wait_for("a full backup in the bucket", || {
        listed(&env, place, "dl").first().cloned()
    });
    let writer = Writer::start(client_urls(&c), "w/");
    let bucket = reader(&env, place, "dl");
    env.wait_for("500 writes and 3 segments in the bucket", || {
        let chain = bucket.chain(&base)?;
        (writer.acked().len() >= 500 && chain.segments.len() >= 3).then_some(())
    });
    // `backups` reads the chain from the bucket and shows its window.
    let out = env.operator_cli(&["backups", "dl"]);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        text.contains(&format!("chain of {}", base.name)) && text.contains("point-in-time restore"),
        "{text}"
    );
    let members = c.status.as_ref().expect("status").members.clone();
    for m in &members[..2] {
        env.destroy("dl", &m.name);
    }
    let lost_at = Instant::now();
    let (c, r) = env.wait_rebuilt("dl rebuilt from the bucket", "dl", 3);
    let acked = writer.stop();
    assert_eq!(r.source, RecoverySource::Backup, "{r:?}");
    assert_eq!(r.backup, base.name, "{r:?}");
    assert!(r.replayed_segments >= 3, "{r:?}");
    let found: HashMap<String, String> = read_prefix(&client_urls(&c), "w/").into_iter().collect();
    let missing = not_found(&acked, &found);
    let behind = missing
        .iter()
        .filter(|a| a.revision <= r.replayed_revision)
        .count();
    assert_eq!(behind, 0, "every write the replayed segments hold is back");
    let window = missing
        .iter()
        .map(|a| lost_at.saturating_duration_since(a.at))
        .max()
        .unwrap_or_default();
    println!(
        "MEASURED: {} of {} acknowledged writes lost, the oldest acknowledged {:.2} s before the \
         loss; {} segments replayed from the bucket up to revision {}",
        missing.len(),
        acked.len(),
        window.as_secs_f64(),
        r.replayed_segments,
        r.replayed_revision
    );
    assert_no_secret(&env, place);
}

#[test]
fn a_store_that_is_down_fails_backups_in_status_and_healing_goes_on() {
    let mut s3 = S3Server::start();
    s3.create_bucket(BUCKET);
    let place = Place::s3(&s3);
    let mut env = env_with(&place);
    let mut m = manifest("down", 3, "3.4.23");
    m.push_str("  backup:\n    interval: 1s\n    maxBackups: 2\n    location:\n");
    m.push_str(&object_store(&place, "      "));
    env.write_manifest("down.yaml", &m);
    env.start_operator();
    let c = env.wait_running("down", 3);
    env.wait_for("a backup in the bucket", || {
        listed(&env, &place, "down").first().cloned()
    });
    s3.stop();
    // Bounded: the client retries for at most a minute per request.
    let err = env.wait_for("the store's failure in status", || {
        let e = env.status("down")?.status?.backup?.last_error?;
        e.contains(&format!("s3://{BUCKET}/prod")).then_some(e)
    });
    println!("status.backup.lastError: {err}");
    let status = env.status("down").and_then(|c| c.status).expect("status");
    let failing = status
        .condition("BackupsFailing")
        .expect("a condition of its own");
    assert_eq!(failing.status, "True", "{failing:?}");
    let degraded = status.condition("Degraded").expect("Degraded");
    assert_ne!(
        degraded.status, "True",
        "a store that is down is not a degraded cluster: {degraded:?}"
    );
    // The cluster itself is fine, and heals: a killed member comes back.
    let victim = c.status.as_ref().expect("status").members[0].name.clone();
    let pid = env.pid("down", &victim).expect("runs");
    kill9(pid);
    env.wait_for("the killed member back", || {
        env.pid("down", &victim).filter(|p| *p != pid)
    });
    let c = env.wait_running("down", 3);
    let phase = c.status.as_ref().map(|s| format!("{:?}", s.phase));
    assert_eq!(phase.as_deref(), Some("Running"), "{c:?}");
    assert_no_secret(&env, &place);
}
