//! The table of admission rules ([`super::rules`]): each made from the
//! constants and patterns of the operator's own validation. A new spec
//! field gets its bounds, pattern or CEL rule with a line here.

use std::time::Duration;

use crate::kube_names::{
    MAX_OBJECT_NAME_LEN, MAX_REPOSITORY_LEN, OBJECT_NAME_PATTERN, REPOSITORY_PATTERN, size_pattern,
};
use crate::member::Tuning;
use crate::member::backend::{
    FRAGMENTATION_PERCENT, MAX_QUOTA, MAX_REVISION_RETENTION, MIN_DEFRAG_INTERVAL,
    MIN_PERIODIC_RETENTION, MIN_QUOTA, MIN_REVISION_RETENTION,
};
use crate::member::tuning::{MAX_ELECTION_MS, MAX_HEARTBEAT_MS};
use crate::names::{CLUSTER_NAME_PATTERN, MAX_CLUSTER_NAME_LEN};
use crate::units::{GO_DURATION_PATTERN, MAX_DURATION, MAX_INTERVAL, SPACES};
use crate::validate::continuous::{
    MAX_MAX_EVENTS, MAX_SEGMENT_INTERVAL, MIN_MAX_EVENTS, MIN_SEGMENT_INTERVAL,
};
use crate::validate::pod::MAX_ID;
use crate::validate::{
    MAX_BACKUPS, MAX_SECRET_NAME_LEN, MAX_SIZE, MIN_BACKUP_INTERVAL, MIN_BACKUPS, MIN_REVISION,
    MIN_SIZE, MIN_TLS_VALIDITY, SECRET_NAME_PATTERN, TIME_PREFIX_PATTERN,
};

use super::{Check, Rule, go};

/// The object-store places: `url` and names of each.
const OBJECT_STORES: [&str; 2] = [
    "spec.backup.location.objectStore",
    "spec.restore.location.objectStore",
];
/// What the store URLs start with ([`crate::backup::object::ObjectLocation`]
/// checks the rest): a scheme and a bucket's first character.
const STORE_URL_PATTERN: &str = "^(s3|gs|az)://[a-z0-9]";

/// The durations of the spec: (rule name, field, least, greatest).
fn durations() -> [(&'static str, &'static str, Duration, Duration); 8] {
    let ms = |n: u32| Duration::from_millis(u64::from(n));
    [
        (
            "backup-interval",
            "spec.backup.interval",
            MIN_BACKUP_INTERVAL,
            MAX_INTERVAL,
        ),
        (
            "restore-check-interval",
            "spec.backup.restoreCheck.interval",
            MIN_BACKUP_INTERVAL,
            MAX_INTERVAL,
        ),
        (
            "segment-interval",
            "spec.backup.continuous.segmentInterval",
            MIN_SEGMENT_INTERVAL,
            MAX_SEGMENT_INTERVAL,
        ),
        (
            "defrag-interval",
            "spec.defrag.interval",
            MIN_DEFRAG_INTERVAL,
            MAX_INTERVAL,
        ),
        (
            "certificate-validity",
            "spec.tls.certificateValidity",
            MIN_TLS_VALIDITY,
            MAX_DURATION,
        ),
        (
            "ca-validity",
            "spec.tls.caValidity",
            MIN_TLS_VALIDITY,
            MAX_DURATION,
        ),
        (
            "heartbeat-interval",
            "spec.tuning.heartbeatInterval",
            ms(1),
            ms(MAX_HEARTBEAT_MS),
        ),
        (
            "election-timeout",
            "spec.tuning.electionTimeout",
            ms(1),
            ms(MAX_ELECTION_MS),
        ),
    ]
}

