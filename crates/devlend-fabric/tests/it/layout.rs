//! The workspace's integration tests are one binary per crate (`tests/it/main.rs`, README "Testing"):
//! a file in a `tests/it/` folder that its `main.rs` does not declare would never be compiled, so
//! this checks every crate's folder.

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
