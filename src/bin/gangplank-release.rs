//! `gangplank-release`: builds gangplank's container image without a daemon (an OCI image
//! layout and its tar), optionally pushes it, and prints its digest.
//!
//! ```sh
//! RUSTFLAGS='-C target-feature=+crt-static' cargo build --release --target x86_64-unknown-linux-gnu
//! cargo run --bin gangplank-release -- image \
//!     --binary target/x86_64-unknown-linux-gnu/release/gangplank --out-dir target/image
//! ```
//!
//! It also pins that digest in deploy/ (`pin`) and renders dist/'s install files from deploy/
//! (`render`).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use gangplank::release::image::{self, Inputs};
use gangplank::release::push::{self, Target};
use gangplank::release::{git, kubectl, pin, render};

#[derive(Debug, Parser)]
#[command(name = "gangplank-release", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Build the image from a static gangplank binary: an OCI image layout in --out-dir
    /// (plus image.tar, the same layout as one archive, and digest, the manifest's digest);
    /// prints the digest.
    Image(ImageArgs),
    /// Print the revision and the commit time (seconds) of the image's inputs (src/,
    /// Cargo.toml, Cargo.lock, .ci/image): what .ci/image passes as --revision and
    /// --source-date-epoch, so a commit that changes none of them builds the same image.
    Source,
    /// Write the built image's digest into deploy/kustomization.yaml (refused on a dirty
    /// tree or for an image built from other sources), then render dist/ again if kubectl
    /// is found; with --check, only compare.
    Pin(PinArgs),
    /// Render dist/install.yaml and dist/install-cert-manager.yaml from deploy/ with
    /// kubectl's kustomize (refused on a dirty tree); with --check, only compare.
    Render(CheckArgs),
}

#[derive(Debug, clap::Args)]
struct CheckArgs {
    /// Write nothing: exit 1, saying what differs, when the committed files are not what
    /// would be written now. Runs on a dirty tree.
    #[arg(long)]
    check: bool,
}

#[derive(Debug, clap::Args)]
struct PinArgs {
    /// The layout `image` wrote.
    #[arg(long, default_value = "target/image")]
    image_dir: PathBuf,
    /// The repository the release is pushed to; default: the one deploy/ names now.
    #[arg(long)]
    repository: Option<String>,
    /// Exit 1 when deploy/ names another digest than the built image's, and say how to fix it.
    #[arg(long)]
    check: bool,
}

#[derive(Debug, clap::Args)]
struct ImageArgs {
    /// The statically linked gangplank binary.
    #[arg(long)]
    binary: PathBuf,
    /// Where the layout goes (created).
    #[arg(long, default_value = "target/image")]
    out_dir: PathBuf,
    /// The CA bundle the image carries (registries are reached over TLS).
    #[arg(long, default_value = "/etc/ssl/certs/ca-certificates.crt")]
    ca_certificates: PathBuf,
    /// Every file's mtime and the config's creation time, in seconds since the epoch: the
    /// commit's time (`git log -1 --format=%ct`) makes two builds of a commit one image.
    #[arg(long, env = "SOURCE_DATE_EPOCH", default_value_t = 0)]
    source_date_epoch: u64,
    /// The commit built, recorded as org.opencontainers.image.revision.
    #[arg(long, default_value = "")]
    revision: String,
    /// The name recorded in the layout's index (what `ctr images import` tags it as).
    #[arg(long, default_value = concat!("localhost/gangplank:", env!("CARGO_PKG_VERSION")))]
    tag: String,
    /// Also push it: `registry/repository[:tag]` (http for 127.0.0.1 and localhost, https
    /// otherwise, or say which with a scheme in front); no credentials.
    #[arg(long)]
    push: Option<String>,
}

