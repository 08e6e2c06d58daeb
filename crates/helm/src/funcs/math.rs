//! Template functions: integer and float math (`add`, `div`, `max`, `addf`, `round`, `int`, …).
//!
//! The integer functions convert every argument with `cast.ToInt64` (so `add "3" 4.9` is 7) and
//! return `int64`, wrapping on overflow as Go does. The float functions `addf`, `subf`, `mulf`,
//! `divf` and `add1f` compute in decimal (Sprig uses shopspring/decimal): each operand becomes the
//! shortest decimal that reads back as the same float, the arithmetic is exact (division rounds
//! to 16 decimal places, half away from zero) and the result is rounded to the nearest float once.
//! That is why `addf 0.1 0.2` is 0.3 and not 0.30000000000000004.

use num_bigint::{BigInt, Sign};

use super::reflect::{float_arg, int_arg, want_args, want_at_least};
use crate::cast;
use crate::template::{Call, FuncMap};
use crate::value::Value;

/// Adds this module's functions to `map`.
pub fn register(map: &mut FuncMap) {
    map.insert("add", add);
    map.insert("add1", add1);
    map.insert("sub", sub);
    map.insert("div", div);
    map.insert("mod", modulo);
    map.insert("mul", mul);
    map.insert("max", max);
    map.insert("biggest", max);
    map.insert("min", min);
    map.insert("addf", addf);
    map.insert("add1f", add1f);
    map.insert("subf", subf);
    map.insert("divf", divf);
    map.insert("mulf", mulf);
    map.insert("maxf", maxf);
    map.insert("minf", minf);
    map.insert("floor", floor);
    map.insert("ceil", ceil);
    map.insert("round", round);
    map.insert("int", int);
    map.insert("int64", int64);
    map.insert("float64", float64);
    map.insert("toDecimal", to_decimal);
}

const DIVIDE_BY_ZERO: &str = "runtime error: integer divide by zero";

#[expect(
    clippy::unnecessary_wraps,
    reason = "every template function returns a Result"
)]
fn add(_: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    Ok(Value::Int64(
        args.iter().map(cast::to_i64).fold(0, i64::wrapping_add),
    ))
}

fn add1(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    want_args(call, args, 1)?;
    Ok(Value::Int64(cast::to_i64(&args[0]).wrapping_add(1)))
}

fn sub(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    want_args(call, args, 2)?;
    Ok(Value::Int64(
        cast::to_i64(&args[0]).wrapping_sub(cast::to_i64(&args[1])),
    ))
}

fn div(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    divide(call, args, i64::wrapping_div)
}

fn modulo(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    divide(call, args, i64::wrapping_rem)
}

/// `div` and `mod`: Go's integer `/` or `%`, which panics on a zero divisor.
fn divide(call: &Call<'_>, args: &[Value], op: fn(i64, i64) -> i64) -> Result<Value, String> {
    want_args(call, args, 2)?;
    let divisor = cast::to_i64(&args[1]);
    if divisor == 0 {
        return Err(DIVIDE_BY_ZERO.into());
    }
    Ok(Value::Int64(op(cast::to_i64(&args[0]), divisor)))
}

fn mul(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    want_at_least(call, args, 1)?;
    Ok(Value::Int64(
        args.iter().map(cast::to_i64).fold(1, i64::wrapping_mul),
    ))
}

fn max(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    want_at_least(call, args, 1)?;
    Ok(Value::Int64(
        args.iter().map(cast::to_i64).max().unwrap_or_default(),
    ))
}

fn min(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    want_at_least(call, args, 1)?;
    Ok(Value::Int64(
        args.iter().map(cast::to_i64).min().unwrap_or_default(),
    ))
}

