//! Template functions: dictionaries (`dict`, `get`, `set`, `merge`, `dig`, `deepCopy`, …).
//!
//! Go maps are references: `set`, `unset` and `merge` change the map they are given, and every
//! holder of that map sees the change (charts rely on it: `$_ := set $ctx "x" 1`). [`Value::Map`]
//! shares the same way.
//!
//! Go iterates maps in random order, so `keys` and `values` come back shuffled in Helm; charts
//! sort them (`keys $m | sortAlpha`). Here they come in key order, one of Go's possible answers.

use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

use super::reflect::{
    MAX_NESTING, STACK_GROWTH, STACK_RED_ZONE, is_empty, list_items, map_arg, string_arg,
    want_args, want_at_least,
};
use crate::cast;
use crate::template::{Call, FuncMap};
use crate::value::{Map, Value};

/// Adds this module's functions to `map`.
pub fn register(map: &mut FuncMap) {
    map.insert("dict", dict);
    map.insert("get", get);
    map.insert("set", set);
    map.insert("unset", unset);
    map.insert("hasKey", has_key);
    map.insert("pluck", pluck);
    map.insert("keys", keys);
    map.insert("pick", pick);
    map.insert("omit", omit);
    map.insert("values", values);
    map.insert("merge", merge);
    map.insert("mustMerge", merge);
    map.insert("mergeOverwrite", merge_overwrite);
    map.insert("mustMergeOverwrite", merge_overwrite);
    map.insert("deepCopy", deep_copy);
    map.insert("mustDeepCopy", deep_copy);
    map.insert("dig", dig);
}

/// `dict K V K V …`: keys converted to strings as `toString` does (`nil` becomes "<nil>"), a
/// missing last value is "".
#[expect(
    clippy::unnecessary_wraps,
    reason = "every template function returns a Result"
)]
fn dict(_: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    let mut entries = BTreeMap::new();
    for pair in args.chunks(2) {
        let value = pair.get(1).cloned().unwrap_or_else(|| Value::str(""));
        entries.insert(cast::to_string(&pair[0]), value);
    }
    Ok(Value::map(entries))
}

/// `get MAP KEY`: the value, or "" when the key is missing (nil when it holds nil).
fn get(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    want_args(call, args, 2)?;
    let map = map_arg(&args[0])?;
    let key = string_arg(&args[1])?;
    Ok(map
        .and_then(|m| m.borrow().get(key).cloned())
        .unwrap_or_else(|| Value::str("")))
}

fn set(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    want_args(call, args, 3)?;
    let map = map_arg(&args[0])?.ok_or("assignment to entry in nil map")?;
    let key = string_arg(&args[1])?;
    refuse_cycle(&args[2], map)?;
    map.borrow_mut().insert(key.to_string(), args[2].clone());
    Ok(args[0].clone())
}

/// Go lets a map hold itself, but then printing it (or `toYaml`) recurses until Helm dies of a
/// stack overflow. We refuse to build such a map instead, which keeps every walker over values
/// (printing, YAML, JSON, copies) finite.
fn refuse_cycle(value: &Value, target: &Map) -> Result<(), String> {
    if contains_map(value, target) {
        Err("refusing to put a map inside itself (Helm would crash printing it)".into())
    } else {
        Ok(())
    }
}

/// Whether `target` is `value` or reachable from it. Iterative, and each shared map is visited
/// once, so deep or widely shared values cost no stack and linear time.
fn contains_map(value: &Value, target: &Map) -> bool {
    // The common case, a scalar or a map without nested containers, needs no bookkeeping.
    match value {
        Value::Map(m) if Rc::ptr_eq(m, target) => return true,
        Value::Map(m)
            if !m
                .borrow()
                .values()
                .any(|v| matches!(v, Value::Map(_) | Value::List(..))) =>
        {
            return false;
        }
        Value::Map(_) | Value::List(..) => {}
        _ => return false,
    }
    let mut seen = std::collections::HashSet::new();
    let mut pending: Vec<Value> = vec![value.clone()];
    while let Some(value) = pending.pop() {
        match value {
            Value::Map(m) => {
                if Rc::ptr_eq(&m, target) {
                    return true;
                }
                if seen.insert(Rc::as_ptr(&m)) {
                    pending.extend(m.borrow().values().cloned());
                }
            }
            Value::List(items, _) => pending.extend(items.iter().cloned()),
            _ => {}
        }
    }
    false
}

