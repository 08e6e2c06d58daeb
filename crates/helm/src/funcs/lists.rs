//! Template functions: lists (`list`, `first`, `append`, `uniq`, `slice`, `until`, `seq`, …).
//!
//! Sprig takes its list arguments as `interface{}` and walks them by reflection, so every slice
//! type works (`[]string` from `splitList`, `[]int` from `until`, `[]byte`); results are new
//! `[]interface {}` lists and the argument is never changed. Each `mustX` is the same function as
//! `X`: Sprig's plain variants panic where the `must` ones return an error, and Go's template
//! engine turns both into the same `error calling X: …`.

use std::rc::Rc;

use super::reflect::{
    NIL_DEREFERENCE, deep_equal, int_arg, is_empty, list_items, not_a_list, want_args,
    want_at_least,
};
use crate::cast;
use crate::template::{Call, FuncMap};
use crate::value::{ListKind, Value};

/// The most items `until`, `untilStep` and `seq` build; Sprig has no bound, so a typo such as
/// `until 1000000000` would exhaust memory.
pub const MAX_RANGE_ITEMS: i128 = 10_000_000;

/// Adds this module's functions to `map`.
pub fn register(map: &mut FuncMap) {
    map.insert("list", list);
    map.insert("tuple", list);
    for name in ["append", "push", "mustAppend", "mustPush"] {
        map.insert(name, push);
    }
    for name in ["prepend", "mustPrepend"] {
        map.insert(name, prepend);
    }
    for name in ["first", "mustFirst"] {
        map.insert(name, first);
    }
    for name in ["last", "mustLast"] {
        map.insert(name, last);
    }
    for name in ["rest", "mustRest"] {
        map.insert(name, rest);
    }
    for name in ["initial", "mustInitial"] {
        map.insert(name, initial);
    }
    for name in ["reverse", "mustReverse"] {
        map.insert(name, reverse);
    }
    for name in ["uniq", "mustUniq"] {
        map.insert(name, uniq);
    }
    for name in ["without", "mustWithout"] {
        map.insert(name, without);
    }
    for name in ["has", "mustHas"] {
        map.insert(name, has);
    }
    for name in ["compact", "mustCompact"] {
        map.insert(name, compact);
    }
    for name in ["slice", "mustSlice"] {
        map.insert(name, slice);
    }
    for name in ["chunk", "mustChunk"] {
        map.insert(name, chunk);
    }
    map.insert("concat", concat);
    map.insert("until", until);
    map.insert("untilStep", until_step);
    map.insert("seq", seq);
}

fn any_list(items: Vec<Value>) -> Value {
    Value::List(Rc::new(items), ListKind::Any)
}

/// The items of a list argument, or Sprig's complaint (`{what} {kind}`) for anything else.
fn items_of(v: &Value, what: &str) -> Result<Rc<Vec<Value>>, String> {
    list_items(v)
        .map(|(items, _)| items)
        .ok_or_else(|| not_a_list(what, v))
}

#[expect(
    clippy::unnecessary_wraps,
    reason = "every template function returns a Result"
)]
fn list(_: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    Ok(any_list(args.to_vec()))
}

fn push(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    want_args(call, args, 2)?;
    let items = items_of(&args[0], "Cannot push on type")?;
    let mut out = Vec::with_capacity(items.len() + 1);
    out.extend(items.iter().cloned());
    out.push(args[1].clone());
    Ok(any_list(out))
}

fn prepend(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    want_args(call, args, 2)?;
    let items = items_of(&args[0], "Cannot prepend on type")?;
    let mut out = Vec::with_capacity(items.len() + 1);
    out.push(args[1].clone());
    out.extend(items.iter().cloned());
    Ok(any_list(out))
}

fn first(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    want_args(call, args, 1)?;
    let items = items_of(&args[0], "Cannot find first on type")?;
    Ok(items.first().cloned().unwrap_or_default())
}

fn last(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    want_args(call, args, 1)?;
    let items = items_of(&args[0], "Cannot find last on type")?;
    Ok(items.last().cloned().unwrap_or_default())
}

