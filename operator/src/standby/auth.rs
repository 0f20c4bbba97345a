//! Read-only while standby: etcd has no read-only mode, so a standby runs
//! with etcd's auth on. `root` (role `root`, its password known to the
//! operator only) is the applier's, and the only user that may write;
//! clients read as [`READER`], whose role [`READ_ROLE`] may read every key
//! and write none. A write without credentials is refused ("user name is
//! empty"), and one as the reader too ("permission denied").
//!
//! Turning auth on changes neither the KV revision nor `HashKV` (users and
//! roles are kept apart from the keys), so the standby stays revision for
//! revision its source's. Each step is idempotent, so an operator stopped
//! half way finishes on its next pass; whether auth is on is asked of etcd
//! itself (an unauthenticated read is refused while it is: 3.4 has no
//! `AuthStatus`, and 3.5 answers it to root only). A member added later
//! gets users, roles and the switch through raft. Promoting turns auth off
//! ([`disable`]): the cluster then takes everyone's writes.

use etcd_client::{Client, GetOptions, Permission};

use crate::backup::{Candidate, Source, replay};
use crate::etcd::Credentials;

/// The operator's user, role `root`.
pub const ROOT: &str = "root";
/// The role of [`ROOT`].
const ROOT_ROLE: &str = "root";
/// The user clients read a standby as.
pub const READER: &str = "reader";
/// The reader's role: read every key (from key `\0` on), write none.
pub const READ_ROLE: &str = "standby-read";

/// The standby's credentials, from the platform.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Secrets {
    /// The operator's (the applier writes as root).
    pub root: Credentials,
    /// Clients'.
    pub reader: Credentials,
    /// Where a user reads the reader's password.
    pub reader_place: PasswordPlace,
}

/// Where a user reads a standby's password: one place, by platform.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PasswordPlace {
    /// A file of the operator's state folder (local platform).
    File(String),
    /// A key of a Secret in the cluster's namespace (Kubernetes).
    Secret(crate::crd::SecretKey),
}

impl PasswordPlace {
    /// Says it in `status`: the file or the Secret, the other unset.
    pub fn show(&self, status: &mut crate::crd::StandbyStatus) {
        let (file, secret) = match self {
            PasswordPlace::File(f) => (Some(f.clone()), None),
            PasswordPlace::Secret(s) => (None, Some(s.clone())),
        };
        status.read_password_file = file;
        status.read_password_secret = secret;
    }
}

/// How long a member's signed token lasts (clients authenticate again
/// after).
pub const JWT_TTL: &str = "10m";

/// The `--auth-token` flag of a standby's members: tokens signed (JWT,
/// ES256) with the key at `private`, checked with `public` (etcd takes no
/// comma in either path).
pub fn token_flag(public: &str, private: &str) -> [String; 2] {
    [
        "--auth-token".into(),
        format!("jwt,pub-key={public},priv-key={private},sign-method=ES256,ttl={JWT_TTL}"),
    ]
}

/// A failed step of turning auth on or off.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{member}: {step}: {message}")]
pub struct Error {
    /// The standby's member asked.
    pub member: String,
    /// What was being done.
    pub step: &'static str,
    /// What etcd (or the connection) said.
    pub message: String,
}

/// Whether an answer of etcd says its auth is on and the request carried
/// no (or no valid) credentials.
fn refused_for_auth(text: &str) -> bool {
    [
        "user name is empty",
        "permission denied",
        "invalid auth token",
    ]
    .iter()
    .any(|k| text.contains(k))
}

/// Whether etcd's auth is on in the cluster of `member`, asked without
/// credentials (a count of the keys).
pub async fn is_on(member: &Candidate) -> Result<bool, Error> {
    let mut client = connect(member, None, "connecting").await?;
    let asked = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        client.get(vec![0u8], Some(GetOptions::new().with_count_only())),
    )
    .await;
    match asked {
        Ok(Ok(_)) => Ok(false),
        Ok(Err(e)) if refused_for_auth(&e.to_string()) => Ok(true),
        Ok(Err(e)) => Err(fail(member, "asking whether auth is on", e.to_string())),
        Err(_) => Err(fail(
            member,
            "asking whether auth is on",
            "no answer".into(),
        )),
    }
}