/// Folds `rest` into `first` with a decimal operation, as Sprig's float functions do.
fn decimal_fold(
    first: &Value,
    rest: &[Value],
    op: fn(Decimal, Decimal) -> Result<Decimal, String>,
) -> Result<Value, String> {
    let mut acc = Decimal::from_f64(cast::to_f64(first))?;
    for operand in rest {
        acc = op(acc, Decimal::from_f64(cast::to_f64(operand))?)?;
    }
    Ok(Value::Float(acc.to_f64()))
}

fn addf(_: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    decimal_fold(&Value::Float(0.0), args, |a, b| Ok(a.add(&b)))
}

fn add1f(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    want_args(call, args, 1)?;
    decimal_fold(&args[0], &[Value::Int(1)], |a, b| Ok(a.add(&b)))
}

fn subf(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    want_at_least(call, args, 1)?;
    decimal_fold(&args[0], &args[1..], |a, b| Ok(a.add(&b.negate())))
}

fn mulf(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    want_at_least(call, args, 1)?;
    decimal_fold(&args[0], &args[1..], |a, b| a.mul(&b))
}

fn divf(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    want_at_least(call, args, 1)?;
    decimal_fold(&args[0], &args[1..], |a, b| a.div(&b))
}

fn maxf(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    want_at_least(call, args, 1)?;
    let first = cast::to_f64(&args[0]);
    Ok(Value::Float(
        args[1..].iter().map(cast::to_f64).fold(first, go_max),
    ))
}

fn minf(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    want_at_least(call, args, 1)?;
    let first = cast::to_f64(&args[0]);
    Ok(Value::Float(
        args[1..].iter().map(cast::to_f64).fold(first, go_min),
    ))
}

/// Go's `math.Max`: +Inf wins over NaN, NaN over numbers, +0 over -0.
fn go_max(x: f64, y: f64) -> f64 {
    if x == f64::INFINITY || y == f64::INFINITY {
        f64::INFINITY
    } else if x.is_nan() || y.is_nan() {
        f64::NAN
    } else if x == 0.0 && y == 0.0 {
        if x.is_sign_negative() { y } else { x }
    } else if x > y {
        x
    } else {
        y
    }
}

/// Go's `math.Min`: -Inf wins over NaN, NaN over numbers, -0 over +0.
fn go_min(x: f64, y: f64) -> f64 {
    if x == f64::NEG_INFINITY || y == f64::NEG_INFINITY {
        f64::NEG_INFINITY
    } else if x.is_nan() || y.is_nan() {
        f64::NAN
    } else if x == 0.0 && y == 0.0 {
        if x.is_sign_negative() { x } else { y }
    } else if x < y {
        x
    } else {
        y
    }
}

fn floor(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    want_args(call, args, 1)?;
    Ok(Value::Float(cast::to_f64(&args[0]).floor()))
}

fn ceil(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    want_args(call, args, 1)?;
    Ok(Value::Float(cast::to_f64(&args[0]).ceil()))
}

/// `round VALUE PLACES [ROUND_ON]`: rounds up when the fraction at PLACES is at least ROUND_ON
/// (0.5 by default), else down; toward -Inf for negative numbers either way, as Sprig's does.
fn round(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    want_at_least(call, args, 2)?;
    let places = int_arg(&args[1])?;
    let options = args[2..]
        .iter()
        .map(float_arg)
        .collect::<Result<Vec<_>, _>>()?;
    let round_on = options.first().copied().unwrap_or(0.5);
    let value = cast::to_f64(&args[0]);
    let pow = pow10(places);
    let digit = pow * value;
    let rounded = if digit.fract() >= round_on {
        digit.ceil()
    } else {
        digit.floor()
    };
    Ok(Value::Float(rounded / pow))
}

/// 10^n as the nearest float (what Go's `math.Pow(10, n)` gives for the exponents that matter).
fn pow10(n: i64) -> f64 {
    match n {
        ..-400 => 0.0,
        401.. => f64::INFINITY,
        _ => format!("1e{n}").parse().unwrap_or(f64::NAN),
    }
}

fn int(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    want_args(call, args, 1)?;
    Ok(Value::Int(cast::to_i64(&args[0])))
}

