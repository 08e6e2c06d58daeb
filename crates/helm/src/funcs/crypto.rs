//! Template functions: crypto — Sprig's digests (`sha1sum`, `sha256sum`, `sha512sum`,
//! `adler32sum`), password hashing (`bcrypt`, `htpasswd`, `derivePassword`), symmetric
//! encryption (`encryptAES`, `decryptAES`), `randBytes`, and keys and certificates
//! (`genPrivateKey`, `genCA`, `genSignedCert`, …; see [`cert`]).
//!
//! Every random byte comes from the render's [`Env::rng`](crate::template::Env), so a seeded
//! render is reproducible.
//!
//! This module also holds the argument helpers the other modules of this area share: Sprig's
//! functions have typed Go parameters, and Go's template engine checks arguments against them
//! before the call (`wrong number of args for NAME: want 1 got 2`, `wrong type for value; …`).

pub mod cert;

use std::fmt::Write as _;

use base64::Engine as _;
use rand::RngExt as _;

use crate::template::{Call, FuncMap};
use crate::value::Value;

/// Adds this module's functions to `map`.
pub fn register(map: &mut FuncMap) {
    map.insert("sha1sum", digest_sum::<sha1::Sha1>);
    map.insert("sha256sum", digest_sum::<sha2::Sha256>);
    map.insert("sha512sum", digest_sum::<sha2::Sha512>);
    map.insert("adler32sum", adler32sum);
    map.insert("bcrypt", bcrypt_fn);
    map.insert("htpasswd", htpasswd);
    map.insert("derivePassword", derive_password);
    map.insert("encryptAES", encrypt_aes);
    map.insert("decryptAES", decrypt_aes);
    map.insert("randBytes", rand_bytes);
    cert::register(map);
}

// ---- Argument helpers shared by the crypto, date, semver, regex, network and random modules.

pub(super) use super::reflect::want_args;

/// A `string` parameter: only a Go string converts (Go's templates do not stringify).
pub(super) fn str_arg(value: &Value) -> Result<&str, String> {
    match value {
        Value::String(s) => Ok(s),
        Value::Nil => Err("wrong type for value; expected string; got interface {}".into()),
        other => Err(format!(
            "wrong type for value; expected string; got {}",
            other.type_name()
        )),
    }
}

/// An `int` parameter: Go's `int` only (template number literals, `len`, …).
pub(super) fn int_arg(value: &Value) -> Result<i64, String> {
    match value {
        Value::Int(i) => Ok(*i),
        Value::Nil => Err("wrong type for value; expected int; got interface {}".into()),
        other => Err(format!(
            "wrong type for value; expected int; got {}",
            other.type_name()
        )),
    }
}

pub(super) use crate::fmt::quote as go_quote;

/// Go's `base64.StdEncoding.DecodeString`: padding required, `\r` and `\n` skipped, lenient
/// about unused trailing bits; errors name the offset Go names.
pub(super) fn go_base64_decode(text: &str) -> Result<Vec<u8>, String> {
    let corrupt = |at: usize| format!("illegal base64 data at input byte {at}");
    let bytes = text.as_bytes();
    let sextet = |c: u8| -> Option<u32> {
        Some(u32::from(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        }))
    };
    let mut out = Vec::with_capacity(bytes.len() / 4 * 3);
    let mut si = 0;
    loop {
        let mut quantum = [0_u32; 4];
        let mut j = 0;
        let mut padded = false;
        while j < 4 {
            if si == bytes.len() {
                if j == 0 {
                    return Ok(out);
                }
                return Err(corrupt(si - j));
            }
            let c = bytes[si];
            si += 1;
            if c == b'\n' || c == b'\r' {
                continue;
            }
            if let Some(v) = sextet(c) {
                quantum[j] = v;
                j += 1;
                continue;
            }
            if c != b'=' {
                return Err(corrupt(si - 1));
            }
            // Padding: only after two or three data characters.
            match j {
                0 | 1 => return Err(corrupt(si - 1)),
                2 => {
                    while si < bytes.len() && (bytes[si] == b'\n' || bytes[si] == b'\r') {
                        si += 1;
                    }
                    if si == bytes.len() {
                        return Err(corrupt(bytes.len()));
                    }
                    if bytes[si] != b'=' {
                        return Err(corrupt(si - 1));
                    }
                    si += 1;
                }
                _ => {}
            }
            while si < bytes.len() && (bytes[si] == b'\n' || bytes[si] == b'\r') {
                si += 1;
            }
            if si < bytes.len() {
                return Err(corrupt(si));
            }
            padded = true;
            break;
        }
        let word = quantum[0] << 18 | quantum[1] << 12 | quantum[2] << 6 | quantum[3];
        let [_, a, b, c] = word.to_be_bytes();
        let keep = if padded { j - 1 } else { 3 };
        out.extend_from_slice(&[a, b, c][..keep]);
        if padded {
            return Ok(out);
        }
    }
}

