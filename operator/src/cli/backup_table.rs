//! How the backup commands show backups: a table, the chains of delta
//! segments after them, a restore check in a few words. Shared by the
//! listings of a folder and of an object store.

use std::path::Path;

use super::table::render;
use crate::backup::{self, BackupMeta};

/// A backup and the result of checking its file again now.
pub type Checked = (BackupMeta, Result<(), String>);

/// A table of backups.
pub fn table(backups: &[Checked]) -> String {
    let mut rows = vec![vec![
        "NAME".to_string(),
        "TIME".into(),
        "REVISION".into(),
        "KEYS".into(),
        "SIZE".into(),
        "FROM".into(),
        "CHECK".into(),
        "RESTORE CHECK".into(),
    ]];
    for (m, check) in backups {
        rows.push(vec![
            m.name.clone(),
            m.time.clone(),
            m.revision.to_string(),
            m.total_keys.to_string(),
            format!("{:.1} MiB", m.size as f64 / (1 << 20) as f64),
            format!("{} ({})", m.member, m.etcd_version),
            match check {
                Ok(()) => "ok".into(),
                Err(e) => format!("DAMAGED: {e}"),
            },
            restore_check(m),
        ]);
    }
    render(&rows)
}

/// The chains of delta segments (continuous backups) of the backups in
/// `dir`, a line each for those that have segments: how many are intact,
/// the last revision and time they hold, and where the chain is cut.
pub fn chains(dir: &Path, backups: &[Checked]) -> String {
    let mut out = String::new();
    for (m, _) in backups {
        let chain = backup::chain::read(dir, m);
        if chain.files == 0 {
            continue;
        }
        let last = chain
            .last_unix_ms()
            .map_or("-".into(), backup::follow::rfc3339_ms);
        out.push_str(&format!(
            "chain of {}: {} segments, last revision {}, last written {last}; point-in-time \
             restore (spec.restore.toRevision/toTime) from revision {} ({}) to {} ({last})",
            m.name,
            chain.segments.len(),
            chain.last_revision(),
            m.revision,
            m.time,
            chain.last_revision(),
        ));
        match &chain.cut {
            Some(cut) => out.push_str(&format!(
                "; CUT: {cut} ({} segment files after it are not used)\n",
                chain.files - chain.segments.len()
            )),
            None => out.push('\n'),
        }
    }
    out
}

/// The last restore check of a backup, in a few words (`check-backup`).
pub fn restore_check(m: &BackupMeta) -> String {
    use crate::backup::proof::Verdict;
    match &m.restore_check {
        None => "never".into(),
        Some(c) => match (c.result, c.backup_hash, c.live_hash) {
            (Verdict::Mismatch, Some(b), Some(l)) => {
                format!("MISMATCH at {} (hash {b}, live {l})", c.time)
            }
            (Verdict::Mismatch, ..) => format!("MISMATCH at {}: {}", c.time, c.message),
            (Verdict::Unverifiable, ..) => format!("unverifiable at {} (compacted)", c.time),
            (Verdict::Verified, ..) => format!("verified at {}", c.time),
        },
    }
}