fn int64(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    want_args(call, args, 1)?;
    Ok(Value::Int64(cast::to_i64(&args[0])))
}

fn float64(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    want_args(call, args, 1)?;
    Ok(Value::Float(cast::to_f64(&args[0])))
}

/// `toDecimal`: the value's `%v` text read as an octal number (`"0777"` is 511), 0 when it is
/// not one.
fn to_decimal(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    want_args(call, args, 1)?;
    let text = args[0].to_string();
    let (negative, digits) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text.as_str()),
    };
    let parsed = if !digits.is_empty() && digits.bytes().all(|b| (b'0'..=b'7').contains(&b)) {
        i128::from_str_radix(digits, 8)
            .ok()
            .map(|m| if negative { -m } else { m })
            .and_then(|v| i64::try_from(v).ok())
    } else {
        None
    };
    Ok(Value::Int64(parsed.unwrap_or(0)))
}

/// An exact decimal, `mantissa × 10^exponent`.
#[derive(Debug, Clone)]
struct Decimal {
    mantissa: BigInt,
    exponent: i64,
}

/// The decimal exponents products may reach; far beyond any float (10^±400).
const MAX_EXPONENT: i64 = 100_000;

/// shopspring/decimal's default division precision: 16 decimal places.
const DIVISION_PLACES: i64 = 16;

impl Decimal {
    /// The shortest decimal that reads back as `f`; NaN and infinities have none.
    fn from_f64(f: f64) -> Result<Decimal, String> {
        if !f.is_finite() {
            return Err(format!("Cannot create a Decimal from {}", Value::Float(f)));
        }
        if f == 0.0 {
            return Ok(Decimal {
                mantissa: BigInt::ZERO,
                exponent: 0,
            });
        }
        // `{:e}` writes the shortest round-trip digits: "-1.2345e-8".
        let text = format!("{f:e}");
        let (mantissa, exponent) = text.split_once('e').unwrap_or((&text, "0"));
        let fraction_digits = mantissa.split_once('.').map_or(0, |(_, f)| f.len());
        let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
        let exponent: i64 = exponent.parse().unwrap_or_default();
        Ok(Decimal {
            mantissa: digits.parse().unwrap_or_default(),
            exponent: exponent - i64::try_from(fraction_digits).unwrap_or_default(),
        })
    }

    /// The nearest float (ties to even), ±Inf beyond the range.
    fn to_f64(&self) -> f64 {
        format!("{}e{}", self.mantissa, self.exponent)
            .parse()
            .unwrap_or(f64::NAN)
    }

    fn negate(self) -> Decimal {
        Decimal {
            mantissa: -self.mantissa,
            exponent: self.exponent,
        }
    }

    /// `self` with its mantissa scaled to `exponent` (which must not exceed its own).
    fn scaled_to(&self, exponent: i64) -> BigInt {
        let shift = u32::try_from(self.exponent - exponent).unwrap_or(u32::MAX);
        &self.mantissa * BigInt::from(10u32).pow(shift)
    }

    fn add(&self, other: &Decimal) -> Decimal {
        let exponent = self.exponent.min(other.exponent);
        Decimal {
            mantissa: self.scaled_to(exponent) + other.scaled_to(exponent),
            exponent,
        }
    }

    /// The exact product; refused when its exponent leaves ±[`MAX_EXPONENT`], where the exact
    /// digits would only cost memory (the float result is 0 or ±Inf long before).
    fn mul(&self, other: &Decimal) -> Result<Decimal, String> {
        let exponent = self.exponent + other.exponent;
        if exponent.abs() > MAX_EXPONENT {
            return Err(format!(
                "decimal exponent {exponent} out of range (at most {MAX_EXPONENT} either way)"
            ));
        }
        Ok(Decimal {
            mantissa: &self.mantissa * &other.mantissa,
            exponent,
        })
    }

