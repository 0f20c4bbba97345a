//! Latency and loss on loopback with `tc netem`, for marked packets only.
//!
//! Loopback is one device, `lo`, shared by everything on the machine. The
//! monkey gives it a `prio` root qdisc (handle `c0de:`, 16 bands) whose
//! priomap sends every packet to band 0, a plain FIFO that never holds
//! anything back (loopback sends at once); nothing is slowed by it. A fault
//! takes one of the bands 2 to 16 (classes `c0de:2` to `c0de:16`), puts a
//! netem qdisc on it, and adds an `fw` filter that sends the packets its
//! iptables rules marked into that band. The root goes away with the last
//! band. Monkeys on the same machine share the root: a lock file
//! serialises the changes.

use std::fs::File;
use std::time::Duration;

use rustix::fs::{FlockOperation, flock};

use super::Error;
use super::sys::cmd;

/// The root qdisc's handle.
pub const ROOT: &str = "c0de:";
/// The bands a fault may take (prio classes; class 1 is band 0).
const BANDS: std::ops::RangeInclusive<u8> = 2..=16;
const LOCK: &str = "/run/lock/chaos-monkey-tc.lock";

/// What the netem qdisc of a band does.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Netem {
    /// Added latency.
    pub latency: Duration,
    /// Its random variation.
    pub jitter: Duration,
    /// Packets dropped, percent (0: none).
    pub loss_percent: f64,
}

impl Netem {
    /// netem's arguments.
    pub fn args(&self) -> Vec<String> {
        let mut a = Vec::new();
        if !self.latency.is_zero() || !self.jitter.is_zero() {
            a.push("delay".into());
            a.push(format!("{}us", self.latency.as_micros()));
            if !self.jitter.is_zero() {
                a.push(format!("{}us", self.jitter.as_micros()));
            }
        }
        if self.loss_percent > 0.0 {
            a.push("loss".into());
            a.push(format!("{}%", self.loss_percent));
        }
        a
    }
}

fn netem_handle(band: u8) -> String {
    format!("{:x}:", 0xc000 + u16::from(band))
}

fn class(band: u8) -> String {
    format!("{ROOT}{band:x}")
}

/// Holds the lock until dropped.
struct Locked {
    _file: File,
}

fn lock() -> Result<Locked, Error> {
    let io = |what: &str| {
        let what = what.to_string();
        move |source| Error::Io { what, source }
    };
    let _ = std::fs::create_dir_all("/run/lock");
    let f = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(LOCK)
        .map_err(io(&format!("cannot open {LOCK}")))?;
    flock(&f, FlockOperation::LockExclusive).map_err(|e| Error::Io {
        what: format!("cannot lock {LOCK}"),
        source: e.into(),
    })?;
    Ok(Locked { _file: f })
}

/// The root qdisc line of `lo` and the bands holding a netem qdisc.
fn show() -> Result<(String, Vec<u8>), Error> {
    let text = cmd("tc", &["qdisc", "show", "dev", "lo"])?;
    let root = text
        .lines()
        .find(|l| l.contains(" root "))
        .unwrap_or_default()
        .to_string();
    Ok((root, netem_bands(&text)))
}

/// Bands of our root that hold a netem qdisc, from `tc qdisc show`.
pub fn netem_bands(text: &str) -> Vec<u8> {
    text.lines()
        .filter(|l| l.starts_with("qdisc netem "))
        .filter_map(|l| {
            let parent = l.split_whitespace().skip_while(|w| *w != "parent").nth(1)?;
            let band = parent.strip_prefix(ROOT)?;
            u8::from_str_radix(band, 16).ok()
        })
        .collect()
}

/// Whether `lo`'s root qdisc is ours (or there is none to speak of).
fn root_state(root: &str) -> Result<bool, Error> {
    if root.contains(&format!("prio {ROOT}")) {
        return Ok(true);
    }
    if root.is_empty() || root.starts_with("qdisc noqueue") {
        return Ok(false);
    }
    Err(Error::Missing(format!(
        "lo already has a root qdisc the monkey did not add ({root}); remove it \
         (tc qdisc del dev lo root) or run without delay and loss"
    )))
}

/// Kernel options latency needs.
const KERNEL: [&str; 3] = [
    "CONFIG_NET_SCH_NETEM",
    "CONFIG_NET_SCH_PRIO",
    "CONFIG_NET_CLS_FW",
];

/// The options of [`KERNEL`] that the running kernel's configuration
/// (`/proc/config.gz`) says are missing; empty when it cannot be read.
fn kernel_missing() -> Vec<&'static str> {
    let Ok(config) = super::sys::cmd("zcat", &["/proc/config.gz"]) else {
        return Vec::new();
    };
    KERNEL
        .into_iter()
        .filter(|opt| {
            !config
                .lines()
                .any(|l| l == format!("{opt}=y") || l == format!("{opt}=m"))
        })
        .collect()
}