/// Every rule, in the order the reference lists them.
pub(super) fn rules() -> Vec<Rule> {
    let mut r = Rules(Vec::new());
    r.range("size-range", "spec.size", MIN_SIZE, Some(MAX_SIZE));
    r.range(
        "max-backups-range",
        "spec.backup.maxBackups",
        MIN_BACKUPS,
        Some(MAX_BACKUPS),
    );
    r.range(
        "max-events-range",
        "spec.backup.continuous.maxEvents",
        MIN_MAX_EVENTS,
        Some(MAX_MAX_EVENTS),
    );
    r.range(
        "to-revision-min",
        "spec.restore.toRevision",
        MIN_REVISION,
        None,
    );
    r.range(
        "quota-range",
        "spec.quotaBackendBytes",
        MIN_QUOTA,
        Some(MAX_QUOTA),
    );
    r.range(
        "fragmentation-range",
        "spec.defrag.fragmentationPercent",
        *FRAGMENTATION_PERCENT.start(),
        Some(*FRAGMENTATION_PERCENT.end()),
    );
    r.pattern(
        "version-format",
        "spec.version",
        crate::version::PATTERN,
        None,
    );
    for (name, field, min, max) in durations() {
        r.pattern(&format!("{name}-format"), field, GO_DURATION_PATTERN, None);
        let (lo, hi) = (go(min), go(max));
        r.cel(
            &format!("{name}-range"),
            field,
            format!("duration(self.trim()) >= duration('{lo}') && duration(self.trim()) <= duration('{hi}')"),
            format!("{field}: must be at least {lo} and at most {hi}"),
        );
    }
    r.tuning();
    r.compaction();
    r.cel(
        "defrag-what",
        "spec.defrag",
        "has(self.interval) || has(self.fragmentationPercent)".into(),
        "spec.defrag: set interval (such as \"24h\"), fragmentationPercent (such as 50), or \
         both; leave spec.defrag out for no scheduled defragmentation"
            .into(),
    );
    r.backup_location();
    r.members();
    r.restore();
    r.recovery();
    r.tls();
    r.cel(
        "cluster-name",
        "metadata.name",
        format!(
            "size(self.metadata.name) <= {MAX_CLUSTER_NAME_LEN} && \
             self.metadata.name.matches('{CLUSTER_NAME_PATTERN}')"
        ),
        format!(
            "metadata.name: a cluster name is 1 to {MAX_CLUSTER_NAME_LEN} lowercase letters, \
             digits and '-', starting with a letter and ending with a letter or digit"
        ),
    );
    r.0
}

/// The rules, as [`rules`] adds them.
struct Rules(Vec<Rule>);

impl Rules {
    fn push(&mut self, name: &str, field: &str, check: Check) {
        self.0.push(Rule {
            name: name.to_string(),
            field: field.to_string(),
            check,
            kubernetes_only: false,
        });
    }

    fn range(&mut self, name: &str, field: &str, min: i64, max: Option<i64>) {
        let min = Some(min);
        self.push(name, field, Check::Range { min, max });
    }

    fn pattern(&mut self, name: &str, field: &str, pattern: &str, max_length: Option<usize>) {
        let pattern = pattern.to_string();
        self.push(
            name,
            field,
            Check::Pattern {
                pattern,
                max_length,
            },
        );
    }

    fn object_name(&mut self, name: &str, field: &str) {
        self.pattern(name, field, OBJECT_NAME_PATTERN, Some(MAX_OBJECT_NAME_LEN));
    }

    fn cel(&mut self, name: &str, field: &str, rule: String, message: String) {
        self.push(name, field, Check::Cel { rule, message });
    }

    /// A rule the operator applies on Kubernetes only.
    fn kube_cel(&mut self, name: &str, field: &str, rule: &str, message: &str) {
        self.cel(name, field, rule.into(), message.into());
        if let Some(last) = self.0.last_mut() {
            last.kubernetes_only = true;
        }
    }

    /// `spec.tuning`: an election timeout of at least 5 heartbeats, an
    /// unset one counting at etcd's default ([`Tuning`]).
    fn tuning(&mut self) {
        let value = |field: &str, default_ms: u32| {
            format!(
                "(has(self.{field}) ? duration(self.{field}.trim()) : duration('{default_ms}ms'))"
            )
        };
        let heartbeat = value("heartbeatInterval", Tuning::DEFAULT_HEARTBEAT_MS);
        let election = value("electionTimeout", Tuning::DEFAULT_ELECTION_MS);
        // CEL multiplies no duration: five heartbeats are a sum.
        let five = [heartbeat.as_str(); 5].join(" + ");
        self.cel(
            "election-timeout-vs-heartbeat",
            "spec.tuning",
            format!("{election} >= {five}"),
            format!(
                "spec.tuning.electionTimeout: must be at least 5 times the heartbeat interval, \
                 as etcd requires (unset: electionTimeout {}ms, heartbeatInterval {}ms)",
                Tuning::DEFAULT_ELECTION_MS,
                Tuning::DEFAULT_HEARTBEAT_MS
            ),
        );
    }

