//! Backups in an object store (`spec.backup.location.objectStore`): S3 and
//! S3-compatible stores, Google Cloud Storage and Azure Blob Storage,
//! through the `object_store` crate (one client for the three, with
//! multipart uploads, retries and each cloud's credential chain).
//!
//! Here: the checked place ([`ObjectLocation`], parsed from the spec with
//! a message naming the field for anything wrong) and, in [`client`], the
//! few operations the backup store needs (upload a file, download one,
//! list, delete). A backup is laid out as in a folder ([`crate::backup`]):
//! `PREFIX/CLUSTER/NAME.db`, then `NAME.json` written last, so a reader
//! never lists a backup whose snapshot is not complete.

pub mod client;
pub mod env;
pub mod upload;

use std::fmt;

/// Longest accepted `url` (bucket and prefix).
const MAX_URL: usize = 512;
/// Longest accepted `endpoint`.
const MAX_ENDPOINT: usize = 256;

/// Which cloud's protocol a store speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Scheme {
    /// Amazon S3 and S3-compatible stores (`s3://`).
    S3,
    /// Google Cloud Storage (`gs://`).
    Gcs,
    /// Azure Blob Storage (`az://`).
    Azure,
}

/// A checked `objectStore` place.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ObjectLocation {
    /// The protocol.
    pub scheme: Scheme,
    /// The bucket (Azure: the container).
    pub bucket: String,
    /// Key prefix without leading or trailing `/` (empty: the bucket's
    /// root).
    pub prefix: String,
    /// `http(s)://HOST[:PORT]` of an S3-compatible store or an emulator.
    pub endpoint: Option<String>,
    /// S3 region.
    pub region: Option<String>,
    /// The Secret whose keys are the Jobs' environment (Kubernetes).
    pub secret: Option<String>,
    /// The service account the Jobs run as, for a workload identity
    /// (Kubernetes).
    pub service_account: Option<String>,
}

impl fmt::Display for ObjectLocation {
    /// The store's URL, as the spec gives it (never with credentials: the
    /// spec has none); with the endpoint when one is set.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.url())?;
        if let Some(e) = &self.endpoint {
            write!(f, " at {e}")?;
        }
        Ok(())
    }
}

impl ObjectLocation {
    /// Checks `spec` (`field` is where it is, such as
    /// `spec.backup.location.objectStore`): every problem with the field
    /// that has it.
    pub fn parse(
        spec: &crate::crd::ObjectStoreSpec,
        field: &str,
    ) -> Result<Self, Vec<(String, String)>> {
        let mut problems = Vec::new();
        let url = parse_url(&spec.url).map_err(|m| problems.push((format!("{field}.url"), m)));
        let endpoint = match spec.endpoint.as_deref().map(check_endpoint) {
            Some(Err(m)) => {
                problems.push((format!("{field}.endpoint"), m));
                None
            }
            other => other.and_then(Result::ok),
        };
        if let Some(r) = &spec.region
            && let Err(m) = check_region(r)
        {
            problems.push((format!("{field}.region"), m));
        }
        let names = [
            ("credentialsSecret", &spec.credentials_secret),
            ("serviceAccountName", &spec.service_account_name),
        ];
        for (name, value) in names {
            if let Some(Err(m)) = value.as_deref().map(crate::kube_names::check_object_name) {
                problems.push((format!("{field}.{name}"), m));
            }
        }
        match url {
            Ok((scheme, _, _))
                if scheme != Scheme::Azure
                    && endpoint.as_deref().is_some_and(|e| {
                        e.split("://").nth(1).is_some_and(|r| r.contains('/'))
                    }) =>
            {
                Err(vec![(
                    format!("{field}.endpoint"),
                    "has a path: only an Azure emulator's endpoint names its account so \
                     (http://HOST:PORT/ACCOUNT); write https://HOST[:PORT]"
                        .into(),
                )])
            }
            Ok((scheme, bucket, prefix)) if problems.is_empty() => Ok(ObjectLocation {
                scheme,
                bucket,
                prefix,
                endpoint,
                region: spec.region.clone(),
                secret: spec.credentials_secret.clone(),
                service_account: spec.service_account_name.clone(),
            }),
            _ => Err(problems),
        }
    }

    /// `s3://BUCKET[/PREFIX]` (or `gs://`, `az://`), as the spec's `url`.
    pub fn url(&self) -> String {
        let scheme = match self.scheme {
            Scheme::S3 => "s3",
            Scheme::Gcs => "gs",
            Scheme::Azure => "az",
        };
        let mut url = format!("{scheme}://{}", self.bucket);
        if !self.prefix.is_empty() {
            url.push('/');
            url.push_str(&self.prefix);
        }
        url
    }

