//! Notes about how the run went (routes to members), kept until the
//! report can carry them.

/// Notes kept until they can be said.
#[derive(Debug, Default)]
pub(super) struct Notes(Vec<String>);

impl Notes {
    /// Keeps `notes` for later.
    pub(super) fn keep(&mut self, notes: Vec<String>) {
        self.0.extend(notes);
    }

    /// Everything kept and `notes`, as one note (`None` when there is none).
    pub(super) fn say(&mut self, notes: Vec<String>) -> Option<String> {
        self.0.extend(notes);
        let all = std::mem::take(&mut self.0);
        (!all.is_empty()).then(|| all.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::Notes;

    /// The routes chosen while the cluster was created were lost
    /// (`summary.json` had `notes: []`): they are said with the next note.
    #[test]
    fn notes_from_the_bring_up_are_said_later() {
        let mut n = Notes::default();
        n.keep(vec!["soak-0: port-forward".into()]);
        n.keep(vec![]);
        assert_eq!(
            n.say(vec!["soak-1: client URL".into()]).as_deref(),
            Some("soak-0: port-forward; soak-1: client URL")
        );
        assert_eq!(n.say(vec![]), None, "said once");
    }
}