// ---- Digests.

fn hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(out, "{b:02x}");
    }
    out
}

/// `sha1sum`, `sha256sum` and `sha512sum`: the lower-case hex digest of a string.
fn digest_sum<D: sha2::Digest>(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    want_args(call, args, 1)?;
    let input = str_arg(&args[0])?;
    Ok(Value::str(hex(&D::digest(input.as_bytes()))))
}

fn adler32sum(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    want_args(call, args, 1)?;
    let input = str_arg(&args[0])?;
    let mut adler = adler2::Adler32::new();
    adler.write_slice(input.as_bytes());
    Ok(Value::str(adler.checksum().to_string()))
}

// ---- Passwords.

/// Go's `bcrypt.DefaultCost`.
const BCRYPT_COST: u32 = 10;

/// A `$2a$10$…` hash as Go's `bcrypt.GenerateFromPassword` writes it, salted from the render's
/// random source; Go refuses passwords longer than 72 bytes.
fn bcrypt_hash(call: &mut Call<'_>, password: &str) -> Result<String, String> {
    if password.len() > 72 {
        return Err("bcrypt: password length exceeds 72 bytes".into());
    }
    let salt: [u8; 16] = call.env.rng.random();
    bcrypt::hash_with_salt(password, BCRYPT_COST, salt)
        .map(|parts| parts.format_for_version(bcrypt::Version::TwoA))
        .map_err(|e| format!("bcrypt: {e}"))
}

fn bcrypt_fn(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    want_args(call, args, 1)?;
    let input = str_arg(&args[0])?;
    // Sprig returns the failure as the text.
    Ok(Value::str(bcrypt_hash(call, input).unwrap_or_else(|e| {
        format!("failed to encrypt string with bcrypt: {e}")
    })))
}

fn htpasswd(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    want_args(call, args, 2)?;
    let user = str_arg(&args[0])?;
    let password = str_arg(&args[1])?;
    if user.contains(':') {
        return Ok(Value::str(format!("invalid username: {user}")));
    }
    let hash = bcrypt_hash(call, password)
        .unwrap_or_else(|e| format!("failed to encrypt string with bcrypt: {e}"));
    Ok(Value::str(format!("{user}:{hash}")))
}

/// The Master Password algorithm's site password templates, by `derivePassword`'s type name.
fn password_templates(kind: &str) -> Option<&'static [&'static str]> {
    Some(match kind {
        "maximum" => &["anoxxxxxxxxxxxxxxxxx", "axxxxxxxxxxxxxxxxxno"],
        "long" => &[
            "CvcvnoCvcvCvcv",
            "CvcvCvcvnoCvcv",
            "CvcvCvcvCvcvno",
            "CvccnoCvcvCvcv",
            "CvccCvcvnoCvcv",
            "CvccCvcvCvcvno",
            "CvcvnoCvccCvcv",
            "CvcvCvccnoCvcv",
            "CvcvCvccCvcvno",
            "CvcvnoCvcvCvcc",
            "CvcvCvcvnoCvcc",
            "CvcvCvcvCvccno",
            "CvccnoCvccCvcv",
            "CvccCvccnoCvcv",
            "CvccCvccCvcvno",
            "CvcvnoCvccCvcc",
            "CvcvCvccnoCvcc",
            "CvcvCvccCvccno",
            "CvccnoCvcvCvcc",
            "CvccCvcvnoCvcc",
            "CvccCvcvCvccno",
        ],
        "medium" => &["CvcnoCvc", "CvcCvcno"],
        "short" => &["Cvcn"],
        "basic" => &["aaanaaan", "aannaaan", "aaannaaa"],
        "pin" => &["nnnn"],
        _ => return None,
    })
}

