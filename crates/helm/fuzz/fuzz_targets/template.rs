//! Arbitrary text as a chart template: parsed into a `Set` with Helm's whole function map and,
//! when it parses, executed against a small fixed values tree with a fixed random seed and clock.
//! Nothing may panic, overflow the stack, hang or exhaust memory: the engine's caps (template
//! and `tpl` nesting, `repeat`/`until` sizes, output size) must hold for every input.

#![no_main]

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;

use capstan_helm::Value;
use capstan_helm::template::{Call, Env, FuncMap, Function, Set};
use libfuzzer_sys::fuzz_target;

/// Functions that cost real time per call by design (key generation, bcrypt, scrypt): a loop
/// of them runs long in Helm too, which is not a finding. Each input may call one of them
/// once; later calls fail. DSA keys are never generated: finding 2048-bit DSA parameters takes
/// seconds (in Go too), which would read as a hang.
const COSTLY: &[&str] = &[
    "genPrivateKey",
    "genCA",
    "genCAWithKey",
    "genSelfSignedCert",
    "genSelfSignedCertWithKey",
    "genSignedCert",
    "genSignedCertWithKey",
    "bcrypt",
    "htpasswd",
    "derivePassword",
];
const COSTLY_CALLS: u32 = 1;

thread_local! {
    static ORIGINALS: RefCell<HashMap<&'static str, Function>> = RefCell::new(HashMap::new());
    static COSTLY_LEFT: Cell<u32> = const { Cell::new(COSTLY_CALLS) };
}

/// Stands in for a [`COSTLY`] function: calls it while the input's allowance lasts.
fn costly(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    let left = COSTLY_LEFT.get();
    if left == 0 {
        return Err("fuzz: too many costly calls".into());
    }
    COSTLY_LEFT.set(left - 1);
    if call.name == "genPrivateKey" && args.first().and_then(Value::as_str) == Some("dsa") {
        return Err("fuzz: no DSA key generation".into());
    }
    let original = ORIGINALS.with_borrow(|map| map.get(call.name).copied());
    match original {
        Some(function) => function(call, args),
        None => Err("fuzz: unknown costly function".into()),
    }
}

fn funcs() -> Rc<FuncMap> {
    thread_local! {
        static FUNCS: Rc<FuncMap> = {
            let mut map = capstan_helm::funcs::helm();
            for name in COSTLY {
                if let Some((key, function)) = map.remove_entry(name) {
                    ORIGINALS.with_borrow_mut(|originals| originals.insert(key, function));
                    map.insert(key, costly);
                }
            }
            Rc::new(map)
        };
    }
    FUNCS.with(Rc::clone)
}

/// The dot of the render: what a chart template sees, small.
fn dot() -> Value {
    let json = serde_json::json!({
        "Values": {
            "name": "web",
            "replicas": 3,
            "enabled": true,
            "ratio": 0.5,
            "nothing": null,
            "image": {"repository": "nginx", "tag": "1.27", "pullPolicy": "IfNotPresent"},
            "ports": [80, 443],
            "labels": {"app": "web", "tier": "front"},
            "list": ["a", "b", "c"],
            "tpl": "{{ .Values.name }}-{{ .Release.Name }}"
        },
        "Release": {"Name": "r", "Namespace": "ns", "Service": "Helm", "IsInstall": true,
                    "IsUpgrade": false, "Revision": 1},
        "Chart": {"Name": "t", "Version": "0.1.0", "AppVersion": "1.0"},
        "Template": {"Name": "t/templates/fuzz.yaml", "BasePath": "t/templates"}
    });
    // Numbers as Helm's YAML reader gives them (float64).
    Value::from_json_floats(&json)
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    COSTLY_LEFT.set(COSTLY_CALLS);
    let mut set = Set::new(funcs());
    if set.parse("t/templates/fuzz.yaml", text).is_err() {
        return;
    }
    let now = jiff::Timestamp::from_second(1_700_000_000)
        .expect("a valid timestamp")
        .to_zoned(jiff::tz::TimeZone::UTC);
    let mut env = Env::fixed(11, now);
    let _ = set.execute("t/templates/fuzz.yaml", dot(), &mut env);
});