    /// The quotient rounded to [`DIVISION_PLACES`] decimal places, half away from zero.
    fn div(&self, other: &Decimal) -> Result<Decimal, String> {
        if other.mantissa.sign() == Sign::NoSign {
            return Err("decimal division by 0".into());
        }
        // self / other = (a / b) × 10^(ea - eb); we want q = that × 10^16, truncated.
        let shift = self.exponent - other.exponent + DIVISION_PLACES;
        let ten = BigInt::from(10u32);
        let (dividend, divisor) = if shift >= 0 {
            let shift = u32::try_from(shift).unwrap_or(u32::MAX);
            (&self.mantissa * ten.pow(shift), other.mantissa.clone())
        } else {
            let shift = u32::try_from(-shift).unwrap_or(u32::MAX);
            (self.mantissa.clone(), &other.mantissa * ten.pow(shift))
        };
        let mut quotient = &dividend / &divisor;
        let remainder = &dividend % &divisor;
        if remainder.magnitude() * 2u32 >= *divisor.magnitude() {
            if (self.mantissa.sign() == Sign::Minus) == (other.mantissa.sign() == Sign::Minus) {
                quotient += 1;
            } else {
                quotient -= 1;
            }
        }
        Ok(Decimal {
            mantissa: quotient,
            exponent: -DIVISION_PLACES,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::reflect::tests::{int, s, show};
    use super::*;

    fn f(x: f64) -> Value {
        Value::Float(x)
    }

    #[test]
    fn integer_math_is_int64() {
        // Oracle: `add 1 2` 3, `add` 0, `add "3" 4.9` 7, `add1 "x"` 1, `sub 5 7.5` -2,
        // `div 7 2` 3, `div -7 2` -3, `mod -7 2` -1, `mul 2` 2, `mul 2 3 "4"` 24, `max 1 5 3`
        // 5, `min 4 -2` -2, `biggest 3` 3, typeOf int64; `add .Values.a .Values.b` (2.5, 1.9)
        // 3; `div 2.5 1.9` → integer divide by zero; overflow wraps.
        assert_eq!(show("add", &[int(1), int(2)]), "3 (int64)");
        assert_eq!(show("add", &[]), "0 (int64)");
        assert_eq!(show("add", &[s("3"), f(4.9)]), "7 (int64)");
        assert_eq!(show("add", &[f(2.5), f(1.9)]), "3 (int64)");
        assert_eq!(show("add1", &[s("x")]), "1 (int64)");
        assert_eq!(show("sub", &[int(5), f(7.5)]), "-2 (int64)");
        assert_eq!(show("div", &[int(7), int(2)]), "3 (int64)");
        assert_eq!(show("div", &[int(-7), int(2)]), "-3 (int64)");
        assert_eq!(show("mod", &[int(-7), int(2)]), "-1 (int64)");
        assert_eq!(show("mul", &[int(2)]), "2 (int64)");
        assert_eq!(show("mul", &[int(2), int(3), s("4")]), "24 (int64)");
        assert_eq!(show("max", &[int(1), int(5), int(3)]), "5 (int64)");
        assert_eq!(show("min", &[int(4), int(-2)]), "-2 (int64)");
        assert_eq!(show("biggest", &[int(3)]), "3 (int64)");
        assert_eq!(
            show("div", &[f(2.5), f(0.9)]),
            "error: runtime error: integer divide by zero"
        );
        assert_eq!(
            show("mod", &[int(1), int(0)]),
            "error: runtime error: integer divide by zero"
        );
        assert_eq!(
            show("add", &[int(i64::MAX), int(1)]),
            "-9223372036854775808 (int64)"
        );
        assert_eq!(show("mul", &[int(1 << 62), int(4)]), "0 (int64)");
        assert_eq!(
            show("min", &[]),
            "error: wrong number of args for min: want at least 1 got 0"
        );
    }

    #[test]
    fn float_math_is_decimal() {
        // Oracle: `addf 1 2` 3, `addf 0.1 0.2` 0.3, `add1f 1.5` 2.5, `subf 1 0.3` 0.7,
        // `divf 1 3` 0.3333333333333333, `mulf 1.1 3` 3.3, `maxf 1 2.5` 2.5, `minf 1 -2.5`
        // -2.5, `addf` 0 (float64); `divf 1 30000000` 3.33333333e-08, `divf 2 3`
        // 0.6666666666666667, `divf -2 3` -0.6666666666666667, `divf 1e-20 1` 0, `divf 1e20
        // 3` 3.333333333333333e+19, `divf 5 0.5` 10, `divf 1 7` 0.1428571428571429, `divf 100
        // 7` 14.285714285714286; `mulf 1e200 1e200` +Inf, `addf 1e-320 0` 1e-320, `subf 1` 1,
        // `addf 0.1 0.2 0.3` 0.6, `mulf 0.1 3` 0.3, `mulf 0.1 0.2` 0.02, `subf 0.3 0.1` 0.2,
        // `add1f "x"` 1, `maxf "x" 1` 1.
        let cases: &[(&str, &[Value], &str)] = &[
            ("addf", &[int(1), int(2)], "3"),
            ("addf", &[f(0.1), f(0.2)], "0.3"),
            ("add1f", &[f(1.5)], "2.5"),
            ("subf", &[int(1), f(0.3)], "0.7"),
            ("divf", &[int(1), int(3)], "0.3333333333333333"),
            ("mulf", &[f(1.1), int(3)], "3.3"),
            ("maxf", &[int(1), f(2.5)], "2.5"),
            ("minf", &[int(1), f(-2.5)], "-2.5"),
            ("addf", &[], "0"),
            ("divf", &[int(1), int(30_000_000)], "3.33333333e-08"),
            ("divf", &[int(2), int(3)], "0.6666666666666667"),
            ("divf", &[int(-2), int(3)], "-0.6666666666666667"),
            ("divf", &[f(1e-20), int(1)], "0"),
            ("divf", &[f(1e20), int(3)], "3.333333333333333e+19"),
            ("divf", &[int(5), f(0.5)], "10"),
            ("divf", &[int(1), int(7)], "0.1428571428571429"),
            ("divf", &[int(100), int(7)], "14.285714285714286"),
            ("mulf", &[f(1e200), f(1e200)], "+Inf"),
            ("addf", &[f(1e-320), int(0)], "1e-320"),
            ("subf", &[int(1)], "1"),
            ("addf", &[f(0.1), f(0.2), f(0.3)], "0.6"),
            ("mulf", &[f(0.1), int(3)], "0.3"),
            ("mulf", &[f(0.1), f(0.2)], "0.02"),
            ("subf", &[f(0.3), f(0.1)], "0.2"),
            ("add1f", &[s("x")], "1"),
            ("maxf", &[s("x"), int(1)], "1"),
        ];
        for (name, args, want) in cases {
            assert_eq!(
                show(name, args),
                format!("{want} (float64)"),
                "{name} {args:?}"
            );
        }
        assert_eq!(
            show("divf", &[int(1), int(0)]),
            "error: decimal division by 0"
        );
        assert_eq!(
            show("addf", &[s("inf"), int(1)]),
            "error: Cannot create a Decimal from +Inf"
        );
    }

    #[test]
    fn rounding() {
        // Oracle: `floor 1.5` 1, `ceil 1.2` 2, `floor "-1.5"` -2, `round 1.2345 2` 1.23,
        // `round 1.235 2` 1.24, `round 1.5 0` 2, `round -1.5 0` -2, `round 2.5 0 0.6` 2,
        // `round 123.456 -1` 120, `round 2.5 0` (YAML 2.5) 3; `round 1.5` → want at least 2.
        let cases: &[(&str, &[Value], &str)] = &[
            ("floor", &[f(1.5)], "1"),
            ("ceil", &[f(1.2)], "2"),
            ("floor", &[s("-1.5")], "-2"),
            ("round", &[f(1.2345), int(2)], "1.23"),
            ("round", &[f(1.235), int(2)], "1.24"),
            ("round", &[f(1.5), int(0)], "2"),
            ("round", &[f(-1.5), int(0)], "-2"),
            ("round", &[f(2.5), int(0), f(0.6)], "2"),
            ("round", &[f(123.456), int(-1)], "120"),
            ("round", &[f(2.5), int(0)], "3"),
        ];
        for (name, args, want) in cases {
            assert_eq!(
                show(name, args),
                format!("{want} (float64)"),
                "{name} {args:?}"
            );
        }
        assert_eq!(
            show("round", &[f(1.5)]),
            "error: wrong number of args for round: want at least 2 got 1"
        );
    }

    #[test]
    fn conversions() {
        // Oracle: `int 3.9` 3, `int "12"` 12, `int "0x10"` 16, `int "1e3"` 0, `int64 "-5"` -5,
        // `float64 "1.5"` 1.5, `float64 3` 3, `int nil` 0, `int true` 1, `float64 "x"` 0,
        // `int "3.0"` 3, `int " 3"` 0, `int "3.5"` 0, `int "010"` 8, `int "0b11"` 3,
        // `int "1_000"` 1000, `int64 "0x_1F"` 31, `float64 "0x10"` 0, `float64 "1_0.5"` 10.5,
        // `float64 " 2"` 0, `float64 "inf"` +Inf, `float64 true` 1, `int 1e30` and `int64
        // -1e30` -9223372036854775808, `int64 "9223372036854775808"` 0.
        let cases: &[(&str, Value, &str)] = &[
            ("int", f(3.9), "3 (int)"),
            ("int", s("12"), "12 (int)"),
            ("int", s("0x10"), "16 (int)"),
            ("int", s("1e3"), "0 (int)"),
            ("int64", s("-5"), "-5 (int64)"),
            ("float64", s("1.5"), "1.5 (float64)"),
            ("float64", int(3), "3 (float64)"),
            ("int", Value::Nil, "0 (int)"),
            ("int", Value::Bool(true), "1 (int)"),
            ("float64", s("x"), "0 (float64)"),
            ("int", s("3.0"), "3 (int)"),
            ("int", s(" 3"), "0 (int)"),
            ("int", s("3.5"), "0 (int)"),
            ("int", s("010"), "8 (int)"),
            ("int", s("0b11"), "3 (int)"),
            ("int", s("1_000"), "1000 (int)"),
            ("int64", s("0x_1F"), "31 (int64)"),
            ("float64", s("0x10"), "0 (float64)"),
            ("float64", s("1_0.5"), "10.5 (float64)"),
            ("float64", s(" 2"), "0 (float64)"),
            ("float64", s("inf"), "+Inf (float64)"),
            ("float64", Value::Bool(true), "1 (float64)"),
            ("int", f(1e30), "-9223372036854775808 (int)"),
            ("int64", f(-1e30), "-9223372036854775808 (int64)"),
            ("int64", s("9223372036854775808"), "0 (int64)"),
        ];
        for (name, arg, want) in cases {
            assert_eq!(
                show(name, std::slice::from_ref(arg)),
                *want,
                "{name} {arg:?}"
            );
        }
    }

    #[test]
    fn to_decimal_reads_octal() {
        // Oracle: `toDecimal "0777"` 511, `toDecimal 777` 511, `toDecimal "9"` 0,
        // `toDecimal "-17"` -15, `toDecimal 1.5` 0, `toDecimal "0o17"` 0.
        let cases: &[(Value, &str)] = &[
            (s("0777"), "511"),
            (int(777), "511"),
            (s("9"), "0"),
            (s("-17"), "-15"),
            (f(1.5), "0"),
            (s("0o17"), "0"),
        ];
        for (arg, want) in cases {
            assert_eq!(
                show("toDecimal", std::slice::from_ref(arg)),
                format!("{want} (int64)")
            );
        }
    }
}
