//! Keys and certificates: `genPrivateKey`, `buildCustomCert`, `genCA`, `genCAWithKey`,
//! `genSelfSignedCert`, `genSelfSignedCertWithKey`, `genSignedCert`, `genSignedCertWithKey`.
//!
//! Certificates are built as Go's `x509.CreateCertificate` builds them from Sprig's template:
//! version 3, a random 128-bit serial, `CN=<cn>` as subject, validity from the render's clock
//! for the given days, key usage (critical) digital signature + key encipherment (+ cert sign
//! for a CA), extended key usage server + client auth, basic constraints (critical), a subject
//! key identifier on CAs (the first 20 bytes of the SHA-256 of the public key, as Go 1.25+),
//! an authority key identifier when the issuer has one, then the DNS and IP alternative names.
//! Keys Sprig generates are RSA 2048 (certificates) and RSA 4096 (`genPrivateKey "rsa"`), in the
//! PEM forms Go writes (`RSA PRIVATE KEY` PKCS #1, `EC PRIVATE KEY` SEC 1, `PRIVATE KEY` PKCS #8
//! for Ed25519). Randomness comes from the render's seedable source.

use std::rc::Rc;

use base64::Engine as _;
use rand::RngExt as _;
use sha2::Digest as _;

use super::{int_arg, str_arg, want_args};
use crate::template::{Call, FuncMap};
use crate::value::{Object, Value};

/// Adds the key and certificate functions to `map`.
pub fn register(map: &mut FuncMap) {
    map.insert("genPrivateKey", gen_private_key);
    map.insert("buildCustomCert", build_custom_cert);
    map.insert("genCA", gen_ca);
    map.insert("genCAWithKey", gen_ca_with_key);
    map.insert("genSelfSignedCert", gen_self_signed_cert);
    map.insert("genSelfSignedCertWithKey", gen_self_signed_cert_with_key);
    map.insert("genSignedCert", gen_signed_cert);
    map.insert("genSignedCertWithKey", gen_signed_cert_with_key);
}

/// Sprig's `certificate`: PEM texts of a certificate and its key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Certificate {
    /// The certificate, PEM.
    pub cert: String,
    /// The private key, PEM.
    pub key: String,
}

impl Object for Certificate {
    fn type_name(&self) -> String {
        "sprig.certificate".into()
    }

    fn field(&self, name: &str) -> Option<Value> {
        match name {
            "Cert" => Some(Value::str(&self.cert)),
            "Key" => Some(Value::str(&self.key)),
            _ => None,
        }
    }

    fn format(&self) -> String {
        format!("{{{} {}}}", self.cert, self.key)
    }

    fn to_data(&self) -> Value {
        Value::map(
            [
                ("Cert".to_owned(), Value::str(&self.cert)),
                ("Key".to_owned(), Value::str(&self.key)),
            ]
            .into_iter()
            .collect(),
        )
    }

    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }
}

// ---- DER, just what certificates need.

fn tlv(tag: u8, content: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    let len = content.len();
    if len < 0x80 {
        out.push(len as u8);
    } else {
        let bytes = len.to_be_bytes();
        let skip = bytes.iter().take_while(|b| **b == 0).count();
        out.push(0x80 | (bytes.len() - skip) as u8);
        out.extend_from_slice(&bytes[skip..]);
    }
    out.extend_from_slice(content);
    out
}

fn seq(parts: &[&[u8]]) -> Vec<u8> {
    tlv(0x30, &parts.concat())
}

/// An unsigned big-endian number as a DER INTEGER.
fn uint(bytes: &[u8]) -> Vec<u8> {
    let skip = bytes.iter().take_while(|b| **b == 0).count();
    let mut content = Vec::with_capacity(bytes.len() + 1);
    let trimmed = &bytes[skip..];
    if trimmed.is_empty() || trimmed[0] & 0x80 != 0 {
        content.push(0);
    }
    content.extend_from_slice(trimmed);
    tlv(0x02, &content)
}

fn oid(text: &str) -> Vec<u8> {
    let arcs: Vec<u64> = text.split('.').filter_map(|a| a.parse().ok()).collect();
    let mut content = Vec::new();
    if arcs.len() >= 2 {
        let mut encode = |mut arc: u64| {
            let mut chunk = vec![(arc & 0x7f) as u8];
            arc >>= 7;
            while arc > 0 {
                chunk.push(0x80 | (arc & 0x7f) as u8);
                arc >>= 7;
            }
            chunk.reverse();
            content.extend(chunk);
        };
        encode(arcs[0] * 40 + arcs[1]);
        for arc in &arcs[2..] {
            encode(*arc);
        }
    }
    tlv(0x06, &content)
}

fn bit_string(bytes: &[u8], unused: u8) -> Vec<u8> {
    let mut content = vec![unused];
    content.extend_from_slice(bytes);
    tlv(0x03, &content)
}

/// Go's choice of string type for a name attribute: PrintableString when every character
/// allows it, UTF8String otherwise.
fn directory_string(text: &str) -> Vec<u8> {
    let printable = text
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b" '()+,-./:=?".contains(&b));
    tlv(if printable { 0x13 } else { 0x0c }, text.as_bytes())
}

/// `CN=<cn>`; an empty common name gives an empty name, as Go's `pkix.Name` does.
fn name(cn: &str) -> Vec<u8> {
    if cn.is_empty() {
        return seq(&[]);
    }
    let attribute = seq(&[&oid("2.5.4.3"), &directory_string(cn)]);
    seq(&[&tlv(0x31, &attribute)])
}

/// UTCTime until 2049, GeneralizedTime after, at whole seconds in UTC.
fn der_time(t: jiff::Timestamp) -> Vec<u8> {
    let dt = jiff::tz::Offset::UTC.to_datetime(t);
    let year = i32::from(dt.year());
    let rest = format!(
        "{:02}{:02}{:02}{:02}{:02}Z",
        dt.month(),
        dt.day(),
        dt.hour(),
        dt.minute(),
        dt.second()
    );
    if (1950..2050).contains(&year) {
        tlv(0x17, format!("{:02}{rest}", year % 100).as_bytes())
    } else {
        tlv(0x18, format!("{year:04}{rest}").as_bytes())
    }
}