    /// `spec.compaction.retention`: a duration or a number, as `mode` says.
    fn compaction(&mut self) {
        let number = r"\+?[0-9]+";
        let duration = GO_DURATION_PATTERN
            .trim_start_matches('^')
            .trim_end_matches('$');
        self.pattern(
            "compaction-retention-format",
            "spec.compaction.retention",
            &format!("^{SPACES}{number}{SPACES}$|^{duration}$"),
            None,
        );
        let (lo, hi) = (go(MIN_PERIODIC_RETENTION), go(MAX_DURATION));
        self.cel(
            "compaction-periodic-retention",
            "spec.compaction",
            format!(
                "self.mode != 'Periodic' || duration(self.retention.trim()) >= duration('{lo}') \
                 && duration(self.retention.trim()) <= duration('{hi}')"
            ),
            format!(
                "spec.compaction.retention: with mode Periodic, a duration of at least {lo} \
                 such as \"1h\" or \"30m\""
            ),
        );
        let (lo, hi) = (MIN_REVISION_RETENTION, MAX_REVISION_RETENTION);
        self.cel(
            "compaction-revision-retention",
            "spec.compaction",
            format!(
                "self.mode != 'Revision' || int(self.retention.trim()) >= {lo} && \
                 int(self.retention.trim()) <= {hi}"
            ),
            format!(
                "spec.compaction.retention: with mode Revision, the number of revisions to \
                 keep: a whole number from {lo} to {hi}, such as \"10000\""
            ),
        );
    }

    /// `spec.backup.location` and the object stores.
    fn backup_location(&mut self) {
        let location = "spec.backup.location";
        self.cel(
            "backup-location-one-place",
            location,
            "!has(self.objectStore) || !has(self.path) && !has(self.persistentVolumeClaim)".into(),
            "spec.backup.location.objectStore: is a place of its own: drop path or \
             persistentVolumeClaim (one location per cluster)"
                .into(),
        );
        self.kube_cel(
            "backup-location-no-path",
            location,
            "!has(self.path)",
            "spec.backup.location.path: a folder is where the local platform keeps backups; on \
             Kubernetes they go to a volume claim (persistentVolumeClaim) or an object store \
             (objectStore)",
        );
        self.object_name(
            "backup-claim-name",
            "spec.backup.location.persistentVolumeClaim",
        );
        self.object_name(
            "storage-class-name",
            "spec.backup.location.storageClassName",
        );
        self.pattern(
            "backup-claim-size",
            "spec.backup.location.size",
            &size_pattern(),
            None,
        );
        for store in OBJECT_STORES {
            let which = if store.starts_with("spec.backup") {
                "backup"
            } else {
                "restore"
            };
            self.pattern(
                &format!("{which}-store-url"),
                &format!("{store}.url"),
                STORE_URL_PATTERN,
                None,
            );
            self.object_name(
                &format!("{which}-store-credentials-secret"),
                &format!("{store}.credentialsSecret"),
            );
            self.object_name(
                &format!("{which}-store-service-account"),
                &format!("{store}.serviceAccountName"),
            );
        }
    }

    /// The members' claims (`spec.storage`), image (`spec.image`) and
    /// pods (`spec.pod`). Maps (labels, annotations, resources) are left
    /// to the operator: a CEL rule over a map of unbounded size may cost
    /// more than an API server allows a rule.
    fn members(&mut self) {
        self.pattern(
            "member-claim-size",
            "spec.storage.size",
            &size_pattern(),
            None,
        );
        self.object_name("member-storage-class-name", "spec.storage.storageClassName");
        self.cel(
            "member-claims-need-persistent",
            "spec.storage",
            "!(has(self.size) || has(self.storageClassName)) || !has(self.policy) || \
             self.policy != 'Ephemeral'"
                .into(),
            "spec.storage.size: Ephemeral members have no volume claim: drop size and \
             storageClassName, or use policy: Persistent"
                .into(),
        );
        self.pattern(
            "image-repository",
            "spec.image.repository",
            REPOSITORY_PATTERN,
            Some(MAX_REPOSITORY_LEN),
        );
        self.object_name("priority-class-name", "spec.pod.priorityClassName");
        let security = "spec.pod.securityContext";
        self.range(
            "run-as-user",
            &format!("{security}.runAsUser"),
            1,
            Some(MAX_ID),
        );
        self.range(
            "run-as-group",
            &format!("{security}.runAsGroup"),
            0,
            Some(MAX_ID),
        );
        self.range("fs-group", &format!("{security}.fsGroup"), 0, Some(MAX_ID));
        self.pattern(
            "fs-group-change-policy",
            &format!("{security}.fsGroupChangePolicy"),
            "^(OnRootMismatch|Always)$",
            None,
        );
    }