/// The characters a template letter stands for.
fn template_characters(class: u8) -> &'static [u8] {
    match class {
        b'V' => b"AEIOU",
        b'C' => b"BCDFGHJKLMNPQRSTVWXYZ",
        b'v' => b"aeiou",
        b'c' => b"bcdfghjklmnpqrstvwxyz",
        b'A' => b"AEIOUBCDFGHJKLMNPQRSTVWXYZ",
        b'a' => b"AEIOUaeiouBCDFGHJKLMNPQRSTVWXYZbcdfghjklmnpqrstvwxyz",
        b'n' => b"0123456789",
        b'o' => b"@&%?,=[]_:-+*$#!'^~;()/.",
        _ => b"AEIOUaeiouBCDFGHJKLMNPQRSTVWXYZbcdfghjklmnpqrstvwxyz0123456789!@#$%^&*()",
    }
}

/// The seed Master Password salts its keys with.
const MASTER_PASSWORD_SCOPE: &[u8] = b"com.lyndir.masterpassword";

/// Master Password: a scrypt key from the master password salted with the user name, an
/// HMAC-SHA256 of the site and counter with that key, and the HMAC's bytes choosing a template
/// and its characters.
fn master_password(counter: u32, kind: &str, password: &str, user: &str, site: &str) -> String {
    use hmac::{KeyInit as _, Mac as _};
    let Some(templates) = password_templates(kind) else {
        return format!("cannot find password template {kind}");
    };
    let mut salt = MASTER_PASSWORD_SCOPE.to_vec();
    salt.extend_from_slice(&(user.len() as u32).to_be_bytes());
    salt.extend_from_slice(user.as_bytes());
    let mut key = [0_u8; 64];
    // N = 32768 (log2 15), r = 8, p = 2: the algorithm's fixed parameters.
    let derived = scrypt::Params::new(15, 8, 2)
        .map_err(|e| e.to_string())
        .and_then(|params| {
            scrypt::scrypt(password.as_bytes(), &salt, &params, &mut key).map_err(|e| e.to_string())
        });
    if let Err(e) = derived {
        return format!("failed to derive password: {e}");
    }
    let Ok(mut mac) = hmac::Hmac::<sha2::Sha256>::new_from_slice(&key) else {
        return "failed to derive password: bad key".into();
    };
    mac.update(MASTER_PASSWORD_SCOPE);
    mac.update(&(site.len() as u32).to_be_bytes());
    mac.update(site.as_bytes());
    mac.update(&counter.to_be_bytes());
    let seed = mac.finalize().into_bytes();
    let template = templates[usize::from(seed[0]) % templates.len()];
    template
        .bytes()
        .zip(seed.iter().skip(1))
        .map(|(class, byte)| {
            let chars = template_characters(class);
            char::from(chars[usize::from(*byte) % chars.len()])
        })
        .collect()
}

fn derive_password(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    want_args(call, args, 5)?;
    // The counter is a Go `uint32`: template integers convert when they fit.
    let counter = match &args[0] {
        Value::Int(i) | Value::Int64(i) => {
            u32::try_from(*i).map_err(|_| format!("{i} overflows uint32"))?
        }
        other => {
            return Err(format!(
                "wrong type for value; expected uint32; got {}",
                other.type_name()
            ));
        }
    };
    let kind = str_arg(&args[1])?;
    let password = str_arg(&args[2])?;
    let user = str_arg(&args[3])?;
    let site = str_arg(&args[4])?;
    Ok(Value::str(master_password(
        counter, kind, password, user, site,
    )))
}

// ---- AES.

/// The AES-256 key Sprig derives from a password: its bytes, zero-padded or cut to 32.
fn aes_key(password: &str) -> [u8; 32] {
    let mut key = [0_u8; 32];
    for (slot, byte) in key.iter_mut().zip(password.as_bytes()) {
        *slot = *byte;
    }
    key
}

fn encrypt_aes(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    use aes::cipher::{BlockModeEncrypt as _, KeyIvInit as _};
    want_args(call, args, 2)?;
    let password = str_arg(&args[0])?;
    let text = str_arg(&args[1])?;
    if text.is_empty() {
        return Ok(Value::str(""));
    }
    let iv: [u8; 16] = call.env.rng.random();
    // PKCS #7: always pad, a whole block when the text fills its last one.
    let pad = 16 - text.len() % 16;
    let mut buffer = text.as_bytes().to_vec();
    buffer.resize(text.len() + pad, pad as u8);
    let mut encryptor = cbc::Encryptor::<aes::Aes256>::new(&aes_key(password).into(), &iv.into());
    let (blocks, rest) = aes::cipher::Block::<aes::Aes256>::slice_as_chunks_mut(&mut buffer);
    debug_assert!(rest.is_empty());
    encryptor.encrypt_blocks(blocks);
    let mut out = iv.to_vec();
    out.extend_from_slice(&buffer);
    Ok(Value::str(
        base64::engine::general_purpose::STANDARD.encode(out),
    ))
}

