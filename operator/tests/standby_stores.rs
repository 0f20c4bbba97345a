//! A standby kept up through the other object stores the project runs
//! (issue 36; S3 and a folder: `standby.rs`): an Azure container (Azurite)
//! and `gs://` (GCS's XML API client against moto's S3 app behind a shim,
//! see `object_store.rs`). One operator, two primaries under a writer,
//! each followed by a standby through its store, both at once; at the end
//! each standby's revision and `HashKV` equal its primary's at the same
//! revision, and every acknowledged write is there.

#[allow(dead_code)]
#[path = "common/store.rs"]
mod store;

#[allow(dead_code)]
#[path = "common/standby.rs"]
mod standby;

use std::collections::HashMap;

use etcd_operator::testing::acked::{Writer, not_found, read_prefix_as};
use etcd_operator::testing::azure::Azurite;
use etcd_operator::testing::s3::S3Server;
use etcd_operator::testing::{Env, client_urls, manifest};
use standby::{assert_same_as_primary, revision, standby, standby_status};
use store::{BUCKET, Place, object_store};

/// A 1-member primary with 1 s delta segments into `place`.
fn primary(name: &str, place: &Place) -> String {
    let mut m = manifest(name, 1, "3.4.23");
    m.push_str("  backup:\n    interval: 1h\n    maxBackups: 2\n");
    m.push_str("    continuous:\n      segmentInterval: 1s\n    location:\n");
    m.push_str(&object_store(place, "      "));
    m
}

#[test]
#[allow(unsafe_code)]
fn standbys_follow_through_azure_and_gcs_revision_for_revision() {
    let az = Azurite::start();
    az.create_container(BUCKET);
    let gcs = S3Server::start_for_gcs();
    gcs.create_bucket("etcdbackups");
    let places = [
        (
            "az",
            Place {
                url: format!("az://{BUCKET}/prod"),
                endpoint: az.endpoint(),
                credentials: az.credentials(),
            },
        ),
        (
            "gs",
            Place {
                url: "gs://etcdbackups/prod".into(),
                endpoint: gcs.endpoint(),
                credentials: gcs.gcs_credentials(),
            },
        ),
    ];
    let mut env = Env::new();
    for (_, place) in &places {
        for (k, v) in &place.credentials {
            // SAFETY: set before this test starts any thread.
            unsafe { std::env::set_var(k, v) };
        }
        env.operator_env.extend(place.credentials.iter().cloned());
    }
    for (name, place) in &places {
        env.write_manifest(&format!("{name}.yaml"), &primary(name, place));
    }
    env.start_operator();
    let mut writers = Vec::new();
    for (name, place) in &places {
        let p = env.wait_running(name, 1);
        env.wait_for(&format!("a full backup of {name} in its store"), || {
            env.status(name)?.status?.backup?.last_backup
        });
        writers.push((p.clone(), Writer::start(client_urls(&p), "w/")));
        let at = Some(object_store(place, "      "));
        let s = format!("{name}-dr");
        env.write_manifest(&format!("{s}.yaml"), &standby(&s, 1, name, at, false));
    }
    for (name, _) in &places {
        let s = format!("{name}-dr");
        env.wait_running(&s, 1);
        env.wait_for(&format!("{s} following past revision 100"), || {
            let st = standby_status(&env, &s)?;
            (st.state == "Following" && st.applied_revision > 100).then_some(())
        });
    }
    for ((name, _), (p, writer)) in places.iter().zip(writers) {
        let acked = writer.stop();
        let target = revision(&client_urls(&p));
        let s = format!("{name}-dr");
        let dr = assert_same_as_primary(&env, &s, &p, target);
        // Read as clients read a standby.
        let reader = env.standby_credentials(&s, "reader");
        let found: HashMap<String, String> = read_prefix_as(&client_urls(&dr), "w/", Some(&reader))
            .into_iter()
            .collect();
        let missing = not_found(&acked, &found).len();
        assert_eq!(
            missing,
            0,
            "every write acknowledged by {name} is on its standby ({} acknowledged)",
            acked.len()
        );
    }
}