    /// The key prefix of `cluster`'s backups: `PREFIX/CLUSTER`.
    pub fn cluster_prefix(&self, cluster: &str) -> String {
        if self.prefix.is_empty() {
            cluster.to_string()
        } else {
            format!("{}/{cluster}", self.prefix)
        }
    }
}

/// `s3://BUCKET[/PREFIX]` (or `gs://`, `az://`): (scheme, bucket, prefix).
fn parse_url(url: &str) -> Result<(Scheme, String, String), String> {
    if url.len() > MAX_URL {
        return Err(format!(
            "is {} characters long; at most {MAX_URL}",
            url.len()
        ));
    }
    let (scheme, rest) = url.split_once("://").ok_or_else(|| {
        format!("{url:?} is not a store's URL; write s3://BUCKET/PREFIX, gs://BUCKET/PREFIX or az://CONTAINER/PREFIX")
    })?;
    let scheme = match scheme {
        "s3" => Scheme::S3,
        "gs" => Scheme::Gcs,
        "az" => Scheme::Azure,
        other => {
            return Err(format!(
                "starts with {other:?}://; the stores are s3:// (S3 and S3-compatible), \
                 gs:// (Google Cloud Storage) and az:// (Azure Blob Storage)"
            ));
        }
    };
    if let Some(c) = rest.chars().find(|c| matches!(c, '@' | '?' | '#' | '\\')) {
        return Err(format!(
            "must not hold {c:?}: only the bucket and a prefix (credentials come from the \
             operator's environment, never from the spec)"
        ));
    }
    let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    check_bucket(bucket)?;
    let prefix = prefix.trim_end_matches('/');
    if !prefix.is_empty() {
        for part in prefix.split('/') {
            check_prefix_part(part)?;
        }
    }
    Ok((scheme, bucket.to_string(), prefix.to_string()))
}

/// A bucket (or container) name as all three clouds accept it: 3 to 63
/// lowercase letters, digits, `-` and `.`, starting and ending with a
/// letter or digit.
fn check_bucket(b: &str) -> Result<(), String> {
    let ok_char = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.';
    let edge = |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    if (3..=63).contains(&b.len())
        && b.chars().all(ok_char)
        && edge(b.chars().next())
        && edge(b.chars().last())
        && !b.contains("..")
    {
        Ok(())
    } else {
        Err(format!(
            "bucket {b:?} is not a bucket name: 3 to 63 lowercase letters, digits, '-' and '.', \
             starting and ending with a letter or digit"
        ))
    }
}

/// One `/`-separated part of a prefix: letters, digits, `-`, `_`, `.`,
/// never empty, `.` or `..`.
fn check_prefix_part(p: &str) -> Result<(), String> {
    let ok_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    if p.is_empty() || p == "." || p == ".." || !p.chars().all(ok_char) {
        return Err(format!(
            "prefix part {p:?} is not allowed: parts are letters, digits, '-', '_' and '.', \
             separated by single '/', never '.' or '..'"
        ));
    }
    Ok(())
}

/// `http(s)://HOST[:PORT]`, nothing else (no credentials, path or query).
fn check_endpoint(e: &str) -> Result<String, String> {
    let bad = || {
        format!(
            "{e:?} is not an endpoint; write https://HOST[:PORT] (http:// for a store on the \
             same machine; an Azure emulator's account as its path), with no query or \
             credentials"
        )
    };
    if e.len() > MAX_ENDPOINT {
        return Err(format!(
            "is {} characters long; at most {MAX_ENDPOINT}",
            e.len()
        ));
    }
    let rest = e
        .strip_prefix("https://")
        .or_else(|| e.strip_prefix("http://"))
        .ok_or_else(bad)?;
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    // A path: the account of an Azure emulator (`http://HOST:PORT/ACCOUNT`).
    let (host_port, path) = rest.split_once('/').unwrap_or((rest, ""));
    if !path.is_empty() && path.split('/').any(|p| check_prefix_part(p).is_err()) {
        return Err(bad());
    }
    let (host, port) = match host_port.rsplit_once(':') {
        Some((h, p)) if !h.ends_with(']') || h.starts_with('[') => (h, Some(p)),
        _ => (host_port, None),
    };
    let host_ok = !host.is_empty()
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '[' | ']' | ':'));
    let port_ok = port.is_none_or(|p| p.parse::<u16>().is_ok_and(|n| n > 0));
    if host_ok && port_ok {
        Ok(e.trim_end_matches('/').to_string())
    } else {
        Err(bad())
    }
}

/// A region: 1 to 32 lowercase letters, digits and `-`.
fn check_region(r: &str) -> Result<(), String> {
    if (1..=32).contains(&r.len())
        && r.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    {
        Ok(())
    } else {
        Err(format!(
            "{r:?} is not a region; write one such as us-east-1 (lowercase letters, digits, '-')"
        ))
    }
}

#[cfg(test)]
mod tests;
