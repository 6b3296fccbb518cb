//! gangplank's image as `gangplank-release image` builds it (src/release/): reproducible, one
//! layer with the binary, the CA bundle and the non-root user, refused for a dynamic binary,
//! and pushed to a real registry (Debian's docker-registry) and pulled back by digest.
//!
//! The binary packed is `GANGPLANK_STATIC_BINARY` (`.ci/run` sets it to the static release
//! build it made), else `/bin/busybox` when it is static (Debian's busybox-static); with
//! neither, the tests that need one print why they skip.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use support::registry::{self, Auth, Registry, OCI_MANIFEST};

fn release() -> Command {
    Command::new(env!("CARGO_BIN_EXE_gangplank-release"))
}

/// A static x86-64 binary to pack, or `None` after saying why there is none.
fn static_binary(test: &str) -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("GANGPLANK_STATIC_BINARY") {
        let path = PathBuf::from(path);
        assert!(
            path.is_file(),
            "GANGPLANK_STATIC_BINARY={} is not a file",
            path.display()
        );
        return Some(path);
    }
    let busybox = PathBuf::from("/bin/busybox");
    let statically = Command::new("file")
        .arg("-L")
        .arg(&busybox)
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("statically linked"));
    if busybox.is_file() && statically {
        return Some(busybox);
    }
    support::skip(&format!(
        "{test}: no static binary to pack (set GANGPLANK_STATIC_BINARY to a static gangplank \
         build, as .ci/run does, or install Debian's busybox-static)"
    ));
    None
}

fn build(binary: &Path, out: &Path, epoch: &str, extra: &[&str]) -> Output {
    release()
        .arg("image")
        .arg("--binary")
        .arg(binary)
        .arg("--out-dir")
        .arg(out)
        .arg(format!("--source-date-epoch={epoch}"))
        .args(extra)
        .output()
        .expect("run gangplank-release")
}

fn digest_of(out: &Output) -> String {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn tree(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).expect("read dir").flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let name = path
                    .strip_prefix(dir)
                    .expect("under dir")
                    .display()
                    .to_string();
                files.push((name, std::fs::read(&path).expect("read")));
            }
        }
    }
    files.sort();
    files
}

#[test]
fn two_builds_of_one_binary_give_one_image_byte_for_byte() {
    let Some(binary) = static_binary("two_builds_of_one_binary_give_one_image_byte_for_byte")
    else {
        return;
    };
    let dirs = [(); 3].map(|()| tempfile::tempdir().expect("temp dir"));
    let first = digest_of(&build(&binary, dirs[0].path(), "1764633600", &[]));
    let second = digest_of(&build(&binary, dirs[1].path(), "1764633600", &[]));
    assert!(first.starts_with("sha256:") && first.len() == 71, "{first}");
    assert_eq!(first, second);
    assert_eq!(
        tree(dirs[0].path()),
        tree(dirs[1].path()),
        "every file of the layout"
    );
    let later = digest_of(&build(&binary, dirs[2].path(), "1764633601", &[]));
    assert_ne!(
        first, later,
        "the source date is the image's one varying input"
    );
}

#[test]
fn the_layer_holds_the_binary_the_ca_bundle_and_the_nonroot_user_all_owned_by_root() {
    let Some(binary) = static_binary("the_layer_holds_the_binary") else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    digest_of(&build(&binary, dir.path(), "0", &["--revision=abc123"]));
    let index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("index.json")).expect("index"))
            .expect("index.json");
    let manifest_digest = index["manifests"][0]["digest"].as_str().unwrap_or_default();
    let blob = |digest: &str| {
        std::fs::read(
            dir.path()
                .join("blobs/sha256")
                .join(digest.trim_start_matches("sha256:")),
        )
        .expect("blob")
    };
    let manifest: serde_json::Value =
        serde_json::from_slice(&blob(manifest_digest)).expect("manifest");
    assert_eq!(manifest["mediaType"], OCI_MANIFEST);
    assert_eq!(
        manifest["annotations"]["org.opencontainers.image.revision"],
        "abc123"
    );
    let config: serde_json::Value = serde_json::from_slice(&blob(
        manifest["config"]["digest"].as_str().unwrap_or_default(),
    ))
    .expect("config");
    assert_eq!(config["config"]["User"], "65532:65532");
    assert_eq!(
        config["config"]["Entrypoint"][0],
        "/usr/local/bin/gangplank"
    );
    let layer_digest = manifest["layers"][0]["digest"].as_str().unwrap_or_default();
    assert_eq!(
        config["rootfs"]["diff_ids"][0], layer_digest,
        "an uncompressed layer"
    );

    let layer = dir.path().join("layer.tar");
    std::fs::write(&layer, blob(layer_digest)).expect("write layer");
    let listing = Command::new("tar")
        .args(["--numeric-owner", "-tvf"])
        .arg(&layer)
        .output()
        .expect("tar");
    let listing = String::from_utf8_lossy(&listing.stdout);
    for (mode, path) in [
        ("-rwxr-xr-x 0/0", "usr/local/bin/gangplank"),
        ("-rw-r--r-- 0/0", "etc/ssl/certs/ca-certificates.crt"),
        ("-rw-r--r-- 0/0", "etc/passwd"),
        ("drwxrwxrwt 0/0", "tmp/"),
    ] {
        assert!(
            listing
                .lines()
                .any(|l| l.starts_with(mode) && l.ends_with(path)),
            "{mode} {path} in:\n{listing}"
        );
    }
    let unpacked = dir.path().join("rootfs");
    std::fs::create_dir_all(&unpacked).expect("mkdir");
    let status = Command::new("tar")
        .arg("-xf")
        .arg(&layer)
        .arg("-C")
        .arg(&unpacked)
        .status()
        .expect("tar -x");
    assert!(status.success());
    let packed = std::fs::read(unpacked.join("usr/local/bin/gangplank")).expect("binary");
    assert_eq!(
        packed,
        std::fs::read(&binary).expect("input binary"),
        "the binary, unchanged"
    );
    let passwd = std::fs::read_to_string(unpacked.join("etc/passwd")).expect("passwd");
    assert!(passwd.contains("nonroot:x:65532:65532:"), "{passwd}");
}

