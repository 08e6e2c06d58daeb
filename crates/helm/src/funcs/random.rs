//! Template functions: random — `randAlphaNum`, `randAlpha`, `randNumeric`, `randAscii`,
//! `randInt` and `uuidv4`.
//!
//! All of them draw from the render's [`Env::rng`](crate::template::Env), so a seeded render
//! gives the same strings every time (Sprig draws from the OS; the shapes are the same).

use rand::RngExt as _;

use super::crypto::{MAX_RANDOM_BYTES, int_arg, want_args};
use crate::template::{Call, FuncMap};
use crate::value::Value;

/// Adds this module's functions to `map`.
pub fn register(map: &mut FuncMap) {
    map.insert("randAlphaNum", rand_alpha_num);
    map.insert("randAlpha", rand_alpha);
    map.insert("randNumeric", rand_numeric);
    map.insert("randAscii", rand_ascii);
    map.insert("randInt", rand_int);
    map.insert("uuidv4", uuidv4);
}

const LETTERS: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
const DIGITS: &[u8] = b"0123456789";
const ALPHANUMERIC: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";

/// `count` characters drawn uniformly from `alphabet`; a count below one gives the empty
/// string, as Sprig's helpers do.
fn random_string(call: &mut Call<'_>, args: &[Value], alphabet: &[u8]) -> Result<Value, String> {
    want_args(call, args, 1)?;
    let count = int_arg(&args[0])?;
    let Ok(count) = usize::try_from(count) else {
        return Ok(Value::str(""));
    };
    if count > MAX_RANDOM_BYTES {
        return Err(format!(
            "{}: {count} characters is more than the {MAX_RANDOM_BYTES} a render may ask for",
            call.name
        ));
    }
    let rng = &mut call.env.rng;
    let text: String = (0..count)
        .map(|_| char::from(alphabet[rng.random_range(0..alphabet.len())]))
        .collect();
    Ok(Value::str(text))
}

fn rand_alpha_num(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    random_string(call, args, ALPHANUMERIC)
}

fn rand_alpha(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    random_string(call, args, LETTERS)
}

fn rand_numeric(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    random_string(call, args, DIGITS)
}

fn rand_ascii(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    // Printable ASCII, space included: code points 32 to 126.
    const PRINTABLE: &[u8; 95] = &{
        let mut table = [0_u8; 95];
        let mut i = 0;
        while i < 95 {
            table[i] = 32 + i as u8;
            i += 1;
        }
        table
    };
    random_string(call, args, PRINTABLE)
}

/// `randInt MIN MAX`: an `int` in `[MIN, MAX)`; Go's `rand.Intn` refuses an empty range.
fn rand_int(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    want_args(call, args, 2)?;
    let min = int_arg(&args[0])?;
    let max = int_arg(&args[1])?;
    // Go computes the span in wrapping 64-bit arithmetic; a span that is not positive (an empty
    // range, or one too wide to fit) makes rand.Intn panic.
    let span = max.wrapping_sub(min);
    if span <= 0 {
        return Err("invalid argument to Intn".into());
    }
    Ok(Value::Int(
        call.env.rng.random_range(0..span).wrapping_add(min),
    ))
}

/// A random (version 4, RFC 4122 variant) UUID as text.
fn uuidv4(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    want_args(call, args, 0)?;
    let bytes: [u8; 16] = call.env.rng.random();
    let id = uuid::Builder::from_random_bytes(bytes).into_uuid();
    Ok(Value::str(id.hyphenated().to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::funcs::crypto::test_call;

    fn text(f: crate::template::Function, args: &[Value]) -> String {
        test_call(f, args).unwrap().to_string()
    }

    #[test]
    fn strings_have_the_asked_shape() {
        let n = Value::Int(200);
        let check = |s: String, ok: fn(char) -> bool| {
            assert_eq!(s.len(), 200);
            assert!(s.chars().all(ok), "{s}");
        };
        check(text(rand_alpha_num, std::slice::from_ref(&n)), |c| {
            c.is_ascii_alphanumeric()
        });
        check(text(rand_alpha, std::slice::from_ref(&n)), |c| {
            c.is_ascii_alphabetic()
        });
        check(text(rand_numeric, std::slice::from_ref(&n)), |c| {
            c.is_ascii_digit()
        });
        check(text(rand_ascii, &[n]), |c| (' '..='~').contains(&c));
        for f in [rand_alpha_num, rand_alpha, rand_numeric, rand_ascii] {
            assert_eq!(text(f, &[Value::Int(0)]), "");
            assert_eq!(text(f, &[Value::Int(-1)]), "");
        }
        assert_eq!(
            test_call(rand_alpha, &[Value::Float(3.0)]).unwrap_err(),
            "wrong type for value; expected int; got float64"
        );
    }

    #[test]
    fn integers_stay_in_range() {
        for _ in 0..50 {
            let v = test_call(rand_int, &[Value::Int(-5), Value::Int(-3)]).unwrap();
            assert!(matches!(v, Value::Int(-5 | -4)), "{v:?}");
        }
        for (min, max) in [(5, 5), (i64::MIN, i64::MAX), (-i64::MAX, 1)] {
            assert_eq!(
                test_call(rand_int, &[Value::Int(min), Value::Int(max)]).unwrap_err(),
                "invalid argument to Intn"
            );
        }
    }

    #[test]
    fn uuids_are_version_4() {
        let id = text(uuidv4, &[]);
        let parsed = uuid::Uuid::parse_str(&id).unwrap();
        assert_eq!(parsed.get_version_num(), 4);
        assert_eq!(id.len(), 36);
        assert_eq!(id, id.to_lowercase());
    }
}
