//! `spec.standby`: whose standby a cluster is and where that cluster's
//! backups are.

use std::path::PathBuf;

use super::{RestoreFrom, check_name};
use crate::backup::object::ObjectLocation;
use crate::crd::EtcdClusterSpec;

/// A checked `spec.standby`.
#[derive(Clone, Debug, PartialEq)]
pub struct Standby {
    /// The source cluster and where its backups are (`until` unset).
    pub from: RestoreFrom,
    /// Promote (stop following).
    pub promote: bool,
    /// Follow the source live from these members (`spec.standby.stream`).
    pub stream: Option<Stream>,
    /// What to do at a gap in the source's chains (`spec.standby.onGap`).
    pub on_gap: crate::crd::OnGap,
}

/// A checked `spec.standby.stream`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stream {
    /// The source members' client URLs.
    pub endpoints: Vec<String>,
    /// The folder with `ca.crt`, `tls.crt` and `tls.key`, for `https://`.
    pub tls_path: Option<PathBuf>,
}

/// Most endpoints a stream names (as many as a cluster has members).
const MAX_ENDPOINTS: usize = 9;

/// `http(s)://HOST:PORT`: a member's client URL, nothing more.
pub fn check_endpoint(e: &str) -> Result<(), String> {
    let bad = |why: &str| {
        format!(
            "{e:?} {why}; write a source member's client URL as http://HOST:PORT or \
             https://HOST:PORT (etcd-operator status SOURCE lists them)"
        )
    };
    let rest = e
        .strip_prefix("https://")
        .or_else(|| e.strip_prefix("http://"))
        .ok_or_else(|| bad("is not an http:// or https:// URL"))?;
    let Some((host, port)) = rest.rsplit_once(':') else {
        return Err(bad("has no port"));
    };
    let host_ok = !host.is_empty()
        && host.len() <= 253
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '[' | ']' | ':'));
    if !host_ok {
        return Err(bad("has no host name or address before its port"));
    }
    if !port.parse::<u16>().is_ok_and(|p| p > 0) {
        return Err(bad(
            "has a port that is not a number from 1 to 65535 (or a path)",
        ));
    }
    Ok(())
}

/// Checks `spec.standby.stream`, one error per problem.
fn stream(s: &crate::crd::StandbyStream, err: &mut impl FnMut(&str, String)) -> Option<Stream> {
    let mut ok = true;
    if s.endpoints.is_empty() || s.endpoints.len() > MAX_ENDPOINTS {
        err(
            "spec.standby.stream.endpoints",
            format!(
                "names {} endpoints; name 1 to {MAX_ENDPOINTS} of the source's members",
                s.endpoints.len()
            ),
        );
        ok = false;
    }
    for (i, e) in s.endpoints.iter().enumerate() {
        if let Err(m) = check_endpoint(e) {
            err(&format!("spec.standby.stream.endpoints[{i}]"), m);
            ok = false;
        }
    }
    let https = s
        .endpoints
        .iter()
        .filter(|e| e.starts_with("https://"))
        .count();
    if https > 0 && https < s.endpoints.len() {
        err(
            "spec.standby.stream.endpoints",
            "mixes http:// and https://; the members of one cluster answer one way".into(),
        );
        ok = false;
    }
    let tls_path = s
        .tls_path
        .as_deref()
        .map(str::trim)
        .filter(|p| !p.is_empty());
    match (https > 0, tls_path) {
        (true, None) => {
            err(
                "spec.standby.stream.tlsPath",
                "is needed for https:// endpoints: an absolute path to a folder with ca.crt, \
                 tls.crt and tls.key (a client certificate the source's members accept)"
                    .into(),
            );
            ok = false;
        }
        (false, Some(_)) => {
            err(
                "spec.standby.stream.tlsPath",
                "is only for https:// endpoints; drop it, or write the endpoints as https://"
                    .into(),
            );
            ok = false;
        }
        (_, Some(p)) if !std::path::Path::new(p).is_absolute() || p.contains("/../") => {
            err(
                "spec.standby.stream.tlsPath",
                format!("{p:?} is not an absolute path to a folder; write /path/to/folder"),
            );
            ok = false;
        }
        _ => {}
    }
    ok.then(|| Stream {
        endpoints: s.endpoints.clone(),
        tls_path: tls_path.map(PathBuf::from),
    })
}

impl Standby {
    /// The source cluster.
    pub fn source(&self) -> &str {
        self.from.cluster.as_deref().unwrap_or_default()
    }
}

