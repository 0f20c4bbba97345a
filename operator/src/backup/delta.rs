//! The delta segment format of continuous backups: the changes of the
//! cluster after a full backup, a file per segment, chained by SHA-256.
//!
//! A segment is, in this order (integers big-endian):
//!
//! - the magic `EOPDLT01`;
//! - the base backup's name (`u16` length, UTF-8), the segment's number in
//!   its chain (`u64`, from 1), when it was written (`u64`, ms since the
//!   Unix epoch), its first and last revision (`i64` each);
//! - its revisions (`u32` count), each one etcd revision, that is one
//!   transaction: the revision (`i64`) and its events (`u32` count), each
//!   a kind (`u8`: 0 put, 1 delete), a key and, for a put, a value (`u32`
//!   length and bytes each; leases are not kept);
//! - the SHA-256 of the previous segment (for the first: of the base
//!   backup's name and file hash, [`chain_start`]);
//! - the SHA-256 of everything before it.
//!
//! So each segment's hash covers its content and the previous one's hash:
//! a segment changed, missing or out of order breaks the chain there.

use sha2::{Digest, Sha256};

/// The first bytes of every segment.
pub const MAGIC: &[u8; 8] = b"EOPDLT01";

/// Why bytes are not a good segment.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FormatError {
    /// The file ends early.
    #[error("truncated: {0} is missing")]
    Truncated(&'static str),
    /// Not a segment at all.
    #[error("not a delta segment (no EOPDLT01 magic)")]
    Magic,
    /// The hash at its end does not match its content.
    #[error("its SHA-256 does not match its content: the segment is damaged")]
    Hash,
    /// The content makes no sense.
    #[error("{0}")]
    Invalid(String),
}

/// What happened to one key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// The key was set to a value.
    Put {
        /// The key.
        key: Vec<u8>,
        /// Its new value.
        value: Vec<u8>,
    },
    /// The key was deleted.
    Delete {
        /// The key.
        key: Vec<u8>,
    },
}

/// The events of one etcd revision (one transaction).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Revision {
    /// The revision.
    pub revision: i64,
    /// Its events, in etcd's order (at least one).
    pub events: Vec<Event>,
}

/// Adds a watched event to `revisions` (grouped by revision, in order):
/// its revision, or `None` for an event without a key-value.
pub fn push_watched(revisions: &mut Vec<Revision>, ev: &etcd_client::Event) -> Option<i64> {
    let kv = ev.kv()?;
    let rev = kv.mod_revision();
    let event = match ev.event_type() {
        etcd_client::EventType::Put => Event::Put {
            key: kv.key().to_vec(),
            value: kv.value().to_vec(),
        },
        etcd_client::EventType::Delete => Event::Delete {
            key: kv.key().to_vec(),
        },
    };
    match revisions.last_mut() {
        Some(r) if r.revision == rev => r.events.push(event),
        _ => revisions.push(Revision {
            revision: rev,
            events: vec![event],
        }),
    }
    Some(rev)
}

/// One delta segment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Segment {
    /// The full backup the chain follows.
    pub base: String,
    /// Number in the chain, from 1.
    pub seq: u64,
    /// When it was written, ms since the Unix epoch.
    pub unix_ms: u64,
    /// Its revisions, increasing (at least one).
    pub revisions: Vec<Revision>,
    /// The SHA-256 of the previous segment (or [`chain_start`]).
    pub prev: [u8; 32],
}

impl Segment {
    /// Its first revision.
    pub fn first_revision(&self) -> i64 {
        self.revisions.first().map_or(0, |r| r.revision)
    }

    /// Its last revision.
    pub fn last_revision(&self) -> i64 {
        self.revisions.last().map_or(0, |r| r.revision)
    }

    /// Its events.
    pub fn events(&self) -> usize {
        self.revisions.iter().map(|r| r.events.len()).sum()
    }
}

/// What the first segment of the chain of backup `base` (whose file has
/// SHA-256 `sha256`, hex) chains to.
pub fn chain_start(base: &str, sha256: &str) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(b"EOPDLT01 chain of ");
    h.update(base.as_bytes());
    h.update(b"\n");
    h.update(sha256.as_bytes());
    h.finalize().into()
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&u32::try_from(b.len()).unwrap_or(u32::MAX).to_be_bytes());
    out.extend_from_slice(b);
}

