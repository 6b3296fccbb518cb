package gangplank.lib_test

import rego.v1

import data.gangplank.lib

test_ptr_escapes_slashes if {
	lib.ptr("/limits", "nvidia.com/gpu") == "/limits/nvidia.com~1gpu"
}

test_ptrs_joins_keys if {
	lib.ptrs("/spec", ["runPolicy", "a~b"]) == "/spec/runPolicy/a~0b"
}

# The helpers that replaced regular expressions with string builtins (a request's first
# regex.match costs several microseconds) accept exactly what the expressions accepted.

repeat(s, n) := concat("", [s | some _ in numbers.range(1, n)])

hex64 := repeat("0123456789abcdef", 4)

label_samples := [
	"a", "z", "0", "9", "-", "a-", "-a", "0-", "a-b", "a--b", "0a", "mnist-ddp", "llama-finetune-2",
	"Mnist", "a_b", "a.b", "1abc", "abc1", "", " ", "é", "aé", "a b", "a\n", "a-\n",
	repeat("a", 63), repeat("a", 64), concat("", [repeat("a", 62), "-"]),
]

# Each helper's answer, false rather than undefined.
dns1035(s) := true if lib.dns1035_label(s) else := false

dns1123(s) := true if lib.dns1123_label(s) else := false

label_regex(pattern, s) := true if {
	count(s) <= 63
	regex.match(pattern, s)
} else := false

test_dns1035_label_is_the_rfc_1035_expression if {
	every s in label_samples {
		dns1035(s) == label_regex(`^[a-z]([-a-z0-9]*[a-z0-9])?$`, s)
	}
}

test_dns1123_label_is_the_rfc_1123_expression if {
	every s in label_samples {
		dns1123(s) == label_regex(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`, s)
	}
}

test_dns_labels_need_strings if {
	not lib.dns1035_label(7)
	not lib.dns1123_label(null)
}

image_samples := [
	concat("", ["repo/app:1.0@sha256:", hex64]),
	concat("", ["repo/app@sha256:", hex64]),
	concat("", ["@sha256:", hex64]),
	concat("", ["repo/app@sha256:", hex64, "0"]),
	concat("", ["repo/app@sha256:", substring(hex64, 1, -1)]),
	concat("", ["repo/app@sha256:", upper(hex64)]),
	concat("", ["repo/app@sha256:", hex64, "@sha256:", hex64]),
	concat("", ["repo/app@sha256:", hex64, "@sha256:"]),
	concat("", ["repo/app@sha512:", hex64]),
	concat("", ["repo/app:sha256:", hex64]),
	concat("", ["repo/app@sha256:", repeat("g", 64)]),
	"repo/app:1.0", "repo/app@sha256:", "", "@sha256:",
]

pinned(image) := true if lib.image_pinned(image) else := false

pinned_regex(image) := true if regex.match(`@sha256:[a-f0-9]{64}$`, image) else := false

test_image_pinned_is_the_digest_expression if {
	every image in image_samples {
		pinned(image) == pinned_regex(image)
	}
}

digest(d) := true if lib.is_sha256_digest(d) else := false

digest_regex(d) := true if regex.match(`^sha256:[a-f0-9]{64}$`, d) else := false

test_is_sha256_digest_is_the_digest_expression if {
	every d in [
		concat("", ["sha256:", hex64]), concat("", ["sha256:", hex64, "0"]),
		concat("", ["xsha256:", hex64]), concat("", ["sha256:", upper(hex64)]),
		concat("", ["sha256:", substring(hex64, 1, -1)]), "sha256:", "",
	] {
		digest(d) == digest_regex(d)
	}
	not lib.is_sha256_digest(7)
}

test_whole_number_reads_digit_strings_as_atoi_does if {
	lib.whole_number("8") == 8
	lib.whole_number("08") == 8
	lib.whole_number("0") == 0
	lib.whole_number("000") == 0
	lib.whole_number("123456789") == 123456789
	lib.whole_number(4) == 4
	not lib.whole_number("1234567890")
	not lib.whole_number("")
	not lib.whole_number("-1")
	not lib.whole_number("1.5")
	not lib.whole_number(" 8")
	not lib.whole_number("auto")
	not lib.whole_number(-1)
	not lib.whole_number(1.5)
}

test_is_glob_finds_each_metacharacter if {
	every p in ["*", "PET_*", "a?", "[ab]", "{a,b}"] {
		lib.is_glob(p)
	}
	not lib.is_glob("MASTER_ADDR")
	not lib.is_glob("")
}

test_shown_quotes_strings_and_names_null if {
	lib.shown("x") == "\"x\""
	lib.shown(null) == "unset"
	lib.shown(3) == "3"
	lib.shown(-1) == "-1"
	lib.shown([1]) == "[1]"
}

test_run_policy_is_an_object_or_empty if {
	lib.run_policy({"spec": {"runPolicy": {"backoffLimit": 3}}}) == {"backoffLimit": 3}
	lib.run_policy({"spec": {"runPolicy": "Running"}}) == {}
	lib.run_policy({"spec": {"runPolicy": null}}) == {}
	lib.run_policy({"spec": "x"}) == {}
	lib.run_policy({}) == {}
}