fn decrypt_aes(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    use aes::cipher::{BlockModeDecrypt as _, KeyIvInit as _};
    want_args(call, args, 2)?;
    let password = str_arg(&args[0])?;
    let encoded = str_arg(&args[1])?;
    let data = go_base64_decode(encoded)?;
    if data.is_empty() {
        return Ok(Value::str(""));
    }
    // Sprig does not validate its input: the failures below are the Go runtime's panics.
    if data.len() < 16 {
        // Go's decoder allocates for the longest result the input could hold.
        return Err(format!(
            "runtime error: slice bounds out of range [:16] with capacity {}",
            encoded.len() / 4 * 3
        ));
    }
    let (iv, body) = data.split_at(16);
    if body.len() % 16 != 0 {
        return Err("crypto/cipher: input not full blocks".into());
    }
    if body.is_empty() {
        return Err("runtime error: index out of range [-1]".into());
    }
    let mut buffer = body.to_vec();
    let iv: [u8; 16] = iv.try_into().map_err(|_| "bad iv".to_owned())?;
    let mut decryptor = cbc::Decryptor::<aes::Aes256>::new(&aes_key(password).into(), &iv.into());
    let (blocks, _) = aes::cipher::Block::<aes::Aes256>::slice_as_chunks_mut(&mut buffer);
    decryptor.decrypt_blocks(blocks);
    let pad = usize::from(buffer[buffer.len() - 1]);
    let Some(end) = buffer.len().checked_sub(pad) else {
        return Err(format!(
            "runtime error: slice bounds out of range [:-{}]",
            pad - buffer.len()
        ));
    };
    buffer.truncate(end);
    Ok(Value::str(String::from_utf8_lossy(&buffer)))
}

fn rand_bytes(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    want_args(call, args, 1)?;
    let count = int_arg(&args[0])?;
    let count = usize::try_from(count)
        .map_err(|_| "runtime error: makeslice: len out of range".to_owned())?;
    if count > MAX_RANDOM_BYTES {
        return Err(format!(
            "randBytes: {count} bytes is more than the {MAX_RANDOM_BYTES} a render may ask for"
        ));
    }
    let mut bytes = vec![0_u8; count];
    call.env.rng.fill(&mut bytes[..]);
    Ok(Value::str(
        base64::engine::general_purpose::STANDARD.encode(bytes),
    ))
}

/// The most random bytes or characters one call may produce (Go would allocate anything).
pub(super) const MAX_RANDOM_BYTES: usize = 64 << 20;

/// Calls `f` as a template would, with a fixed environment (for unit tests).
#[cfg(test)]
pub(super) fn test_call(f: crate::template::Function, args: &[Value]) -> Result<Value, String> {
    test_call_env(f, args, &mut crate::template::Env::fixed(7, test_now()))
}

/// The clock unit tests fix.
#[cfg(test)]
pub(super) fn test_now() -> jiff::Zoned {
    "2024-05-06T07:08:09.123456789+00:00[UTC]"
        .parse()
        .expect("a valid time")
}

/// Pseudo-random strings over `pool` for robustness tests (a fixed xorshift sequence).
#[cfg(test)]
pub(super) fn random_texts(pool: &str, count: usize, max_len: usize) -> Vec<String> {
    let chars: Vec<char> = pool.chars().collect();
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    (0..count)
        .map(|_| {
            let len = (next() % (max_len as u64 + 1)) as usize;
            (0..len)
                .map(|_| chars[(next() % chars.len() as u64) as usize])
                .collect()
        })
        .collect()
}

