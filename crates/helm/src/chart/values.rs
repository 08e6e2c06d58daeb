//! Values: reading `values.yaml`, Helm's coalescing of chart defaults under user values
//! (`chartutil.CoalesceValues`/`MergeValues`), and `-f` files merged as the CLI merges them.

use serde_json::Value as Json;

use super::Chart;

/// A values tree (`map[string]interface{}`).
pub type Values = serde_json::Map<String, Json>;

/// The key whose contents every subchart receives.
pub const GLOBAL_KEY: &str = "global";

/// How deep values may nest before coalescing stops descending (a guard against stack
/// exhaustion on hostile input; real values are a few levels deep).
const MAX_DEPTH: usize = 256;

/// Reads one YAML document into JSON data.
pub(crate) fn parse_yaml(text: &str) -> Result<Json, String> {
    crate::yaml::parse(text).map_err(|e| e.message)
}

/// Reads a values file: an empty document is an empty map; anything but a map is an error
/// (`cannot unmarshal yaml document: …`, as Helm words it).
pub fn read_values(data: &[u8]) -> Result<Values, String> {
    const PREFIX: &str = "cannot unmarshal yaml document: ";
    let text = String::from_utf8_lossy(data);
    match parse_yaml(&text).map_err(|e| format!("{PREFIX}{e}"))? {
        Json::Null => Ok(Values::new()),
        Json::Object(map) => Ok(map),
        other => Err(format!(
            "{PREFIX}error unmarshaling JSON: while decoding JSON: json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
            match other {
                Json::Array(_) => "array",
                Json::String(_) => "string",
                Json::Number(_) => "number",
                _ => "bool",
            }
        )),
    }
}

/// Merges values files as repeated `-f` does (Helm's `mergeMaps`): maps merge key by key,
/// anything else in `overlay` replaces what `base` had.
pub fn merge_maps(base: &Values, overlay: &Values) -> Values {
    merge_maps_at(base, overlay, 0)
}

fn merge_maps_at(base: &Values, overlay: &Values, depth: usize) -> Values {
    let mut out = base.clone();
    for (key, value) in overlay {
        if depth < MAX_DEPTH
            && let (Json::Object(over), Some(Json::Object(under))) = (value, out.get(key))
        {
            let merged = merge_maps_at(under, over, depth + 1);
            out.insert(key.clone(), Json::Object(merged));
            continue;
        }
        out.insert(key.clone(), value.clone());
    }
    out
}

/// Helm's `CoalesceValues`: the chart's defaults (and its subcharts', scoped under their
/// names, with `global` passed down) under `user`; a `null` in `user` deletes the default.
/// Fails as Helm does when a subchart's key holds something other than a map
/// (`type mismatch on sub: %!t(string=x)`).
pub fn coalesce_values(chart: &Chart, user: &Values) -> Result<Values, String> {
    let mut dest = user.clone();
    coalesce(chart, &mut dest, false, 0)?;
    Ok(dest)
}

/// Helm's `MergeValues`: as [`coalesce_values`] but `null`s are kept rather than deleting.
pub fn merge_values(chart: &Chart, user: &Values) -> Result<Values, String> {
    let mut dest = user.clone();
    coalesce(chart, &mut dest, true, 0)?;
    Ok(dest)
}

fn coalesce(chart: &Chart, dest: &mut Values, merge: bool, depth: usize) -> Result<(), String> {
    coalesce_chart_values(chart, dest, merge);
    if depth < MAX_DEPTH {
        coalesce_dependencies(chart, dest, merge, depth)?;
    }
    Ok(())
}

fn coalesce_dependencies(
    chart: &Chart,
    dest: &mut Values,
    merge: bool,
    depth: usize,
) -> Result<(), String> {
    for sub in &chart.dependencies {
        let name = &sub.metadata.name;
        let mut sub_values = match dest.get(name) {
            None => Values::new(),
            Some(Json::Object(map)) => map.clone(),
            Some(other) => {
                return Err(format!(
                    "type mismatch on {name}: {}",
                    go_bool_verb(other, 0)
                ));
            }
        };
        coalesce_globals(&mut sub_values, dest);
        coalesce(sub, &mut sub_values, merge, depth + 1)?;
        dest.insert(name.clone(), Json::Object(sub_values));
    }
    Ok(())
}