fn unset(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    want_args(call, args, 2)?;
    let map = map_arg(&args[0])?;
    let key = string_arg(&args[1])?;
    Ok(match map {
        Some(map) => {
            map.borrow_mut().remove(key);
            args[0].clone()
        }
        None => Value::empty_map(),
    })
}

fn has_key(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    want_args(call, args, 2)?;
    let map = map_arg(&args[0])?;
    let key = string_arg(&args[1])?;
    Ok(Value::Bool(
        map.is_some_and(|m| m.borrow().contains_key(key)),
    ))
}

/// The maps of a `...map[string]interface {}` parameter (nil maps are empty).
fn maps_arg(args: &[Value]) -> Result<Vec<Option<&Map>>, String> {
    args.iter().map(map_arg).collect()
}

/// The strings of a `...string` parameter.
fn strings_arg(args: &[Value]) -> Result<Vec<&str>, String> {
    args.iter().map(string_arg).collect()
}

/// `pluck KEY MAP…`: the KEY values of the maps that have it.
fn pluck(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    want_at_least(call, args, 1)?;
    let key = string_arg(&args[0])?;
    let found = maps_arg(&args[1..])?
        .into_iter()
        .flatten()
        .filter_map(|m| m.borrow().get(key).cloned())
        .collect();
    Ok(Value::list(found))
}

/// `keys MAP…`: every map's keys, one map after the other (duplicates kept), as a `[]string`.
fn keys(_: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    let mut out: Vec<String> = Vec::new();
    for map in maps_arg(args)?.into_iter().flatten() {
        out.extend(map.borrow().keys().cloned());
    }
    Ok(Value::string_list(out))
}

fn values(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    want_args(call, args, 1)?;
    let map = map_arg(&args[0])?;
    Ok(Value::list(
        map.map(|m| m.borrow().values().cloned().collect())
            .unwrap_or_default(),
    ))
}

/// `pick MAP KEY…`: a new map with only those keys.
fn pick(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    want_at_least(call, args, 1)?;
    let map = map_arg(&args[0])?;
    let keys = strings_arg(&args[1..])?;
    let mut out = BTreeMap::new();
    if let Some(map) = map {
        let map = map.borrow();
        for key in keys {
            if let Some(value) = map.get(key) {
                out.insert(key.to_string(), value.clone());
            }
        }
    }
    Ok(Value::map(out))
}

