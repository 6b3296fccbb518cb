// Tests: an out-of-range index is a failed assertion, which is what a panic here reports.
#![allow(clippy::indexing_slicing)]

use super::*;

fn at(s: i64) -> Timestamp {
    Timestamp::from_second(1_700_000_000 + s).unwrap_or(Timestamp::UNIX_EPOCH)
}

fn set(status: &mut JobStatus, t: ConditionType, on: bool, reason: &str, now: i64) -> bool {
    status.set_condition(t, on, reason.into(), format!("{reason} message"), at(now))
}

fn types(status: &JobStatus) -> Vec<(ConditionType, &str)> {
    status
        .conditions
        .iter()
        .map(|c| (c.type_.clone(), c.status.as_str()))
        .collect()
}

#[test]
fn running_and_restarting_replace_each_other() {
    let mut s = JobStatus::default();
    set(&mut s, ConditionType::Created, true, "Created", 0);
    set(&mut s, ConditionType::Running, true, "Running", 1);
    set(&mut s, ConditionType::Restarting, true, "Restarting", 2);
    assert_eq!(
        types(&s),
        [
            (ConditionType::Created, "True"),
            (ConditionType::Restarting, "True")
        ]
    );
    set(&mut s, ConditionType::Running, true, "Running", 3);
    assert_eq!(
        types(&s),
        [
            (ConditionType::Created, "True"),
            (ConditionType::Running, "True")
        ]
    );
}

#[test]
fn succeeded_turns_running_false_and_failed_freezes_the_list() {
    let mut s = JobStatus::default();
    set(&mut s, ConditionType::Running, true, "Running", 1);
    set(&mut s, ConditionType::Failed, true, "Failed", 2);
    assert_eq!(
        types(&s),
        [
            (ConditionType::Running, "False"),
            (ConditionType::Failed, "True")
        ]
    );
    assert!(!set(&mut s, ConditionType::Succeeded, true, "Succeeded", 3));
    assert_eq!(s.conditions.len(), 2);
}

#[test]
fn an_unchanged_condition_keeps_its_times_and_a_new_message_keeps_the_transition() {
    let mut s = JobStatus::default();
    assert!(set(&mut s, ConditionType::Running, true, "A", 1));
    assert!(!set(&mut s, ConditionType::Running, true, "A", 5));
    assert_eq!(s.conditions[0].last_update_time, Some(Time(at(1))));
    assert!(set(&mut s, ConditionType::Running, true, "B", 7));
    assert_eq!(s.conditions[0].last_update_time, Some(Time(at(7))));
    assert_eq!(s.conditions[0].last_transition_time, Some(Time(at(1))));
}

#[test]
fn conditions_of_unknown_types_survive_a_round_trip() {
    let v = serde_json::json!({"conditions": [{"type": "Queued", "status": "True"}]});
    let s: JobStatus = serde_json::from_value(v).unwrap_or_default();
    assert_eq!(s.conditions[0].type_, ConditionType::Other("Queued".into()));
    let back = serde_json::to_value(&s).unwrap_or_default();
    assert_eq!(back["conditions"][0]["type"], "Queued");
}
