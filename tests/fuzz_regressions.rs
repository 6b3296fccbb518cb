//! Inputs the fuzz targets (fuzz/, `.ci/fuzz`) found failing, each replayed through the
//! same check as its target, as an ordinary test on the stable toolchain. RELIABILITY.md
//! lists the findings.

use gangplank::images::reference::{Reference, ReferenceError};

/// fuzz/fuzz_targets/oci_reference.rs, crash-e0d77d32: a name of 249 characters as written
/// (under distribution's 255) that is 259 long as `docker.io/<name>`. It was accepted, and
/// its full form, which digest pinning writes back into the job, was then refused.
const NAME_LONG_ONLY_WITH_ITS_REGISTRY: &str = "i/kuregisovod/le.cdubc/xger.io/kuregisovod/le.cotry.baidubcio/r.io/kury/baidubc/xger.i-o/kubeflow/mr.gimovod/idle/mpi-hopi-hbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbborovo-cpu";

/// The oci_reference target's property: a reference parses or is refused, and a parsed
/// one printed in full parses back to itself.
fn round_trips_or_is_refused(image: &str) -> Result<Reference, ReferenceError> {
    let r = Reference::parse(image)?;
    let full = r.to_string();
    assert_eq!(
        Reference::parse(&full).as_ref(),
        Ok(&r),
        "{image:?} printed as {full:?}"
    );
    Ok(r)
}

#[test]
fn a_name_over_the_limit_once_its_registry_is_added_is_refused_not_half_accepted() {
    assert_eq!(NAME_LONG_ONLY_WITH_ITS_REGISTRY.len(), 249);
    assert_eq!(
        round_trips_or_is_refused(NAME_LONG_ONLY_WITH_ITS_REGISTRY),
        Err(ReferenceError::NameTooLong { len: 259 })
    );
}