/// Checks `spec.standby` of the cluster `name`, one error per problem.
pub(super) fn check(
    name: &str,
    spec: &EtcdClusterSpec,
    err: &mut impl FnMut(&str, String),
) -> Option<Standby> {
    let s = spec.standby.as_ref()?;
    let cluster = s.cluster.trim();
    let mut ok = true;
    if let Err(e) = check_name(cluster) {
        err("spec.standby.cluster", e);
        ok = false;
    } else if cluster == name {
        err(
            "spec.standby.cluster",
            format!(
                "names this cluster itself ({name}); a standby follows another cluster: name \
                 the source (the primary)"
            ),
        );
        ok = false;
    }
    if spec.restore.is_some() {
        err(
            "spec.standby",
            "a standby is created from its source's newest backup; drop spec.restore (or \
             spec.standby, to restore one backup and go on alone)"
                .into(),
        );
        ok = false;
    }
    if let Some(l) = &s.location {
        let mut bad = false;
        super::restore::location(l, "spec.standby.location", &mut |f, m| {
            bad = true;
            err(f, m);
        });
        if l.persistent_volume_claim.is_some() {
            err(
                "spec.standby.location.persistentVolumeClaim",
                "a standby follows its source from a folder or an object store; name the \
                 source's objectStore (or, on the local platform, its path)"
                    .into(),
            );
            bad = true;
        }
        ok &= !bad;
    }
    let stream = match &s.stream {
        Some(st) => {
            let checked = stream(st, err);
            ok &= checked.is_some();
            checked
        }
        None => None,
    };
    if !ok {
        return None;
    }
    let location = s.location.as_ref();
    Some(Standby {
        from: RestoreFrom {
            cluster: Some(cluster.to_string()),
            path: location.and_then(|l| l.path.clone()).map(PathBuf::from),
            claim: None,
            object: location
                .and_then(|l| l.object_store.as_ref())
                .and_then(|o| ObjectLocation::parse(o, "spec.standby.location.objectStore").ok()),
            until: None,
        },
        promote: s.promote,
        stream,
        on_gap: s.on_gap,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::{StandbySpec, StandbyStream};

    fn spec(stream: Option<StandbyStream>) -> EtcdClusterSpec {
        let mut spec = EtcdClusterSpec::minimal(1, "3.4.23");
        spec.standby = Some(StandbySpec {
            cluster: "src".into(),
            stream,
            ..StandbySpec::default()
        });
        spec
    }

    fn errors(stream: StandbyStream) -> Vec<(String, String)> {
        let mut out = Vec::new();
        let got = check("dr", &spec(Some(stream)), &mut |f, m| {
            out.push((f.to_string(), m));
        });
        assert_eq!(got.is_some(), out.is_empty(), "{out:?}");
        out
    }

    fn stream(endpoints: &[&str], tls_path: Option<&str>) -> StandbyStream {
        StandbyStream {
            endpoints: endpoints.iter().map(|e| (*e).to_string()).collect(),
            tls_path: tls_path.map(String::from),
        }
    }

    #[test]
    fn a_stream_of_members_urls_is_taken() {
        let ok = stream(&["http://127.0.0.1:2379", "http://127.0.0.2:2379"], None);
        assert!(errors(ok).is_empty());
        let tls = stream(&["https://etcd-0.example:2379"], Some("/etc/dr/source-tls"));
        assert!(errors(tls).is_empty());
        let mut out = Vec::new();
        let s = check(
            "dr",
            &spec(Some(stream(&["http://10.0.0.1:2379"], None))),
            &mut |f, m| {
                out.push((f.to_string(), m));
            },
        );
        let s = s.expect("valid");
        assert_eq!(
            s.stream.map(|s| s.endpoints),
            Some(vec!["http://10.0.0.1:2379".into()])
        );
    }

    #[test]
    fn a_bad_stream_is_refused_by_field() {
        let cases: Vec<(StandbyStream, &str, &str)> = vec![
            (stream(&[], None), "spec.standby.stream.endpoints", "1 to 9"),
            (
                stream(&["127.0.0.1:2379"], None),
                "spec.standby.stream.endpoints[0]",
                "http://",
            ),
            (
                stream(&["http://127.0.0.1"], None),
                "spec.standby.stream.endpoints[0]",
                "no port",
            ),
            (
                stream(&["http://127.0.0.1:2379/v3"], None),
                "spec.standby.stream.endpoints[0]",
                "port",
            ),
            (
                stream(&["http://a;rm -rf /:2379"], None),
                "spec.standby.stream.endpoints[0]",
                "host",
            ),
            (
                stream(&["https://a:1"], None),
                "spec.standby.stream.tlsPath",
                "is needed",
            ),
            (
                stream(&["http://a:1"], Some("/x")),
                "spec.standby.stream.tlsPath",
                "only for",
            ),
            (
                stream(&["https://a:1"], Some("certs")),
                "spec.standby.stream.tlsPath",
                "absolute",
            ),
            (
                stream(&["https://a:1", "http://b:1"], Some("/x")),
                "spec.standby.stream.endpoints",
                "mixes",
            ),
        ];
        for (s, field, says) in cases {
            let errs = errors(s.clone());
            assert!(
                errs.iter().any(|(f, m)| f == field && m.contains(says)),
                "{s:?}: {errs:?}"
            );
        }
    }

    proptest::proptest! {
        /// Whatever the text, an endpoint taken is `http(s)://HOST:PORT`
        /// with a port from 1 up and nothing a shell or a path would read.
        #[test]
        fn an_endpoint_taken_is_a_url_with_a_port(e in "(https?://)?[a-z0-9.:;/ \\[\\]-]{0,30}") {
            if check_endpoint(&e).is_ok() {
                let rest = e.split_once("://").map(|(_, r)| r).unwrap_or_default();
                let (host, port) = rest.rsplit_once(':').unwrap_or_default();
                proptest::prop_assert!(!host.is_empty());
                proptest::prop_assert!(port.parse::<u16>().is_ok_and(|p| p > 0));
                proptest::prop_assert!(!e.contains([';', ' ', '/']) || e.matches('/').count() == 2);
            }
        }
    }
}