fn extension(id: &str, critical: bool, value: &[u8]) -> Vec<u8> {
    let value = tlv(0x04, value);
    if critical {
        seq(&[&oid(id), &tlv(0x01, &[0xff]), &value])
    } else {
        seq(&[&oid(id), &value])
    }
}

// ---- PEM.

fn pem_encode(label: &str, der: &[u8]) -> String {
    let body = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    for line in body.as_bytes().chunks(64) {
        out.push_str(&String::from_utf8_lossy(line));
        out.push('\n');
    }
    out.push_str("-----END ");
    out.push_str(label);
    out.push_str("-----\n");
    out
}

/// The first PEM block of `text` (Go's `pem.Decode`): its type and bytes.
fn pem_decode(text: &str) -> Option<(String, Vec<u8>)> {
    let mut rest = text;
    loop {
        let start = rest.find("-----BEGIN ")?;
        let after = &rest[start + 11..];
        let end_label = after.find("-----")?;
        let label = &after[..end_label];
        let body_start = &after[end_label + 5..];
        let end_marker = format!("-----END {label}-----");
        let valid_label = !label.contains('\n');
        if valid_label
            && (body_start.starts_with('\n') || body_start.starts_with("\r\n"))
            && let Some(end) = body_start.find(&end_marker)
        {
            let body = &body_start[..end];
            // Headers ("Key: value" lines before a blank line) are skipped.
            let body = if body.contains(':') {
                body.split_once("\n\n").map_or(body, |(_, b)| b)
            } else {
                body
            };
            let cleaned: String = body.chars().filter(|c| !c.is_whitespace()).collect();
            if let Ok(der) = base64::engine::general_purpose::STANDARD.decode(cleaned) {
                return Some((label.to_owned(), der));
            }
        }
        rest = &rest[start + 11..];
    }
}

// ---- Keys.

/// A private key of a type Sprig handles.
enum Key {
    Rsa(Box<rsa::PrivateKey>),
    Ec(p256::SecretKey),
    Ed(Box<ed25519_dalek::SigningKey>),
    /// A DSA key (OpenSSL form): Sprig reads it, but Go cannot certify or sign with it.
    Dsa(Vec<u8>),
}

const ED25519_OID: &str = "1.3.101.112";

/// A two-prime RSA key with 65537 as its public exponent whose primes (`half_bits` each, top
/// two bits set, so the modulus has exactly twice as many) are searched at the same time on
/// two threads, in fixed-size integers (faster than the `rsa` crate's heap-sized ones): the
/// same sieve and Baillie-PSW test as `rsa::PrivateKey::new`, so the key is as strong. Each
/// thread draws from its own generator seeded from `rng`, so a seeded render stays
/// reproducible. `None` if no thread can be started or the attempts run out (the caller then
/// uses the `rsa` crate's generator).
fn rsa_key_from_parallel_primes<const LIMBS: usize>(
    rng: &mut rand::rngs::StdRng,
    half_bits: u32,
) -> Option<rsa::PrivateKey> {
    use rand::SeedableRng as _;
    // p and q equal, or 65537 dividing p-1 or q-1 (about one chance in 32,768 per key):
    // new primes.
    for _ in 0..8 {
        let seeds: [[u8; 32]; 2] = [rng.random(), rng.random()];
        let [p, q] = std::thread::scope(|scope| {
            let worker = std::thread::Builder::new().spawn_scoped(scope, || {
                random_rsa_prime::<LIMBS>(&mut rand::rngs::StdRng::from_seed(seeds[1]), half_bits)
            });
            let p =
                random_rsa_prime::<LIMBS>(&mut rand::rngs::StdRng::from_seed(seeds[0]), half_bits);
            let q = worker.ok()?.join().ok()?;
            Some([p?, q?])
        })?;
        if p == q {
            continue;
        }
        let key = rsa::PrivateKey::from_p_q(
            rsa::BoxedUint::from(&p),
            rsa::BoxedUint::from(&q),
            rsa::BoxedUint::from(65537u64),
        );
        if let Ok(key) = key {
            return Some(key);
        }
    }
    None
}

/// A random prime of exactly `bits` bits with its top two bits set, found by sieving from a
/// random odd start and testing the survivors with Baillie-PSW.
fn random_rsa_prime<const LIMBS: usize>(
    rng: &mut rand::rngs::StdRng,
    bits: u32,
) -> Option<crypto_bigint::Uint<LIMBS>> {
    use crypto_bigint::{BitOps as _, RandomBits as _};
    let width = std::num::NonZeroU32::new(bits).filter(|b| b.get() >= 2)?;
    loop {
        let mut start = crypto_bigint::Uint::<LIMBS>::try_random_bits(rng, bits).ok()?;
        start.set_bit_vartime(0, true);
        start.set_bit_vartime(bits - 1, true);
        start.set_bit_vartime(bits - 2, true);
        let mut sieve = crypto_primes::hazmat::SmallFactorsSieve::new(start, width, false).ok()?;
        // Nearly every survivor of the sieve is composite and fails Fermat's test to base 2,
        // which costs less than the Miller-Rabin round Baillie-PSW starts with; the one that
        // passes (every prime does) still goes through the whole Baillie-PSW test.
        if let Some(prime) = sieve.find(|candidate| {
            passes_fermat_base_two(candidate)
                && crypto_primes::is_prime(crypto_primes::Flavor::Any, candidate)
        }) {
            return Some(prime);
        }
    }
}

