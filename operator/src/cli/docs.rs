//! Shell completions and man pages for the three programs, generated from
//! their clap definitions (so they cannot drift from the flags), and the
//! rule that every subcommand's `--help` ends with an example.

use std::io::Write;
use std::path::{Path, PathBuf};

pub use clap_complete::Shell;

/// Writes `shell`'s completion script for `cmd` to `out`.
pub fn completions(mut cmd: clap::Command, shell: Shell, out: &mut dyn Write) {
    let name = cmd.get_name().to_string();
    clap_complete::generate(shell, &mut cmd, name, out);
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
    fn bash_completion_names_the_subcommands() {
        let mut out = Vec::new();
        completions(demo(), Shell::Bash, &mut out);
        let text = String::from_utf8_lossy(&out);
        assert!(text.contains("good") && text.contains("_demo"), "{text}");
    }
}
