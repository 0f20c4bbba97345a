//! Which backups belong to a cluster. A backup belongs to the cluster it
//! was taken from, by name and by identity: a cluster deleted and
//! re-created under the same name is another cluster, and two clusters may
//! name one backup folder. So every backup carries its cluster's identity
//! twice: in its name, `CLUSTER.TAG-YYYYMMDD-HHMMSS-mmm` (TAG: the first 8
//! letters and digits of the cluster's uid; a cluster name has no `.`, so
//! the prefix `CLUSTER.TAG-` is never another cluster's), and in its
//! [`BackupMeta`] (`cluster` and the whole `uid`). Listing, retention,
//! restore checks, rebuilds and the `backups` command see only the backups
//! [`owned`] says are theirs; a sweep deletes only files [`owned_file`] says
//! this cluster wrote (its snapshots, metas, delta segments and temporary
//! files), never anything else in the folder.
//!
//! The uid is `metadata.uid` on Kubernetes; the local platform gives each
//! cluster one when it first sees it, kept in the cluster's record in its
//! state folder (so kept across operator restarts, and new when a manifest
//! is re-added after its cluster's data was removed).
//!
//! **Backups written before this rule** (a meta without `uid`, named
//! `CLUSTER-YYYYMMDD-HHMMSS-mmm`) count as the cluster's when their meta
//! names the cluster and their name is exactly that form for it: a backup
//! another cluster took names that cluster, in its meta and its name, so it
//! is never taken for this one's. What cannot be told apart for those old
//! backups is a cluster of the same name deleted and re-created: its
//! old-format backups are taken as the new cluster's (as they always
//! were). Every backup written from now on carries its uid and is never
//! mistaken.
//!
//! An identity without a uid (`uid: None`: the `backups` command on a
//! deleted cluster, whose uid is no longer known) matches every backup
//! whose meta and name are of a cluster of that name, whatever its uid.

use super::BackupMeta;

/// The letters of a uid that go into backup names.
const TAG_LEN: usize = 8;

/// The tag of `uid` in backup names: its first letters and digits,
/// lowercased.
fn tag(uid: &str) -> String {
    uid.chars()
        .filter(char::is_ascii_alphanumeric)
        .take(TAG_LEN)
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

/// What the name of every backup of the cluster `cluster` with `uid` starts
/// with, up to its timestamp: `CLUSTER.TAG` (or `CLUSTER` without a uid,
/// the old form).
pub fn name_prefix(cluster: &str, uid: Option<&str>) -> String {
    match uid.map(tag).filter(|t| !t.is_empty()) {
        Some(t) => format!("{cluster}.{t}"),
        None => cluster.to_string(),
    }
}

/// Whether `rest` is a backup timestamp, `YYYYMMDD-HHMMSS-mmm`, with an
/// optional `-N` suffix (a second backup in the same millisecond).
fn is_stamp(rest: &str) -> bool {
    let digits = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_digit());
    let mut parts = rest.split('-');
    let ok = matches!(
        (parts.next(), parts.next(), parts.next()),
        (Some(d), Some(t), Some(ms)) if digits(d, 8) && digits(t, 6) && digits(ms, 3)
    );
    let suffix = parts.next();
    ok && parts.next().is_none()
        && suffix.is_none_or(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// The cluster a backup's name says it belongs to: `example` of
/// `example.3f9a-20261205-012308-950` or of the older
/// `example-20261205-012308-950`; `None` for a name of neither form.
pub fn cluster_of(name: &str) -> Option<&str> {
    // The stamp is the last three dash-separated parts (and an optional
    // counter); cluster names may hold dashes too.
    let dashes: Vec<usize> = name.match_indices('-').map(|(i, _)| i).collect();
    let head = dashes
        .iter()
        .rev()
        .find_map(|&i| is_stamp(&name[i + 1..]).then_some(&name[..i]))?;
    let cluster = match head.split_once('.') {
        Some((c, tag)) if !tag.is_empty() && tag.bytes().all(|b| b.is_ascii_alphanumeric()) => c,
        Some(_) => return None,
        None => head,
    };
    crate::names::check_cluster_name(cluster).ok()?;
    Some(cluster)
}

/// Whether `name` is the name of a backup of `cluster` (with `uid`; any
/// uid's when `None`). Old-form names (`CLUSTER-STAMP`) count when
/// `legacy` says so.
fn own_name(name: &str, cluster: &str, uid: Option<&str>, legacy: bool) -> bool {
    let Some(rest) = name.strip_prefix(cluster) else {
        return false;
    };
    if let Some(stamp) = rest.strip_prefix('-') {
        return legacy && is_stamp(stamp);
    }
    let Some(rest) = rest.strip_prefix('.') else {
        return false;
    };
    let Some((t, stamp)) = rest.split_once('-') else {
        return false;
    };
    let tag_ok = match uid {
        Some(uid) => t == tag(uid),
        None => !t.is_empty() && t.bytes().all(|b| b.is_ascii_alphanumeric()),
    };
    tag_ok && is_stamp(stamp)
}

/// Whether `meta` is a backup of the cluster `cluster` with `uid` (see the
/// module doc for backups written before uids).
pub fn owned(meta: &BackupMeta, cluster: &str, uid: Option<&str>) -> bool {
    if meta.cluster != cluster {
        return false;
    }
    match (&meta.uid, uid) {
        (Some(theirs), Some(ours)) => theirs == ours && own_name(&meta.name, cluster, uid, false),
        (Some(_), None) => own_name(&meta.name, cluster, None, false),
        (None, _) => own_name(&meta.name, cluster, None, true),
    }
}

/// The backup name a file of the backup folder belongs to, when it is one
/// this cluster writes: `NAME.db`, `NAME.json`, a delta segment
/// `NAME.delta-N.seg`, a temporary file of one of those (`.tmp-NAME.db`,
/// `.seg-tmp-NAME.delta-N.seg`), or the marker of an upload of one in a
/// bucket (`NAME.db.upload`, [`super::object::upload::MARK`]); `None` for
/// anything else.
pub fn owned_file<'a>(file: &'a str, cluster: &str, uid: Option<&str>) -> Option<&'a str> {
    let file = super::object::upload::marked(file).unwrap_or(file);
    let inner = file
        .strip_prefix(".tmp-")
        .or_else(|| file.strip_prefix(super::chain::TMP_PREFIX))
        .unwrap_or(file);
    let name = if let Some((base, _)) = super::chain::parse_file_name(inner) {
        base
    } else {
        inner
            .strip_suffix(".db")
            .or_else(|| inner.strip_suffix(".json"))?
    };
    own_name(name, cluster, uid, true).then_some(name)
}

