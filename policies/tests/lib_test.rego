package gangplank.lib_test

import rego.v1

import data.gangplank.lib

test_ptr_escapes_slashes if {
	lib.ptr("/limits", "nvidia.com/gpu") == "/limits/nvidia.com~1gpu"
}

test_ptrs_joins_keys if {
	lib.ptrs("/spec", ["runPolicy", "a~b"]) == "/spec/runPolicy/a~0b"
}