fn rest(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    want_args(call, args, 1)?;
    let items = items_of(&args[0], "Cannot find rest on type")?;
    if items.is_empty() {
        return Ok(Value::nil_list());
    }
    Ok(any_list(items.iter().skip(1).cloned().collect()))
}

fn initial(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    want_args(call, args, 1)?;
    let items = items_of(&args[0], "Cannot find initial on type")?;
    if items.is_empty() {
        return Ok(Value::nil_list());
    }
    let keep = items.len() - 1;
    Ok(any_list(items.iter().take(keep).cloned().collect()))
}

fn reverse(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    want_args(call, args, 1)?;
    let items = items_of(&args[0], "Cannot find reverse on type")?;
    Ok(any_list(items.iter().rev().cloned().collect()))
}

fn uniq(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    want_args(call, args, 1)?;
    let items = items_of(&args[0], "Cannot find uniq on type")?;
    let mut out: Vec<Value> = Vec::new();
    for item in items.iter() {
        if !out.iter().any(|seen| deep_equal(item, seen)) {
            out.push(item.clone());
        }
    }
    Ok(any_list(out))
}

fn without(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    want_at_least(call, args, 1)?;
    let items = items_of(&args[0], "Cannot find without on type")?;
    let omit = &args[1..];
    Ok(any_list(
        items
            .iter()
            .filter(|item| !omit.iter().any(|o| deep_equal(item, o)))
            .cloned()
            .collect(),
    ))
}

fn has(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    want_args(call, args, 2)?;
    if args[1].is_nil() {
        return Ok(Value::Bool(false));
    }
    let items = items_of(&args[1], "Cannot find has on type")?;
    Ok(Value::Bool(
        items.iter().any(|item| deep_equal(&args[0], item)),
    ))
}

fn compact(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    want_args(call, args, 1)?;
    let items = items_of(&args[0], "Cannot compact on type")?;
    Ok(any_list(
        items
            .iter()
            .filter(|item| !is_empty(item))
            .cloned()
            .collect(),
    ))
}

/// Sprig's `slice LIST [START [END]]`: the list's own type is kept (`[]string` stays one), an
/// empty list gives nil, and indices outside `0 <= START <= END <= len` fail as Go's reflection
/// does.
fn slice(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    want_at_least(call, args, 1)?;
    let target = &args[0];
    let (items, kind) = list_items(target).ok_or_else(|| {
        if target.is_nil() {
            NIL_DEREFERENCE.to_string()
        } else {
            format!(
                "list should be type of slice or array but {}",
                target.kind_name()
            )
        }
    })?;
    let len = items.len();
    if len == 0 {
        return Ok(Value::Nil);
    }
    let start = args.get(1).map_or(0, cast::to_i64);
    let end = args.get(2).map_or(to_i64(len), cast::to_i64);
    let (Ok(start), Ok(end)) = (usize::try_from(start), usize::try_from(end)) else {
        return Err(SLICE_OUT_OF_BOUNDS.into());
    };
    if start > end || end > len {
        return Err(SLICE_OUT_OF_BOUNDS.into());
    }
    if let Value::Bytes(bytes) = target {
        return Ok(Value::Bytes(Rc::from(&bytes[start..end])));
    }
    Ok(Value::List(Rc::new(items[start..end].to_vec()), kind))
}

