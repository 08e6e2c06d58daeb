use serde_json::{Map, Value, json};

use super::*;
use crate::fieldpath::FieldSet;

#[test]
fn merge_patch_rfc7386_examples() {
    // (target, patch, expected) from RFC 7386 appendix A.
    let cases = [
        (json!({"a": "b"}), json!({"a": "c"}), json!({"a": "c"})),
        (
            json!({"a": "b"}),
            json!({"b": "c"}),
            json!({"a": "b", "b": "c"}),
        ),
        (json!({"a": "b"}), json!({"a": null}), json!({})),
        (
            json!({"a": "b", "b": "c"}),
            json!({"a": null}),
            json!({"b": "c"}),
        ),
        (json!({"a": ["b"]}), json!({"a": "c"}), json!({"a": "c"})),
        (json!({"a": "c"}), json!({"a": ["b"]}), json!({"a": ["b"]})),
        (
            json!({"a": {"b": "c"}}),
            json!({"a": {"b": "d", "c": null}}),
            json!({"a": {"b": "d"}}),
        ),
        (
            json!({"a": [{"b": "c"}]}),
            json!({"a": [1]}),
            json!({"a": [1]}),
        ),
        (json!(["a", "b"]), json!(["c", "d"]), json!(["c", "d"])),
        (json!({"a": "b"}), json!(["c"]), json!(["c"])),
        (json!({"a": "foo"}), json!(null), json!(null)),
        (json!({"a": "foo"}), json!("bar"), json!("bar")),
        (
            json!({"e": null}),
            json!({"a": 1}),
            json!({"e": null, "a": 1}),
        ),
        (
            json!([1, 2]),
            json!({"a": "b", "c": null}),
            json!({"a": "b"}),
        ),
        (
            json!({}),
            json!({"a": {"bb": {"ccc": null}}}),
            json!({"a": {"bb": {}}}),
        ),
    ];
    for (mut target, patch, expected) in cases {
        let before = target.clone();
        merge_patch(&mut target, &patch);
        assert_eq!(target, expected, "{before} + {patch}");
    }
}

#[test]
fn json_patch_applies_all_or_nothing() {
    let mut target = json!({"spec": {"replicas": 1, "args": ["a"]}});
    json_patch(
        &mut target,
        &json!([
            {"op": "replace", "path": "/spec/replicas", "value": 2},
            {"op": "add", "path": "/spec/args/-", "value": "b"},
            {"op": "test", "path": "/spec/args/0", "value": "a"}
        ]),
    )
    .expect("patch applies");
    assert_eq!(target, json!({"spec": {"replicas": 2, "args": ["a", "b"]}}));

    let before = target.clone();
    let failed = json_patch(
        &mut target,
        &json!([
            {"op": "replace", "path": "/spec/replicas", "value": 3},
            {"op": "remove", "path": "/spec/missing"}
        ]),
    );
    assert!(
        matches!(failed, Err(PatchError::JsonPatch(_))),
        "{failed:?}"
    );
    assert_eq!(target, before);

    let failed_test = json_patch(
        &mut target,
        &json!([{"op": "test", "path": "/spec/replicas", "value": 9}]),
    );
    assert!(matches!(failed_test, Err(PatchError::JsonPatch(_))));
    for malformed in [
        json!({"op": "add"}),
        json!([{"op": "frobnicate", "path": "/a"}]),
        json!([{"op": "add", "path": "/a"}]),
    ] {
        assert!(
            matches!(
                json_patch(&mut target, &malformed),
                Err(PatchError::Invalid(_))
            ),
            "{malformed}"
        );
    }
    assert_eq!(target, before);
}

/// A small deterministic generator (xorshift) for property tests.
struct Generator(u64);

impl Generator {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, bound: u64) -> u64 {
        self.next() % bound
    }

    fn value(&mut self, depth: u32, nulls: bool) -> Value {
        let choice = if depth == 0 {
            self.below(3)
        } else {
            self.below(6)
        };
        match choice {
            0 => json!(self.below(4)),
            1 => json!(["a", "b", "c", "d"][self.below(4) as usize]),
            2 if nulls => Value::Null,
            2 => json!(self.below(2) == 0),
            3 => Value::Array(
                (0..self.below(3))
                    .map(|_| self.value(depth - 1, false))
                    .collect(),
            ),
            _ => {
                let mut map = Map::new();
                for _ in 0..self.below(4) {
                    let key = ["p", "q", "r", "s"][self.below(4) as usize].to_owned();
                    map.insert(key, self.value(depth - 1, nulls));
                }
                Value::Object(map)
            }
        }
    }

    fn object(&mut self, nulls: bool) -> Value {
        loop {
            let value = self.value(3, nulls);
            if value.is_object() {
                return value;
            }
        }
    }
}

/// Without a schema and without directives, a strategic merge patch is a JSON merge patch.
#[test]
fn property_schemaless_strategic_merge_equals_merge_patch() {
    let mut generator = Generator(0x9e37_79b9_7f4a_7c15);
    for _ in 0..2000 {
        let original = generator.object(false);
        let patch = generator.object(true);
        let mut expected = original.clone();
        merge_patch(&mut expected, &patch);
        let actual = strategic_merge(&original, &patch, None).expect("patch applies");
        assert_eq!(actual, expected, "{original} + {patch}");
    }
}

/// `from_object` sets survive the `FieldsV1` encoding, and the set algebra is consistent.
#[test]
fn property_field_sets_round_trip_and_obey_set_laws() {
    let mut generator = Generator(0x2545_f491_4f6c_dd1d);
    for _ in 0..500 {
        let a = FieldSet::from_object(&generator.object(false), None);
        let b = FieldSet::from_object(&generator.object(false), None);
        assert_eq!(
            FieldSet::from_fields_v1(&a.to_fields_v1()).expect("decodes"),
            a
        );
        assert_eq!(a.union(&b), b.union(&a));
        assert_eq!(a.intersection(&b), b.intersection(&a));
        assert_eq!(a.difference(&b).union(&a.intersection(&b)), a);
        assert!(a.difference(&b).intersection(&b).is_empty());
        assert_eq!(
            a.union(&b).len(),
            a.len() + b.len() - a.intersection(&b).len()
        );
    }
}
