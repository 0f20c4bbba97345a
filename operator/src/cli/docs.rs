//! Shell completions and man pages for the three programs, generated from
//! their clap definitions (so they cannot drift from the flags), and the
//! rule that every subcommand's `--help` ends with an example.

use std::io::Write;
use std::path::{Path, PathBuf};

pub use clap_complete::Shell;

/// Writes `shell`'s completion script for `cmd` to `out`.
///
/// clap_complete (4.6.12, the newest) spells a hyphenated program's bash
/// function names two ways: its loop builds `etcd__operator__subcmd__run`
/// from the name with `-` as `__`, its case labels read
/// `etcd__subcmd__operator__subcmd__run` (`-` as `__subcmd__`), so no
/// subcommand's flags complete. The bash script is therefore generated
/// for the name with `_` for `-` (one spelling throughout) and registered
/// for the real name.
pub fn completions(mut cmd: clap::Command, shell: Shell, out: &mut dyn Write) {
    let name = cmd.get_name().to_string();
    if shell != Shell::Bash || !name.contains('-') {
        clap_complete::generate(shell, &mut cmd, name, out);
        return;
    }
    let safe = name.replace('-', "_");
    let mut buf = Vec::new();
    clap_complete::generate(shell, &mut cmd, safe.clone(), &mut buf);
    let script = String::from_utf8_lossy(&buf);
    let suffix = format!(" {safe}");
    let fixed: Vec<String> = script
        .lines()
        .map(|line| match line.strip_suffix(&suffix) {
            Some(head) if line.trim_start().starts_with("complete -F ") => {
                format!("{head} {name}")
            }
            _ => line.to_string(),
        })
        .collect();
    let _ = writeln!(out, "{}", fixed.join("\n"));
}

/// What bash offers when `words[last]` is completed on the command line
/// `words` (`words[0]` the program) with `cmd`'s completion script
/// loaded: bash runs the script, `complete -p PROGRAM` names the function
/// it registered, which is called as bash calls it (`COMP_WORDS`,
/// `COMP_CWORD`, the program, the word and the one before) and
/// `COMPREPLY` is read back. For the programs' tests.
pub fn bash_complete(cmd: clap::Command, words: &[&str]) -> std::io::Result<Vec<String>> {
    let mut script = Vec::new();
    completions(cmd, Shell::Bash, &mut script);
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("completion.bash");
    std::fs::write(&file, &script)?;
    const DRIVER: &str = r#"
source "$0" || exit 3
spec=$(complete -p "$1") || { echo "no completion registered for $1" >&2; exit 4; }
fn=$(printf '%s\n' "$spec" | sed -n 's/.* -F \([^ ]*\) .*/\1/p')
[ -n "$fn" ] || { echo "no function in: $spec" >&2; exit 5; }
COMP_WORDS=("$@")
COMP_CWORD=$(( $# - 1 ))
COMP_LINE="$*"
COMP_POINT=${#COMP_LINE}
prev=""
[ "$COMP_CWORD" -gt 0 ] && prev=${COMP_WORDS[COMP_CWORD-1]}
"$fn" "$1" "${COMP_WORDS[COMP_CWORD]}" "$prev"
printf '%s\n' "${COMPREPLY[@]}"
"#;
    let out = std::process::Command::new("bash")
        .args(["--norc", "--noprofile", "-c", DRIVER])
        .arg(&file)
        .args(words)
        .output()?;
    if !out.status.success() {
        return Err(std::io::Error::other(format!(
            "bash completion of {words:?} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect())
}

/// Writes a man page (section 1) for `cmd` and one for each of its visible
/// subcommands (`PROGRAM-SUB.1`) into `dir`; returns the files written.
pub fn man_pages(cmd: clap::Command, dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let mut written = Vec::new();
    write_page(cmd.clone(), cmd.get_name(), dir, &mut written)?;
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = format!("{}-{}", cmd.get_name(), sub.get_name());
        let sub = sub.clone().name(name.clone()).bin_name(name.clone());
        write_page(sub, &name, dir, &mut written)?;
    }
    Ok(written)
}

fn write_page(
    cmd: clap::Command,
    name: &str,
    dir: &Path,
    written: &mut Vec<PathBuf>,
) -> std::io::Result<()> {
    let path = dir.join(format!("{name}.1"));
    let mut buf = Vec::new();
    clap_mangen::Man::new(cmd).render(&mut buf)?;
    std::fs::write(&path, buf)?;
    written.push(path);
    Ok(())
}

/// The subcommands of `cmd` (the command itself when it has none) whose
/// long help does not end with an example: a last paragraph that starts
/// with "Example".
pub fn missing_examples(cmd: &clap::Command) -> Vec<String> {
    let mut cmds: Vec<clap::Command> = cmd
        .get_subcommands()
        .filter(|s| !s.is_hide_set())
        .cloned()
        .collect();
    if cmds.is_empty() {
        cmds.push(cmd.clone());
    }
    cmds.into_iter()
        .filter(|c| {
            let help = c.clone().render_long_help().to_string();
            let last = help
                .trim_end()
                .rsplit("\n\n")
                .next()
                .unwrap_or_default()
                .trim_start();
            !last.starts_with("Example")
        })
        .map(|c| c.get_name().to_string())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn demo() -> clap::Command {
        clap::Command::new("demo")
            .subcommand(clap::Command::new("good").after_long_help("Example:\n  demo good"))
            .subcommand(clap::Command::new("bad"))
            .subcommand(clap::Command::new("hidden").hide(true))
    }

    #[test]
    fn a_subcommand_without_an_example_is_named() {
        assert_eq!(missing_examples(&demo()), ["bad"]);
    }

    #[test]
    fn man_pages_are_written_for_the_program_and_each_visible_subcommand() {
        let dir = std::env::temp_dir().join(format!("man-{}", std::process::id()));
        let files = man_pages(demo(), &dir).unwrap_or_default();
        let names: Vec<_> = files
            .iter()
            .filter_map(|f| f.file_name()?.to_str())
            .collect();
        assert_eq!(names, ["demo.1", "demo-good.1", "demo-bad.1"]);
        let page = std::fs::read_to_string(dir.join("demo-good.1")).unwrap_or_default();
        assert!(page.contains(".TH demo-good 1"), "{page}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn bash_completes_a_hyphenated_programs_subcommand_flags() {
        let cmd = clap::Command::new("demo-tool").subcommand(
            clap::Command::new("run-it").arg(
                clap::Arg::new("platform")
                    .long("platform")
                    .value_parser(["local", "kube"]),
            ),
        );
        let got =
            |words: &[&str]| bash_complete(cmd.clone(), words).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(got(&["demo-tool", "run-it", "--plat"]), ["--platform"]);
        assert_eq!(
            got(&["demo-tool", "run-it", "--platform", ""]),
            ["local", "kube"]
        );
        assert_eq!(got(&["demo-tool", "ru"]), ["run-it"]);
    }

    #[test]
    fn bash_completion_names_the_subcommands() {
        let mut out = Vec::new();
        completions(demo(), Shell::Bash, &mut out);
        let text = String::from_utf8_lossy(&out);
        assert!(text.contains("good") && text.contains("_demo"), "{text}");
    }
}