/// Calls `f` against `env` (for unit tests).
#[cfg(test)]
pub(super) fn test_call_env(
    f: crate::template::Function,
    args: &[Value],
    env: &mut crate::template::Env,
) -> Result<Value, String> {
    use super::reflect::tests::NoRuntime;
    let mut runtime = NoRuntime;
    let mut call = Call::new("f", env, &mut runtime);
    f(&mut call, args)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(text: &str) -> Value {
        Value::str(text)
    }

    fn text(f: crate::template::Function, args: &[Value]) -> String {
        test_call(f, args).unwrap().to_string()
    }

    #[test]
    fn digests_match_sprig() {
        assert_eq!(
            text(digest_sum::<sha1::Sha1>, &[s("abc")]),
            "a9993e364706816aba3e25717850c26c9cd0d89d"
        );
        assert_eq!(
            text(digest_sum::<sha2::Sha256>, &[s("abc")]),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(
            text(digest_sum::<sha2::Sha512>, &[s("abc")]),
            "ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f"
        );
        assert_eq!(text(adler32sum, &[s("abc")]), "38600999");
        assert_eq!(
            test_call(digest_sum::<sha1::Sha1>, &[Value::Int(12)]).unwrap_err(),
            "wrong type for value; expected string; got int"
        );
    }

    #[test]
    fn bcrypt_hashes_verify() {
        let line = text(htpasswd, &[s("user"), s("pw")]);
        assert_eq!(line.len(), 65);
        let hash = line
            .strip_prefix("user:$2a$10$")
            .map(|_| &line[5..])
            .unwrap();
        assert!(bcrypt::verify("pw", hash).unwrap());
        assert_eq!(text(htpasswd, &[s("a:b"), s("x")]), "invalid username: a:b");
        assert_eq!(
            text(htpasswd, &[s("user"), s(&"0".repeat(73))]),
            "user:failed to encrypt string with bcrypt: bcrypt: password length exceeds 72 bytes"
        );
        assert!(text(bcrypt_fn, &[s("x")]).starts_with("$2a$10$"));
    }

    #[test]
    fn derived_passwords_equal_sprig() {
        let n = Value::Int;
        for (counter, kind, password, user, site, want) in [
            (
                1,
                "long",
                "password",
                "user",
                "example.com",
                "ZedaFaxcZaso9*",
            ),
            (
                1,
                "maximum",
                "password",
                "user",
                "example.com",
                "pf4zS1LjCg&LjhsZ7T2~",
            ),
            (2, "medium", "pw", "me", "site", "Roh0%Tac"),
            (3, "short", "pw", "me", "site", "Dur6"),
            (4, "basic", "pw", "me", "site", "Vpx22jOS"),
            (5, "pin", "pw", "me", "site", "6102"),
            (
                1,
                "nope",
                "pw",
                "me",
                "site",
                "cannot find password template nope",
            ),
            (7, "maximum", "pw", "me", "site2", "IxyNre2dLqeGHpfeCk8!"),
            (8, "maximum", "pw", "me", "site3", "kRAZkwZoKMz2jgJNUj1*"),
            (9, "maximum", "pw", "mé", "site4", "c3~YB3qKM4XeMkYe&U&@"),
        ] {
            let args = [n(counter), s(kind), s(password), s(user), s(site)];
            assert_eq!(text(derive_password, &args), want, "{kind} {site}");
        }
    }

    #[test]
    fn aes_round_trips_and_fails_as_sprig() {
        let encrypted = text(encrypt_aes, &[s("k"), s("hello")]);
        assert_eq!(go_base64_decode(&encrypted).unwrap().len(), 32);
        assert_eq!(text(decrypt_aes, &[s("k"), s(&encrypted)]), "hello");
        let long_key = "0123456789012345678901234567890123456789";
        let encrypted = text(encrypt_aes, &[s(long_key), s("hello")]);
        assert_eq!(text(decrypt_aes, &[s(long_key), s(&encrypted)]), "hello");
        assert_eq!(text(encrypt_aes, &[s("k"), s("")]), "");
        assert_eq!(text(decrypt_aes, &[s("k"), s("")]), "");
        for (input, want) in [
            ("abc", "illegal base64 data at input byte 0"),
            ("YWJj=", "illegal base64 data at input byte 4"),
            ("YW Jj", "illegal base64 data at input byte 2"),
            ("YWJjYQ", "illegal base64 data at input byte 4"),
            ("YWJjYQ=", "illegal base64 data at input byte 7"),
            ("YWJjYQ==YWJj", "illegal base64 data at input byte 8"),
            (
                "YWJj",
                "runtime error: slice bounds out of range [:16] with capacity 3",
            ),
            (
                "YWJjYR==",
                "runtime error: slice bounds out of range [:16] with capacity 6",
            ),
            (
                "YWJj\nYWJj",
                "runtime error: slice bounds out of range [:16] with capacity 6",
            ),
            (
                "YWJjYWJjYWJjYWJjYWJjYQ==",
                "runtime error: index out of range [-1]",
            ),
            (
                "YWJjYWJjYWJjYWJjYWJjYWJjYWJjYWJjYWJjYWJjYWJjYWJjYWJjYWJjYWJj",
                "crypto/cipher: input not full blocks",
            ),
            (
                "YWJjYWJjYWJjYWJjYWJjYWJjYWJjYWJjYWJjYWJjYWJjYWJjYWJjYWJjYWJjYWJj",
                "runtime error: slice bounds out of range [:-78]",
            ),
            (
                "rGcn4kWr5WYfMhLR2vVrwAw0fbs2IYXBjJ0xIXTRIiU=",
                "runtime error: slice bounds out of range [:-22]",
            ),
        ] {
            let key = if input.starts_with("rGcn")
                || input.len() > 40
                || input.starts_with("YWJjYWJjYWJjYWJjYWJjYQ")
            {
                "secretkey"
            } else {
                "k"
            };
            assert_eq!(
                test_call(decrypt_aes, &[s(key), s(input)]).unwrap_err(),
                want,
                "{input}"
            );
        }
    }

    #[test]
    fn odd_input_never_panics() {
        for text in random_texts("AZaz09+/=\n\r -é☺", 3000, 24) {
            let _ = go_base64_decode(&text);
            let _ = test_call(decrypt_aes, &[s("k"), s(&text)]);
        }
        for text in random_texts("-----BEGIN PRIVATE KEY RSA EC\nAZaz09+/=", 500, 60) {
            let _ = test_call(cert::register_probe(), &[s(&text)]);
        }
    }

    #[test]
    fn random_bytes_have_the_asked_length() {
        let encoded = text(rand_bytes, &[Value::Int(5)]);
        assert_eq!(go_base64_decode(&encoded).unwrap().len(), 5);
        assert_eq!(text(rand_bytes, &[Value::Int(0)]), "");
        assert_eq!(
            test_call(rand_bytes, &[Value::Int(-1)]).unwrap_err(),
            "runtime error: makeslice: len out of range"
        );
    }
}

/// Templates calling this area's functions, rendered by the template engine with Helm's
/// argument checks, against the text Helm v4.2.3 rendered for them.
#[cfg(test)]
mod rendered {
    use std::rc::Rc;

    #[test]
    fn templates_render_as_helm_renders_them() {
        let mut map = crate::template::FuncMap::new();
        crate::funcs::register_sprig(&mut map);
        let map = Rc::new(map);
        let signatures = Rc::new(crate::template::helm_signatures());
        for (text, want) in [
            (
                "{{ (semver \"v1.2.3-rc.1+b\").Major }} {{ semver \"1.2\" }} {{ (semver \"1.2.3\").Original }} {{ (semver \"1.2.3-rc.1+b\").Prerelease }} {{ (semver \"1.2.3-rc.1+b\").Metadata }}",
                "1 1.2.0 1.2.3 rc.1 b",
            ),
            (
                "{{ $v := semver \"1.2.3\" }}{{ $v.IncMinor }} {{ $v.LessThan (semver \"1.3.0\") }} {{ ($v.SetPrerelease \"rc.1\").Prerelease }} {{ $v.Compare (semver \"1.2.3\") }} {{ $v }}",
                "1.3.0 true rc.1 0 1.2.3",
            ),
            (
                "{{ if semverCompare \">=1.21-0\" \"v1.30.0-gke.1\" }}yes{{ end }} {{ semverCompare \"^1.2\" \"1.3.0\" }}",
                "yes true",
            ),
            (
                "{{ semverCompare \"foo\" \"1.2.3\" }}",
                "ERR template: t/templates/t.yaml:1:3: executing \"t/templates/t.yaml\" at <semverCompare \"foo\" \"1.2.3\">: error calling semverCompare: improper constraint: \"foo\"",
            ),
            (
                "{{ semver \"x\" }}",
                "ERR template: t/templates/t.yaml:1:3: executing \"t/templates/t.yaml\" at <semver \"x\">: error calling semver: invalid semantic version",
            ),
            (
                "{{ regexReplaceAll \"(\\\\w+)@(\\\\w+)\" \"me@host\" \"${2}.${1}\" }} {{ regexFindAll \"[0-9]+\" \"a1b22c333\" -1 }} {{ regexSplit \",\" \"a,b\" -1 }} {{ index (regexSplit \",\" \"a,b\" -1) 1 }}",
                "host.me [1 22 333] [a b] b",
            ),
            (
                "{{ mustRegexMatch \"(\" \"x\" }}",
                "ERR template: t/templates/t.yaml:1:3: executing \"t/templates/t.yaml\" at <mustRegexMatch \"(\" \"x\">: error calling mustRegexMatch: error parsing regexp: missing closing ): `(`",
            ),
            (
                "{{ regexFind \"(\" \"x\" }}",
                "ERR template: t/templates/t.yaml:1:3: executing \"t/templates/t.yaml\" at <regexFind \"(\" \"x\">: error calling regexFind: regexp: Compile(`(`): error parsing regexp: missing closing ): `(`",
            ),
            (
                "{{ \"abc\" | regexMatch \"b\" }} {{ regexQuoteMeta \"a.b\" }}",
                "true a\\.b",
            ),
            (
                "{{ date \"2006-01-02 15:04 MST\" 1700000000 }} {{ dateInZone \"Mon Jan _2 15:04:05 MST 2006\" 0 \"Asia/Tokyo\" }}",
                "2023-11-14 22:13 UTC Thu Jan  1 09:00:00 JST 1970",
            ),
            (
                "{{ $t := toDate \"2006-01-02\" \"2020-02-03\" }}{{ $t }} {{ $t.Unix }} {{ $t.Year }} {{ $t | date \"Jan 2\" }} {{ $t | unixEpoch }} {{ dateModify \"-1h\" $t }} {{ $t.Format \"2006\" }}",
                "2020-02-03 00:00:00 +0000 UTC 1580688000 2020 Feb 3 1580688000 2020-02-02 23:00:00 +0000 UTC 2020",
            ),
            (
                "{{ mustToDate \"2006-01-02\" \"x\" }}",
                "ERR template: t/templates/t.yaml:1:3: executing \"t/templates/t.yaml\" at <mustToDate \"2006-01-02\" \"x\">: error calling mustToDate: parsing time \"x\" as \"2006-01-02\": cannot parse \"x\" as \"2006\"",
            ),
            (
                "{{ duration \"3661\" }} {{ durationRound \"400h\" }} {{ (toDate \"2006\" \"2020\") | htmlDate }}",
                "1h1m1s 16d 2020-01-01",
            ),
            (
                "{{ sha256sum \"abc\" }} {{ \"abc\" | sha1sum }} {{ adler32sum \"abc\" }}",
                "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad a9993e364706816aba3e25717850c26c9cd0d89d 38600999",
            ),
            (
                "{{ derivePassword 1 \"long\" \"password\" \"user\" \"example.com\" }}",
                "ZedaFaxcZaso9*",
            ),
            (
                "{{ $ca := genCA \"ca\" 10 }}{{ gt (len $ca.Cert) 1000 }} {{ gt (len $ca.Key) 1500 }}",
                "true true",
            ),
            (
                "{{ len (genPrivateKey \"ed25519\") }} {{ genPrivateKey \"foo\" }}",
                "119 Unknown type foo",
            ),
            (
                "{{ $e := encryptAES \"k\" \"secret\" }}{{ decryptAES \"k\" $e }}",
                "secret",
            ),
            (
                "{{ randAlphaNum 10 | len }} {{ randInt 1 2 }} {{ uuidv4 | len }}",
                "10 1 36",
            ),
            (
                "{{ decryptAES \"k\" \"YWJj\" }}",
                "ERR template: t/templates/t.yaml:1:3: executing \"t/templates/t.yaml\" at <decryptAES \"k\" \"YWJj\">: error calling decryptAES: runtime error: slice bounds out of range [:16] with capacity 3",
            ),
        ] {
            let mut set = crate::template::Set::with_signatures(map.clone(), signatures.clone());
            let mut env = crate::template::Env::fixed(1, super::test_now());
            let name = "t/templates/t.yaml";
            let got = set
                .parse(name, text)
                .and_then(|()| set.execute(name, crate::Value::empty_map(), &mut env));
            let got = got.unwrap_or_else(|e| format!("ERR {}", e.message));
            assert_eq!(got, want, "{text}");
        }
    }
}