/// Go's `%t` of a value that is not a map: `true`, or `%!t(string=x)` for other kinds.
fn go_bool_verb(value: &Json, depth: usize) -> String {
    match value {
        Json::Bool(b) => b.to_string(),
        Json::Null => "%!t(<nil>)".into(),
        Json::String(s) => format!("%!t(string={s})"),
        Json::Number(n) if n.is_f64() => {
            format!("%!t(float64={})", crate::value::Value::from_json(value))
        }
        Json::Number(n) => format!("%!t(int64={n})"),
        // Inside a slice a nil element prints as `<nil>`.
        Json::Array(_) if depth > 32 => "[...]".into(),
        Json::Array(items) => format!(
            "[{}]",
            items
                .iter()
                .map(|item| if item.is_null() {
                    "<nil>".to_string()
                } else {
                    go_bool_verb(item, depth + 1)
                })
                .collect::<Vec<_>>()
                .join(" ")
        ),
        Json::Object(_) => format!("{}", crate::value::Value::from_json(value)),
    }
}

/// Copies the parent's `global` into the subchart's, the parent's entries winning; tables in
/// both are merged with the parent's on top.
fn coalesce_globals(dest: &mut Values, src: &Values) {
    let mut dest_global = match dest.get(GLOBAL_KEY) {
        None => Values::new(),
        Some(Json::Object(map)) => map.clone(),
        Some(_) => return,
    };
    let src_global = match src.get(GLOBAL_KEY) {
        None => Values::new(),
        Some(Json::Object(map)) => map.clone(),
        Some(_) => return,
    };
    for (key, value) in src_global {
        match value {
            Json::Object(table) => {
                let mut merged = table;
                match dest_global.get(&key) {
                    None => {}
                    Some(Json::Object(existing)) => {
                        coalesce_tables_at(&mut merged, existing, true, 0);
                    }
                    // A non-table under the same key: Helm skips with a conflict warning.
                    Some(_) => continue,
                }
                dest_global.insert(key, Json::Object(merged));
            }
            other => {
                if matches!(dest_global.get(&key), Some(Json::Object(_))) {
                    continue;
                }
                dest_global.insert(key, other);
            }
        }
    }
    dest.insert(GLOBAL_KEY.into(), Json::Object(dest_global));
}

/// The chart's own defaults under `dest`.
fn coalesce_chart_values(chart: &Chart, dest: &mut Values, merge: bool) {
    for (key, default) in &chart.values {
        match dest.get_mut(key) {
            None => insert_default(dest, key, default, merge),
            Some(Json::Null) if !merge => {
                dest.remove(key);
            }
            Some(Json::Object(user_table)) => {
                if let Json::Object(default_table) = default {
                    // Values for a subchart keep their nulls here; the subchart's own
                    // coalescing deletes them.
                    let merge = merge
                        || chart
                            .dependencies
                            .iter()
                            .any(|sub| &sub.metadata.name == key);
                    coalesce_tables_at(user_table, default_table, merge, 0);
                }
            }
            Some(_) => {}
        }
    }
}

/// Helm's `CoalesceTables` (`merge` false) and `MergeTables` (`merge` true): `src` under
/// `dst`, `dst` authoritative.
pub fn coalesce_tables(dst: &mut Values, src: &Values, merge: bool) {
    coalesce_tables_at(dst, src, merge, 0);
}

fn coalesce_tables_at(dst: &mut Values, src: &Values, merge: bool, depth: usize) {
    // A `null` in dst deletes the key only where src has it: user nulls with no default
    // behind them stay (Helm v4 renders them as null).
    for (key, value) in src {
        match dst.get_mut(key) {
            // A null over a default deletes it; a null over a null default stays (Helm v4).
            Some(Json::Null) if !merge => {
                if !value.is_null() {
                    dst.remove(key);
                }
            }
            None => insert_default(dst, key, value, merge),
            Some(existing) => {
                if let Json::Object(src_table) = value
                    && let Json::Object(dst_table) = existing
                    && depth < MAX_DEPTH
                {
                    coalesce_tables_at(dst_table, src_table, merge, depth + 1);
                }
                // Otherwise dst wins; Helm only warns on table/non-table mismatches.
            }
        }
    }
}