/// Turns auth on unless it is: the users and roles first, then the switch.
/// Returns whether it was off.
pub async fn enable(member: &Candidate, secrets: &Secrets) -> Result<bool, Error> {
    if is_on(member).await? {
        return Ok(false);
    }
    let mut c = connect(member, None, "connecting").await?;
    let step = |step: &'static str| move |e: etcd_client::Error| fail(member, step, e.to_string());
    user(&mut c, &secrets.root)
        .await
        .map_err(step("adding user root"))?;
    done(c.role_add(ROOT_ROLE).await).map_err(step("adding role root"))?;
    done(c.user_grant_role(ROOT, ROOT_ROLE).await).map_err(step("granting root"))?;
    done(c.role_add(READ_ROLE).await).map_err(step("adding the read role"))?;
    let everything = Permission::read(vec![0u8]).with_from_key();
    done(c.role_grant_permission(READ_ROLE, everything).await)
        .map_err(step("letting the read role read every key"))?;
    user(&mut c, &secrets.reader)
        .await
        .map_err(step("adding the reader"))?;
    done(c.user_grant_role(READER, READ_ROLE).await).map_err(step("granting the reader"))?;
    done(c.auth_enable().await).map_err(step("turning auth on"))?;
    Ok(true)
}

/// Turns auth off as `root` unless it is off: the cluster takes
/// everyone's writes. Returns whether it was on.
pub async fn disable(member: &Candidate, root: &Credentials) -> Result<bool, Error> {
    if !is_on(member).await? {
        return Ok(false);
    }
    let mut c = connect(member, Some(root), "connecting as root").await?;
    c.auth_disable()
        .await
        .map_err(|e| fail(member, "turning auth off", e.to_string()))?;
    Ok(true)
}

/// The standby's revision, as its member says: asked as `root` while
/// etcd's auth is on, without credentials once it is off.
pub async fn revision(member: &Candidate, root: &Credentials) -> Result<i64, Error> {
    let on = is_on(member).await?;
    let mut c = connect(member, on.then_some(root), "connecting").await?;
    replay::head(&mut c)
        .await
        .map(|(r, _)| r)
        .map_err(|e| fail(member, "reading its revision", e))
}

/// Adds `who` with its password, or sets the password of the user there.
async fn user(c: &mut Client, who: &Credentials) -> Result<(), etcd_client::Error> {
    match c.user_add(who.user(), who.password(), None).await {
        Ok(_) => Ok(()),
        Err(e) if already(&e) => c
            .user_change_password(who.user(), who.password())
            .await
            .map(|_| ()),
        Err(e) => Err(e),
    }
}

/// A step's answer, with "already there" taken as done.
fn done<T>(r: Result<T, etcd_client::Error>) -> Result<(), etcd_client::Error> {
    match r {
        Err(e) if !already(&e) => Err(e),
        _ => Ok(()),
    }
}

fn already(e: &etcd_client::Error) -> bool {
    e.to_string().contains("already")
}

async fn connect(
    (member, url, tls): &Candidate,
    auth: Option<&Credentials>,
    step: &'static str,
) -> Result<Client, Error> {
    let source = Source {
        member,
        url,
        tls: tls.as_ref(),
    };
    replay::connect(source, auth)
        .await
        .map_err(|message| Error {
            member: member.clone(),
            step,
            message,
        })
}

fn fail(member: &Candidate, step: &'static str, message: String) -> Error {
    Error {
        member: member.0.clone(),
        step,
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_refusals_of_an_auth_on_cluster_are_told_apart() {
        assert!(refused_for_auth(
            "grpc request error: status: InvalidArgument, message: \"etcdserver: user name is \
             empty\""
        ));
        assert!(refused_for_auth("etcdserver: permission denied"));
        assert!(!refused_for_auth("transport error"));
    }
}
