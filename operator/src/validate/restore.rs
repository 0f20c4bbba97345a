//! `spec.restore`: which backup a new cluster starts from, whose it is,
//! where it is, and up to which point its chain is replayed.

use super::check_name;
use crate::backup::object::ObjectLocation;

/// `spec.restore`: a backup's name (with whose it is and where, each
/// checked) or a snapshot file's path (with neither).
pub(super) fn check(r: &crate::crd::RestoreSpec, err: &mut impl FnMut(&str, String)) {
    let backup = r.backup.trim();
    if backup.is_empty() {
        err(
            "spec.restore.backup",
            "must name a backup or the path of a snapshot file".into(),
        );
        return;
    }
    let is_path = crate::names::is_snapshot_path(backup);
    if is_path && (r.cluster.is_some() || r.location.is_some()) {
        let field = if r.cluster.is_some() {
            "cluster"
        } else {
            "location"
        };
        err(
            &format!("spec.restore.{field}"),
            format!(
                "names whose backup and where: only for a backup's name, and {backup:?} is a \
                 snapshot file's path; drop spec.restore.{field}"
            ),
        );
    }
    if let Some(c) = &r.cluster
        && let Err(e) = check_name(c)
    {
        err("spec.restore.cluster", e);
    }
    if let Err((field, m)) = point_in_time(r) {
        err(field, m);
    } else if is_path && (r.to_revision.is_some() || r.to_time.is_some()) {
        err(
            "spec.restore.toRevision",
            format!(
                "a point in time is for a backup's name (its chain of delta segments), and \
                 {backup:?} is a snapshot file's path; drop toRevision/toTime"
            ),
        );
    }
    if let Some(l) = &r.location {
        location(l, "spec.restore.location", err);
    }
}

/// A location of another cluster's backups (`spec.restore.location`,
/// `spec.standby.location`) at `field`: one place, each checked.
pub(super) fn location(
    l: &crate::crd::RestoreLocation,
    field: &str,
    err: &mut impl FnMut(&str, String),
) {
    let places = [
        l.path.is_some(),
        l.persistent_volume_claim.is_some(),
        l.object_store.is_some(),
    ];
    if places.iter().filter(|p| **p).count() > 1 {
        err(
            field,
            "names a folder (path, local platform), a claim (persistentVolumeClaim, \
             Kubernetes) or an object store (objectStore), only one"
                .into(),
        );
    }
    if let Some(Err(problems)) = l
        .object_store
        .as_ref()
        .map(|o| ObjectLocation::parse(o, &format!("{field}.objectStore")))
    {
        for (f, m) in problems {
            err(&f, m);
        }
    }
    if let Some(p) = &l.path
        && (p.trim().is_empty() || p.contains('\0'))
    {
        err(&format!("{field}.path"), "must be a folder's path".into());
    }
    if let Some(c) = &l.persistent_volume_claim
        && let Err(e) = crate::kube_names::check_object_name(c)
    {
        err(&format!("{field}.persistentVolumeClaim"), e);
    }
}

/// The least `spec.restore.toRevision`.
pub const MIN_REVISION: i64 = 1;

/// The start of a `spec.restore.toTime` as [`point_in_time`] reads it
/// (RFC 3339's date and time, `T` or a space between them), as a regular
/// expression for the CRD's schema; what follows (fraction, `Z`) is left to
/// the operator.
pub const TIME_PREFIX_PATTERN: &str =
    r"^[ \t\n\f\r]*[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}:[0-9]{2}";

/// `spec.restore.toRevision` / `toTime`, checked: at most one, a revision
/// of at least 1, a time in RFC 3339.
pub(super) fn point_in_time(
    r: &crate::crd::RestoreSpec,
) -> Result<Option<crate::backup::point::PointInTime>, (&'static str, String)> {
    use crate::backup::point::PointInTime;
    match (r.to_revision, r.to_time.as_deref()) {
        (Some(_), Some(_)) => Err((
            "spec.restore.toRevision",
            "names a revision, and toTime a time: set one of them".into(),
        )),
        (Some(rev), None) if rev < MIN_REVISION => Err((
            "spec.restore.toRevision",
            format!("must be a revision (at least {MIN_REVISION}), got {rev}"),
        )),
        (Some(rev), None) => Ok(Some(PointInTime::Revision(rev))),
        (None, Some(t)) => humantime::parse_rfc3339_weak(crate::units::trim_spaces(t))
            .ok()
            .and_then(|at| at.duration_since(std::time::UNIX_EPOCH).ok())
            .and_then(|d| u64::try_from(d.as_millis()).ok())
            .map(|ms| Some(PointInTime::Time(ms)))
            .ok_or((
                "spec.restore.toTime",
                format!(
                    "{} is not a time; write one in RFC 3339, in UTC, such as \
                     \"2026-12-04T10:41:59Z\"",
                    crate::names::quote(t, 60)
                ),
            )),
        (None, None) => Ok(None),
    }
}