/// The bytes of `segment`, and its hash (the last 32 of them).
pub fn encode(segment: &Segment) -> (Vec<u8>, [u8; 32]) {
    let mut out = Vec::new();
    out.extend_from_slice(MAGIC);
    let base = segment.base.as_bytes();
    out.extend_from_slice(&u16::try_from(base.len()).unwrap_or(u16::MAX).to_be_bytes());
    out.extend_from_slice(base);
    out.extend_from_slice(&segment.seq.to_be_bytes());
    out.extend_from_slice(&segment.unix_ms.to_be_bytes());
    out.extend_from_slice(&segment.first_revision().to_be_bytes());
    out.extend_from_slice(&segment.last_revision().to_be_bytes());
    let n = u32::try_from(segment.revisions.len()).unwrap_or(u32::MAX);
    out.extend_from_slice(&n.to_be_bytes());
    for r in &segment.revisions {
        out.extend_from_slice(&r.revision.to_be_bytes());
        let n = u32::try_from(r.events.len()).unwrap_or(u32::MAX);
        out.extend_from_slice(&n.to_be_bytes());
        for e in &r.events {
            match e {
                Event::Put { key, value } => {
                    out.push(0);
                    put_bytes(&mut out, key);
                    put_bytes(&mut out, value);
                }
                Event::Delete { key } => {
                    out.push(1);
                    put_bytes(&mut out, key);
                }
            }
        }
    }
    out.extend_from_slice(&segment.prev);
    let hash: [u8; 32] = Sha256::digest(&out).into();
    out.extend_from_slice(&hash);
    (out, hash)
}

/// Reads bytes off the front of a slice, never past its end.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], FormatError> {
        if self.0.len() < n {
            return Err(FormatError::Truncated(what));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], FormatError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N, what)?);
        Ok(a)
    }

    fn u32(&mut self, what: &'static str) -> Result<usize, FormatError> {
        let n = u32::from_be_bytes(self.array(what)?);
        usize::try_from(n).map_err(|_| FormatError::Invalid(format!("{what} {n} is too large")))
    }

    fn i64(&mut self, what: &'static str) -> Result<i64, FormatError> {
        Ok(i64::from_be_bytes(self.array(what)?))
    }

    fn bytes(&mut self, what: &'static str) -> Result<Vec<u8>, FormatError> {
        let n = self.u32(what)?;
        Ok(self.take(n, what)?.to_vec())
    }
}