/// Whether an odd `n` above 3 passes Fermat's test to base 2 (`2^(n-1) = 1 mod n`), which
/// every prime does. In variable time: it only screens out candidates that are thrown away.
/// Left to right over the exponent's bits, a multiplication by 2 is a doubling (an addition),
/// not a Montgomery multiplication. `false` for even `n`.
fn passes_fermat_base_two<const LIMBS: usize>(n: &crypto_bigint::Uint<LIMBS>) -> bool {
    use crypto_bigint::modular::{FixedMontyForm, FixedMontyParams};
    let Some(odd) = crypto_bigint::Odd::new(*n).into_option() else {
        return false;
    };
    let params = FixedMontyParams::new_vartime(odd);
    let one = FixedMontyForm::one(&params);
    let exponent = n.wrapping_sub(&crypto_bigint::Uint::ONE);
    let mut acc = one;
    for bit in (0..exponent.bit_width_vartime()).rev() {
        acc = acc.square();
        if exponent.bit_vartime(bit) {
            acc = acc.double();
        }
    }
    acc == one
}

impl Key {
    fn generate_rsa(call: &mut Call<'_>, bits: usize) -> Result<Key, String> {
        let fast = match bits {
            2048 => rsa_key_from_parallel_primes::<16>(&mut call.env.rng, 1024),
            4096 => rsa_key_from_parallel_primes::<32>(&mut call.env.rng, 2048),
            _ => None,
        };
        if let Some(key) = fast {
            return Ok(Key::Rsa(Box::new(key)));
        }
        rsa::PrivateKey::new(&mut call.env.rng, bits)
            .map(|k| Key::Rsa(Box::new(k)))
            .map_err(|e| format!("error generating RSA key: {e}"))
    }

    /// The PEM Sprig writes for the key.
    fn to_pem(&self) -> Result<String, String> {
        use rsa::pkcs1::EncodeRsaPrivateKey as _;
        match self {
            Key::Rsa(k) => k
                .to_pkcs1_der()
                .map(|der| pem_encode("RSA PRIVATE KEY", der.as_bytes()))
                .map_err(|e| e.to_string()),
            Key::Ec(k) => k
                .to_sec1_der()
                .map(|der| pem_encode("EC PRIVATE KEY", &der))
                .map_err(|e| e.to_string()),
            Key::Ed(k) => {
                // PKCS #8 v1 without the public key, as Go's MarshalPKCS8PrivateKey writes it.
                let inner = tlv(0x04, &k.to_bytes());
                let der = seq(&[
                    &[0x02, 0x01, 0x00],
                    &seq(&[&oid(ED25519_OID)]),
                    &tlv(0x04, &inner),
                ]);
                Ok(pem_encode("PRIVATE KEY", &der))
            }
            Key::Dsa(der) => Ok(pem_encode("DSA PRIVATE KEY", der)),
        }
    }

    /// The SubjectPublicKeyInfo and the public key bits inside it.
    fn public_key_info(&self) -> Result<(Vec<u8>, Vec<u8>), String> {
        use rsa::pkcs1::EncodeRsaPublicKey as _;
        Ok(match self {
            Key::Rsa(k) => {
                let bits = k
                    .to_public_key()
                    .to_pkcs1_der()
                    .map_err(|e| e.to_string())?
                    .into_vec();
                let algorithm = seq(&[&oid("1.2.840.113549.1.1.1"), &[0x05, 0x00]]);
                (seq(&[&algorithm, &bit_string(&bits, 0)]), bits)
            }
            Key::Ec(k) => {
                use p256::elliptic_curve::sec1::ToSec1Point as _;
                let bits = k.public_key().to_sec1_point(false).as_bytes().to_vec();
                let algorithm = seq(&[&oid("1.2.840.10045.2.1"), &oid("1.2.840.10045.3.1.7")]);
                (seq(&[&algorithm, &bit_string(&bits, 0)]), bits)
            }
            Key::Ed(k) => {
                let bits = k.verifying_key().to_bytes().to_vec();
                let algorithm = seq(&[&oid(ED25519_OID)]);
                (seq(&[&algorithm, &bit_string(&bits, 0)]), bits)
            }
            Key::Dsa(_) => return Err("x509: unsupported public key type: *dsa.PublicKey".into()),
        })
    }

    /// The signature algorithm identifier and the signature of `message`.
    fn sign(&self, message: &[u8]) -> Result<(Vec<u8>, Vec<u8>), String> {
        use rsa::signature::{SignatureEncoding as _, Signer as _};
        Ok(match self {
            Key::Rsa(k) => {
                let signer = rsa::pkcs1v15::SigningKey::<sha2::Sha256>::new((**k).clone());
                let signature = signer.try_sign(message).map_err(|e| e.to_string())?;
                (
                    seq(&[&oid("1.2.840.113549.1.1.11"), &[0x05, 0x00]]),
                    signature.to_vec(),
                )
            }
            Key::Ec(k) => {
                let signer = p256::ecdsa::SigningKey::from(k);
                let signature: p256::ecdsa::Signature =
                    signer.try_sign(message).map_err(|e| e.to_string())?;
                (
                    seq(&[&oid("1.2.840.10045.4.3.2")]),
                    signature.to_der().as_bytes().to_vec(),
                )
            }
            Key::Ed(k) => {
                let signature = ed25519_dalek::Signer::sign(k.as_ref(), message);
                (seq(&[&oid(ED25519_OID)]), signature.to_bytes().to_vec())
            }
            Key::Dsa(_) => {
                return Err(
                    "x509: certificate private key does not implement crypto.Signer".into(),
                );
            }
        })
    }
}

