use super::*;

const GPU: &str = "nvidia.com/gpu";

fn fr() -> FlavorResource {
    ("a100".to_string(), GPU.to_string())
}

/// A node in `parent` with the GPU quota of flavor a100: nominal, borrowing, lending limit.
fn node(
    parent: Option<&str>,
    nominal: i64,
    borrowing: Option<i64>,
    lending: Option<i64>,
) -> QuotaNode {
    let quota = Quota {
        nominal: Amount(nominal),
        borrowing_limit: borrowing.map(Amount),
        lending_limit: lending.map(Amount),
    };
    QuotaNode {
        parent: parent.map(str::to_string),
        quotas: BTreeMap::from([(fr(), quota)]),
        ..QuotaNode::default()
    }
}

fn tree(queues: Vec<(&str, QuotaNode)>, cohorts: Option<Vec<(&str, QuotaNode)>>) -> Tree {
    let named =
        |v: Vec<(&str, QuotaNode)>| v.into_iter().map(|(n, q)| (n.to_string(), q)).collect();
    Tree {
        cluster_queues: named(queues),
        cohorts: cohorts.map(named),
    }
}

fn reserve(tree: &Tree, queue: &str) -> Reserve {
    tree.can_reserve(queue, &fr()).expect("a queue of the tree")
}

#[test]
fn a_borrowing_limit_is_capped_by_what_the_cohort_can_lend() {
    // The case: 8 GPUs, borrowingLimit 16, beside a queue of 16 that lends at most 4.
    let t = tree(
        vec![
            ("small", node(Some("pool"), 8, Some(16), None)),
            ("big", node(Some("pool"), 16, None, Some(4))),
        ],
        Some(vec![]),
    );
    assert_eq!(reserve(&t, "small"), Reserve::AtMost(Amount(12)));
    // The lender keeps its 12 and may borrow the small queue's 8.
    assert_eq!(reserve(&t, "big"), Reserve::AtMost(Amount(24)));
}

#[test]
fn without_limits_a_queue_can_reach_the_whole_cohort() {
    let t = tree(
        vec![
            ("a", node(Some("pool"), 8, None, None)),
            ("b", node(Some("pool"), 16, None, None)),
        ],
        Some(vec![]),
    );
    assert_eq!(reserve(&t, "a"), Reserve::AtMost(Amount(24)));
}

#[test]
fn a_borrowing_limit_below_what_the_cohort_lends_decides() {
    let t = tree(
        vec![
            ("a", node(Some("pool"), 8, Some(2), None)),
            ("b", node(Some("pool"), 16, None, None)),
        ],
        Some(vec![]),
    );
    assert_eq!(reserve(&t, "a"), Reserve::AtMost(Amount(10)));
}

#[test]
fn a_queue_that_lends_little_still_reaches_its_own_nominal_and_the_rest() {
    // a keeps 6 of its 8 (lendingLimit 2); the cohort holds 2 + 16.
    let t = tree(
        vec![
            ("a", node(Some("pool"), 8, None, Some(2))),
            ("b", node(Some("pool"), 16, None, None)),
        ],
        Some(vec![]),
    );
    assert_eq!(reserve(&t, "a"), Reserve::AtMost(Amount(24)));
    // b reaches its 16 and the 2 a lends.
    assert_eq!(reserve(&t, "b"), Reserve::AtMost(Amount(18)));
}

#[test]
fn outside_a_cohort_only_the_nominal_quota_counts() {
    let t = tree(vec![("alone", node(None, 8, Some(16), None))], Some(vec![]));
    assert_eq!(reserve(&t, "alone"), Reserve::AtMost(Amount(8)));
}

#[test]
fn nested_cohorts_lend_upwards_only_within_their_lending_limit() {
    // org (own quota 10) holds team (lends nothing up) and c (4); team holds a (8).
    let cohorts = vec![
        ("org", node(None, 10, None, None)),
        ("team", node(Some("org"), 0, None, Some(0))),
    ];
    let queues = vec![
        ("a", node(Some("team"), 8, None, None)),
        ("c", node(Some("org"), 4, None, None)),
    ];
    let t = tree(queues.clone(), Some(cohorts));
    // a: team's 8 kept below org, plus all org holds (10 + 4).
    assert_eq!(reserve(&t, "a"), Reserve::AtMost(Amount(22)));
    // c: org's 10 and its own 4, never team's 8.
    assert_eq!(reserve(&t, "c"), Reserve::AtMost(Amount(14)));
    // team may borrow at most 3 beyond its subtree.
    let capped = vec![
        ("org", node(None, 10, None, None)),
        ("team", node(Some("org"), 0, Some(3), Some(0))),
    ];
    let t = tree(queues, Some(capped));
    assert_eq!(reserve(&t, "a"), Reserve::AtMost(Amount(11)));
}

#[test]
fn a_cohort_named_without_an_object_is_implicit_and_adds_nothing() {
    let t = tree(
        vec![("a", node(Some("ghost"), 8, None, None))],
        Some(vec![("other", node(None, 100, None, None))]),
    );
    assert_eq!(reserve(&t, "a"), Reserve::AtMost(Amount(8)));
}

#[test]
fn a_cohort_cycle_is_named_and_not_judged() {
    let t = tree(
        vec![
            ("a", node(Some("x"), 8, None, None)),
            ("b", node(Some("free"), 8, None, None)),
        ],
        Some(vec![
            ("x", node(Some("y"), 0, None, None)),
            ("y", node(Some("x"), 0, None, None)),
        ]),
    );
    let cycle = ["x", "y", "x"].map(String::from).to_vec();
    assert_eq!(reserve(&t, "a"), Reserve::Cycle(cycle));
    assert_eq!(
        reserve(&t, "b"),
        Reserve::AtMost(Amount(8)),
        "another tree is judged"
    );
}

#[test]
fn without_the_cohort_objects_only_the_queues_own_cap_is_sure() {
    let t = tree(
        vec![
            ("capped", node(Some("pool"), 8, Some(16), None)),
            ("open", node(Some("pool"), 16, None, Some(4))),
        ],
        None,
    );
    assert_eq!(reserve(&t, "capped"), Reserve::AtMost(Amount(24)));
    assert_eq!(reserve(&t, "open"), Reserve::AtMost(Amount::UNLIMITED));
}

#[test]
fn an_unreadable_quota_leaves_its_cohort_tree_unjudged_and_no_other() {
    let mut bad = node(Some("pool"), 0, None, None);
    bad.unreadable.insert(fr());
    let t = tree(
        vec![
            ("a", node(Some("pool"), 8, Some(16), None)),
            ("bad", bad),
            ("elsewhere", node(None, 4, None, None)),
        ],
        Some(vec![]),
    );
    assert_eq!(reserve(&t, "a"), Reserve::Unreadable);
    assert_eq!(reserve(&t, "elsewhere"), Reserve::AtMost(Amount(4)));
}

#[test]
fn unlimited_quota_stays_unlimited_through_the_tree() {
    let t = tree(
        vec![
            ("a", node(Some("pool"), 8, None, None)),
            ("b", node(Some("pool"), i64::MAX, None, None)),
        ],
        Some(vec![]),
    );
    assert_eq!(reserve(&t, "a"), Reserve::AtMost(Amount::UNLIMITED));
}
