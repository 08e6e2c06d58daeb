//! Bounded condition messages: what `kubectl get`, kstatus readers and `kubectl describe` show
//! must stay readable however many objects failed.
//!
//! Flux joins such lists whole (Kubernetes only caps a condition message at 32,768 characters);
//! Capstan summarises them: the count, the first few entries, and how many more
//! ([`summarize`]), and keeps any message within [`MAX_MESSAGE`] characters by leaving out its
//! middle ([`bound`]), so the start (what failed) and the end of an error chain (the root
//! cause) both stay.

/// The longest condition message written, in characters (the size of a Kubernetes Event note,
/// which is counted in bytes: Events cut it again).
pub const MAX_MESSAGE: usize = 1024;

/// How many entries of a list [`summarize`] shows.
pub const LISTED: usize = 3;

/// `message` within `max` characters: unchanged when it fits, else its start and its end
/// around `… (N characters left out) …`; when `max` leaves no room for that marker, its first
/// `max - 1` characters and `…`.
pub fn bound_to(message: &str, max: usize) -> String {
    let length = message.chars().count();
    if length <= max {
        return message.to_owned();
    }
    let marker = |left_out: usize| format!(" … ({left_out} characters left out) … ");
    let Some(budget) = max.checked_sub(marker(length).chars().count()) else {
        let mut cut: String = message.chars().take(max.saturating_sub(1)).collect();
        if max > 0 {
            cut.push('…');
        }
        return cut;
    };
    let head = budget * 2 / 3;
    let tail = budget - head;
    let start: String = message.chars().take(head).collect();
    let end: String = message.chars().skip(length - tail).collect();
    format!("{start}{}{end}", marker(length - head - tail))
}

/// `message` within [`MAX_MESSAGE`] characters (see [`bound_to`]).
pub fn bound(message: &str) -> String {
    bound_to(message, MAX_MESSAGE)
}

/// A list of entries (one per failed object) as one message: all of them, `; `-separated, when
/// there are at most [`LISTED`]; else the first [`LISTED`] and `(and N more)`. The whole stays
/// within [`MAX_MESSAGE`]: entries too long for their share are shortened ([`bound_to`]).
pub fn summarize<T: AsRef<str>>(entries: &[T]) -> String {
    summarize_after("", entries)
}

/// `prefix` followed by the [`summarize`]d `entries`, the whole within [`MAX_MESSAGE`]
/// characters: the entries share what the prefix leaves (a prefix longer than half the room is
/// itself shortened to half, so the list always shows).
pub fn summarize_after<T: AsRef<str>>(prefix: &str, entries: &[T]) -> String {
    let prefix = bound_to(prefix, MAX_MESSAGE / 2);
    let room = MAX_MESSAGE - prefix.chars().count();
    let shown = entries.len().min(LISTED);
    if shown == 0 {
        return prefix;
    }
    let suffix = if entries.len() > LISTED {
        format!("; (and {} more)", entries.len() - LISTED)
    } else {
        String::new()
    };
    let separators = 2 * (shown - 1);
    let share = room.saturating_sub(suffix.chars().count() + separators) / shown;
    let mut text = prefix;
    for (i, entry) in entries.iter().take(LISTED).enumerate() {
        if i > 0 {
            text.push_str("; ");
        }
        text.push_str(&bound_to(entry.as_ref(), share));
    }
    text.push_str(&suffix);
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_lists_are_joined_whole() {
        assert_eq!(summarize(&["a failed", "b failed"]), "a failed; b failed");
        assert_eq!(summarize::<&str>(&[]), "");
        let long = format!(
            "Job/default/migrate: immutable: {}: spec.template: {}",
            "j".repeat(300),
            "k".repeat(300)
        );
        assert_eq!(
            summarize(&[&long]),
            long,
            "one entry keeps the whole message's room"
        );
        let three = vec![long.clone(); 3];
        let text = summarize(&three);
        assert!(text.chars().count() <= MAX_MESSAGE, "{}", text.len());
        assert_eq!(text.matches("Job/default/migrate").count(), 3);
    }

    #[test]
    fn long_lists_show_the_count_and_the_first_entries() {
        let entries: Vec<String> = (1..=200)
            .map(|i| {
                format!(
                    "Deployment/apps/web-{i} status: 'InProgress': {}",
                    "x".repeat(30)
                )
            })
            .collect();
        let text = summarize(&entries);
        assert!(text.starts_with("Deployment/apps/web-1 "), "{text}");
        assert!(text.contains("web-3 "), "{text}");
        assert!(!text.contains("web-4 "), "{text}");
        assert!(text.ends_with("(and 197 more)"), "{text}");
        assert!(text.chars().count() <= MAX_MESSAGE);
    }

    #[test]
    fn the_prefix_counts_in_the_budget() {
        let prefix = "apply failed for 200 of 210 objects (10 applied): ";
        let entries = vec!["e".repeat(2000); 200];
        let text = summarize_after(prefix, &entries);
        assert!(text.starts_with(prefix), "{text}");
        assert!(text.ends_with("(and 197 more)"), "{text}");
        assert!(
            text.chars().count() <= MAX_MESSAGE,
            "{}",
            text.chars().count()
        );
        assert_eq!(text.matches("characters left out").count(), 3, "{text}");

        let long_prefix = "p".repeat(3000);
        let text = summarize_after(&long_prefix, &["x failed", "y failed"]);
        assert!(text.chars().count() <= MAX_MESSAGE);
        assert!(text.ends_with("x failed; y failed"), "{text}");
        assert_eq!(summarize_after("nothing: ", &[] as &[&str]), "nothing: ");
    }

    #[test]
    fn tiny_budgets_are_kept_too() {
        for max in 0..40 {
            let text = bound_to(&"z".repeat(500), max);
            assert!(text.chars().count() <= max, "{max}: {text}");
        }
        assert_eq!(bound_to("abcdef", 4), "abc…");
    }

    #[test]
    fn bounding_keeps_the_start_and_the_root_cause() {
        let message = format!("apply failed: {}: no such host", "y".repeat(5000));
        let bounded = bound(&message);
        assert!((MAX_MESSAGE - 3..=MAX_MESSAGE).contains(&bounded.chars().count()));
        assert!(bounded.starts_with("apply failed: "), "{bounded}");
        assert!(bounded.ends_with(": no such host"), "{bounded}");
        assert!(bounded.contains("characters left out"), "{bounded}");
        assert_eq!(bound("short"), "short");
        let wide = "é".repeat(2000);
        let count = bound(&wide).chars().count();
        assert!(
            (MAX_MESSAGE - 3..=MAX_MESSAGE).contains(&count),
            "characters, not bytes"
        );
    }
}
