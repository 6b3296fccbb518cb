//! gangplank's container image as an OCI image layout, built without a daemon, a base image
//! or a registry: one layer holding the static `gangplank` binary, the CA certificates, and
//! the passwd and group entries of the non-root user deploy/ runs as.
//!
//! Entry point: [`build`]. Reproducible: every entry is owned by root (the binary too) with
//! one fixed mtime (`SOURCE_DATE_EPOCH`, the commit's time), entries in path order, JSON
//! written in one key order; the same binary and certificates give the same manifest digest.
//!
//! The layer is an uncompressed tar (`application/vnd.oci.image.layer.v1.tar`, which every
//! runtime and registry takes): compressing it would bring a gzip crate, and what it saves is
//! pull bytes only (BENCHMARKS.md "Image").

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::tar::{Tar, TarError};
use crate::images::digest::sha256;

/// Where the binary goes (the Dockerfile's path, so both images run the same command).
pub const BINARY_PATH: &str = "usr/local/bin/gangplank";
/// Debian's bundle path, which rustls-native-certs and OpenSSL look at first.
pub const CA_PATH: &str = "etc/ssl/certs/ca-certificates.crt";
/// deploy/'s runAsUser and runAsGroup (distroless' `nonroot`).
pub const USER: u32 = 65_532;

pub const LAYER_MEDIA_TYPE: &str = "application/vnd.oci.image.layer.v1.tar";
pub const CONFIG_MEDIA_TYPE: &str = "application/vnd.oci.image.config.v1+json";
pub const MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";

/// What goes into the image.
#[derive(Debug, Clone)]
pub struct Inputs {
    /// A statically linked `gangplank` (checked: no ELF interpreter).
    pub binary: PathBuf,
    /// A PEM bundle of CA certificates (registries are reached over TLS).
    pub ca_certificates: PathBuf,
    /// Seconds since the epoch for every mtime and the config's `created`.
    pub source_date_epoch: u64,
    /// `org.opencontainers.image.*` annotations and labels (version, revision, source).
    pub labels: Vec<(String, String)>,
    /// The reference recorded in the layout's index (containerd's `io.containerd.image.name`;
    /// its tag is `org.opencontainers.image.ref.name`).
    pub tag: String,
}

/// A built image: its blobs by digest, and the manifest's digest (what deploy/ pins).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Image {
    pub manifest_digest: String,
    pub manifest: Vec<u8>,
    pub config: Vec<u8>,
    pub layer: Vec<u8>,
    pub tag: String,
}

/// Why an image cannot be built.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    #[error("cannot read {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot write {path}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not a static binary: it names the ELF interpreter {interpreter}, which the image does not have (build with RUSTFLAGS='-C target-feature=+crt-static' --target x86_64-unknown-linux-gnu)")]
    Dynamic { path: PathBuf, interpreter: String },
    #[error("{path} is not an x86-64 ELF executable")]
    NotElf { path: PathBuf },
    #[error(transparent)]
    Tar(#[from] TarError),
}

fn read(path: &Path) -> Result<Vec<u8>, ImageError> {
    std::fs::read(path).map_err(|source| ImageError::Read {
        path: path.to_path_buf(),
        source,
    })
}

/// Builds the image from `inputs`.
pub fn build(inputs: &Inputs) -> Result<Image, ImageError> {
    let binary = read(&inputs.binary)?;
    check_static(&inputs.binary, &binary)?;
    let layer = layer(
        binary,
        read(&inputs.ca_certificates)?,
        inputs.source_date_epoch,
    )?;
    let config = config(&layer, inputs);
    let manifest = manifest(&config, &layer, inputs);
    Ok(Image {
        manifest_digest: sha256(&manifest),
        manifest,
        config,
        layer,
        tag: inputs.tag.clone(),
    })
}