fn main() -> ExitCode {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let Cli { command } = Cli::parse();
    let result = match command {
        Command::Image(args) => build(args),
        Command::Source => source().map(|(revision, epoch)| println!("{revision} {epoch}")),
        Command::Pin(args) => pin(args),
        Command::Render(CheckArgs { check }) => render_dist(check),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}

fn build(args: ImageArgs) -> Result<(), String> {
    let ImageArgs {
        binary,
        out_dir,
        ca_certificates,
        source_date_epoch,
        revision,
        tag,
        push,
    } = args;
    let mut labels = vec![
        (
            "org.opencontainers.image.source".to_string(),
            "https://github.com/gangplank-dev/gangplank".to_string(),
        ),
        (
            "org.opencontainers.image.version".to_string(),
            env!("CARGO_PKG_VERSION").to_string(),
        ),
        (
            "org.opencontainers.image.licenses".to_string(),
            "Apache-2.0".to_string(),
        ),
    ];
    if !revision.is_empty() {
        labels.push(("org.opencontainers.image.revision".to_string(), revision));
    }
    let inputs = Inputs {
        binary,
        ca_certificates,
        source_date_epoch,
        labels,
        tag,
    };
    let built = image::build(&inputs).map_err(|e| gangplank::error_chain(&e))?;
    image::write_layout(&built, &out_dir).map_err(|e| gangplank::error_chain(&e))?;
    let archive =
        image::archive(&built, source_date_epoch).map_err(|e| gangplank::error_chain(&e))?;
    let write = |name: &str, bytes: &[u8]| {
        let path = out_dir.join(name);
        std::fs::write(&path, bytes).map_err(|e| format!("cannot write {}: {e}", path.display()))
    };
    write("image.tar", &archive)?;
    write("digest", format!("{}\n", built.manifest_digest).as_bytes())?;
    eprintln!(
        "image {} ({} bytes in its layer) in {}",
        built.tag,
        built.layer.len(),
        out_dir.display()
    );
    if let Some(reference) = push {
        let target =
            Target::parse(&reference, env!("CARGO_PKG_VERSION")).map_err(|e| e.to_string())?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the async runtime: {e}"))?;
        let client = reqwest::Client::new();
        let stored = runtime
            .block_on(push::push(&client, &built, &target))
            .map_err(|e| gangplank::error_chain(&e))?;
        eprintln!(
            "pushed {}/{}:{} as {stored}",
            target.base, target.repository, target.tag
        );
    }
    println!("{}", built.manifest_digest);
    Ok(())
}

/// (revision, commit time) of the last commit that changed the image's inputs.
fn source() -> Result<(String, u64), String> {
    let mut args = vec!["log", "-1", "--format=%H %ct", "--"];
    args.extend(pin::IMAGE_INPUTS);
    let out = git::run(&args).map_err(|e| gangplank::error_chain(&e))?;
    let (revision, epoch) = out
        .trim()
        .split_once(' ')
        .ok_or_else(|| format!("git log printed {out:?}: is this a git clone with history?"))?;
    let epoch = epoch
        .parse()
        .map_err(|e| format!("commit time {epoch:?}: {e}"))?;
    Ok((revision.to_string(), epoch))
}

/// The kustomizations whose `images:` block names gangplank's image: the base, and the
/// controller's and the audit CronJob's components (their workloads are added after the
/// base's transformer ran).
const KUSTOMIZATIONS: [&str; 3] = [
    "deploy/kustomization.yaml",
    "deploy/controller/kustomization.yaml",
    "deploy/audit/kustomization.yaml",
];

fn pin(args: PinArgs) -> Result<(), String> {
    let PinArgs {
        image_dir,
        repository,
        check,
    } = args;
    let read =
        |path: &str| std::fs::read_to_string(path).map_err(|e| format!("cannot read {path}: {e}"));
    let digest = read(&image_dir.join("digest").display().to_string())?
        .trim()
        .to_string();
    let fix = "build the image (.ci/image), then `cargo run --bin gangplank-release -- pin` on a clean tree, and commit";
    if check {
        for file in KUSTOMIZATIONS {
            let (repository, pinned) =
                pin::pinned(&read(file)?).map_err(|e| format!("{file}: {e}"))?;
            if pinned != digest {
                return Err(format!(
                    "{file} pins {pinned}, but this commit builds {digest}: {fix}"
                ));
            }
            eprintln!("{file} pins {repository}@{digest}, the image this commit builds");
        }
        return Ok(());
    }
    git::require_clean_tree("`gangplank-release pin`").map_err(|e| gangplank::error_chain(&e))?;
    let (revision, _) = source()?;
    let built_from = image_revision(&image_dir)?;
    if built_from != revision {
        return Err(format!(
            "{} was built from {built_from}, but this tree's image inputs are at {revision}: {fix}",
            image_dir.display()
        ));
    }
    for file in KUSTOMIZATIONS {
        let text = read(file)?;
        let (current, _) = pin::pinned(&text).map_err(|e| format!("{file}: {e}"))?;
        let repository = repository.clone().unwrap_or(current);
        let new = pin::rewrite(&text, &repository, &digest).map_err(|e| format!("{file}: {e}"))?;
        std::fs::write(file, new).map_err(|e| format!("cannot write {file}: {e}"))?;
        eprintln!("{file} now pins {repository}@{digest}");
    }
    // dist/ names the digest too: rendered in the same step, it cannot be left behind.
    match kubectl::find() {
        Ok(kubectl) => write_dist(&kubectl),
        Err(e) => {
            eprintln!(
                "warning: dist/ was not rendered again and may name the old digest: {e}; \
                 commit, then run `gangplank-release render` and commit again"
            );
            Ok(())
        }
    }
}

/// `render [--check]`: dist/'s files from deploy/.
fn render_dist(check: bool) -> Result<(), String> {
    if !check {
        git::require_clean_tree("`gangplank-release render`")
            .map_err(|e| gangplank::error_chain(&e))?;
    }
    let kubectl = kubectl::find().map_err(|e| e.to_string())?;
    if check {
        check_dist(&kubectl)
    } else {
        write_dist(&kubectl)
    }
}

fn write_dist(kubectl: &std::path::Path) -> Result<(), String> {
    for variant in &render::VARIANTS {
        let text = render::render(kubectl, std::path::Path::new("."), variant)
            .map_err(|e| gangplank::error_chain(&e))?;
        write_file(variant.file, &text)?;
        eprintln!("{} rendered from {}", variant.file, variant.overlay);
    }
    Ok(())
}

fn check_dist(kubectl: &std::path::Path) -> Result<(), String> {
    let mut stale = Vec::new();
    for variant in &render::VARIANTS {
        let text = render::render(kubectl, std::path::Path::new("."), variant)
            .map_err(|e| gangplank::error_chain(&e))?;
        match compare(variant.file, &text) {
            Some(why) => stale.push(why),
            None => eprintln!("{} is what {} renders to", variant.file, variant.overlay),
        }
    }
    if stale.is_empty() {
        return Ok(());
    }
    Err(format!(
        "{}\nrender dist/ again: `cargo run --bin gangplank-release -- render` on a clean \
         tree, and commit",
        stale.join("\n")
    ))
}

/// Why `file` on disk is not `expected`, or `None` when it is.
fn compare(file: &str, expected: &str) -> Option<String> {
    match std::fs::read_to_string(file) {
        Ok(committed) => {
            render::drift(&committed, expected).map(|d| format!("{file} differs: {d}"))
        }
        Err(e) => Some(format!("cannot read {file}: {e}")),
    }
}

fn write_file(file: &str, text: &str) -> Result<(), String> {
    if let Some(dir) = std::path::Path::new(file).parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    std::fs::write(file, text).map_err(|e| format!("cannot write {file}: {e}"))
}

/// The org.opencontainers.image.revision the layout's manifest carries.
fn image_revision(dir: &std::path::Path) -> Result<String, String> {
    let read_json = |path: PathBuf| -> Result<serde_json::Value, String> {
        let bytes =
            std::fs::read(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        serde_json::from_slice(&bytes).map_err(|e| format!("{}: {e}", path.display()))
    };
    let index = read_json(dir.join("index.json"))?;
    let digest = index["manifests"][0]["digest"].as_str().unwrap_or_default();
    let manifest = read_json(
        dir.join("blobs/sha256")
            .join(digest.trim_start_matches("sha256:")),
    )?;
    Ok(manifest["annotations"]["org.opencontainers.image.revision"]
        .as_str()
        .unwrap_or_default()
        .to_string())
}
