//! Copies of policies/ with a parameter changed, as a platform configures them: the suites
//! that run a gang scheduler other than the shipped default (Volcano) judge jobs with the
//! params a platform running that scheduler sets.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::ControlPlane;

/// policies/ with `gang_scheduling`'s scheduler set to `scheduler` (`kubernetes`: the native
/// gang; pods then keep the default scheduler, which the capacity policy's placement search
/// models), in the control plane's temp dir; made once per plane and scheduler.
pub fn with_gang_scheduler(plane: &ControlPlane, scheduler: &str) -> PathBuf {
    static MADE: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
    let dir = plane.file(&format!("policies-gang-{scheduler}"));
    let mut made = MADE.lock().unwrap_or_else(|e| e.into_inner());
    if made.contains(&dir) {
        return dir;
    }
    copy_dir(&super::repo().join("policies"), &dir);
    let params = dir.join("params.yaml");
    let text = std::fs::read_to_string(&params).expect("read params.yaml");
    // The setting, not the comment above it that names the choices.
    let changed = text.replacen(
        "\n      scheduler: volcano\n",
        &format!("\n      scheduler: {scheduler}\n"),
        1,
    );
    assert_ne!(
        text, changed,
        "params.yaml sets `      scheduler: volcano` on a line of its own"
    );
    std::fs::write(&params, changed).expect("write params.yaml");
    made.push(dir.clone());
    dir
}

/// Copies the directory tree `from` to `to`.
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap_or_else(|e| panic!("create {}: {e}", to.display()));
    let entries =
        std::fs::read_dir(from).unwrap_or_else(|e| panic!("read {}: {e}", from.display()));
    for entry in entries.flatten() {
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target)
                .unwrap_or_else(|e| panic!("copy {}: {e}", entry.path().display()));
        }
    }
}
