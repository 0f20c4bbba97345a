//! The credentials the operator sends to members with etcd's auth on (a
//! standby's, [`crate::standby::auth`]), and the one place that turns how a
//! member is reached (its TLS files, its credentials) into connect options.

use etcd_client::ConnectOptions;

use crate::tls::ClientTls;

/// A user name and its password. `Debug` never shows the password.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    user: String,
    password: String,
}

impl Credentials {
    /// `user` with `password`.
    pub fn new(user: impl Into<String>, password: impl Into<String>) -> Self {
        Credentials {
            user: user.into(),
            password: password.into(),
        }
    }

    /// The user name.
    pub fn user(&self) -> &str {
        &self.user
    }

    /// The password.
    pub fn password(&self) -> &str {
        &self.password
    }
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("user", &self.user)
            .field("password", &"<hidden>")
            .finish()
    }
}

/// `opts` with how the member at `url` is reached: `tls` for an
/// `https://` URL, and `auth` (the client authenticates when it connects,
/// and again by itself when its token expires). Credentials must only be
/// sent while auth is on: etcd refuses to authenticate anyone otherwise.
pub fn reach(
    opts: ConnectOptions,
    url: &str,
    tls: Option<&ClientTls>,
    auth: Option<&Credentials>,
) -> ConnectOptions {
    let mut opts = opts;
    if let Some(tls) = tls.filter(|_| crate::tls::is_https(url)) {
        opts = opts.with_tls(tls.options());
    }
    if let Some(c) = auth {
        opts = opts.with_user(c.user(), c.password());
    }
    opts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_hides_the_password() {
        let c = Credentials::new("root", "s3cret-pw");
        let shown = format!("{c:?}");
        assert!(
            shown.contains("root") && !shown.contains("s3cret-pw"),
            "{shown}"
        );
    }
}
