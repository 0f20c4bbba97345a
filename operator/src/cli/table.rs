//! Plain aligned text tables.

/// Renders rows (the first is the header) as columns separated by two
/// spaces, without trailing blanks. Every cell is [`printable`].
pub fn render(rows: &[Vec<String>]) -> String {
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|r| r.iter().map(|c| printable(c)).collect())
        .collect();
    let rows = &rows;
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..cols)
        .map(|i| {
            rows.iter()
                .map(|r| r.get(i).map_or(0, String::len))
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for r in rows {
        let line: Vec<String> = r
            .iter()
            .enumerate()
            .map(|(i, c)| format!("{c:<w$}", w = widths[i]))
            .collect();
        out.push_str(line.join("  ").trim_end());
        out.push('\n');
    }
    out
}

/// `text` with every control character escaped (`\u{1b}`, `\n`): a
/// manifest's name, message or file name reaches the terminal through
/// here, and an escape sequence in it must not clear the screen or set
/// the terminal's title.
pub fn printable(text: &str) -> String {
    if !text.chars().any(char::is_control) {
        return text.to_string();
    }
    text.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped() {
        let rows = vec![
            vec!["NAME".to_string(), "MESSAGE".into()],
            vec!["a".into(), "\x1b[2J\x1b]0;PWN\x07 and\nmore".into()],
        ];
        let t = render(&rows);
        assert!(!t.chars().any(|c| c.is_control() && c != '\n'), "{t:?}");
        assert!(
            t.contains("\\u{1b}[2J\\u{1b}]0;PWN\\u{7} and\\nmore"),
            "{t}"
        );
        assert_eq!(t.lines().count(), 2, "{t}");
        assert_eq!(printable("plain, ünïcode"), "plain, ünïcode");
    }
}