/// A length or index as Go's `int`.
fn to_i64(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

const SLICE_OUT_OF_BOUNDS: &str = "reflect.Value.Slice: slice index out of bounds";

fn concat(_: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    let mut out = Vec::new();
    for arg in args {
        let items = list_items(arg).map(|(items, _)| items).ok_or_else(|| {
            if arg.is_nil() {
                NIL_DEREFERENCE.to_string()
            } else {
                format!("Cannot concat type {} as list", arg.kind_name())
            }
        })?;
        out.extend(items.iter().cloned());
    }
    // Go appends to a nil slice, which stays nil when nothing was appended.
    if out.is_empty() {
        return Ok(Value::nil_list());
    }
    Ok(any_list(out))
}

/// `chunk SIZE LIST`: lists of SIZE items (the last one shorter). The chunk count is computed
/// in floating point as Sprig does, so a size of zero or below fails the way Go's `make` does.
fn chunk(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    const BAD_LEN: &str = "runtime error: makeslice: len out of range";
    want_args(call, args, 2)?;
    let size = int_arg(&args[0])?;
    let items = items_of(&args[1], "Cannot chunk type")?;
    let len = to_i64(items.len());
    let count = cast::float_to_int(((len - 1) as f64 / size as f64).floor() + 1.0);
    let count = usize::try_from(count).map_err(|_| BAD_LEN.to_string())?;
    if count > items.len() + 1 {
        return Err(BAD_LEN.into());
    }
    let mut out = Vec::with_capacity(count);
    for i in 0..count {
        let mut chunk_len = size;
        if i + 1 == count {
            chunk_len = cast::float_to_int((len as f64 % size as f64).floor());
            if chunk_len == 0 {
                chunk_len = size;
            }
        }
        let chunk_len = usize::try_from(chunk_len).map_err(|_| BAD_LEN.to_string())?;
        let mut chunk = Vec::with_capacity(chunk_len.min(items.len()));
        for j in 0..chunk_len {
            let index = to_i64(i).wrapping_mul(size).wrapping_add(to_i64(j));
            let item = usize::try_from(index)
                .ok()
                .and_then(|index| items.get(index))
                .ok_or_else(|| {
                    format!("runtime error: index out of range [{index}] with length {len}")
                })?;
            chunk.push(item.clone());
        }
        out.push(any_list(chunk));
    }
    Ok(any_list(out))
}

fn until(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    want_args(call, args, 1)?;
    let count = int_arg(&args[0])?;
    let step = if count < 0 { -1 } else { 1 };
    int_range(0, count, step).map(int_list)
}

fn until_step(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    want_args(call, args, 3)?;
    let start = int_arg(&args[0])?;
    let stop = int_arg(&args[1])?;
    let step = int_arg(&args[2])?;
    int_range(start, stop, step).map(int_list)
}

fn int_list(items: Vec<i64>) -> Value {
    Value::List(
        Rc::new(items.into_iter().map(Value::Int).collect()),
        ListKind::Int,
    )
}

/// Sprig's `untilStep`: from `start` towards `stop` (excluded) by `step`; empty when the step
/// points away from `stop` or is zero. Refuses more than [`MAX_RANGE_ITEMS`] items.
fn int_range(start: i64, stop: i64, step: i64) -> Result<Vec<i64>, String> {
    let (start, stop, step) = (i128::from(start), i128::from(stop), i128::from(step));
    let count = if stop < start {
        if step >= 0 {
            0
        } else {
            (start - stop + (-step) - 1) / (-step)
        }
    } else if step <= 0 {
        0
    } else {
        (stop - start + step - 1) / step
    };
    if count > MAX_RANGE_ITEMS {
        return Err(format!(
            "refusing to build a list of {count} numbers (the limit is {MAX_RANGE_ITEMS})"
        ));
    }
    // Every item lies between start and stop, so it fits an i64.
    Ok((0..count)
        .map(|k| i64::try_from(start + k * step).unwrap_or_default())
        .collect())
}

/// Sprig's `seq`, like the Unix command: `seq END` counts from 1, `seq START END`, `seq START
/// STEP END`; the numbers joined by spaces, or "" when the step points away from the end.
fn seq(_: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    let params = args.iter().map(int_arg).collect::<Result<Vec<_>, _>>()?;
    let numbers = match params[..] {
        [end] => {
            let increment = if end < 1 { -1 } else { 1 };
            int_range(1, end.wrapping_add(increment), increment)?
        }
        [start, end] => {
            let step = if end < start { -1 } else { 1 };
            int_range(start, end.wrapping_add(step), step)?
        }
        [start, step, end] => {
            let mut increment = 1;
            if end < start {
                increment = -1;
                if step > 0 {
                    return Ok(Value::str(""));
                }
            }
            int_range(start, end.wrapping_add(increment), step)?
        }
        _ => Vec::new(),
    };
    let text = numbers
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(" ");
    Ok(Value::from(text))
}

#[cfg(test)]
mod oracle_tests;

#[cfg(test)]
mod tests {
    use super::super::reflect::tests::{call, dict, int, list, s, show};
    use super::*;

    fn ints(items: &[i64]) -> Value {
        Value::list(items.iter().copied().map(Value::Int).collect())
    }

    #[test]
    fn list_basics() {
        // Oracle: `first (list)` and `last (list)` print "" (nil, typeOf <nil>); `rest (list)`
        // and `initial (list)` `[]`; reverse/append/prepend as below; `append` of a []string
        // is an []interface {}.
        assert_eq!(show("list", &[int(1), s("a")]), "[1 a] ([]interface {})");
        assert_eq!(show("tuple", &[]), "[] ([]interface {})");
        assert_eq!(show("first", &[ints(&[1, 2])]), "1 (int)");
        assert_eq!(show("first", &[list(&[])]), "<nil> (<nil>)");
        assert_eq!(show("last", &[ints(&[1, 2])]), "2 (int)");
        assert_eq!(show("rest", &[ints(&[1, 2, 3])]), "[2 3] ([]interface {})");
        assert_eq!(show("rest", &[list(&[])]), "[] ([]interface {})");
        assert_eq!(
            show("initial", &[ints(&[1, 2, 3])]),
            "[1 2] ([]interface {})"
        );
        assert_eq!(show("initial", &[list(&[])]), "[] ([]interface {})");
        assert_eq!(
            show("reverse", &[ints(&[1, 2, 3])]),
            "[3 2 1] ([]interface {})"
        );
        assert_eq!(
            show("append", &[ints(&[1]), int(2)]),
            "[1 2] ([]interface {})"
        );
        assert_eq!(
            show("prepend", &[ints(&[1]), int(2)]),
            "[2 1] ([]interface {})"
        );
        assert_eq!(
            show("push", &[Value::string_list(["a"]), s("b")]),
            "[a b] ([]interface {})"
        );
    }

    #[test]
    fn non_lists_fail_as_sprig_does() {
        // Oracle: `first "abc"` → Cannot find first on type string; `first nil` and `append
        // nil 1` → Go's nil dereference; `append "a" 1` → Cannot push on type string;
        // `concat (list 1) "a"` → Cannot concat type string as list.
        assert_eq!(
            show("first", &[s("abc")]),
            "error: Cannot find first on type string"
        );
        assert_eq!(
            show("mustFirst", &[Value::Nil]),
            "error: runtime error: invalid memory address or nil pointer dereference"
        );
        assert_eq!(
            show("append", &[s("a"), int(1)]),
            "error: Cannot push on type string"
        );
        assert_eq!(
            show("append", &[Value::Nil, int(1)]),
            "error: runtime error: invalid memory address or nil pointer dereference"
        );
        assert_eq!(
            show("concat", &[ints(&[1]), s("a")]),
            "error: Cannot concat type string as list"
        );
        assert_eq!(
            show("first", &[]),
            "error: wrong number of args for first: want 1 got 0"
        );
    }

    #[test]
    fn uniq_without_has_compact_use_go_equality() {
        // Oracle: `uniq (list 1 1 "1" 1.0 2)` → [1 1 1 2]; `without (list 1 2 3 1) 1 3` → [2];
        // `compact (list 0 1 "" nil false "a" (list) (dict))` → [1 a]; `has 1 (list 1 2)`
        // true, `has 1 .Values.l` (YAML floats) false, `has 1.0 .Values.l` true, `has 1 nil`
        // false, `has "a" (splitList "," "a,b")` true.
        let mixed = list(&[int(1), int(1), s("1"), Value::Float(1.0), int(2)]);
        assert_eq!(show("uniq", &[mixed]), "[1 1 1 2] ([]interface {})");
        assert_eq!(
            show("without", &[ints(&[1, 2, 3, 1]), int(1), int(3)]),
            "[2] ([]interface {})"
        );
        let sparse = list(&[
            int(0),
            int(1),
            s(""),
            Value::Nil,
            Value::Bool(false),
            s("a"),
            list(&[]),
            dict(&[]),
        ]);
        assert_eq!(show("compact", &[sparse]), "[1 a] ([]interface {})");
        let floats = list(&[Value::Float(1.0), Value::Float(2.0)]);
        assert_eq!(show("has", &[int(1), ints(&[1, 2])]), "true (bool)");
        assert_eq!(show("has", &[int(1), floats.clone()]), "false (bool)");
        assert_eq!(show("has", &[Value::Float(1.0), floats]), "true (bool)");
        assert_eq!(show("has", &[int(1), Value::Nil]), "false (bool)");
        assert_eq!(
            show("has", &[s("a"), Value::string_list(["a", "b"])]),
            "true (bool)"
        );
    }

    #[test]
    fn slice_keeps_the_type_and_checks_bounds() {
        // Oracle: `slice (list 1 2 3) 1` → [2 3]; `… 1 2` → [2]; `slice (list)` → nil;
        // `typeOf (slice (splitList "," "a,b") 1)` → []string; `… 2 1`, `… 1 5`, `… -1` →
        // reflect.Value.Slice: slice index out of bounds; `slice "abc" 1` → list should be
        // type of slice or array but string.
        assert_eq!(
            show("slice", &[ints(&[1, 2, 3]), int(1)]),
            "[2 3] ([]interface {})"
        );
        assert_eq!(
            show("slice", &[ints(&[1, 2, 3]), int(1), int(2)]),
            "[2] ([]interface {})"
        );
        assert_eq!(show("slice", &[list(&[])]), "<nil> (<nil>)");
        assert_eq!(
            show("slice", &[Value::string_list(["a", "b"]), int(1)]),
            "[b] ([]string)"
        );
        for bounds in [[2, 1], [1, 5], [-1, 3]] {
            assert_eq!(
                show("slice", &[ints(&[1, 2, 3]), int(bounds[0]), int(bounds[1])]),
                "error: reflect.Value.Slice: slice index out of bounds"
            );
        }
        assert_eq!(
            show("mustSlice", &[s("abc"), int(1)]),
            "error: list should be type of slice or array but string"
        );
    }

    #[test]
    fn chunk_and_concat() {
        // Oracle: `chunk 2 (list 1 2 3 4 5)` → [[1 2] [3 4] [5]]; `chunk 2 (list)` → [];
        // `chunk 3 (list 1 2 3)` → [[1 2 3]]; `chunk 0 …`, `chunk -1 …`, `chunk 0 (list)` →
        // runtime error: makeslice: len out of range; `concat (list 1) (splitList "," "a,b")
        // (list)` → [1 a b]; `concat` → [].
        assert_eq!(
            show("chunk", &[int(2), ints(&[1, 2, 3, 4, 5])]),
            "[[1 2] [3 4] [5]] ([]interface {})"
        );
        assert_eq!(show("chunk", &[int(2), list(&[])]), "[] ([]interface {})");
        assert_eq!(
            show("chunk", &[int(3), ints(&[1, 2, 3])]),
            "[[1 2 3]] ([]interface {})"
        );
        for (size, items) in [
            (0, ints(&[1, 2, 3])),
            (-1, ints(&[1, 2, 3])),
            (0, list(&[])),
        ] {
            assert_eq!(
                show("mustChunk", &[int(size), items]),
                "error: runtime error: makeslice: len out of range"
            );
        }
        assert_eq!(
            show(
                "concat",
                &[ints(&[1]), Value::string_list(["a", "b"]), list(&[])]
            ),
            "[1 a b] ([]interface {})"
        );
        assert_eq!(show("concat", &[]), "[] ([]interface {})");
        // Oracle: `toJson (concat)`, `toJson (concat (list) (list))`, `toJson (rest (list))`,
        // `toJson (initial (list))` → null (Go's nil slice); `toJson (list)`, `toJson (rest
        // (list 1))`, `toJson (uniq (list))` → [].
        let json = |name: &str, args: &[Value]| call(name, args).expect(name).to_json().to_string();
        assert_eq!(json("concat", &[]), "null");
        assert_eq!(json("concat", &[list(&[]), list(&[])]), "null");
        assert_eq!(json("rest", &[list(&[])]), "null");
        assert_eq!(json("initial", &[list(&[])]), "null");
        assert_eq!(json("list", &[]), "[]");
        assert_eq!(json("rest", &[ints(&[1])]), "[]");
        assert_eq!(json("uniq", &[list(&[])]), "[]");
        let nil = call("concat", &[]).expect("concat");
        assert_eq!(show("deepEqual", &[nil.clone(), list(&[])]), "false (bool)");
        assert_eq!(
            show(
                "deepEqual",
                &[nil.clone(), call("rest", &[list(&[])]).expect("rest")]
            ),
            "true (bool)"
        );
        assert!(call("deepCopy", &[nil]).expect("copy").is_nil_list());
    }

    #[test]
    fn until_and_seq() {
        // Oracle: `until 5` → [0 1 2 3 4] ([]int); `until -3` → [0 -1 -2]; `until 0` → [];
        // `untilStep 0 10 3` → [0 3 6 9]; `untilStep 10 0 -3` → [10 7 4 1]; step 0 or away
        // → []; seq: `seq 5` → "1 2 3 4 5", `seq -2` → "1 0 -1 -2", `seq 0` → "1 0",
        // `seq 1 3`, `seq 3 1`, `seq 0 2 10`, `seq 10 -2 0`, `seq 1 2`, `seq 1 1 1 1` → "",
        // `seq` → "", `seq 10 2 0` → "", `seq 0 -2 10` → ""; `until 1.5` and `until (add 1
        // 2)` fail (Go's wrong type), as does `until .Values.n`.
        assert_eq!(show("until", &[int(5)]), "[0 1 2 3 4] ([]int)");
        assert_eq!(show("until", &[int(-3)]), "[0 -1 -2] ([]int)");
        assert_eq!(show("until", &[int(0)]), "[] ([]int)");
        assert_eq!(
            show("untilStep", &[int(0), int(10), int(3)]),
            "[0 3 6 9] ([]int)"
        );
        assert_eq!(
            show("untilStep", &[int(10), int(0), int(-3)]),
            "[10 7 4 1] ([]int)"
        );
        assert_eq!(show("untilStep", &[int(0), int(10), int(0)]), "[] ([]int)");
        assert_eq!(show("untilStep", &[int(0), int(10), int(-1)]), "[] ([]int)");
        let seq = |args: &[i64]| show("seq", &args.iter().map(|i| int(*i)).collect::<Vec<_>>());
        assert_eq!(seq(&[5]), "1 2 3 4 5 (string)");
        assert_eq!(seq(&[-2]), "1 0 -1 -2 (string)");
        assert_eq!(seq(&[0]), "1 0 (string)");
        assert_eq!(seq(&[1, 3]), "1 2 3 (string)");
        assert_eq!(seq(&[3, 1]), "3 2 1 (string)");
        assert_eq!(seq(&[0, 2, 10]), "0 2 4 6 8 10 (string)");
        assert_eq!(seq(&[10, -2, 0]), "10 8 6 4 2 0 (string)");
        assert_eq!(seq(&[1, 2]), "1 2 (string)");
        assert_eq!(seq(&[1, 1, 1, 1]), " (string)");
        assert_eq!(seq(&[]), " (string)");
        assert_eq!(seq(&[10, 2, 0]), " (string)");
        assert_eq!(seq(&[0, -2, 10]), " (string)");
        assert_eq!(seq(&[1, 0, 5]), " (string)");
        assert_eq!(
            show("until", &[Value::Float(1.5)]),
            "error: wrong type for value; expected int; got float64"
        );
        assert_eq!(
            show("until", &[Value::Int64(3)]),
            "error: wrong type for value; expected int; got int64"
        );
    }

    #[test]
    fn odd_sizes_and_indices() {
        // Oracle: `chunk -2 (list 1)` [[1]], `chunk -3 (list 1 2)` [], `chunk 5 (list 1 2)`
        // [[1 2]], `chunk 1 (list 1 2)` [[1] [2]], `chunk -2 (list 1 2 3)` []; `slice (list 1
        // 2 3) "1" 2.9` [2], `… nil` [1 2 3], `… 0 0` [] ([]interface {}), `slice (until 5) 1
        // 3` []int; `untilStep 0 -10 -4` [0 -4 -8], `untilStep 5 5 1` [], `untilStep 0 3 10`
        // [0], `until -1` [0]; `seq 0 0` "0", `seq 0 0 0`, `seq 1 0 1`, `seq 2 0 1` "";
        // `uniq "abc"` fails; `without nil 1`, `compact nil`, `reverse nil` dereference nil.
        assert_eq!(
            show("chunk", &[int(-2), ints(&[1])]),
            "[[1]] ([]interface {})"
        );
        assert_eq!(
            show("chunk", &[int(-3), ints(&[1, 2])]),
            "[] ([]interface {})"
        );
        assert_eq!(
            show("chunk", &[int(5), ints(&[1, 2])]),
            "[[1 2]] ([]interface {})"
        );
        assert_eq!(
            show("chunk", &[int(1), ints(&[1, 2])]),
            "[[1] [2]] ([]interface {})"
        );
        assert_eq!(
            show("chunk", &[int(-2), ints(&[1, 2, 3])]),
            "[] ([]interface {})"
        );
        let one_two_three = ints(&[1, 2, 3]);
        assert_eq!(
            show("slice", &[one_two_three.clone(), s("1"), Value::Float(2.9)]),
            "[2] ([]interface {})"
        );
        assert_eq!(
            show("slice", &[one_two_three.clone(), Value::Nil]),
            "[1 2 3] ([]interface {})"
        );
        assert_eq!(
            show("slice", &[one_two_three, int(0), int(0)]),
            "[] ([]interface {})"
        );
        let until5 = call("until", &[int(5)]).expect("until");
        assert_eq!(show("slice", &[until5, int(1), int(3)]), "[1 2] ([]int)");
        assert_eq!(
            show("untilStep", &[int(0), int(-10), int(-4)]),
            "[0 -4 -8] ([]int)"
        );
        assert_eq!(show("untilStep", &[int(5), int(5), int(1)]), "[] ([]int)");
        assert_eq!(show("untilStep", &[int(0), int(3), int(10)]), "[0] ([]int)");
        assert_eq!(show("until", &[int(-1)]), "[0] ([]int)");
        assert_eq!(show("seq", &[int(0), int(0)]), "0 (string)");
        for args in [[0, 0, 0], [1, 0, 1], [2, 0, 1]] {
            let args: Vec<Value> = args.iter().map(|i| int(*i)).collect();
            assert_eq!(show("seq", &args), " (string)");
        }
        assert_eq!(
            show("uniq", &[s("abc")]),
            "error: Cannot find uniq on type string"
        );
        for name in ["without", "compact", "reverse"] {
            assert_eq!(
                show(name, &[Value::Nil]),
                "error: runtime error: invalid memory address or nil pointer dereference"
            );
        }
    }

    #[test]
    fn huge_ranges_are_refused() {
        assert_eq!(
            show("until", &[int(20_000_000)]),
            "error: refusing to build a list of 20000000 numbers (the limit is 10000000)"
        );
        assert!(show("seq", &[int(i64::MIN), int(1), int(0)]).starts_with("error: "));
        assert!(show("untilStep", &[int(i64::MAX), int(i64::MIN), int(-1)]).starts_with("error: "));
        assert_eq!(
            show("untilStep", &[int(i64::MIN), int(i64::MAX), int(i64::MAX)]),
            "[-9223372036854775808 -1 9223372036854775806] ([]int)"
        );
    }
}