fn layer(binary: Vec<u8>, ca: Vec<u8>, mtime: u64) -> Result<Vec<u8>, ImageError> {
    let mut tar = Tar::new(mtime);
    let root = (0, 0);
    // Owned by root and not writable by the user it runs as: the process cannot replace
    // its own binary even where a runtime leaves the root filesystem writable.
    tar.file(BINARY_PATH, binary, 0o755, root);
    tar.file(CA_PATH, ca, 0o644, root);
    let passwd = format!(
        "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:{USER}:{USER}:nonroot:/home/nonroot:/sbin/nologin\n"
    );
    tar.file("etc/passwd", passwd.into_bytes(), 0o644, root);
    tar.file(
        "etc/group",
        format!("root:x:0:\nnonroot:x:{USER}:\n").into_bytes(),
        0o644,
        root,
    );
    // glibc's resolver, linked in statically, reads these two; without them it still works,
    // but `hosts: files dns` is the order a pod's /etc/hosts expects.
    tar.file(
        "etc/nsswitch.conf",
        b"hosts: files dns\n".to_vec(),
        0o644,
        root,
    );
    tar.dir("home/nonroot", 0o755);
    tar.dir("tmp", 0o1777);
    Ok(tar.into_bytes()?)
}

fn config(layer: &[u8], inputs: &Inputs) -> Vec<u8> {
    let created = rfc3339(inputs.source_date_epoch);
    let labels: serde_json::Map<String, Value> = inputs
        .labels
        .iter()
        .map(|(k, v)| (k.clone(), json!(v)))
        .collect();
    let config = json!({
        "created": created,
        "architecture": "amd64",
        "os": "linux",
        "config": {
            "User": format!("{USER}:{USER}"),
            "Env": [
                "PATH=/usr/local/bin",
                "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt",
                // mimalloc: commit arenas as they are used (the Dockerfile's reason).
                "MIMALLOC_ARENA_EAGER_COMMIT=0",
            ],
            "Entrypoint": [format!("/{BINARY_PATH}")],
            "Cmd": ["serve", "--addr=0.0.0.0:8443"],
            "ExposedPorts": {"8443/tcp": {}, "9090/tcp": {}},
            "WorkingDir": "/",
            "Labels": labels,
        },
        "rootfs": {"type": "layers", "diff_ids": [sha256(layer)]},
        "history": [{"created": created, "created_by": "gangplank-release image"}],
    });
    bytes(&config)
}

fn manifest(config: &[u8], layer: &[u8], inputs: &Inputs) -> Vec<u8> {
    let annotations: serde_json::Map<String, Value> = inputs
        .labels
        .iter()
        .map(|(k, v)| (k.clone(), json!(v)))
        .collect();
    bytes(&json!({
        "schemaVersion": 2,
        "mediaType": MANIFEST_MEDIA_TYPE,
        "config": descriptor(CONFIG_MEDIA_TYPE, config),
        "layers": [descriptor(LAYER_MEDIA_TYPE, layer)],
        "annotations": annotations,
    }))
}

fn descriptor(media_type: &str, blob: &[u8]) -> Value {
    json!({"mediaType": media_type, "digest": sha256(blob), "size": blob.len()})
}

/// Compact JSON in the order written (serde_json keeps insertion order here).
fn bytes(value: &Value) -> Vec<u8> {
    serde_json::to_vec(value).unwrap_or_default()
}

/// `YYYY-MM-DDTHH:MM:SSZ` of `secs` since the epoch.
fn rfc3339(secs: u64) -> String {
    let at = time::OffsetDateTime::from_unix_timestamp(i64::try_from(secs).unwrap_or(i64::MAX))
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
        at.year(),
        u8::from(at.month()),
        at.day(),
        at.hour(),
        at.minute(),
        at.second()
    )
}