/// Sprig's `parsePrivateKeyPEM`, with its error texts.
fn parse_private_key(text: &str) -> Result<Key, String> {
    use rsa::pkcs1::DecodeRsaPrivateKey as _;
    let (label, der) = pem_decode(text).ok_or("no PEM data in input")?;
    if label == "PRIVATE KEY" {
        return parse_pkcs8(&der).map_err(|e| format!("decoding PEM as PKCS#8: {e}"));
    }
    let Some(kind) = label.strip_suffix(" PRIVATE KEY") else {
        return Err(format!("no private key data in PEM block of type {label}"));
    };
    match kind {
        "RSA" => rsa::PrivateKey::from_pkcs1_der(&der)
            .map(|k| Key::Rsa(Box::new(k)))
            .map_err(|e| format!("parsing RSA private key from PEM: {e}")),
        "EC" => p256::SecretKey::from_sec1_der(&der)
            .map(Key::Ec)
            .map_err(|e| format!("parsing EC private key from PEM: {e}")),
        "DSA" => {
            if is_integer_sequence(&der, 6) {
                Ok(Key::Dsa(der))
            } else {
                Err("parsing DSA private key from PEM: asn1: structure error".into())
            }
        }
        _ => Err(format!("invalid private key type {label}")),
    }
}

/// Whether `der` is exactly a SEQUENCE of `count` INTEGERs (OpenSSL's DSA private key form).
fn is_integer_sequence(der: &[u8], count: usize) -> bool {
    /// One TLV at the start of `bytes`: tag, content, rest.
    fn read(bytes: &[u8]) -> Option<(u8, &[u8], &[u8])> {
        let (&tag, rest) = bytes.split_first()?;
        let (&first, mut rest) = rest.split_first()?;
        let len = if first < 0x80 {
            usize::from(first)
        } else {
            let n = usize::from(first & 0x7f);
            if n == 0 || n > 4 || rest.len() < n {
                return None;
            }
            let (len_bytes, after) = rest.split_at(n);
            rest = after;
            len_bytes
                .iter()
                .fold(0_usize, |acc, b| (acc << 8) | usize::from(*b))
        };
        if rest.len() < len {
            return None;
        }
        let (content, after) = rest.split_at(len);
        Some((tag, content, after))
    }
    let Some((0x30, mut content, [])) = read(der) else {
        return false;
    };
    for _ in 0..count {
        match read(content) {
            Some((0x02, _, rest)) => content = rest,
            _ => return false,
        }
    }
    content.is_empty()
}

fn parse_pkcs8(der: &[u8]) -> Result<Key, String> {
    use rsa::pkcs8::DecodePrivateKey as _;
    if let Ok(k) = rsa::PrivateKey::from_pkcs8_der(der) {
        return Ok(Key::Rsa(Box::new(k)));
    }
    if let Ok(k) = p256::SecretKey::from_pkcs8_der(der) {
        return Ok(Key::Ec(k));
    }
    ed25519_dalek::SigningKey::from_pkcs8_der(der)
        .map(|k| Key::Ed(Box::new(k)))
        .map_err(|e| format!("x509: failed to parse private key: {e}"))
}

fn gen_private_key(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    want_args(call, args, 1)?;
    let kind = str_arg(&args[0])?;
    let key = match kind {
        "rsa" => Key::generate_rsa(call, 4096),
        "dsa" => return Ok(Value::str(generate_dsa(call))),
        "ecdsa" => Ok(Key::Ec(
            <p256::SecretKey as rsa::Generate>::generate_from_rng(&mut call.env.rng),
        )),
        "ed25519" => {
            let seed: [u8; 32] = call.env.rng.random();
            Ok(Key::Ed(Box::new(ed25519_dalek::SigningKey::from_bytes(
                &seed,
            ))))
        }
        other => return Ok(Value::str(format!("Unknown type {other}"))),
    };
    // Sprig returns failures as the text.
    Ok(Value::str(key.and_then(|k| k.to_pem()).unwrap_or_else(
        |e| format!("failed to generate private key: {e}"),
    )))
}

/// A DSA key with fresh L2048 N256 parameters, as OpenSSL's `DSA PRIVATE KEY` (version, p, q,
/// g, y, x), which is what Sprig writes; or Sprig's failure text.
fn generate_dsa(call: &mut Call<'_>) -> String {
    let generated = dsa::Components::try_generate_from_rng_with_key_size(
        &mut call.env.rng,
        dsa::KeySize::DSA_2048_256,
    )
    .map_err(|e| e.to_string())
    .and_then(|components| {
        dsa::SigningKey::try_generate_from_rng_with_components(&mut call.env.rng, components)
            .map_err(|e| e.to_string())
    });
    match generated {
        Ok(key) => {
            let public = key.verifying_key();
            let c = public.components();
            let der = seq(&[
                &[0x02, 0x01, 0x00],
                &uint(&c.p().to_be_bytes()),
                &uint(&c.q().to_be_bytes()),
                &uint(&c.g().to_be_bytes()),
                &uint(&public.y().to_be_bytes()),
                &uint(&key.x().to_be_bytes()),
            ]);
            pem_encode("DSA PRIVATE KEY", &der)
        }
        Err(e) => format!("failed to generate private key: {e}"),
    }
}

/// A function that reads a PEM private key (for robustness tests of the PEM and key readers).
#[cfg(test)]
pub(super) fn register_probe() -> crate::template::Function {
    fn probe(_: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
        let text = args.first().and_then(Value::as_str).unwrap_or_default();
        let _ = pem_decode(text);
        parse_private_key(text).map(|_| Value::Nil)
    }
    probe
}

// ---- Certificates.

/// What Sprig's base template varies: the subject, alternative names, validity and whether it
/// is a CA.
struct Template {
    cn: String,
    ips: Vec<std::net::IpAddr>,
    dns: Vec<String>,
    days: i64,
    is_ca: bool,
}

/// The issuer of a certificate: its subject name, its subject key identifier and its key.
struct Issuer<'k> {
    name: Vec<u8>,
    key_id: Option<Vec<u8>>,
    key: &'k Key,
}