/// Copies a default into values that lack the key. When coalescing (not merging), Helm v4
/// leaves out the `null`s of chart defaults, in nested maps too (not inside lists).
fn insert_default(dest: &mut Values, key: &str, value: &Json, merge: bool) {
    if merge {
        dest.insert(key.to_string(), value.clone());
        return;
    }
    if let Some(value) = without_nulls(value, 0) {
        dest.insert(key.to_string(), value);
    }
}

fn without_nulls(value: &Json, depth: usize) -> Option<Json> {
    match value {
        Json::Null => None,
        Json::Object(map) if depth < MAX_DEPTH => Some(Json::Object(
            map.iter()
                .filter_map(|(k, v)| Some((k.clone(), without_nulls(v, depth + 1)?)))
                .collect(),
        )),
        other => Some(other.clone()),
    }
}

/// Helm's `Values.Table`: the map at a dotted path.
pub(crate) fn table<'a>(values: &'a Values, path: &str) -> Option<&'a Values> {
    let mut current = values;
    for part in path.split('.') {
        match current.get(part) {
            Some(Json::Object(map)) => current = map,
            _ => return None,
        }
    }
    Some(current)
}

/// Helm's `Values.PathValue`: the non-table value at a dotted path.
pub(crate) fn path_value<'a>(values: &'a Values, path: &str) -> Option<&'a Json> {
    if path.is_empty() {
        return None;
    }
    let (parent, key) = match path.rsplit_once('.') {
        Some((parent, key)) => (table(values, parent)?, key),
        None => (values, path),
    };
    match parent.get(key) {
        Some(Json::Object(_)) | None => None,
        Some(value) => Some(value),
    }
}

