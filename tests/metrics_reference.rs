//! docs/src/reference/metrics.md is generated from src/metrics_catalog.rs (the table each
//! `/metrics` is checked against): this fails when the page drifts from the code.
//! Regenerate it with `UPDATE_DOCS=1 cargo test --test metrics_reference`.

use std::path::PathBuf;

#[test]
fn the_metrics_reference_page_is_the_catalogs() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("docs/src/reference/metrics.md");
    let generated = gangplank::metrics_catalog::markdown();
    if std::env::var_os("UPDATE_DOCS").is_some() {
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(&path, &generated).expect("write the reference");
        return;
    }
    let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        on_disk == generated,
        "{} differs from src/metrics_catalog.rs; regenerate it with \
         `UPDATE_DOCS=1 cargo test --test metrics_reference`",
        path.display()
    );
}