/// Parses a segment, checking its hash first, then every length against
/// the bytes there are: damage is an error, never a panic.
pub fn parse(bytes: &[u8]) -> Result<(Segment, [u8; 32]), FormatError> {
    if bytes.len() < MAGIC.len() + 64 {
        return Err(FormatError::Truncated("the header and hashes"));
    }
    if &bytes[..MAGIC.len()] != MAGIC {
        return Err(FormatError::Magic);
    }
    let (body, hash) = bytes.split_at(bytes.len() - 32);
    let computed: [u8; 32] = Sha256::digest(body).into();
    if computed.as_slice() != hash {
        return Err(FormatError::Hash);
    }
    let mut r = Reader(&body[MAGIC.len()..body.len() - 32]);
    let prev: [u8; 32] = body[body.len() - 32..]
        .try_into()
        .map_err(|_| FormatError::Truncated("the previous hash"))?;
    let base_len = usize::from(u16::from_be_bytes(r.array("the base name")?));
    let base = std::str::from_utf8(r.take(base_len, "the base name")?)
        .map_err(|_| FormatError::Invalid("the base name is not UTF-8".into()))?
        .to_string();
    let seq = u64::from_be_bytes(r.array("the segment number")?);
    let unix_ms = u64::from_be_bytes(r.array("the time")?);
    let first = r.i64("the first revision")?;
    let last = r.i64("the last revision")?;
    let count = r.u32("the revision count")?;
    let mut revisions = Vec::new();
    for _ in 0..count {
        let revision = r.i64("a revision")?;
        let n = r.u32("an event count")?;
        let mut events = Vec::new();
        for _ in 0..n {
            let kind = r.take(1, "an event kind")?[0];
            let key = r.bytes("a key")?;
            events.push(match kind {
                0 => Event::Put {
                    key,
                    value: r.bytes("a value")?,
                },
                1 => Event::Delete { key },
                k => return Err(FormatError::Invalid(format!("unknown event kind {k}"))),
            });
        }
        if events.is_empty() {
            return Err(FormatError::Invalid(format!(
                "revision {revision} has no events"
            )));
        }
        if revision <= revisions.last().map_or(0, |p: &Revision| p.revision) {
            return Err(FormatError::Invalid(format!(
                "revision {revision} is not after the one before it"
            )));
        }
        revisions.push(Revision { revision, events });
    }
    if !r.0.is_empty() {
        return Err(FormatError::Invalid(format!(
            "{} bytes after the last event",
            r.0.len()
        )));
    }
    let segment = Segment {
        base,
        seq,
        unix_ms,
        revisions,
        prev,
    };
    if segment.revisions.is_empty()
        || segment.first_revision() != first
        || segment.last_revision() != last
    {
        return Err(FormatError::Invalid(format!(
            "its revisions do not match its header ({first} to {last})"
        )));
    }
    let hash = computed;
    Ok((segment, hash))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    pub(crate) fn sample() -> Segment {
        Segment {
            base: "demo-20260101-000000-000".into(),
            seq: 3,
            unix_ms: 1_700_000_000_000,
            revisions: vec![
                Revision {
                    revision: 11,
                    events: vec![Event::Put {
                        key: b"a".to_vec(),
                        value: b"1".to_vec(),
                    }],
                },
                Revision {
                    revision: 12,
                    events: vec![
                        Event::Delete { key: b"a".to_vec() },
                        Event::Put {
                            key: vec![0, 255, 7],
                            value: vec![],
                        },
                    ],
                },
            ],
            prev: chain_start("demo-20260101-000000-000", "abc"),
        }
    }

    #[test]
    fn round_trip() {
        let s = sample();
        let (bytes, hash) = encode(&s);
        let (back, h) = parse(&bytes).expect("parses");
        assert_eq!(back, s);
        assert_eq!(h, hash);
        assert_eq!((back.first_revision(), back.last_revision()), (11, 12));
        assert_eq!(back.events(), 3);
    }

    #[test]
    fn an_empty_segment_is_refused() {
        let mut s = sample();
        s.revisions.clear();
        let (bytes, _) = encode(&s);
        assert!(matches!(parse(&bytes), Err(FormatError::Invalid(_))));
    }

    fn arb_segment() -> impl Strategy<Value = Segment> {
        let event = prop_oneof![
            (
                proptest::collection::vec(any::<u8>(), 0..20),
                proptest::collection::vec(any::<u8>(), 0..40)
            )
                .prop_map(|(key, value)| Event::Put { key, value }),
            proptest::collection::vec(any::<u8>(), 0..20).prop_map(|key| Event::Delete { key }),
        ];
        let revs =
            proptest::collection::vec((1i64..5, proptest::collection::vec(event, 1..4)), 1..6);
        (
            "[a-z0-9-]{1,30}",
            any::<u64>(),
            any::<u64>(),
            revs,
            any::<[u8; 32]>(),
        )
            .prop_map(|(base, seq, unix_ms, revs, prev)| {
                let mut at = 0;
                let revisions = revs
                    .into_iter()
                    .map(|(step, events)| {
                        at += step;
                        Revision {
                            revision: at,
                            events,
                        }
                    })
                    .collect();
                Segment {
                    base,
                    seq,
                    unix_ms,
                    revisions,
                    prev,
                }
            })
    }

    proptest! {
        /// Arbitrary bytes never make the parser panic, and are refused
        /// (a random file passing a SHA-256 check does not happen).
        #[test]
        fn arbitrary_bytes_are_refused_without_panic(
            bytes in proptest::collection::vec(any::<u8>(), 0..400),
            magic in any::<bool>(),
        ) {
            let mut bytes = bytes;
            if magic {
                let mut b = MAGIC.to_vec();
                b.extend_from_slice(&bytes);
                bytes = b;
            }
            prop_assert!(parse(&bytes).is_err());
        }

        /// Any segment round-trips; any one byte flipped, any truncation,
        /// anything appended is refused.
        #[test]
        fn damage_is_refused(s in arb_segment(), at in any::<prop::sample::Index>(), bit in 0u8..8, cut in any::<prop::sample::Index>()) {
            let (bytes, hash) = encode(&s);
            let (back, h) = parse(&bytes).expect("round trip");
            prop_assert_eq!(&back, &s);
            prop_assert_eq!(h, hash);
            let mut flipped = bytes.clone();
            let i = at.index(flipped.len());
            flipped[i] ^= 1 << bit;
            prop_assert!(parse(&flipped).is_err());
            let short = &bytes[..cut.index(bytes.len())];
            prop_assert!(parse(short).is_err());
            let mut long = bytes.clone();
            long.push(0);
            prop_assert!(parse(&long).is_err());
        }

        /// Content whose hash was recomputed (a deliberate forgery or a
        /// bug) is still parsed safely: any bytes after the magic, rehashed,
        /// never panic.
        #[test]
        fn rehashed_garbage_never_panics(body in proptest::collection::vec(any::<u8>(), 0..300)) {
            let mut bytes = MAGIC.to_vec();
            bytes.extend_from_slice(&body);
            let hash: [u8; 32] = Sha256::digest(&bytes).into();
            bytes.extend_from_slice(&hash);
            let _ = parse(&bytes);
        }
    }
}
