//! The workspace's integration tests are one binary per crate (`tests/it/main.rs`, README "Testing"):
//! a file in a `tests/it/` folder that its `main.rs` does not declare would never be compiled, so
//! this checks every crate's folder; and that a crate without a unit-test harness has no unit test.

use std::fs;
use std::path::Path;

#[test]
fn every_file_in_a_tests_it_folder_is_a_module_of_its_main() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut folders = 0;
    for krate in fs::read_dir(&crates).unwrap() {
        let it = krate.unwrap().path().join("tests/it");
        let Ok(main) = fs::read_to_string(it.join("main.rs")) else { continue };
        folders += 1;
        for file in fs::read_dir(&it).unwrap() {
            let name = file.unwrap().file_name().into_string().unwrap();
            let Some(module) = name.strip_suffix(".rs").filter(|m| *m != "main") else { continue };
            assert!(main.lines().any(|l| l == format!("mod {module};")), "{} does not declare `mod {module};`", it.join("main.rs").display());
        }
    }
    assert!(folders >= 8, "found {folders} tests/it folders under {}", crates.display());
}

/// A crate whose `Cargo.toml` turns its unit-test harness off (`test = false`: one compilation of
/// the crate fewer in `cargo test`) must have no unit test in `src/`, or that test would never run.
#[test]
fn a_crate_without_a_unit_test_harness_has_no_unit_tests() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut off = 0;
    for krate in fs::read_dir(&crates).unwrap() {
        let krate = krate.unwrap().path();
        let Ok(manifest) = fs::read_to_string(krate.join("Cargo.toml")) else { continue };
        if !manifest.lines().any(|l| l.trim() == "test = false") {
            continue;
        }
        off += 1;
        for file in rust_files(&krate.join("src")) {
            let text = fs::read_to_string(&file).unwrap();
            assert!(
                !text.contains("#[test]") && !text.contains("proptest!"),
                "{} has a unit test, but {} says `test = false`",
                file.display(),
                krate.join("Cargo.toml").display()
            );
        }
    }
    assert!(off >= 3, "found {off} crates with `test = false` under {}", crates.display());
}

fn rust_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
    files
}
