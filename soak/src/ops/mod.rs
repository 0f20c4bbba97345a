//! The operation history: every client operation of the load (put, get,
//! compare-and-set, delete) with when it was invoked and when it completed,
//! what it asked and what came back, unknown outcomes kept as such. Written
//! line by line as `history.jsonl` while the run goes ([`file::Writer`]) and
//! read back by the checkers ([`file::read`]); the format is documented in
//! soak/README.md ("history.jsonl").

pub mod file;
pub mod series;

use std::time::{Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// Microseconds since the Unix epoch.
pub type Us = u64;

/// A monotonic clock read as unix microseconds: anchored to the system
/// clock once, then advanced by `Instant`, so a system clock step during the
/// run cannot reorder operations.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    anchor_us: Us,
    anchor: Instant,
}

impl Default for Clock {
    fn default() -> Self {
        Clock::new()
    }
}

impl Clock {
    /// A clock anchored now.
    pub fn new() -> Self {
        let anchor_us = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
            .unwrap_or_default();
        Clock {
            anchor_us,
            anchor: Instant::now(),
        }
    }

    /// Now, in unix microseconds.
    pub fn now(&self) -> Us {
        self.anchor_us
            .saturating_add(u64::try_from(self.anchor.elapsed().as_micros()).unwrap_or(u64::MAX))
    }
}

/// What an operation asked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// A linearizable range read of one key.
    Get,
    /// A put.
    Put,
    /// A transaction: if the key's mod revision is `expectModRev` (0: the
    /// key is absent) put `value`, else read the key.
    Cas,
    /// A delete of one key.
    Delete,
}

impl Kind {
    /// The name in the file.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Get => "get",
            Kind::Put => "put",
            Kind::Cas => "cas",
            Kind::Delete => "delete",
        }
    }

    /// Whether it may change the key.
    pub fn writes(self) -> bool {
        !matches!(self, Kind::Get)
    }
}

/// How an operation ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Answered: the result fields hold what etcd said.
    Ok,
    /// A write whose answer never came (timeout, connection lost, an error
    /// that does not say it was not applied): it may or may not have taken
    /// effect, then or later.
    Unknown,
    /// A read that got no answer, or a write that was never sent (no
    /// connection could be made): no effect, not checked.
    Failed,
}

/// A key's value as an operation saw it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Found {
    /// The write that wrote it (`w3#45`), or `raw:` and the value's first
    /// 32 bytes when the load never wrote such a value.
    pub value: String,
    /// Its mod revision.
    pub mod_rev: i64,
}

/// One line of `history.jsonl`: one operation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Record {
    /// Sequence number in the file (0, 1, ...).
    pub id: u64,
    /// The client session (`w0`.. writers, `r0`.. readers); one operation
    /// at a time per session.
    pub client: String,
    /// What was asked.
    pub op: Kind,
    /// The etcd key.
    pub key: String,
    /// put, cas: the value written (`w3#45`: writer 3, its 45th write).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// cas: the mod revision compared against (0: the key must be absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect_mod_rev: Option<i64>,
    /// When the request was sent (unix µs, monotonic within a run).
    pub call: Us,
    /// When the answer came, or when the client gave up (unknown, failed).
    #[serde(rename = "return")]
    pub ret: Us,
    /// ok, unknown or failed.
    pub status: Status,
    /// ok: the response header's revision (for a write that changed the key,
    /// the revision of the change).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rev: Option<i64>,
    /// get, and a cas that did not succeed: the key as read; absent when
    /// the key did not exist.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub found: Option<Found>,
    /// cas: whether the comparison held and the value was written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub succeeded: Option<bool>,
    /// delete: keys deleted (0 or 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deleted: Option<u64>,
    /// unknown, failed: why, in a few words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Record {
    /// A record of `op` on `key` by `client`, invoked at `call`, before
    /// its result is known.
    pub fn new(client: &str, op: Kind, key: &str, call: Us) -> Self {
        Record {
            id: 0,
            client: client.to_string(),
            op,
            key: key.to_string(),
            value: None,
            expect_mod_rev: None,
            call,
            ret: call,
            status: Status::Unknown,
            rev: None,
            found: None,
            succeeded: None,
            deleted: None,
            error: None,
        }
    }

    /// Whether this operation changed its key for sure (acknowledged).
    pub fn acked_write(&self) -> bool {
        self.status == Status::Ok
            && match self.op {
                Kind::Put => true,
                Kind::Cas => self.succeeded == Some(true),
                Kind::Delete => self.deleted.unwrap_or(0) > 0,
                Kind::Get => false,
            }
    }

    /// What it did, in a few words: `put w3#45 -> rev 1042`.
    pub fn describe(&self) -> String {
        let found = |f: &Option<Found>| match f {
            Some(f) => format!("{}@{}", f.value, f.mod_rev),
            None => "absent".to_string(),
        };
        let ask = match self.op {
            Kind::Get => "get".to_string(),
            Kind::Put => format!("put {}", self.value.as_deref().unwrap_or("?")),
            Kind::Cas => format!(
                "cas {} if mod={}",
                self.value.as_deref().unwrap_or("?"),
                self.expect_mod_rev.unwrap_or(0)
            ),
            Kind::Delete => "delete".to_string(),
        };
        let rev = self.rev.unwrap_or(0);
        let answer = match (self.status, self.op) {
            (Status::Unknown, _) => {
                format!("unknown ({})", self.error.as_deref().unwrap_or("no answer"))
            }
            (Status::Failed, _) => format!("failed ({})", self.error.as_deref().unwrap_or("?")),
            (Status::Ok, Kind::Get) => format!("{} (rev {rev})", found(&self.found)),
            (Status::Ok, Kind::Put) => format!("ok rev {rev}"),
            (Status::Ok, Kind::Cas) if self.succeeded == Some(true) => format!("ok rev {rev}"),
            (Status::Ok, Kind::Cas) => format!("not swapped, {} (rev {rev})", found(&self.found)),
            (Status::Ok, Kind::Delete) => {
                format!("deleted {} rev {rev}", self.deleted.unwrap_or(0))
            }
        };
        format!("{ask} -> {answer}")
    }
}