/// Refuses a dynamically linked binary: the image has no libc to load it with.
fn check_static(path: &Path, elf: &[u8]) -> Result<(), ImageError> {
    let not_elf = || ImageError::NotElf {
        path: path.to_path_buf(),
    };
    // ELF64 little-endian x86-64: magic, class 2, data 1, e_machine 62.
    if elf.get(..4) != Some(b"\x7fELF") || elf.get(4) != Some(&2) || elf.get(5) != Some(&1) {
        return Err(not_elf());
    }
    let u16_at = |at: usize| {
        elf.get(at..at + 2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]))
    };
    let u32_at = |at: usize| {
        elf.get(at..at + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    };
    let u64_at = |at: usize| {
        elf.get(at..at + 8).map(|b| {
            let mut a = [0u8; 8];
            a.copy_from_slice(b);
            u64::from_le_bytes(a)
        })
    };
    if u16_at(18) != Some(62) {
        return Err(not_elf());
    }
    let (Some(phoff), Some(phentsize), Some(phnum)) = (u64_at(32), u16_at(54), u16_at(56)) else {
        return Err(not_elf());
    };
    const PT_INTERP: u32 = 3;
    for i in 0..usize::from(phnum) {
        let at = usize::try_from(phoff).map_err(|_| not_elf())? + i * usize::from(phentsize);
        if u32_at(at) != Some(PT_INTERP) {
            continue;
        }
        let (Some(offset), Some(size)) = (u64_at(at + 8), u64_at(at + 32)) else {
            return Err(not_elf());
        };
        let start = usize::try_from(offset).map_err(|_| not_elf())?;
        let end = start + usize::try_from(size).map_err(|_| not_elf())?;
        let interpreter = elf
            .get(start..end)
            .map(|b| {
                String::from_utf8_lossy(b)
                    .trim_end_matches('\0')
                    .to_string()
            })
            .unwrap_or_default();
        return Err(ImageError::Dynamic {
            path: path.to_path_buf(),
            interpreter,
        });
    }
    Ok(())
}

/// The files of the image's OCI image layout, by path: the blobs, `oci-layout`, and
/// `index.json` naming the manifest with its tag.
pub fn layout_files(image: &Image) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = [&image.manifest, &image.config, &image.layer]
        .into_iter()
        .map(|blob| {
            let digest = sha256(blob);
            let hex = digest.trim_start_matches("sha256:");
            (format!("blobs/sha256/{hex}"), blob.clone())
        })
        .collect();
    files.push((
        "oci-layout".to_string(),
        br#"{"imageLayoutVersion":"1.0.0"}"#.to_vec(),
    ));
    let mut manifest = descriptor(MANIFEST_MEDIA_TYPE, &image.manifest);
    // The OCI annotation holds the tag alone (skopeo, umoci); containerd's import names the
    // image by its own annotation, the full reference.
    let tag_only = image.tag.rsplit_once(':').map_or("latest", |(_, t)| t);
    manifest["annotations"] = json!({
        "io.containerd.image.name": image.tag,
        "org.opencontainers.image.ref.name": tag_only,
    });
    let index = json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [manifest],
    });
    files.push(("index.json".to_string(), bytes(&index)));
    files
}

/// Writes `image` as an OCI image layout in `dir` (created; blobs added beside any there).
pub fn write_layout(image: &Image, dir: &Path) -> Result<(), ImageError> {
    for (name, contents) in layout_files(image) {
        let path = dir.join(name);
        let parent = path.parent().unwrap_or(dir).to_path_buf();
        std::fs::create_dir_all(&parent).map_err(|source| ImageError::Write {
            path: parent,
            source,
        })?;
        std::fs::write(&path, contents).map_err(|source| ImageError::Write { path, source })?;
    }
    Ok(())
}

/// The layout as one tar (what `ctr images import` and `realnode.sh images` load), with
/// the same fixed owner and mtime.
pub fn archive(image: &Image, mtime: u64) -> Result<Vec<u8>, ImageError> {
    let mut tar = Tar::new(mtime);
    for (name, contents) in layout_files(image) {
        tar.file(&name, contents, 0o644, (0, 0));
    }
    Ok(tar.into_bytes()?)
}