#[test]
fn a_dynamically_linked_binary_is_refused_with_the_build_that_fixes_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    // The test build of gangplank links glibc dynamically.
    let out = build(support::gangplank(), dir.path(), "0", &[]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("is not a static binary"), "{err}");
    assert!(err.contains("ld-linux"), "names the interpreter: {err}");
    assert!(err.contains("+crt-static"), "says how to build one: {err}");
    let out = build(Path::new("Cargo.toml"), dir.path(), "0", &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not an x86-64 ELF executable"), "{err}");
}

#[test]
fn the_image_is_pushed_to_a_real_registry_and_pulled_back_by_its_digest() {
    if let Err(why) = registry::requirement() {
        support::skip(&format!("the_image_is_pushed_to_a_real_registry: {why}"));
        return;
    }
    let Some(binary) = static_binary("the_image_is_pushed_to_a_real_registry") else {
        return;
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let registry = Registry::start(Auth::Open).await;
        let dir = tempfile::tempdir().expect("temp dir");
        let target = registry.image("platform/gangplank", "0.1.0-test");
        let digest = digest_of(&build(&binary, dir.path(), "0", &["--push", &target]));
        let host = target.split('/').next().unwrap_or_default();
        let http = reqwest::Client::builder()
            .no_proxy()
            .build()
            .expect("client");
        // By digest, as deploy/ names it: the bytes hash to the digest, and every blob too.
        let url = format!("http://{host}/v2/platform/gangplank/manifests/{digest}");
        let response = http
            .get(&url)
            .header("Accept", OCI_MANIFEST)
            .send()
            .await
            .expect("pull the manifest");
        assert_eq!(response.status(), 200, "{url}");
        let manifest = response.bytes().await.expect("manifest bytes");
        assert_eq!(registry::sha256(&manifest), digest);
        let manifest: serde_json::Value = serde_json::from_slice(&manifest).expect("manifest");
        let layers = manifest["layers"].as_array().cloned().unwrap_or_default();
        for blob in layers.iter().chain([&manifest["config"]]) {
            let blob_digest = blob["digest"].as_str().unwrap_or_default();
            let url = format!("http://{host}/v2/platform/gangplank/blobs/{blob_digest}");
            let bytes = http
                .get(&url)
                .send()
                .await
                .expect("pull")
                .bytes()
                .await
                .expect("body");
            assert_eq!(registry::sha256(&bytes), blob_digest, "{url}");
        }
        // The tag resolves to the same digest: what `gangplank check` pins a tag to.
        let url = format!("http://{host}/v2/platform/gangplank/manifests/0.1.0-test");
        let by_tag = http
            .head(&url)
            .header("Accept", OCI_MANIFEST)
            .send()
            .await
            .expect("head");
        let header = by_tag.headers().get("Docker-Content-Digest").cloned();
        assert_eq!(
            header.and_then(|h| h.to_str().ok().map(String::from)),
            Some(digest)
        );
    });
}

/// `.ci/image` writes the CycloneDX SBOM beside the layout: the binary and the crates it
/// links, the ones a scanner must see (the TLS stack, the policy engine, the API client).
#[test]
fn the_sbom_beside_the_built_image_names_the_crates_the_binary_links() {
    let Some(dir) = std::env::var_os("GANGPLANK_IMAGE_DIR").map(PathBuf::from) else {
        support::skip(
            "the_sbom_beside_the_built_image: GANGPLANK_IMAGE_DIR is not set (.ci/run sets it \
             after .ci/image built the image and its SBOM)",
        );
        return;
    };
    let sbom: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("sbom.cdx.json")).expect("sbom.cdx.json"))
            .expect("the SBOM is JSON");
    assert_eq!(sbom["bomFormat"], "CycloneDX");
    assert_eq!(sbom["metadata"]["component"]["name"], "gangplank");
    let names: Vec<&str> = sbom["components"]
        .as_array()
        .map(|c| c.iter().filter_map(|c| c["name"].as_str()).collect())
        .unwrap_or_default();
    for linked in [
        "regorus",
        "kube-client",
        "rustls",
        "aws-lc-rs",
        "tokio",
        "axum",
    ] {
        assert!(names.contains(&linked), "{linked} in the SBOM");
    }
    assert!(
        !names.contains(&"criterion"),
        "dev-dependencies are not in the binary"
    );
}