/// `omit MAP KEY…`: a new map without those keys.
fn omit(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    want_at_least(call, args, 1)?;
    let map = map_arg(&args[0])?;
    let omitted: BTreeSet<&str> = strings_arg(&args[1..])?.into_iter().collect();
    let out = map
        .map(|m| {
            m.borrow()
                .iter()
                .filter(|(k, _)| !omitted.contains(k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
        .unwrap_or_default();
    Ok(Value::map(out))
}

/// `merge DST SRC…` (and its three siblings): each source merged into DST in turn, DST changed
/// in place and returned. A nil DST becomes a new map.
///
/// Sprig's plain variants swallow mergo's errors and return "", but mergo only fails on
/// mismatched Go types, which `map[string]interface {}` arguments never are; the `must` variants
/// are therefore the same functions.
fn merge_all(call: &Call<'_>, args: &[Value], overwrite: bool) -> Result<Value, String> {
    want_at_least(call, args, 1)?;
    let dst = map_arg(&args[0])?;
    let sources = maps_arg(&args[1..])?;
    let dst = dst.map_or_else(|| Rc::new(std::cell::RefCell::default()), Rc::clone);
    for source in sources.into_iter().flatten() {
        merge_maps(&dst, source, overwrite, 0)?;
    }
    Ok(Value::Map(dst))
}

fn merge(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    merge_all(call, args, false)
}

fn merge_overwrite(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    merge_all(call, args, true)
}

/// One step of `mergo.Merge` (`overwrite` false) or `mergo.MergeWithOverwrite` (true) on
/// `map[string]interface {}` trees, the library Sprig's merges use.
///
/// Without overwrite a source value fills a key that is missing or holds an empty value (nil,
/// "", 0, false, an empty list or map); maps present on both sides merge recursively. With
/// overwrite every non-nil source value replaces the destination's, empty ones included
/// (`mergeOverwrite $d (dict "a" "")` sets "a" to ""), a nil source value replaces it with nil,
/// and maps on both sides still merge recursively rather than replace.
fn merge_maps(dst: &Map, src: &Map, overwrite: bool, depth: usize) -> Result<(), String> {
    if depth > MAX_NESTING {
        return Err(format!(
            "merge: maps nested deeper than {MAX_NESTING} levels"
        ));
    }
    // A snapshot: the source may be the destination itself, or contain it.
    let entries: Vec<(String, Value)> = src
        .borrow()
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    for (key, value) in entries {
        let current = dst.borrow().get(&key).cloned();
        if value.is_nil() {
            if overwrite {
                dst.borrow_mut().insert(key, Value::Nil);
            }
            continue;
        }
        if let (Value::Map(src_map), Some(Value::Map(dst_map))) = (&value, &current) {
            stacker::maybe_grow(STACK_RED_ZONE, STACK_GROWTH, || {
                merge_maps(dst_map, src_map, overwrite, depth + 1)
            })?;
        }
        // Emptiness is judged after the recursion: an empty destination map that received
        // keys is no longer empty.
        if let Some(current) = &current
            && !is_empty(current)
        {
            if list_items(&value).is_some() && !matches!(value, Value::Object(_)) {
                if overwrite {
                    refuse_cycle(&value, dst)?;
                    dst.borrow_mut().insert(key, value);
                }
                continue;
            }
            if matches!((&value, current), (Value::Map(_), Value::Map(_))) {
                continue;
            }
        }
        if overwrite || current.as_ref().is_none_or(is_empty) {
            refuse_cycle(&value, dst)?;
            dst.borrow_mut().insert(key, value);
        }
    }
    Ok(())
}

/// `deepCopy VALUE`: new maps and lists all the way down; other values as they are.
fn deep_copy(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    want_args(call, args, 1)?;
    if args[0].is_nil() {
        return Err("reflect: call of reflect.Value.Type on zero Value".into());
    }
    copy_value(&args[0], 0)
}

fn copy_value(v: &Value, depth: usize) -> Result<Value, String> {
    stacker::maybe_grow(STACK_RED_ZONE, STACK_GROWTH, || copy_value_at(v, depth))
}

fn copy_value_at(v: &Value, depth: usize) -> Result<Value, String> {
    if depth > MAX_NESTING {
        return Err(format!(
            "deepCopy: value nested deeper than {MAX_NESTING} levels"
        ));
    }
    Ok(match v {
        Value::Map(m) => {
            let entries = m
                .borrow()
                .iter()
                .map(|(k, v)| Ok((k.clone(), copy_value(v, depth + 1)?)))
                .collect::<Result<BTreeMap<_, _>, String>>()?;
            Value::map(entries)
        }
        // A nil list stays nil (and has nothing to copy).
        Value::List(..) if v.is_nil_list() => v.clone(),
        Value::List(items, kind) => Value::List(
            Rc::new(
                items
                    .iter()
                    .map(|item| copy_value(item, depth + 1))
                    .collect::<Result<_, _>>()?,
            ),
            *kind,
        ),
        other => other.clone(),
    })
}

/// `dig KEY… DEFAULT MAP`: the value at the key path, or DEFAULT when a key is missing. Sprig
/// asserts the types as it goes, so a non-map on the way (or a non-string key) fails with Go's
/// interface-conversion message.
fn dig(_: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    let [keys @ .., default, map] = args else {
        return Err("dig needs at least three arguments".into());
    };
    if keys.is_empty() {
        return Err("dig needs at least three arguments".into());
    }
    let mut current = as_go_map(map)?;
    let keys = keys
        .iter()
        .map(|k| k.as_str().ok_or_else(|| conversion_error(k, "string")))
        .collect::<Result<Vec<_>, _>>()?;
    for (i, key) in keys.iter().enumerate() {
        let step = current.borrow().get(*key).cloned();
        let Some(step) = step else {
            return Ok(default.clone());
        };
        if i + 1 == keys.len() {
            return Ok(step);
        }
        current = as_go_map(&step)?;
    }
    Ok(default.clone())
}

fn as_go_map(v: &Value) -> Result<Map, String> {
    match v {
        Value::Map(m) => Ok(Rc::clone(m)),
        other => Err(conversion_error(other, "map[string]interface {}")),
    }
}

/// Go's failed type assertion on an `interface {}`.
fn conversion_error(v: &Value, want: &str) -> String {
    let got = if v.is_nil() {
        "nil".to_string()
    } else {
        v.type_name()
    };
    format!("interface conversion: interface {{}} is {got}, not {want}")
}

#[cfg(test)]
mod tests {
    use super::super::reflect::tests::{call, dict, int, list, s, show};
    use super::*;

    fn json(v: &Value) -> String {
        v.to_json().to_string()
    }

    fn merged(name: &str, dst: &Value, src: &Value) -> String {
        json(&call(name, &[dst.clone(), src.clone()]).expect("merge succeeds"))
    }

    #[test]
    fn dict_get_set_unset() {
        // Oracle: `dict "a"` → map[a:]; `dict 1 2 nil 3` → map[1:2 <nil>:3]; `dict (list 1
        // 2) 3` → map[[1 2]:3]; `get (dict "a" 1) "b"` → "" (string); `get nil "a"` → "";
        // `hasKey (dict "a" nil) "a"` true; `hasKey nil "a"` false; set then unset → map[b:2];
        // `unset nil "a"` → map[]; `set nil "a" 1` → assignment to entry in nil map.
        assert_eq!(show("dict", &[s("a")]), "map[a:] (map[string]interface {})");
        assert_eq!(
            show("dict", &[int(1), int(2), Value::Nil, int(3)]),
            "map[1:2 <nil>:3] (map[string]interface {})"
        );
        assert_eq!(
            show("dict", &[list(&[int(1), int(2)]), int(3)]),
            "map[[1 2]:3] (map[string]interface {})"
        );
        let d = dict(&[("a", int(1))]);
        assert_eq!(show("get", &[d.clone(), s("a")]), "1 (int)");
        assert_eq!(show("get", &[d.clone(), s("b")]), " (string)");
        assert_eq!(show("get", &[Value::Nil, s("b")]), " (string)");
        assert_eq!(
            show("hasKey", &[dict(&[("a", Value::Nil)]), s("a")]),
            "true (bool)"
        );
        assert_eq!(show("hasKey", &[Value::Nil, s("a")]), "false (bool)");
        call("set", &[d.clone(), s("b"), int(2)]).expect("set");
        call("unset", &[d.clone(), s("a")]).expect("unset");
        assert_eq!(d.to_string(), "map[b:2]");
        assert_eq!(
            show("unset", &[Value::Nil, s("a")]),
            "map[] (map[string]interface {})"
        );
        assert_eq!(
            show("set", &[Value::Nil, s("a"), int(1)]),
            "error: assignment to entry in nil map"
        );
        assert_eq!(
            show("get", &[s("x"), s("a")]),
            "error: wrong type for value; expected map[string]interface {}; got string"
        );
    }

    #[test]
    fn pluck_keys_values_pick_omit() {
        // Oracle: `pluck "a" (dict "a" 1) (dict "b" 2) (dict "a" 3)` → [1 3]; `pluck "a"` →
        // []; `pick (dict "a" 1 "b" 2 "c" 3) "a" "c" "z"` → map[a:1 c:3]; `omit … "a"` →
        // map[b:2 c:3]; `pick nil "a"` → map[]; `keys nil`, `values nil`, `keys` → [].
        let abc = dict(&[("a", int(1)), ("b", int(2)), ("c", int(3))]);
        assert_eq!(
            show(
                "pluck",
                &[
                    s("a"),
                    dict(&[("a", int(1))]),
                    dict(&[("b", int(2))]),
                    dict(&[("a", int(3))])
                ]
            ),
            "[1 3] ([]interface {})"
        );
        assert_eq!(show("pluck", &[s("a")]), "[] ([]interface {})");
        assert_eq!(
            show("pick", &[abc.clone(), s("a"), s("c"), s("z")]),
            "map[a:1 c:3] (map[string]interface {})"
        );
        assert_eq!(
            show("omit", &[abc.clone(), s("a")]),
            "map[b:2 c:3] (map[string]interface {})"
        );
        assert_eq!(
            show("pick", &[Value::Nil, s("a")]),
            "map[] (map[string]interface {})"
        );
        assert_eq!(
            show("keys", &[abc.clone(), dict(&[("d", int(1))])]),
            "[a b c d] ([]string)"
        );
        assert_eq!(show("keys", &[Value::Nil]), "[] ([]string)");
        assert_eq!(show("keys", &[]), "[] ([]string)");
        assert_eq!(show("values", &[abc]), "[1 2 3] ([]interface {})");
        assert_eq!(show("values", &[Value::Nil]), "[] ([]interface {})");
    }

    #[test]
    fn merge_fills_missing_and_empty_keys() {
        // Oracle: merge $d (a:"" b:0 c:false e:[] m:{} n:nil) with (a:"s" b:2 c:true e:[2]
        // m:{z:1} n:3) → {"a":"s","b":2,"c":true,"e":[2],"m":{"z":1},"n":3}; nested maps merge
        // and keep dst's values: {"a":"x","m":{"j":{"q":1,"r":3},"k":1,"l":3}}; a string in dst
        // is kept over a map in src.
        let d = dict(&[
            ("a", s("")),
            ("b", int(0)),
            ("c", Value::Bool(false)),
            ("e", list(&[])),
            ("m", dict(&[])),
            ("n", Value::Nil),
        ]);
        let src = dict(&[
            ("a", s("s")),
            ("b", int(2)),
            ("c", Value::Bool(true)),
            ("e", list(&[int(2)])),
            ("m", dict(&[("z", int(1))])),
            ("n", int(3)),
        ]);
        assert_eq!(
            merged("merge", &d, &src),
            r#"{"a":"s","b":2,"c":true,"e":[2],"m":{"z":1},"n":3}"#
        );
        let d = dict(&[
            ("a", s("x")),
            ("m", dict(&[("k", int(1)), ("j", dict(&[("q", int(1))]))])),
        ]);
        let src = dict(&[
            ("a", s("y")),
            (
                "m",
                dict(&[
                    ("k", int(2)),
                    ("l", int(3)),
                    ("j", dict(&[("q", int(2)), ("r", int(3))])),
                ]),
            ),
        ]);
        assert_eq!(
            merged("merge", &d, &src),
            r#"{"a":"x","m":{"j":{"q":1,"r":3},"k":1,"l":3}}"#
        );
        // The destination itself changed.
        assert_eq!(json(&d), r#"{"a":"x","m":{"j":{"q":1,"r":3},"k":1,"l":3}}"#);
        let d = dict(&[("a", s("x")), ("m", s("str"))]);
        let src = dict(&[("m", dict(&[("k", int(2))]))]);
        assert_eq!(merged("mustMerge", &d, &src), r#"{"a":"x","m":"str"}"#);
        assert_eq!(
            merged("mergeOverwrite", &d, &src),
            r#"{"a":"x","m":{"k":2}}"#
        );
        // Oracle: `merge nil (dict "a" 1)` and `merge (dict "a" 1) nil` → {"a":1}.
        assert_eq!(
            merged("merge", &Value::Nil, &dict(&[("a", int(1))])),
            r#"{"a":1}"#
        );
        assert_eq!(
            merged("merge", &dict(&[("a", int(1))]), &Value::Nil),
            r#"{"a":1}"#
        );
    }

    #[test]
    fn merge_overwrite_takes_empty_values_too() {
        // Oracle: mergeOverwrite (a:"x" b:1 c:true e:[1] m:{k:1}) with (a:"" b:0 c:false e:[]
        // m:{}) → {"a":"","b":0,"c":false,"e":[],"m":{"k":1}}; with (a:nil b:nil m:nil) →
        // {"a":null,"b":null,"c":true,"e":[1],"m":null}; (m:{k:1}) with (m:"s") → m:"s".
        let full = || {
            dict(&[
                ("a", s("x")),
                ("b", int(1)),
                ("c", Value::Bool(true)),
                ("e", list(&[int(1)])),
                ("m", dict(&[("k", int(1))])),
            ])
        };
        let empties = dict(&[
            ("a", s("")),
            ("b", int(0)),
            ("c", Value::Bool(false)),
            ("e", list(&[])),
            ("m", dict(&[])),
        ]);
        assert_eq!(
            merged("mergeOverwrite", &full(), &empties),
            r#"{"a":"","b":0,"c":false,"e":[],"m":{"k":1}}"#
        );
        let nils = dict(&[("a", Value::Nil), ("b", Value::Nil), ("m", Value::Nil)]);
        assert_eq!(
            merged("mustMergeOverwrite", &full(), &nils),
            r#"{"a":null,"b":null,"c":true,"e":[1],"m":null}"#
        );
        assert_eq!(
            merged(
                "mergeOverwrite",
                &dict(&[("m", dict(&[("k", int(1))]))]),
                &dict(&[("m", s("s"))])
            ),
            r#"{"m":"s"}"#
        );
    }

    #[test]
    fn merge_mixed_kinds_and_nils() {
        // Oracle (each `| toJson`): merge (a:[]) (a:{k:1}) → {"a":{"k":1}}; mergeOverwrite
        // (a:[1]) (a:{k:1}) → {"a":{"k":1}}; merge (a:{}) (a:[1]) → {"a":[1]}; merge (a:{x:1})
        // (a:[1]) → {"a":{"x":1}}; mergeOverwrite of the same → {"a":[1]}; merge (a:1)
        // (a:2.5) → {"a":1}; merge (a:[1]) (a:[2,3]) → {"a":[1]}; mergeOverwrite → [2,3];
        // mergeOverwrite (a:"x") (a:[]) → {"a":[]}; merge (a:nil) (a:nil) → {"a":null};
        // merge {} (a:nil) → {}; mergeOverwrite {} (a:nil) → {"a":null}; mergeOverwrite (a:1)
        // (a:{}) → {"a":{}}; merge (a:1) (a:{}) → {"a":1}; merge (a:0) (a:{}) → {"a":{}};
        // mergeOverwrite (a:{b:"x"}) (a:{b:nil}) → {"a":{"b":null}}; three sources merge in
        // order: {"a":{"b":{"c":1,"d":2,"e":4}}}.
        let one = |v: Value| dict(&[("a", v)]);
        let k1 = || dict(&[("k", int(1))]);
        let cases: &[(&str, Value, Value, &str)] = &[
            ("merge", one(list(&[])), one(k1()), r#"{"a":{"k":1}}"#),
            (
                "mergeOverwrite",
                one(list(&[int(1)])),
                one(k1()),
                r#"{"a":{"k":1}}"#,
            ),
            (
                "merge",
                one(dict(&[])),
                one(list(&[int(1)])),
                r#"{"a":[1]}"#,
            ),
            (
                "merge",
                one(dict(&[("x", int(1))])),
                one(list(&[int(1)])),
                r#"{"a":{"x":1}}"#,
            ),
            (
                "mergeOverwrite",
                one(dict(&[("x", int(1))])),
                one(list(&[int(1)])),
                r#"{"a":[1]}"#,
            ),
            ("merge", one(int(1)), one(Value::Float(2.5)), r#"{"a":1}"#),
            (
                "merge",
                one(list(&[int(1)])),
                one(list(&[int(2), int(3)])),
                r#"{"a":[1]}"#,
            ),
            (
                "mergeOverwrite",
                one(list(&[int(1)])),
                one(list(&[int(2), int(3)])),
                r#"{"a":[2,3]}"#,
            ),
            ("mergeOverwrite", one(s("x")), one(list(&[])), r#"{"a":[]}"#),
            ("merge", one(Value::Nil), one(Value::Nil), r#"{"a":null}"#),
            ("merge", dict(&[]), one(Value::Nil), "{}"),
            (
                "mergeOverwrite",
                dict(&[]),
                one(Value::Nil),
                r#"{"a":null}"#,
            ),
            ("mergeOverwrite", one(int(1)), one(dict(&[])), r#"{"a":{}}"#),
            ("merge", one(int(1)), one(dict(&[])), r#"{"a":1}"#),
            ("merge", one(int(0)), one(dict(&[])), r#"{"a":{}}"#),
            (
                "mergeOverwrite",
                one(dict(&[("b", s("x"))])),
                one(dict(&[("b", Value::Nil)])),
                r#"{"a":{"b":null}}"#,
            ),
        ];
        for (name, dst, src, want) in cases {
            assert_eq!(merged(name, dst, src), *want, "{name} {dst:?} {src:?}");
        }
        let nested = |inner: &[(&str, Value)]| one(dict(&[("b", dict(inner))]));
        let result = call(
            "merge",
            &[
                nested(&[("c", int(1))]),
                nested(&[("d", int(2))]),
                nested(&[("c", int(3)), ("e", int(4))]),
            ],
        )
        .expect("merge");
        assert_eq!(json(&result), r#"{"a":{"b":{"c":1,"d":2,"e":4}}}"#);
    }

    #[test]
    fn merge_shares_source_maps_as_go_does() {
        // Oracle: $s := dict "m" (dict "k" 1); $d := merge (dict "x" 1) $s; set $d.m "z" 2 →
        // $s is {"m":{"k":1,"z":2}}: the source's map was put into the destination, not copied.
        let src = dict(&[("m", dict(&[("k", int(1))]))]);
        let dst = call("merge", &[dict(&[("x", int(1))]), src.clone()]).expect("merge");
        let m = dst
            .as_map()
            .and_then(|m| m.borrow().get("m").cloned())
            .expect("m");
        call("set", &[m, s("z"), int(2)]).expect("set");
        assert_eq!(json(&src), r#"{"m":{"k":1,"z":2}}"#);
        // Merging a map into itself changes nothing.
        let d = dict(&[("m", dict(&[("k", int(1))]))]);
        call("merge", &[d.clone(), d.clone()]).expect("merge");
        assert_eq!(json(&d), r#"{"m":{"k":1}}"#);
    }

    #[test]
    fn maps_never_come_to_hold_themselves() {
        // Go allows these, then dies of a stack overflow printing the map (the oracle's
        // process crashed on the merge case below); we refuse them.
        const REFUSED: &str =
            "error: refusing to put a map inside itself (Helm would crash printing it)";
        let d = dict(&[]);
        assert_eq!(show("set", &[d.clone(), s("self"), d.clone()]), REFUSED);
        let wrapped = list(&[dict(&[("d", d.clone())])]);
        assert_eq!(show("set", &[d.clone(), s("l"), wrapped]), REFUSED);
        assert_eq!(d.to_string(), "map[]");
        // $d.c.a is a shared empty map E; merging c: (a: (b: E)) fills E with b: E.
        let shared = dict(&[]);
        let dst = dict(&[("c", dict(&[("a", shared.clone())]))]);
        let src = dict(&[("c", dict(&[("a", dict(&[("b", shared.clone())]))]))]);
        for name in ["merge", "mustMerge", "mergeOverwrite", "mustMergeOverwrite"] {
            assert_eq!(show(name, &[dst.clone(), src.clone()]), REFUSED, "{name}");
        }
        // Sharing without a cycle is fine.
        let shared = dict(&[("k", int(1))]);
        let twice = dict(&[("x", shared.clone())]);
        assert_eq!(
            show("set", &[twice, s("y"), shared]),
            "map[x:map[k:1] y:map[k:1]] (map[string]interface {})"
        );
    }

    #[test]
    fn deeply_nested_values_do_not_overflow_the_stack() {
        let nest = |leaf: Value| {
            let mut v = leaf;
            for _ in 0..2000 {
                v = dict(&[("a", v)]);
            }
            v
        };
        let (a, b) = (nest(int(1)), nest(int(2)));
        let copy = call("deepCopy", std::slice::from_ref(&a)).expect("copy");
        assert_eq!(show("deepEqual", &[a.clone(), copy]), "true (bool)");
        assert_eq!(show("deepEqual", &[a.clone(), b.clone()]), "false (bool)");
        call("mergeOverwrite", &[a.clone(), b]).expect("merge");
        assert_eq!(show("deepEqual", &[a, nest(int(2))]), "true (bool)");
    }

    #[test]
    fn deep_copy_makes_new_maps() {
        // Oracle: copying then `set $c.a "b" 2` leaves $d as map[a:map[b:1]]; `deepCopy nil` →
        // reflect: call of reflect.Value.Type on zero Value; types are kept ([]string, []int).
        let d = dict(&[("a", dict(&[("b", int(1))]))]);
        let c = call("deepCopy", std::slice::from_ref(&d)).expect("copy");
        let inner = c
            .as_map()
            .and_then(|m| m.borrow().get("a").cloned())
            .expect("a map");
        call("set", &[inner, s("b"), int(2)]).expect("set");
        assert_eq!(d.to_string(), "map[a:map[b:1]]");
        assert_eq!(c.to_string(), "map[a:map[b:2]]");
        assert_eq!(
            show("deepCopy", &[Value::Nil]),
            "error: reflect: call of reflect.Value.Type on zero Value"
        );
        assert_eq!(
            show("mustDeepCopy", &[Value::string_list(["a"])]),
            "[a] ([]string)"
        );
        assert_eq!(show("deepCopy", &[Value::Float(1.5)]), "1.5 (float64)");
    }

    #[test]
    fn dig_walks_maps() {
        // Oracle: `dig "a" "b" "d" (dict "a" (dict "b" 1))` → 1; `dig "a" "x" "d" …` → d;
        // `dig "a" "d" (dict "a" 5)` → 5; through a non-map: interface conversion: interface
        // {} is int, not map[string]interface {}; `dig "a" (dict)` → dig needs at least three
        // arguments; `dig 1 "d" (dict)` → interface {} is int, not string; `dig "a" "d" "x"`
        // → interface {} is string, not map…; through nil → interface {} is nil, not map….
        let d = dict(&[("a", dict(&[("b", int(1))]))]);
        assert_eq!(show("dig", &[s("a"), s("b"), s("d"), d.clone()]), "1 (int)");
        assert_eq!(show("dig", &[s("a"), s("x"), s("d"), d]), "d (string)");
        assert_eq!(
            show("dig", &[s("a"), s("d"), dict(&[("a", int(5))])]),
            "5 (int)"
        );
        assert_eq!(
            show("dig", &[s("a"), s("b"), s("d"), dict(&[("a", int(5))])]),
            "error: interface conversion: interface {} is int, not map[string]interface {}"
        );
        assert_eq!(
            show("dig", &[s("a"), dict(&[])]),
            "error: dig needs at least three arguments"
        );
        assert_eq!(
            show("dig", &[int(1), s("d"), dict(&[])]),
            "error: interface conversion: interface {} is int, not string"
        );
        assert_eq!(
            show("dig", &[s("a"), s("d"), s("x")]),
            "error: interface conversion: interface {} is string, not map[string]interface {}"
        );
        assert_eq!(
            show("dig", &[s("a"), s("b"), s("d"), dict(&[("a", Value::Nil)])]),
            "error: interface conversion: interface {} is nil, not map[string]interface {}"
        );
    }
}