/// Helm's `pathToMap`: `data` nested under the dotted `path` (`.` is the top).
pub(crate) fn path_to_map(path: &str, data: Values) -> Values {
    if path == "." {
        return data;
    }
    let mut out = data;
    for part in path.split('.').rev() {
        if part.is_empty() {
            continue;
        }
        let mut wrapper = Values::new();
        wrapper.insert(part.to_string(), Json::Object(out));
        out = wrapper;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn map(value: Json) -> Values {
        match value {
            Json::Object(map) => map,
            _ => Values::new(),
        }
    }

    fn chart(name: &str, values: Json, dependencies: Vec<Chart>) -> Chart {
        let mut chart = Chart::default();
        chart.metadata.name = name.into();
        chart.values = map(values);
        chart.dependencies = dependencies;
        chart
    }

    #[test]
    fn default_nulls_left_out() {
        // Helm v4.2.3, defaults {a: null, b: {c: null, d: 1, k: {m: null, q: 1}}, e: 1,
        // l: [null, {z: null}]}, user values {b: {x: null, k: {r: null}}}.
        let chart = chart(
            "n",
            json!({"a": null, "b": {"c": null, "d": 1, "k": {"m": null, "q": 1}}, "e": 1,
                   "l": [null, {"z": null}]}),
            vec![],
        );
        let user = map(json!({"b": {"x": null, "k": {"r": null}}}));
        assert_eq!(
            Json::Object(coalesce_values(&chart, &user).expect("coalesce")),
            json!({"b": {"d": 1, "k": {"q": 1, "r": null}, "x": null}, "e": 1, "l": [null, {"z": null}]})
        );
        assert_eq!(
            Json::Object(coalesce_values(&chart, &Values::new()).expect("coalesce")),
            json!({"b": {"d": 1, "k": {"q": 1}}, "e": 1, "l": [null, {"z": null}]})
        );
    }

    #[test]
    fn nested_nulls_as_helm() {
        // Helm v4.2.3 with defaults {b: {k: {m: null, q: 1}, c: null, d: 1}, e: {f: 1}}.
        let chart = chart(
            "n",
            json!({"b": {"k": {"m": null, "q": 1}, "c": null, "d": 1}, "e": {"f": 1}}),
            vec![],
        );
        let cases = [
            (
                json!({"b": {}}),
                json!({"b": {"d": 1, "k": {"q": 1}}, "e": {"f": 1}}),
            ),
            (
                json!({"b": {"c": null}}),
                json!({"b": {"c": null, "d": 1, "k": {"q": 1}}, "e": {"f": 1}}),
            ),
            (
                json!({"b": {"k": null}}),
                json!({"b": {"d": 1}, "e": {"f": 1}}),
            ),
            (
                json!({"b": {"k": {"m": null}}}),
                json!({"b": {"d": 1, "k": {"m": null, "q": 1}}, "e": {"f": 1}}),
            ),
            (
                json!({"e": {"f": null, "g": null}}),
                json!({"b": {"d": 1, "k": {"q": 1}}, "e": {"g": null}}),
            ),
        ];
        for (user, want) in cases {
            assert_eq!(
                Json::Object(coalesce_values(&chart, &map(user.clone())).expect("coalesce")),
                want,
                "{user}"
            );
        }
    }

    #[test]
    fn subchart_type_mismatch_as_helm() {
        let sub = chart("sub", json!({"n": null}), vec![]);
        let parent = chart("q", json!({"tt": 1}), vec![sub]);
        for (user, want) in [
            (json!({"sub": "x"}), "type mismatch on sub: %!t(string=x)"),
            (json!({"sub": 5.0}), "type mismatch on sub: %!t(float64=5)"),
            (json!({"sub": null}), "type mismatch on sub: %!t(<nil>)"),
        ] {
            assert_eq!(coalesce_values(&parent, &map(user)).expect_err(want), want);
        }
        // A `global` that is not a map stays in the parent and reaches no subchart.
        let out = coalesce_values(&parent, &map(json!({"global": 5}))).expect("coalesce");
        assert_eq!(Json::Object(out), json!({"global": 5, "sub": {}, "tt": 1}));
    }

    /// Deeply nested values coalesce without exhausting the stack.
    #[test]
    fn deep_values() {
        let nest = |leaf: Json| {
            let mut value = leaf;
            for _ in 0..1000 {
                let mut map = Values::new();
                map.insert("k".into(), value);
                value = Json::Object(map);
            }
            value
        };
        let chart = chart("d", json!({"a": nest(json!(1))}), vec![]);
        let user = map(json!({"a": nest(json!(null))}));
        let out = coalesce_values(&chart, &user).expect("coalesce");
        assert!(out.contains_key("a"));
        let merged = merge_maps(&user, &map(json!({"a": nest(json!(2))})));
        assert!(merged.contains_key("a"));
    }

    #[test]
    fn merge_maps_as_the_cli() {
        let a = map(json!({"a": {"b": 1, "c": 2}, "l": [1], "s": "x"}));
        let b = map(json!({"a": {"c": 3, "d": null}, "l": [2], "s": {"t": 1}}));
        assert_eq!(
            Json::Object(merge_maps(&a, &b)),
            json!({"a": {"b": 1, "c": 3, "d": null}, "l": [2], "s": {"t": 1}})
        );
    }

    #[test]
    fn coalescing_as_helm() {
        // Confirmed with Helm v4.2.3: `{{ toJson .Values }}` of a chart `p` with defaults
        // {a: {b: 1, c: 2}, d: 1, global: {g: 1}, sub: {x: 1}} and a subchart `sub` with
        // defaults {x: 0, w: {z: 1, q: 2}, global: {h: 1}}.
        let sub = chart(
            "sub",
            json!({"x": 0, "w": {"z": 1, "q": 2}, "global": {"h": 1}}),
            vec![],
        );
        let parent = chart(
            "p",
            json!({"a": {"b": 1, "c": 2}, "d": 1, "global": {"g": 1}, "sub": {"x": 1}}),
            vec![sub],
        );
        let user = map(
            json!({"a": {"b": null}, "d": null, "e": null, "global": {"g": 2},
                              "sub": {"w": {"z": null}, "x": null}}),
        );
        let out = coalesce_values(&parent, &user).expect("coalesce");
        assert_eq!(
            Json::Object(out),
            json!({"a": {"c": 2}, "e": null, "global": {"g": 2},
                   "sub": {"global": {"g": 2, "h": 1}, "w": {"q": 2}}})
        );
    }
}