/// Checks that the kernel has netem, prio and fw, and that `lo` can take
/// our root (nothing foreign there).
pub fn check() -> Result<(), Error> {
    let missing = kernel_missing();
    if !missing.is_empty() {
        return Err(Error::Missing(format!(
            "--fault delay needs tc netem, and this kernel is built without {} (see /proc/config.gz); it cannot be injected on this machine",
            missing.join(", ")
        )));
    }
    let (root, _) = show()?;
    root_state(&root).map(|_| ())
}

/// Puts `netem` on a free band for packets marked `mark`; returns the band.
pub fn add(mark: u32, netem: &Netem) -> Result<u8, Error> {
    let _lock = lock()?;
    let (root, used) = show()?;
    if !root_state(&root)? {
        let mut args = vec![
            "qdisc", "add", "dev", "lo", "root", "handle", ROOT, "prio", "bands", "16", "priomap",
        ];
        args.extend(["0"; 16]);
        cmd("tc", &args)?;
    }
    let Some(band) = BANDS.clone().find(|b| !used.contains(b)) else {
        return Err(Error::Busy(format!(
            "every tc band on lo is taken ({} delay or loss faults at once)",
            BANDS.count()
        )));
    };
    let mut args: Vec<String> = [
        "qdisc",
        "add",
        "dev",
        "lo",
        "parent",
        &class(band),
        "handle",
        &netem_handle(band),
        "netem",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(netem.args());
    super::sys::run("tc", &args)?;
    let filter = cmd(
        "tc",
        &[
            "filter",
            "add",
            "dev",
            "lo",
            "parent",
            ROOT,
            "protocol",
            "ip",
            "prio",
            &band.to_string(),
            "handle",
            &format!("{mark:#x}"),
            "fw",
            "classid",
            &class(band),
        ],
    );
    if let Err(e) = filter {
        let _ = remove_locked(band);
        return Err(e);
    }
    Ok(band)
}

/// Removes the filter and netem qdisc of `band` (and the root with the last
/// band). Missing pieces are fine: removing twice is no error.
pub fn remove(band: u8) -> Result<(), Error> {
    let _lock = lock()?;
    remove_locked(band)
}

fn remove_locked(band: u8) -> Result<(), Error> {
    let (root, used) = show()?;
    if !root_state(&root).unwrap_or(false) {
        return Ok(());
    }
    let filters = cmd("tc", &["filter", "show", "dev", "lo", "parent", ROOT])?;
    if filter_prios(&filters).contains(&band) {
        cmd(
            "tc",
            &[
                "filter",
                "del",
                "dev",
                "lo",
                "parent",
                ROOT,
                "protocol",
                "ip",
                "prio",
                &band.to_string(),
            ],
        )?;
    }
    if used.contains(&band) {
        cmd("tc", &["qdisc", "del", "dev", "lo", "parent", &class(band)])?;
    }
    let (_, used) = show()?;
    let filters = cmd("tc", &["filter", "show", "dev", "lo", "parent", ROOT])?;
    if used.is_empty() && filter_prios(&filters).is_empty() {
        cmd("tc", &["qdisc", "del", "dev", "lo", "root", "handle", ROOT])?;
    }
    Ok(())
}

/// Filter priorities (= bands) in `tc filter show` output.
pub fn filter_prios(text: &str) -> Vec<u8> {
    let mut out: Vec<u8> = text
        .lines()
        .filter_map(|l| {
            let pref = l.split_whitespace().skip_while(|w| *w != "pref").nth(1)?;
            pref.parse().ok()
        })
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn netem_arguments() {
        let n = Netem {
            latency: Duration::from_millis(200),
            jitter: Duration::from_millis(50),
            loss_percent: 0.0,
        };
        assert_eq!(n.args(), ["delay", "200000us", "50000us"]);
        let l = Netem {
            latency: Duration::ZERO,
            jitter: Duration::ZERO,
            loss_percent: 30.0,
        };
        assert_eq!(l.args(), ["loss", "30%"]);
        assert_eq!(netem_handle(16), "c010:");
        assert_eq!(class(16), "c0de:10");
    }

    #[test]
    fn parses_what_tc_prints() {
        let q = "qdisc prio c0de: root refcnt 2 bands 16 priomap 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n\
                 qdisc netem c002: parent c0de:2 limit 1000 delay 200ms  50ms\n\
                 qdisc netem c010: parent c0de:10 limit 1000 loss 30%\n\
                 qdisc netem 8001: parent 1:3 limit 1000\n";
        assert_eq!(netem_bands(q), [2, 16]);
        assert!(root_state(q.lines().next().expect("line")).expect("ours"));
        assert!(!root_state("qdisc noqueue 0: root refcnt 2").expect("free"));
        assert!(root_state("qdisc fq_codel 0: root refcnt 2 limit 10240p").is_err());
        let f = "filter protocol ip pref 2 fw chain 0 \n\
                 filter protocol ip pref 2 fw chain 0 handle 0xc0012301 classid c0de:2 \n\
                 filter protocol ip pref 16 fw chain 0 handle 0xc0012302 classid c0de:10 \n";
        assert_eq!(filter_prios(f), [2, 16]);
    }
}