fn create_certificate(
    call: &mut Call<'_>,
    template: &Template,
    key: &Key,
    issuer: Option<&Issuer<'_>>,
) -> Result<String, String> {
    let signer = issuer.map_or(key, |i| i.key);
    // Go checks the signing key before anything else.
    if matches!(signer, Key::Dsa(_)) {
        return Err(
            "error creating certificate: x509: certificate private key does not implement crypto.Signer"
                .into(),
        );
    }
    let serial: [u8; 16] = call.env.rng.random();
    let now = call.env.now.timestamp();
    let until = jiff::Timestamp::from_second(
        now.as_second()
            .saturating_add(template.days.saturating_mul(86_400)),
    )
    .map_err(|e| format!("x509: {e}"))?;
    let (spki, public_bits) = key
        .public_key_info()
        .map_err(|e| format!("error creating certificate: {e}"))?;
    let subject = name(&template.cn);
    let issuer_name = issuer.map_or_else(|| subject.clone(), |i| i.name.clone());
    let subject_key_id = template
        .is_ca
        .then(|| sha2::Sha256::digest(&public_bits)[..20].to_vec());

    let mut extensions = Vec::new();
    let usage = if template.is_ca {
        bit_string(&[0xa4], 2)
    } else {
        bit_string(&[0xa0], 5)
    };
    extensions.push(extension("2.5.29.15", true, &usage));
    let ext_usage = seq(&[&oid("1.3.6.1.5.5.7.3.1"), &oid("1.3.6.1.5.5.7.3.2")]);
    extensions.push(extension("2.5.29.37", false, &ext_usage));
    let basic = if template.is_ca {
        seq(&[&[0x01, 0x01, 0xff]])
    } else {
        seq(&[])
    };
    extensions.push(extension("2.5.29.19", true, &basic));
    if let Some(id) = &subject_key_id {
        extensions.push(extension("2.5.29.14", false, &tlv(0x04, id)));
    }
    if let Some(i) = issuer
        && let Some(id) = &i.key_id
        && i.name != subject
    {
        extensions.push(extension("2.5.29.35", false, &seq(&[&tlv(0x80, id)])));
    }
    if !template.dns.is_empty() || !template.ips.is_empty() {
        let mut names = Vec::new();
        for dns in &template.dns {
            names.extend(tlv(0x82, dns.as_bytes()));
        }
        for ip in &template.ips {
            match ip {
                std::net::IpAddr::V4(v4) => names.extend(tlv(0x87, &v4.octets())),
                std::net::IpAddr::V6(v6) => names.extend(tlv(0x87, &v6.octets())),
            }
        }
        // Critical when the subject is empty, as RFC 5280 asks and Go does.
        extensions.push(extension(
            "2.5.29.17",
            template.cn.is_empty(),
            &tlv(0x30, &names),
        ));
    }

    let (algorithm, _) = signer.sign(b"")?;
    let tbs = seq(&[
        &tlv(0xa0, &[0x02, 0x01, 0x02]),
        &uint(&serial),
        &algorithm,
        &issuer_name,
        &seq(&[&der_time(now), &der_time(until)]),
        &subject,
        &spki,
        &tlv(0xa3, &tlv(0x30, &extensions.concat())),
    ]);
    let (algorithm, signature) = signer.sign(&tbs)?;
    let certificate = seq(&[&tbs, &algorithm, &bit_string(&signature, 0)]);
    Ok(pem_encode("CERTIFICATE", &certificate))
}

/// An `[]interface{}` parameter (nil allowed).
fn list_arg(value: &Value) -> Result<&[Value], String> {
    match value {
        Value::Nil => Ok(&[]),
        Value::List(items, crate::value::ListKind::Any) => Ok(items),
        other => Err(format!(
            "wrong type for value; expected []interface {{}}; got {}",
            other.type_name()
        )),
    }
}

fn template(
    cn: &Value,
    ips: &Value,
    dns: &Value,
    days: &Value,
    is_ca: bool,
) -> Result<Template, String> {
    let cn = str_arg(cn)?.to_owned();
    let ips = list_arg(ips)?;
    let dns = list_arg(dns)?;
    let days = int_arg(days)?;
    let mut addresses = Vec::new();
    for ip in ips {
        let Value::String(text) = ip else {
            return Err(format!("error parsing ip: {ip} is not a string"));
        };
        let parsed = text
            .parse::<std::net::IpAddr>()
            .map_err(|_| format!("error parsing ip: {text}"))?;
        addresses.push(parsed);
    }
    let mut names = Vec::new();
    for name in dns {
        let Value::String(text) = name else {
            return Err(format!(
                "error processing alternate dns name: {name} is not a string"
            ));
        };
        names.push(text.to_string());
    }
    Ok(Template {
        cn,
        ips: addresses,
        dns: names,
        days,
        is_ca,
    })
}

fn certificate_value(cert: String, key: &Key) -> Result<Value, String> {
    Ok(Value::Object(Rc::new(Certificate {
        cert,
        key: key.to_pem()?,
    })))
}

fn certificate_arg(value: &Value) -> Result<Certificate, String> {
    if let Value::Object(o) = value
        && let Some(c) = o.as_any().and_then(|a| a.downcast_ref::<Certificate>())
    {
        return Ok(c.clone());
    }
    Err(format!(
        "wrong type for value; expected sprig.certificate; got {}",
        value.type_name()
    ))
}

fn gen_ca(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    want_args(call, args, 2)?;
    let template = template(&args[0], &Value::Nil, &Value::Nil, &args[1], true)?;
    let key = Key::generate_rsa(call, 2048)?;
    let cert = create_certificate(call, &template, &key, None)?;
    certificate_value(cert, &key)
}

fn gen_ca_with_key(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    want_args(call, args, 3)?;
    let template = template(&args[0], &Value::Nil, &Value::Nil, &args[1], true)?;
    let key =
        parse_private_key(str_arg(&args[2])?).map_err(|e| format!("parsing private key: {e}"))?;
    let cert = create_certificate(call, &template, &key, None)?;
    certificate_value(cert, &key)
}

fn gen_self_signed_cert(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    want_args(call, args, 4)?;
    let template = template(&args[0], &args[1], &args[2], &args[3], false)?;
    let key = Key::generate_rsa(call, 2048)?;
    let cert = create_certificate(call, &template, &key, None)?;
    certificate_value(cert, &key)
}

