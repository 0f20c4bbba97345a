//! Why a member failed, read from the end of its etcd log (a local log
//! file, or a pod's termination message).

/// The reason etcd gave for failing, from the end of its log: a Go panic
/// line, else the last zap line at error level or above ("message:
/// error"), else the last plain line that is not part of a stack trace
/// (flag errors are printed that way).
pub fn failure_hint(log: &str) -> Option<String> {
    let lines: Vec<&str> = log
        .lines()
        .map(str::trim_end)
        .filter(|l| !l.trim().is_empty())
        .collect();
    if let Some(p) = lines.iter().rev().find(|l| l.starts_with("panic: ")) {
        return Some(p.to_string());
    }
    let zap = lines.iter().rev().find_map(|l| {
        let v: serde_json::Value = serde_json::from_str(l).ok()?;
        let level = v["level"].as_str()?;
        if !matches!(level, "error" | "fatal" | "panic" | "dpanic") {
            return None;
        }
        let msg = v["msg"].as_str().unwrap_or_default();
        Some(match v["error"].as_str() {
            Some(e) => format!("{msg}: {e}"),
            None => msg.to_string(),
        })
    });
    zap.or_else(|| {
        let plain = lines.iter().rev().find(|l| {
            !l.starts_with('{')
                && !l.starts_with(char::is_whitespace)
                && !l.starts_with("goroutine ")
                && !l.contains(".go:")
        })?;
        Some(plain.trim().to_string())
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn failure_hint_reads_etcd_logs() {
        let zap = "{\"level\":\"info\",\"msg\":\"starting\"}\n\
                   {\"level\":\"fatal\",\"msg\":\"discovery failed\",\"error\":\"member x has already been bootstrapped\"}\n";
        assert_eq!(
            super::failure_hint(zap).as_deref(),
            Some("discovery failed: member x has already been bootstrapped")
        );
        let plain = "2026-12-02 etcdmain: error verifying flags, 'true' is not a valid flag.\n";
        assert!(super::failure_hint(plain).is_some_and(|h| h.contains("not a valid flag")));
        assert_eq!(
            super::failure_hint("{\"level\":\"info\",\"msg\":\"ok\"}\n"),
            None
        );
        let panic = "{\"level\":\"info\",\"msg\":\"x\"}\npanic: freepages: failed to get all reachable pages\n\ngoroutine 1 [running]:\nmain.f()\n\t/x/y.go:12 +0x1\n";
        assert_eq!(
            super::failure_hint(panic).as_deref(),
            Some("panic: freepages: failed to get all reachable pages")
        );
    }
}
