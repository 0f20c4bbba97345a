//! A real S3 server for tests: `moto` in server mode (installed into the
//! workspace's `.venv` by ci/setup), on a free port of 127.0.0.1, stopped
//! when dropped (also when a test panics).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use super::server::Served;

/// The credentials tests give the operator (moto accepts any).
pub const ACCESS_KEY: &str = "test-access-key";
/// A secret no log, status or message may ever hold.
pub const SECRET_KEY: &str = "test-secret-never-printed-6f1e";

/// A running S3 server.
#[derive(Debug)]
pub struct S3Server {
    server: Served,
    addr: SocketAddr,
}

/// The moto server of the workspace's `.venv`.
pub fn moto_server() -> PathBuf {
    let bin = Path::new(env!("CARGO_MANIFEST_DIR")).join("../.venv/bin/moto_server");
    assert!(
        bin.is_file(),
        "no moto server at {} (ci/setup installs it: pip install 'moto[server]')",
        bin.display()
    );
    bin
}

/// moto's S3 app for Google Cloud Storage's client: GCS's XML API is its
/// S3-interoperable one (ListObjectsV2, PUT, ranged GET, DELETE, multipart
/// uploads), but the client authenticates with an OAuth bearer token
/// (with a test key's `disable_oauth`, an empty one on writes and none on
/// reads), and moto reads any `Authorization` header as an AWS signature
/// (an empty bearer makes it fail with a 500) and refuses anonymous reads
/// of private objects. The shim gives every request a placeholder AWS
/// signature instead; moto checks no signature.
const GCS_SHIM: &str = r#"
import sys
from werkzeug.serving import run_simple
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
app = DomainDispatcherApplication(create_backend_app)
AWS = "AWS4-HMAC-SHA256 Credential=gcs/20260101/us-east-1/s3/aws4_request, SignedHeaders=host, Signature=0"
def gcs(environ, start_response):
    if environ.get("HTTP_AUTHORIZATION", "Bearer").startswith("Bearer"):
        environ["HTTP_AUTHORIZATION"] = AWS
    return app(environ, start_response)
run_simple(sys.argv[1], int(sys.argv[2]), gcs, threaded=True)
"#;

/// A service account key for tests: `disable_oauth` makes the GCS client
/// send no token (and fetch none); the private key is never used.
pub const GCS_TEST_KEY: &str = r#"{"private_key": "unused-test-key", "private_key_id": "unused", "client_email": "backups@test.invalid", "disable_oauth": true}"#;

impl S3Server {
    /// moto's S3 server answering Google Cloud Storage's client (see
    /// `GCS_SHIM`): a bucket name without '-' or '.' (the client
    /// percent-encodes them, moto does not decode bucket names).
    pub fn start_for_gcs() -> Self {
        let python = moto_server().with_file_name("python");
        Self::serve("moto's S3 app for GCS", move |port: u16| {
            let mut c = Command::new(&python);
            c.args(["-c", GCS_SHIM, "127.0.0.1", &port.to_string()]);
            c
        })
    }

    /// Runs `command(port)` and waits (bounded) until it answers.
    fn serve(what: &str, command: impl FnOnce(u16) -> Command) -> Self {
        let answers = |addr| request(addr, "GET", "/").is_some();
        let server = Served::start(what, command, answers);
        S3Server {
            addr: server.addr(),
            server,
        }
    }

    /// The environment the operator needs to reach [`Self::start_for_gcs`].
    pub fn gcs_credentials(&self) -> Vec<(String, String)> {
        vec![("GOOGLE_SERVICE_ACCOUNT_KEY".into(), GCS_TEST_KEY.into())]
    }

    /// Starts a server and waits (bounded) until it answers.
    pub fn start() -> Self {
        Self::serve("moto_server", |port: u16| {
            let mut c = Command::new(moto_server());
            c.args(["-H", "127.0.0.1", "-p", &port.to_string()]);
            c
        })
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Creates bucket `name`.
    pub fn create_bucket(&self, name: &str) {
        let status = request(self.addr, "PUT", &format!("/{name}"));
        assert_eq!(status, Some(200), "creating bucket {name}");
    }

    /// The environment the operator needs to reach this server.
    pub fn credentials(&self) -> Vec<(String, String)> {
        vec![
            ("AWS_ACCESS_KEY_ID".into(), ACCESS_KEY.into()),
            ("AWS_SECRET_ACCESS_KEY".into(), SECRET_KEY.into()),
            ("AWS_REGION".into(), "us-east-1".into()),
        ]
    }

    /// Stops the server answering, keeping its data, until
    /// [`Self::resume`] (or the end of the test).
    pub fn pause(&self) {
        self.server.pause();
    }

    /// Lets a paused server answer again.
    pub fn resume(&self) {
        self.server.resume();
    }

    /// The multipart uploads begun and neither completed nor aborted in
    /// `bucket` (S3's ListMultipartUploads), as their keys.
    pub fn unfinished_uploads(&self, bucket: &str) -> Vec<String> {
        let body = get(self.addr, &format!("/{bucket}?uploads")).unwrap_or_default();
        body.split("<Key>")
            .skip(1)
            .filter_map(|rest| rest.split_once("</Key>").map(|(k, _)| k.to_string()))
            .collect()
    }

    /// Stops the server (the store goes away; its data with it).
    pub fn stop(&mut self) {
        self.server.stop();
    }
}

/// One HTTP/1.0 request without a body to `addr`: the status code, if any
/// came.
fn request(addr: SocketAddr, method: &str, path: &str) -> Option<u16> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(
        s,
        "{method} {path} HTTP/1.0\r\nHost: {addr}\r\nContent-Length: 0\r\n\r\n"
    )
    .ok()?;
    let mut head = [0u8; 12];
    s.read_exact(&mut head).ok()?;
    std::str::from_utf8(&head[9..12]).ok()?.parse().ok()
}

/// The body of a GET of `path` from `addr`, when it answered 200.
fn get(addr: SocketAddr, path: &str) -> Option<String> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").ok()?;
    let mut answer = String::new();
    s.read_to_string(&mut answer).ok()?;
    let (head, body) = answer.split_once("\r\n\r\n")?;
    (head.starts_with("HTTP/1.0 200") || head.starts_with("HTTP/1.1 200")).then(|| body.to_string())
}
