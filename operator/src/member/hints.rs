//! Why a member failed, read from the end of its etcd log (a local log
//! file, or a pod's termination message).

/// How many lines at the end of a member's log are searched for the
/// reason: a Go stack trace after the reason runs to dozens of lines.
pub const HINT_LINES: usize = 400;

/// The reason etcd gave for failing, from the end of its log: the last zap
/// line at fatal or panic level ("message: error"), else a Go panic line,
/// else the last zap line at error level, else the last plain line before
/// any stack trace (flag errors are printed that way). A stack trace is
/// never the reason, however long it is.
pub fn failure_hint(log: &str) -> Option<String> {
    let lines: Vec<&str> = log
        .lines()
        .map(str::trim_end)
        .filter(|l| !l.trim().is_empty())
        .collect();
    let zap = |levels: &[&str]| {
        lines.iter().rev().find_map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).ok()?;
            let level = v["level"].as_str()?;
            if !levels.contains(&level) {
                return None;
            }
            let msg = v["msg"].as_str().unwrap_or_default();
            Some(match v["error"].as_str() {
                Some(e) => format!("{msg}: {e}"),
                None => msg.to_string(),
            })
        })
    };
    if let Some(fatal) = zap(&["fatal", "panic", "dpanic"]) {
        return Some(fatal);
    }
    if let Some(p) = lines.iter().rev().find(|l| l.starts_with("panic: ")) {
        return Some(p.to_string());
    }
    if let Some(error) = zap(&["error"]) {
        return Some(error);
    }
    // Before the last stack trace, if there is one.
    let before_trace = lines
        .iter()
        .rposition(|l| l.starts_with("goroutine "))
        .map_or(&lines[..], |i| &lines[..i]);
    let plain = before_trace.iter().rev().find(|l| {
        !l.starts_with('{')
            && !l.starts_with(char::is_whitespace)
            && !l.starts_with("goroutine ")
            && !l.starts_with("[signal ")
            && !l.starts_with("created by ")
            && !l.contains(".go:")
    })?;
    Some(plain.trim().to_string())
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

    /// A long stack trace after the reason: the reason, never a frame.
    #[test]
    fn the_reason_above_a_long_stack_trace() {
        let trace: String = (0..40)
            .map(|i| format!("main.f{i}(0x1)\n\t/go/src/x/y.go:{i} +0x1\n"))
            .collect();
        let fatal = format!(
            "{{\"level\":\"info\",\"msg\":\"starting\"}}\n\
             {{\"level\":\"fatal\",\"msg\":\"failed to create WAL\",\"error\":\"no space left on device\"}}\n\
             panic: failed to create WAL\n\ngoroutine 1 [running]:\n{trace}main.main()\n"
        );
        assert!(
            fatal.lines().count() > 80,
            "the reason is far above the end"
        );
        assert_eq!(
            super::failure_hint(&fatal).as_deref(),
            Some("failed to create WAL: no space left on device")
        );
        let go_panic = format!(
            "panic: runtime error: index out of range\n\ngoroutine 7 [running]:\n{trace}main.main()\n"
        );
        assert_eq!(
            super::failure_hint(&go_panic).as_deref(),
            Some("panic: runtime error: index out of range")
        );
        let plain = format!(
            "etcdmain: cannot listen: address in use\ngoroutine 1 [running]:\n{trace}main.main()\n"
        );
        assert_eq!(
            super::failure_hint(&plain).as_deref(),
            Some("etcdmain: cannot listen: address in use")
        );
    }
}
