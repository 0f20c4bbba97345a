//! `spec.storage.size` and `storageClassName`: the members' data volume
//! claims (Kubernetes), and the quota they must hold.

use crate::crd::{EtcdClusterSpec, StoragePolicy};
use crate::kube_names::{check_object_name, check_size, size_bytes};
use crate::member::backend::DEFAULT_QUOTA;

/// Room etcd's log takes on a volume beside its database: 5 WAL files of
/// 64 MiB kept, one more preallocated.
pub const WAL_ROOM: u64 = 6 * (64 << 20);

/// The smallest volume that holds a database of `quota` bytes: twice the
/// quota (a follower receiving a snapshot from the leader writes the new
/// database beside the old one; a defragmentation writes a copy too) and
/// etcd's log. At etcd's default quota (2 GiB) that is 4.4 GiB, so the
/// default claim of 5Gi holds it.
pub fn min_volume(quota: u64) -> u64 {
    quota.saturating_mul(2).saturating_add(WAL_ROOM)
}

/// A claim size from the spec: as written (what the claim requests) and
/// in bytes (to compare).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VolumeSize {
    /// As the spec writes it, such as `20Gi`.
    pub text: String,
    /// In bytes.
    pub bytes: u64,
}

/// The checked `spec.storage` claim settings.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Volumes {
    /// `spec.storage.size` (`None`: the platform's default, 5Gi).
    pub size: Option<VolumeSize>,
    /// `spec.storage.storageClassName` (`None`: the default class).
    pub class: Option<String>,
}

/// GiB with one decimal, for messages.
fn gib(bytes: u64) -> String {
    format!("{:.1}Gi", bytes as f64 / f64::from(1u32 << 30))
}

/// Checks the claim settings: a size and a class name Kubernetes takes,
/// neither with `Ephemeral` storage (no claim), and a size that holds the
/// quota.
pub fn check(spec: &EtcdClusterSpec, err: &mut impl FnMut(&str, String)) -> Volumes {
    let storage = &spec.storage;
    let mut volumes = Volumes::default();
    let ephemeral = storage.policy == StoragePolicy::Ephemeral;
    for (field, set) in [
        ("size", storage.size.is_some()),
        ("storageClassName", storage.storage_class_name.is_some()),
    ] {
        if set && ephemeral {
            err(
                &format!("spec.storage.{field}"),
                "Ephemeral members have no volume claim (their data is an emptyDir that goes \
                 with the pod): drop it, or use policy: Persistent"
                    .into(),
            );
        }
    }
    if let Some(class) = &storage.storage_class_name {
        match check_object_name(class) {
            Ok(()) => volumes.class = Some(class.clone()),
            Err(m) => err("spec.storage.storageClassName", m),
        }
    }
    let Some(size) = &storage.size else {
        return volumes;
    };
    let bytes = match (check_size(size), size_bytes(size)) {
        (Ok(()), Some(b)) => b,
        (Err(m), _) => {
            err("spec.storage.size", m);
            return volumes;
        }
        (Ok(()), None) => {
            err(
                "spec.storage.size",
                format!("{size:?} is more bytes than 64 bits hold"),
            );
            return volumes;
        }
    };
    let quota = spec
        .quota_backend_bytes
        .and_then(|q| u64::try_from(q).ok())
        .unwrap_or(DEFAULT_QUOTA.unsigned_abs());
    let need = min_volume(quota);
    if bytes < need {
        let (field, fix) = match spec.quota_backend_bytes {
            Some(q) => (
                "spec.quotaBackendBytes",
                format!(
                    "{q} does not fit the members' volumes (spec.storage.size {size}): etcd needs \
                     twice its quota (a follower receiving a snapshot holds two databases for a \
                     while) and {} for its log, {} in all; set spec.storage.size to at least {} \
                     or lower the quota",
                    gib(WAL_ROOM),
                    gib(need),
                    gib(need)
                ),
            ),
            None => (
                "spec.storage.size",
                format!(
                    "{size} cannot hold etcd's default quota (2 GiB) twice and its log: set at \
                     least {}, or a smaller spec.quotaBackendBytes (at most half the volume, less \
                     {})",
                    gib(need),
                    gib(WAL_ROOM)
                ),
            ),
        };
        err(field, fix);
    }
    volumes.size = Some(VolumeSize {
        text: size.clone(),
        bytes,
    });
    volumes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(storage: serde_json::Value, quota: Option<i64>) -> EtcdClusterSpec {
        let mut s: EtcdClusterSpec = serde_json::from_value(serde_json::json!({
            "size": 3, "version": "3.5.1", "storage": storage,
        }))
        .expect("a spec");
        s.quota_backend_bytes = quota;
        s
    }

    fn fields(s: &EtcdClusterSpec) -> (Volumes, Vec<String>) {
        let mut errors = Vec::new();
        let v = check(s, &mut |f: &str, m: String| {
            errors.push(format!("{f}: {m}"))
        });
        (v, errors)
    }

    #[test]
    fn the_default_claim_holds_the_default_quota() {
        assert!(5u64 << 30 >= min_volume(DEFAULT_QUOTA.unsigned_abs()));
        let (v, e) = fields(&spec(serde_json::json!({"size": "5Gi"}), None));
        assert!(e.is_empty(), "{e:?}");
        assert_eq!(v.size.map(|s| s.bytes), Some(5 << 30));
    }

    #[test]
    fn a_quota_the_volume_cannot_hold_is_refused_by_name() {
        let (_, e) = fields(&spec(serde_json::json!({"size": "10Gi"}), Some(8 << 30)));
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(
            e[0].starts_with("spec.quotaBackendBytes: 8589934592"),
            "{e:?}"
        );
        assert!(e[0].contains("at least 16.4Gi"), "{e:?}");
        let (_, e) = fields(&spec(serde_json::json!({"size": "17Gi"}), Some(8 << 30)));
        assert!(e.is_empty(), "{e:?}");
        let (_, e) = fields(&spec(serde_json::json!({"size": "1Gi"}), None));
        assert!(
            e[0].starts_with("spec.storage.size: 1Gi cannot hold"),
            "{e:?}"
        );
        let (_, e) = fields(&spec(serde_json::json!({"size": "1Gi"}), Some(256 << 20)));
        assert!(e.is_empty(), "{e:?}");
    }

    #[test]
    fn claims_need_persistent_storage_and_valid_names() {
        let (_, e) = fields(&spec(
            serde_json::json!({"policy": "Ephemeral", "size": "5Gi", "storageClassName": "x"}),
            None,
        ));
        assert_eq!(e.len(), 2, "{e:?}");
        assert!(
            e.iter()
                .all(|e| e.contains("Ephemeral members have no volume claim"))
        );
        let (_, e) = fields(&spec(
            serde_json::json!({"size": "5GB", "storageClassName": "Fast"}),
            None,
        ));
        assert!(
            e.iter().any(|e| e.starts_with("spec.storage.size: ")),
            "{e:?}"
        );
        assert!(
            e.iter()
                .any(|e| e.starts_with("spec.storage.storageClassName: ")),
            "{e:?}"
        );
    }
}
