//! A test file with its own `fn main()` (the libtest-mimic and real-node suites) runs only when
//! Cargo.toml declares it `harness = false`; otherwise libtest builds its own main, finds no
//! `#[test]` and reports "0 passed" as a success: a suite skipped without a word. Every such
//! file must be declared.

use std::path::Path;

/// The `name`s of the `[[test]]` tables of Cargo.toml that say `harness = false` (a line
/// reading of the two keys; the manifest keeps one key per line).
fn declared_without_harness(manifest: &str) -> Vec<String> {
    let mut declared = Vec::new();
    for table in manifest.split("\n[").filter(|t| t.starts_with("[test]]")) {
        let value = |key: &str| {
            table.lines().find_map(|line| {
                let (k, v) = line.split_once('=')?;
                (k.trim() == key).then(|| v.trim().trim_matches('"').to_string())
            })
        };
        if let (Some(name), Some(harness)) = (value("name"), value("harness")) {
            if harness == "false" {
                declared.push(name);
            }
        }
    }
    declared
}

/// The tests/*.rs files that define their own `main`.
fn files_with_main(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("tests/")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .filter(|p| {
            std::fs::read_to_string(p)
                .expect("test source")
                .lines()
                .any(|l| l.starts_with("fn main()"))
        })
        .filter_map(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .collect();
    names.sort();
    names
}

#[test]
fn every_test_file_with_its_own_main_is_declared_without_harness() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).expect("Cargo.toml");
    let declared = declared_without_harness(&manifest);
    let files = files_with_main(&root.join("tests"));
    assert!(
        !files.is_empty(),
        "no suite with its own main found: the scan is broken"
    );
    let missing: Vec<&String> = files.iter().filter(|f| !declared.contains(f)).collect();
    assert!(
        missing.is_empty(),
        "tests/{{{}}}.rs define fn main() but Cargo.toml has no [[test]] with harness = false \
         for them: libtest would run none of their tests and report success",
        missing
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join(",")
    );
}

#[test]
fn the_check_sees_a_file_left_undeclared() {
    let manifest = "[package]\nname = \"x\"\n[[test]]\nname = \"a\"\nharness = false\n\
                    [[test]]\nname = \"b\"\n";
    assert_eq!(declared_without_harness(manifest), vec!["a".to_string()]);
}