/// How a backup folder's status names the cluster of `meta`, a backup in
/// the folder of `cluster` that is not its own
/// ([`crate::crd::BackupStatus::shared_with`]): another cluster by its
/// name, an earlier cluster of the same name by its uid too.
pub fn sharer(meta: BackupMeta, cluster: &str) -> String {
    match meta.uid {
        Some(uid) if meta.cluster == cluster => {
            format!("{} (an earlier cluster, uid {uid})", meta.cluster)
        }
        _ => meta.cluster,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_backup_name_says_its_cluster() {
        assert_eq!(cluster_of("example-20261205-012308-950"), Some("example"));
        assert_eq!(cluster_of("my-db.3f9a-20261205-012308-950"), Some("my-db"));
        assert_eq!(cluster_of("my-db-20261205-012308-950-2"), Some("my-db"));
        for bad in [
            "example",
            "example-2026",
            "/etc/x-20261205-012308-950",
            "-20261205-012308-950",
        ] {
            assert_eq!(cluster_of(bad), None, "{bad}");
        }
    }
    use crate::backup::tests::meta;

    fn of(name: &str, cluster: &str, uid: Option<&str>) -> BackupMeta {
        BackupMeta {
            cluster: cluster.into(),
            uid: uid.map(str::to_string),
            ..meta(name, 1, String::new())
        }
    }

    #[test]
    fn a_backup_is_its_clusters_by_name_and_uid() {
        let uid = "3f2a9c1e-0000-4000-8000-000000000001";
        let name = format!("{}-20261205-005229-523", name_prefix("good", Some(uid)));
        assert_eq!(name, "good.3f2a9c1e-20261205-005229-523");
        assert!(owned(&of(&name, "good", Some(uid)), "good", Some(uid)));
        // Another cluster, or the same name re-created (another uid).
        assert!(!owned(&of(&name, "good", Some(uid)), "rb", Some(uid)));
        let again = "77777777-0000-4000-8000-000000000001";
        assert!(!owned(&of(&name, "good", Some(uid)), "good", Some(again)));
        // A meta that claims the cluster but names another's file.
        assert!(!owned(
            &of("rb.3f2a9c1e-20261205-005229-523", "good", Some(uid)),
            "good",
            Some(uid)
        ));
        // Without a uid (a deleted cluster's listing): any of its own.
        assert!(owned(&of(&name, "good", Some(uid)), "good", None));
        assert!(!owned(&of(&name, "good", Some(uid)), "goo", None));
    }

    #[test]
    fn an_old_backup_is_its_clusters_when_its_name_and_meta_say_so() {
        let uid = Some("3f2a9c1e");
        assert!(owned(
            &of("good-20261205-005229-523", "good", None),
            "good",
            uid
        ));
        assert!(owned(
            &of("good-20261205-005229-523-2", "good", None),
            "good",
            uid
        ));
        assert!(!owned(
            &of("good-20261205-005229-523", "good", None),
            "rb",
            uid
        ));
        assert!(!owned(
            &of("good-20261205-005229-523", "rb", None),
            "rb",
            uid
        ));
        assert!(!owned(
            &of("good-x-20261205-005229-523", "good", None),
            "good",
            uid
        ));
        assert!(!owned(&of("notes", "good", None), "good", uid));
        assert!(!owned(&of("good-2026", "good", None), "good", uid));
    }

    #[test]
    fn only_files_a_cluster_writes_are_its_own() {
        let uid = Some("3f2a9c1e");
        let own = "good.3f2a9c1e-20261205-005229-523";
        for file in [
            format!("{own}.db"),
            format!("{own}.json"),
            format!(".tmp-{own}.db"),
            format!("{own}.delta-00000001.seg"),
            format!(".seg-tmp-{own}.delta-00000001.seg"),
            format!("{own}.db.upload"),
            format!("{own}.delta-00000002.seg.upload"),
            "good-20261205-005229-523.db".to_string(),
        ] {
            assert!(owned_file(&file, "good", uid).is_some(), "{file}");
        }
        for file in [
            ".tmp-user-notes.txt",
            "other.delta-00000001.seg",
            "config.json",
            ".tmp-good.77777777-20261205-005229-523.db",
            ".tmp-rb.3f2a9c1e-20261205-005229-523.db",
            "good.3f2a9c1e-20261205-005229-523.txt",
            "good-x.db",
            "other.3f2a9c1e-20261205-005229-523.db.upload",
            ".upload",
        ] {
            assert_eq!(owned_file(file, "good", uid), None, "{file}");
        }
    }
}