    /// `spec.restore`.
    fn restore(&mut self) {
        self.cel(
            "restore-point-one-of",
            "spec.restore",
            "!has(self.toRevision) || !has(self.toTime)".into(),
            "spec.restore.toRevision: names a revision, and toTime a time: set one of them".into(),
        );
        self.pattern(
            "restore-time-format",
            "spec.restore.toTime",
            TIME_PREFIX_PATTERN,
            None,
        );
        self.pattern(
            "restore-backup-named",
            "spec.restore.backup",
            r"[^ \t\n\f\r]",
            None,
        );
        self.kube_cel(
            "restore-backup-no-file",
            "spec.restore.backup",
            "!self.contains('/') && !self.endsWith('.db')",
            "spec.restore.backup: a file path; on Kubernetes name a backup (as \
             status.backup.lastBackup shows it)",
        );
        self.pattern(
            "restore-cluster-name",
            "spec.restore.cluster",
            CLUSTER_NAME_PATTERN,
            Some(MAX_CLUSTER_NAME_LEN),
        );
        self.cel(
            "restore-location-one-place",
            "spec.restore.location",
            "(has(self.path) ? 1 : 0) + (has(self.persistentVolumeClaim) ? 1 : 0) + \
             (has(self.objectStore) ? 1 : 0) <= 1"
                .into(),
            "spec.restore.location: names a folder (path, local platform), a claim \
             (persistentVolumeClaim, Kubernetes) or an object store (objectStore), only one"
                .into(),
        );
        self.kube_cel(
            "restore-location-no-path",
            "spec.restore.location",
            "!has(self.path)",
            "spec.restore.location.path: folders are the local platform's; on Kubernetes name \
             the claim holding the backups in persistentVolumeClaim",
        );
        self.object_name(
            "restore-claim-name",
            "spec.restore.location.persistentVolumeClaim",
        );
    }

    /// `spec.recovery` and what it needs.
    fn recovery(&mut self) {
        let from_backup = "has(self.recovery) && has(self.recovery.restoreFromBackup) && self.recovery.restoreFromBackup";
        let ephemeral =
            "has(self.storage) && has(self.storage.policy) && self.storage.policy == 'Ephemeral'";
        self.cel(
            "recovery-needs-backup",
            "spec",
            format!("!({from_backup}) || has(self.backup)"),
            "spec.recovery.restoreFromBackup: needs spec.backup: without backups there is \
             nothing to restore from"
                .into(),
        );
        self.cel(
            "survivor-needs-persistent",
            "spec",
            format!(
                "!(has(self.recovery) && has(self.recovery.fromSurvivor) && \
                 self.recovery.fromSurvivor) || !({ephemeral})"
            ),
            "spec.recovery.fromSurvivor: needs spec.storage.policy: Persistent; remove \
             fromSurvivor or use Persistent storage"
                .into(),
        );
        self.kube_cel(
            "restore-needs-persistent",
            "spec",
            &format!("!(has(self.restore) || {from_backup}) || !({ephemeral})"),
            "spec.storage.policy: Ephemeral members cannot be restored from a backup on \
             Kubernetes; use Persistent, or drop spec.restore and \
             spec.recovery.restoreFromBackup",
        );
    }

    /// `spec.tls.peer` and `spec.tls.client`.
    fn tls(&mut self) {
        for side in ["peer", "client"] {
            let field = format!("spec.tls.{side}");
            self.cel(
                &format!("tls-{side}-auto"),
                &field,
                "self.mode != 'Auto' || !has(self.path) && !has(self.secretName)".into(),
                format!(
                    "{field}: path and secretName name certificates you provide: use them \
                     with mode: Provided, or leave them out for mode: Auto"
                ),
            );
            self.cel(
                &format!("tls-{side}-provided"),
                &field,
                "self.mode != 'Provided' || (has(self.path) || has(self.secretName)) && \
                 (!has(self.path) || self.path.trim() != '')"
                    .into(),
                format!(
                    "{field}: mode: Provided needs path (a folder with ca.crt, tls.crt and \
                     tls.key; local platform) or secretName (a kubernetes.io/tls Secret with \
                     ca.crt; Kubernetes)"
                ),
            );
            self.pattern(
                &format!("tls-{side}-secret-name"),
                &format!("{field}.secretName"),
                SECRET_NAME_PATTERN,
                Some(MAX_SECRET_NAME_LEN),
            );
        }
    }
}
