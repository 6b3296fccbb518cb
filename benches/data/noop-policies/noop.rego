# A policy that finds nothing and changes nothing: gangplank serving this is the baseline of
# a do-nothing webhook pair (HTTPS, AdmissionReview decode, JobView, one evaluation, encode)
# for benches/apiserver_latency.rs.
package gangplank.policies.noop

import rego.v1

meta := {
	"title": "Does nothing",
	"description": "No violations, no mutations.",
	"action": "deny",
	"params": {},
}
