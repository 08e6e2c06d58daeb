//! Condition bookkeeping with Kubernetes semantics: `lastTransitionTime` only moves when the
//! status changes.

use capstan_api::meta::Condition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// `True`, `False` or `Unknown`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConditionStatus {
    /// The condition holds.
    True,
    /// The condition does not hold.
    False,
    /// Not known yet.
    Unknown,
}

impl ConditionStatus {
    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::True => "True",
            Self::False => "False",
            Self::Unknown => "Unknown",
        }
    }
}

/// Sets (adds or updates) the condition `type_`; keeps `lastTransitionTime` unless the status
/// changes. Returns whether anything changed.
pub fn set_condition(
    conditions: &mut Vec<Condition>,
    type_: &str,
    status: ConditionStatus,
    reason: &str,
    message: &str,
    generation: Option<i64>,
) -> bool {
    let status = status.as_str();
    if let Some(existing) = conditions.iter_mut().find(|c| c.type_ == type_) {
        let unchanged = existing.status == status
            && existing.reason == reason
            && existing.message == message
            && existing.observed_generation == generation;
        if unchanged {
            return false;
        }
        if existing.status != status {
            existing.last_transition_time = now();
        }
        status.clone_into(&mut existing.status);
        reason.clone_into(&mut existing.reason);
        message.clone_into(&mut existing.message);
        existing.observed_generation = generation;
        return true;
    }
    conditions.push(Condition {
        type_: type_.to_owned(),
        status: status.to_owned(),
        reason: reason.to_owned(),
        message: message.to_owned(),
        last_transition_time: now(),
        observed_generation: generation,
    });
    true
}

/// Removes the condition `type_`; returns whether it was present.
pub fn remove_condition(conditions: &mut Vec<Condition>, type_: &str) -> bool {
    let before = conditions.len();
    conditions.retain(|c| c.type_ != type_);
    before != conditions.len()
}

/// The condition `type_`, if present.
pub fn find<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

fn now() -> Time {
    // Condition times have second precision on the wire.
    let now = jiff::Timestamp::now();
    Time(jiff::Timestamp::from_second(now.as_second()).unwrap_or(now))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_transition_time_while_status_is_unchanged() {
        let mut conditions = Vec::new();
        assert!(set_condition(
            &mut conditions,
            "Ready",
            ConditionStatus::False,
            "Failed",
            "one",
            Some(1)
        ));
        let epoch = Time(jiff::Timestamp::UNIX_EPOCH);
        conditions[0].last_transition_time = epoch.clone();
        assert!(!set_condition(
            &mut conditions,
            "Ready",
            ConditionStatus::False,
            "Failed",
            "one",
            Some(1)
        ));
        assert!(set_condition(
            &mut conditions,
            "Ready",
            ConditionStatus::False,
            "Failed",
            "two",
            Some(1)
        ));
        assert_eq!(conditions[0].last_transition_time, epoch);
        assert_eq!(conditions[0].message, "two");
        assert!(set_condition(
            &mut conditions,
            "Ready",
            ConditionStatus::True,
            "Succeeded",
            "ok",
            Some(2)
        ));
        assert_ne!(conditions[0].last_transition_time, epoch);
        assert_eq!(conditions.len(), 1);
        assert_eq!(conditions[0].observed_generation, Some(2));
    }

    #[test]
    fn removes_only_the_named_condition() {
        let mut conditions = Vec::new();
        set_condition(
            &mut conditions,
            "Ready",
            ConditionStatus::True,
            "R",
            "",
            None,
        );
        set_condition(
            &mut conditions,
            "Stalled",
            ConditionStatus::True,
            "S",
            "",
            None,
        );
        assert!(remove_condition(&mut conditions, "Stalled"));
        assert!(!remove_condition(&mut conditions, "Stalled"));
        assert_eq!(conditions.len(), 1);
        assert_eq!(find(&conditions, "Ready").unwrap().reason, "R");
        assert!(find(&conditions, "Stalled").is_none());
    }
}
