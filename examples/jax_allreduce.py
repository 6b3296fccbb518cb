"""One process of a JAXJob, as a user writes it: jax.distributed.initialize from the
environment the controller injects (COORDINATOR_ADDRESS, COORDINATOR_PORT, NUM_PROCESSES,
PROCESS_ID), then a psum across every process's CPU device over gloo, checked against the sum
computed here. Exits non-zero when the sum is wrong (tests/e2e_realnode_framework.rs)."""

import os

import jax

# gloo is the default CPU collectives of jaxlib 0.10; said explicitly, as older jaxlibs need it.
jax.config.update("jax_cpu_collectives_implementation", "gloo")
jax.distributed.initialize(
    coordinator_address=f"{os.environ['COORDINATOR_ADDRESS']}:{os.environ['COORDINATOR_PORT']}",
    num_processes=int(os.environ["NUM_PROCESSES"]),
    process_id=int(os.environ["PROCESS_ID"]),
)

import numpy as np  # noqa: E402  (after initialize, as JAX's docs order it)

processes, me = jax.process_count(), jax.process_index()
mine = np.arange(4, dtype=np.float32) + me
summed = jax.pmap(lambda x: jax.lax.psum(x, "i"), axis_name="i")(mine[None])
got = np.asarray(summed)[0]
want = sum(np.arange(4, dtype=np.float32) + p for p in range(processes))
print(
    f"jax {jax.__version__} process {me}/{processes}: {jax.device_count()} devices, "
    f"psum {got.tolist()}, expected {want.tolist()}",
    flush=True,
)
if not (got == want).all():
    raise SystemExit(f"process {me}: psum {got.tolist()} is not {want.tolist()}")
print(f"process {me}: all-reduce as expected", flush=True)