fn gen_self_signed_cert_with_key(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    want_args(call, args, 5)?;
    let template = template(&args[0], &args[1], &args[2], &args[3], false)?;
    let key =
        parse_private_key(str_arg(&args[4])?).map_err(|e| format!("parsing private key: {e}"))?;
    let cert = create_certificate(call, &template, &key, None)?;
    certificate_value(cert, &key)
}

/// Signs `template` for `key` with the CA `ca` (Sprig's order of checks and errors).
fn sign_with_ca(
    call: &mut Call<'_>,
    template: &Template,
    key: &Key,
    ca: &Certificate,
) -> Result<Value, String> {
    let (_, der) = pem_decode(&ca.cert).ok_or("unable to decode certificate")?;
    let (issuer_name, key_id) = certificate_subject(&der).map_err(|_| {
        "error parsing certificate: decodedSignerCert.Bytes: x509: malformed certificate".to_owned()
    })?;
    let ca_key =
        parse_private_key(&ca.key).map_err(|e| format!("error parsing private key: {e}"))?;
    let issuer = Issuer {
        name: issuer_name,
        key_id,
        key: &ca_key,
    };
    let cert = create_certificate(call, template, key, Some(&issuer))?;
    certificate_value(cert, key)
}

/// A certificate's subject name (DER) and subject key identifier.
fn certificate_subject(der: &[u8]) -> Result<(Vec<u8>, Option<Vec<u8>>), String> {
    use der::{Decode as _, Encode as _};
    let cert = x509_cert::Certificate::from_der(der).map_err(|e| e.to_string())?;
    let tbs = cert.tbs_certificate();
    let subject = tbs.subject().to_der().map_err(|e| e.to_string())?;
    let key_id = tbs.extensions().and_then(|extensions| {
        extensions
            .iter()
            .find(|e| e.extn_id.to_string() == "2.5.29.14")
            .and_then(|e| {
                der::asn1::OctetString::from_der(e.extn_value.as_bytes())
                    .ok()
                    .map(|o| o.as_bytes().to_vec())
            })
    });
    Ok((subject, key_id))
}

fn gen_signed_cert(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    want_args(call, args, 5)?;
    let template = template(&args[0], &args[1], &args[2], &args[3], false)?;
    let ca = certificate_arg(&args[4])?;
    let key = Key::generate_rsa(call, 2048)?;
    sign_with_ca(call, &template, &key, &ca)
}

fn gen_signed_cert_with_key(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    want_args(call, args, 6)?;
    let template = template(&args[0], &args[1], &args[2], &args[3], false)?;
    let ca = certificate_arg(&args[4])?;
    let key =
        parse_private_key(str_arg(&args[5])?).map_err(|e| format!("parsing private key: {e}"))?;
    sign_with_ca(call, &template, &key, &ca)
}

