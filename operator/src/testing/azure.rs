//! A real Azure Blob Storage emulator for tests: Azurite (npm, installed
//! into the workspace's `.node` by ci/setup), its blob service on a free
//! port of 127.0.0.1 with its data in a temporary folder, stopped when
//! dropped (also when a test panics).

use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use super::server::Served;

/// Azurite's well-known development account.
pub const ACCOUNT: &str = "devstoreaccount1";
/// ... and its well-known key (public: Azurite's documentation has it).
pub const ACCOUNT_KEY: &str =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

/// Creates a container with a SharedKey-signed request (Azurite refuses
/// anonymous ones): python3's standard library only.
const CREATE_CONTAINER: &str = r#"
import base64, hmac, hashlib, sys, http.client, email.utils
port, acct, key, container = sys.argv[1], sys.argv[2], base64.b64decode(sys.argv[3]), sys.argv[4]
date, ver = email.utils.formatdate(usegmt=True), "2021-08-06"
sts = "PUT\n" + "\n" * 11 + f"x-ms-date:{date}\nx-ms-version:{ver}\n/{acct}/{acct}/{container}\nrestype:container"
sig = base64.b64encode(hmac.new(key, sts.encode(), hashlib.sha256).digest()).decode()
c = http.client.HTTPConnection("127.0.0.1", int(port), timeout=10)
c.request("PUT", f"/{acct}/{container}?restype=container", body=b"",
          headers={"x-ms-date": date, "x-ms-version": ver, "Authorization": f"SharedKey {acct}:{sig}"})
status = c.getresponse().status
sys.exit(0 if status in (201, 409) else status)
"#;

/// A running Azurite blob service.
#[derive(Debug)]
pub struct Azurite {
    /// Killed on drop, before its data folder goes.
    _server: Served,
    addr: SocketAddr,
    _data: tempfile::TempDir,
}

/// Azurite's blob service in the workspace's `.node`.
pub fn azurite_blob() -> PathBuf {
    let bin = Path::new(env!("CARGO_MANIFEST_DIR")).join("../.node/node_modules/.bin/azurite-blob");
    assert!(
        bin.is_file(),
        "no Azurite at {} (ci/setup installs it: npm install azurite)",
        bin.display()
    );
    bin
}

impl Azurite {
    /// Starts the blob service and waits (bounded) until it accepts
    /// connections.
    pub fn start() -> Self {
        let data = tempfile::tempdir().expect("a data folder");
        let command = |port: u16| {
            let mut c = Command::new(azurite_blob());
            c.args(["--blobHost", "127.0.0.1", "--blobPort", &port.to_string()])
                .arg("--location")
                .arg(data.path())
                .args(["--skipApiVersionCheck", "--silent"]);
            c
        };
        let listens = |addr| TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_ok();
        let server = Served::start("azurite-blob", command, listens);
        Azurite {
            addr: server.addr(),
            _server: server,
            _data: data,
        }
    }

    /// The endpoint a spec names: `http://127.0.0.1:PORT/ACCOUNT`.
    pub fn endpoint(&self) -> String {
        format!("http://{}/{ACCOUNT}", self.addr)
    }

    /// Creates container `name`.
    pub fn create_container(&self, name: &str) {
        let deadline = Instant::now() + super::WAIT;
        loop {
            let status = Command::new("python3")
                .arg("-c")
                .arg(CREATE_CONTAINER)
                .args([&self.addr.port().to_string(), ACCOUNT, ACCOUNT_KEY, name])
                .status()
                .expect("run python3");
            if status.success() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "creating container {name}: {status}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// The environment the operator needs to reach this service.
    pub fn credentials(&self) -> Vec<(String, String)> {
        vec![
            ("AZURE_STORAGE_ACCOUNT_NAME".into(), ACCOUNT.into()),
            ("AZURE_STORAGE_ACCOUNT_KEY".into(), ACCOUNT_KEY.into()),
        ]
    }
}
