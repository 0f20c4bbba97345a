//! For the workspace's benchmarks (`harness = false`), which run in
//! sections: `cargo bench -p chaos-monkey --bench faults -- nospace` runs
//! only the section `nospace`.

/// Whether the section `name` was asked for on the benchmark's command line
/// (every section when none is; flags such as `--bench` are not sections).
pub fn wanted(name: &str) -> bool {
    let asked: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    asked.is_empty() || asked.iter().any(|a| a == name)
}