fn build_custom_cert(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    want_args(call, args, 2)?;
    let cert = super::go_base64_decode(str_arg(&args[0])?)
        .map_err(|_| "unable to decode base64 certificate".to_owned())?;
    let key = super::go_base64_decode(str_arg(&args[1])?)
        .map_err(|_| "unable to decode base64 private key".to_owned())?;
    let cert = String::from_utf8_lossy(&cert).into_owned();
    let key = String::from_utf8_lossy(&key).into_owned();
    let (_, der) = pem_decode(&cert).ok_or("unable to decode certificate")?;
    // Go's x509 names most structural failures this way.
    certificate_subject(&der).map_err(|_| {
        "error parsing certificate: decodedCert.Bytes: x509: malformed certificate".to_owned()
    })?;
    parse_private_key(&key).map_err(|e| format!("error parsing private key: {e}"))?;
    Ok(Value::Object(Rc::new(Certificate { cert, key })))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::funcs::crypto::{test_call, test_call_env, test_now};
    use der::{Decode as _, Encode as _};

    #[test]
    fn fermat_screen_passes_primes_and_stops_most_composites() {
        use crypto_bigint::U1024;
        let is_prime = |n: u64| {
            n > 1
                && (2..n)
                    .take_while(|d| d * d <= n)
                    .all(|d| !n.is_multiple_of(d))
        };
        for n in 5..5000u64 {
            let passes = passes_fermat_base_two(&U1024::from_u64(n));
            if is_prime(n) {
                assert!(passes, "{n} is prime");
            } else if passes {
                // Base-2 Fermat pseudoprimes (Baillie-PSW catches them).
                assert!(
                    [
                        341, 561, 645, 1105, 1387, 1729, 1905, 2047, 2465, 2701, 2821, 3277, 4033,
                        4369, 4371, 4681
                    ]
                    .contains(&n),
                    "{n}"
                );
            }
        }
        // 2^521 - 1 (a Mersenne prime) and its neighbour.
        let m521 = U1024::ONE.shl_vartime(521).wrapping_sub(&U1024::ONE);
        assert!(passes_fermat_base_two(&m521));
        assert!(!passes_fermat_base_two(
            &m521.wrapping_sub(&U1024::from_u8(2))
        ));
    }

    fn s(text: &str) -> Value {
        Value::str(text)
    }

    fn cert_of(v: &Value) -> Certificate {
        certificate_arg(v).unwrap()
    }

    fn parse(pem: &str) -> x509_cert::Certificate {
        let (label, der) = pem_decode(pem).unwrap();
        assert_eq!(label, "CERTIFICATE");
        x509_cert::Certificate::from_der(&der).unwrap()
    }

    fn extension_value(cert: &x509_cert::Certificate, id: &str) -> Option<(bool, String)> {
        cert.tbs_certificate()
            .extensions()?
            .iter()
            .find(|e| e.extn_id.to_string() == id)
            .map(|e| (e.critical, hex(e.extn_value.as_bytes())))
    }

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().fold(String::new(), |mut out, b| {
            use std::fmt::Write as _;
            let _ = write!(out, "{b:02X}");
            out
        })
    }

    #[test]
    fn ca_and_signed_certificates_are_built_as_go_builds_them() {
        use base64::Engine as _;
        let mut env = crate::template::Env::fixed(3, test_now());
        let ca = test_call_env(gen_ca, &[s("my-ca"), Value::Int(365)], &mut env).unwrap();
        assert_eq!(ca.type_name(), "sprig.certificate");
        assert_eq!(ca.kind_name(), "struct");
        let ca_cert = cert_of(&ca);
        assert!(ca_cert.key.starts_with("-----BEGIN RSA PRIVATE KEY-----\n"));
        let parsed = parse(&ca_cert.cert);
        let tbs = parsed.tbs_certificate();
        assert_eq!(tbs.subject().to_string(), "CN=my-ca");
        assert_eq!(tbs.issuer().to_string(), "CN=my-ca");
        let validity = tbs.validity();
        assert_eq!(
            validity.not_before.to_unix_duration().as_secs(),
            1_714_979_289
        );
        assert_eq!(
            validity.not_after.to_unix_duration().as_secs(),
            1_714_979_289 + 365 * 86_400
        );
        // The bytes Go writes (read from Helm's output with openssl asn1parse).
        assert_eq!(
            extension_value(&parsed, "2.5.29.15"),
            Some((true, "030202A4".into()))
        );
        assert_eq!(
            extension_value(&parsed, "2.5.29.37"),
            Some((false, "301406082B0601050507030106082B06010505070302".into()))
        );
        assert_eq!(
            extension_value(&parsed, "2.5.29.19"),
            Some((true, "30030101FF".into()))
        );
        let (_, ski) = extension_value(&parsed, "2.5.29.14").unwrap();
        assert_eq!(ski.len(), 44);
        let order: Vec<String> = tbs
            .extensions()
            .unwrap()
            .iter()
            .map(|e| e.extn_id.to_string())
            .collect();
        assert_eq!(order, ["2.5.29.15", "2.5.29.37", "2.5.29.19", "2.5.29.14"]);

        let leaf = test_call_env(
            gen_signed_cert,
            &[
                s("svc.example"),
                Value::list(vec![s("10.0.0.1"), s("::1")]),
                Value::list(vec![s("a.example"), s("b.example")]),
                Value::Int(30),
                ca.clone(),
            ],
            &mut env,
        )
        .unwrap();
        let parsed_leaf = parse(&cert_of(&leaf).cert);
        assert_eq!(
            parsed_leaf.tbs_certificate().issuer().to_string(),
            "CN=my-ca"
        );
        assert_eq!(
            extension_value(&parsed_leaf, "2.5.29.15"),
            Some((true, "030205A0".into()))
        );
        assert_eq!(
            extension_value(&parsed_leaf, "2.5.29.19"),
            Some((true, "3000".into()))
        );
        assert_eq!(
            extension_value(&parsed_leaf, "2.5.29.35"),
            Some((false, format!("30168014{}", &ski[4..])))
        );
        assert_eq!(
            extension_value(&parsed_leaf, "2.5.29.17"),
            Some((
                false,
                "302E8209612E6578616D706C658209622E6578616D706C6587040A000001871000000000000000000000000000000001"
                    .into()
            ))
        );
        assert!(extension_value(&parsed_leaf, "2.5.29.14").is_none());
        // The leaf verifies against the CA's key.
        {
            use rsa::pkcs1::DecodeRsaPublicKey as _;
            use rsa::signature::Verifier as _;
            let spki = parsed.tbs_certificate().subject_public_key_info();
            let public =
                rsa::PublicKey::from_pkcs1_der(spki.subject_public_key.raw_bytes()).unwrap();
            let verifier = rsa::pkcs1v15::VerifyingKey::<sha2::Sha256>::new(public);
            let signature =
                rsa::pkcs1v15::Signature::try_from(parsed_leaf.signature().raw_bytes()).unwrap();
            let tbs_der = parsed_leaf.tbs_certificate().to_der().unwrap();
            verifier.verify(&tbs_der, &signature).unwrap();
        }
        // Round trip through buildCustomCert.
        let b64 = |t: &str| s(&base64::engine::general_purpose::STANDARD.encode(t));
        let rebuilt =
            test_call(build_custom_cert, &[b64(&ca_cert.cert), b64(&ca_cert.key)]).unwrap();
        assert_eq!(cert_of(&rebuilt), ca_cert);
    }

    #[test]
    fn keys_of_every_kind_sign_and_round_trip() {
        let mut env = crate::template::Env::fixed(5, test_now());
        for (kind, label) in [("ecdsa", "EC PRIVATE KEY"), ("ed25519", "PRIVATE KEY")] {
            let key = test_call_env(gen_private_key, &[s(kind)], &mut env).unwrap();
            let key = key.as_str().unwrap().to_owned();
            assert!(
                key.starts_with(&format!("-----BEGIN {label}-----\n")),
                "{key}"
            );
            let ca = test_call_env(gen_ca_with_key, &[s("x"), Value::Int(1), s(&key)], &mut env)
                .unwrap();
            assert_eq!(cert_of(&ca).key, key);
            let leaf = test_call_env(
                gen_signed_cert_with_key,
                &[s("y"), Value::Nil, Value::Nil, Value::Int(1), ca, s(&key)],
                &mut env,
            )
            .unwrap();
            assert_eq!(cert_of(&leaf).key, key);
            parse(&cert_of(&leaf).cert);
        }
        // SEC 1 with the curve and the public key, as Go's MarshalECPrivateKey: "MHcCAQEEI…".
        let ec = test_call_env(gen_private_key, &[s("ecdsa")], &mut env).unwrap();
        assert!(ec.as_str().unwrap().contains("\nMHcCAQEEI"), "{ec}");
        let ed = test_call_env(gen_private_key, &[s("ed25519")], &mut env).unwrap();
        // Go's PKCS #8 v1 form: 48 bytes, "MC4CAQAwBQYDK2VwBCIEI…".
        assert!(ed.as_str().unwrap().contains("\nMC4CAQAwBQYDK2VwBCIEI"));
        assert_eq!(
            test_call(gen_private_key, &[s("bogus")])
                .unwrap()
                .to_string(),
            "Unknown type bogus"
        );
    }

    fn test_ec_key() -> String {
        test_call(gen_private_key, &[s("ecdsa")])
            .unwrap()
            .to_string()
    }

    #[test]
    fn errors_are_sprigs() {
        let one = Value::Int(1);
        for (key, want) in [
            ("junk", "parsing private key: no PEM data in input"),
            (
                "-----BEGIN FOO-----\nAAAA\n-----END FOO-----\n",
                "parsing private key: no private key data in PEM block of type FOO",
            ),
            (
                "-----BEGIN XX PRIVATE KEY-----\nAAAA\n-----END XX PRIVATE KEY-----\n",
                "parsing private key: invalid private key type XX PRIVATE KEY",
            ),
        ] {
            assert_eq!(
                test_call(gen_ca_with_key, &[s("x"), one.clone(), s(key)]).unwrap_err(),
                want
            );
        }
        let ips = |v: Value| Value::list(vec![v]);
        for (ip, dns, want) in [
            (ips(s("bad")), Value::Nil, "error parsing ip: bad"),
            (
                ips(Value::Int(1)),
                Value::Nil,
                "error parsing ip: 1 is not a string",
            ),
            (
                Value::Nil,
                ips(Value::Int(1)),
                "error processing alternate dns name: 1 is not a string",
            ),
        ] {
            assert_eq!(
                test_call(gen_self_signed_cert, &[s("x"), ip, dns, one.clone()]).unwrap_err(),
                want
            );
        }
        assert_eq!(
            test_call(build_custom_cert, &[s("junk"), s("junk")]).unwrap_err(),
            "unable to decode certificate"
        );
        assert_eq!(
            test_call(build_custom_cert, &[s("!!"), s("junk")]).unwrap_err(),
            "unable to decode base64 certificate"
        );
        let bad_cert =
            "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCkFBQUEKLS0tLS1FTkQgQ0VSVElGSUNBVEUtLS0tLQo=";
        assert_eq!(
            test_call(build_custom_cert, &[s(bad_cert), s("junk")]).unwrap_err(),
            "error parsing certificate: decodedCert.Bytes: x509: malformed certificate"
        );
        // A DSA key is read, but Go cannot sign with it.
        let dsa_key = pem_encode(
            "DSA PRIVATE KEY",
            &seq(&[
                &[2, 1, 0],
                &[2, 1, 7],
                &[2, 1, 7],
                &[2, 1, 7],
                &[2, 1, 7],
                &[2, 1, 7],
            ]),
        );
        assert_eq!(
            test_call(
                gen_self_signed_cert_with_key,
                &[s("y"), Value::Nil, Value::Nil, Value::Int(1), s(&dsa_key)]
            )
            .unwrap_err(),
            "error creating certificate: x509: certificate private key does not implement crypto.Signer"
        );
        let ca = test_call(gen_ca_with_key, &[s("x"), Value::Int(1), s(&test_ec_key())]).unwrap();
        assert_eq!(
            test_call(
                gen_signed_cert_with_key,
                &[
                    s("y"),
                    Value::Nil,
                    Value::Nil,
                    Value::Int(1),
                    ca,
                    s(&dsa_key)
                ]
            )
            .unwrap_err(),
            "error creating certificate: x509: unsupported public key type: *dsa.PublicKey"
        );
        assert_eq!(
            test_call(
                gen_signed_cert,
                &[s("x"), Value::Nil, Value::Nil, one, Value::empty_map()]
            )
            .unwrap_err(),
            "wrong type for value; expected sprig.certificate; got map[string]interface {}"
        );
    }

    #[test]
    #[ignore = "slow: DSA parameters"]
    fn dsa_private_keys_are_openssl_form() {
        let key = test_call(gen_private_key, &[s("dsa")]).unwrap();
        let text = key.as_str().unwrap();
        let (label, der) = pem_decode(text).unwrap();
        assert_eq!(label, "DSA PRIVATE KEY");
        // Helm's answer for the same call is 1224 characters long; lengths vary by a byte or
        // two with leading zeros.
        assert!((1200..=1240).contains(&text.len()), "{}", text.len());
        assert_eq!(&der[..2], &[0x30, 0x82]);
    }

    #[test]
    #[ignore = "slow: RSA 4096"]
    fn rsa_private_keys_are_pkcs1() {
        use rsa::pkcs1::DecodeRsaPrivateKey as _;
        use rsa::traits::PublicKeyParts as _;
        let key = test_call(gen_private_key, &[s("rsa")]).unwrap();
        let (label, der) = pem_decode(key.as_str().unwrap()).unwrap();
        assert_eq!(label, "RSA PRIVATE KEY");
        assert_eq!(rsa::PrivateKey::from_pkcs1_der(&der).unwrap().size(), 512);
    }

    #[test]
    fn parallel_rsa_keys_are_valid_full_size_and_seeded() {
        use rand::SeedableRng as _;
        use rsa::traits::{PrivateKeyParts as _, PublicKeyParts as _};
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let key = rsa_key_from_parallel_primes::<16>(&mut rng, 1024).unwrap();
        key.validate().unwrap();
        assert_eq!(key.n().as_ref().bit_width(), 2048);
        assert_eq!(key.e(), &rsa::BoxedUint::from(65537u64));
        assert_eq!(key.primes().len(), 2);
        for prime in key.primes() {
            assert_eq!(prime.bit_width(), 1024);
        }
        let mut again = rand::rngs::StdRng::seed_from_u64(7);
        let same = rsa_key_from_parallel_primes::<16>(&mut again, 1024).unwrap();
        assert_eq!(same.n(), key.n());
    }
}
