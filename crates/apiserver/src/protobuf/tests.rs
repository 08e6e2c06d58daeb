//! Decoding tests. `testdata/NAME.pb` are request bodies captured from `kubectl` 1.32 (see
//! `testdata/README.md`); `NAME.json` is `kubectl ... --dry-run=client -o json` for the same command,
//! the JSON kubectl would have sent instead.

use serde_json::{Value, json};

use super::*;

const FIXTURES: &[&str] = &[
    "clusterrole",
    "clusterrolebinding",
    "configmap",
    "cronjob",
    "deployment",
    "deployment-multi",
    "deployment-zero",
    "hpa",
    "ingress",
    "job",
    "namespace",
    "pdb",
    "priorityclass",
    "quota",
    "role",
    "secret",
    "secret-docker-registry",
    "service",
    "service-nodeport",
    "serviceaccount",
];

fn fixture(name: &str) -> (Vec<u8>, Value) {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/src/protobuf/testdata");
    let pb = std::fs::read(format!("{dir}/{name}.pb")).unwrap();
    let json = std::fs::read(format!("{dir}/{name}.json")).unwrap();
    (pb, without_nulls(serde_json::from_slice(&json).unwrap()))
}

/// Go's JSON writes a zero `metav1.Time` as `null`; the decoder leaves it out.
fn without_nulls(value: Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k, without_nulls(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(without_nulls).collect()),
        other => other,
    }
}

#[test]
fn kubectl_bodies_decode_to_the_json_kubectl_would_send() {
    for name in FIXTURES {
        let (pb, expected) = fixture(name);
        let decoded = decode(&pb).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(decoded, expected, "{name}:\n{decoded:#}");
    }
}

#[test]
fn pointer_zeros_are_kept_and_omitempty_zeros_dropped() {
    let (pb, _) = fixture("deployment-zero");
    let decoded = decode(&pb).unwrap();
    // `replicas` is `*int32`: an explicit 0 survives.
    assert_eq!(decoded["spec"]["replicas"], json!(0));
    // `minReadySeconds` is a plain `int32,omitempty`: Go writes 0 on the wire, JSON leaves it out.
    assert!(decoded["spec"].get("minReadySeconds").is_none());
    let (pb, _) = fixture("priorityclass");
    assert_eq!(
        decode(&pb).unwrap()["value"],
        json!(0),
        "non-omitempty int32 `value`"
    );
}

#[test]
fn bytes_become_base64_and_int_or_string_a_number_or_string() {
    let (pb, _) = fixture("configmap");
    let decoded = decode(&pb).unwrap();
    assert_eq!(decoded["binaryData"]["bin"], json!("AAH/"));
    let (pb, _) = fixture("service");
    assert_eq!(
        decode(&pb).unwrap()["spec"]["ports"][0]["targetPort"],
        json!(8080)
    );
    let (pb, _) = fixture("pdb");
    assert_eq!(decode(&pb).unwrap()["spec"]["minAvailable"], json!(0));
}

#[test]
fn kubectl_auth_reviews_decode() {
    // `kubectl auth can-i list deployments.apps --subresource=scale -n kube-system` and
    // `kubectl auth whoami` have no `--dry-run`; expected values follow Go's JSON rules
    // (`status.allowed` has no `omitempty`, `status.userInfo` is a non-pointer struct).
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/src/protobuf/testdata");
    let can_i = decode(&std::fs::read(format!("{dir}/can-i.pb")).unwrap()).unwrap();
    assert_eq!(
        can_i,
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview", "metadata": {},
            "spec": {"resourceAttributes": {"namespace": "kube-system", "verb": "list", "group": "apps",
                "resource": "deployments", "subresource": "scale"}},
            "status": {"allowed": false}})
    );
    let whoami = decode(&std::fs::read(format!("{dir}/whoami.pb")).unwrap()).unwrap();
    assert_eq!(
        whoami,
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview", "metadata": {},
            "status": {"userInfo": {}}})
    );
}

// ---- hand-built messages -------------------------------------------------------------------

fn varint(mut v: u64, out: &mut Vec<u8>) {
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

fn int_field(number: u64, v: u64, out: &mut Vec<u8>) {
    varint(number << 3, out);
    varint(v, out);
}

fn len_field(number: u64, bytes: &[u8], out: &mut Vec<u8>) {
    varint(number << 3 | 2, out);
    varint(bytes.len() as u64, out);
    out.extend_from_slice(bytes);
}

fn envelope(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
    let mut type_meta = Vec::new();
    len_field(1, api_version.as_bytes(), &mut type_meta);
    len_field(2, kind.as_bytes(), &mut type_meta);
    let mut out = MAGIC.to_vec();
    len_field(1, &type_meta, &mut out);
    len_field(2, raw, &mut out);
    out
}

/// The field number of `json_name` in the message `message` (from the generated table).
fn number(message: &str, json_name: &str) -> u64 {
    let Message(_, _, fields) = schema::find(message).unwrap();
    u64::from(fields.iter().find(|f| f.1 == json_name).unwrap().0)
}

fn decode_as(message: &str, bytes: &[u8]) -> Decoded<Option<Value>> {
    decode_message(schema::find(message).unwrap(), bytes, 1)
}

const META: &str = "k8s.io.apimachinery.pkg.apis.meta.v1";

#[test]
fn special_types_take_their_json_form() {
    let mut time = Vec::new();
    int_field(1, 1_700_000_000, &mut time);
    int_field(2, 123_456_789, &mut time);
    assert_eq!(
        decode_as(&format!("{META}.Time"), &time).unwrap(),
        Some(json!("2023-11-14T22:13:20Z"))
    );
    assert_eq!(
        decode_as(&format!("{META}.MicroTime"), &time).unwrap(),
        Some(json!("2023-11-14T22:13:20.123456Z"))
    );
    assert_eq!(
        decode_as(&format!("{META}.Time"), &[]).unwrap(),
        None,
        "the zero time is absent"
    );

    let mut duration = Vec::new();
    int_field(1, 90_000_000_000, &mut duration);
    assert_eq!(
        decode_as(&format!("{META}.Duration"), &duration).unwrap(),
        Some(json!("1m30s"))
    );

    let mut quantity = Vec::new();
    len_field(1, b"500m", &mut quantity);
    assert_eq!(
        decode_as("k8s.io.apimachinery.pkg.api.resource.Quantity", &quantity).unwrap(),
        Some(json!("500m"))
    );

    let mut port = Vec::new();
    int_field(1, 1, &mut port);
    len_field(3, b"http", &mut port);
    assert_eq!(
        decode_as("k8s.io.apimachinery.pkg.util.intstr.IntOrString", &port).unwrap(),
        Some(json!("http"))
    );

    let mut raw = Vec::new();
    len_field(1, br#"{"f:metadata":{}}"#, &mut raw);
    assert_eq!(
        decode_as(&format!("{META}.FieldsV1"), &raw).unwrap(),
        Some(json!({"f:metadata": {}}))
    );

    let mut verbs = Vec::new();
    len_field(1, b"get", &mut verbs);
    len_field(1, b"list", &mut verbs);
    assert_eq!(
        decode_as(&format!("{META}.Verbs"), &verbs).unwrap(),
        Some(json!(["get", "list"]))
    );
}

#[test]
fn go_durations_match_time_duration_string() {
    for (nanos, text) in [
        (0, "0s"),
        (1, "1ns"),
        (1_500, "1.5µs"),
        (250_000_000, "250ms"),
        (1_500_000_000, "1.5s"),
        (3_600_000_000_000, "1h0m0s"),
        (3_723_500_000_000, "1h2m3.5s"),
        (-90_000_000_000, "-1m30s"),
    ] {
        assert_eq!(go_duration(nanos), text, "{nanos}");
    }
}

#[test]
fn inlined_structs_merge_and_empty_messages_stay() {
    // core/v1 Volume { name, VolumeSource `json:",inline"` { emptyDir: {} } }
    let volume = "k8s.io.api.core.v1.Volume";
    let mut source = Vec::new();
    len_field(
        number("k8s.io.api.core.v1.VolumeSource", "emptyDir"),
        &[],
        &mut source,
    );
    let mut bytes = Vec::new();
    len_field(number(volume, "name"), b"cache", &mut bytes);
    len_field(2, &source, &mut bytes);
    assert_eq!(
        decode_as(volume, &bytes).unwrap(),
        Some(json!({"name": "cache", "emptyDir": {}}))
    );
}

#[test]
fn negative_and_packed_integers_decode() {
    let mut bytes = Vec::new();
    let context = "k8s.io.api.core.v1.SecurityContext";
    int_field(
        number(context, "runAsUser"),
        (-5i64).cast_unsigned(),
        &mut bytes,
    );
    assert_eq!(
        decode_as(context, &bytes).unwrap(),
        Some(json!({"runAsUser": -5}))
    );

    // A packed `repeated int32` (Go writes them unpacked; other encoders may pack); a negative
    // int32 is sign-extended to ten bytes.
    let mut packed = Vec::new();
    varint(1, &mut packed);
    varint((-2i64).cast_unsigned(), &mut packed);
    let items = "k8s.io.api.batch.v1.PodFailurePolicyOnExitCodesRequirement";
    let mut bytes = Vec::new();
    len_field(number(items, "values"), &packed, &mut bytes);
    assert_eq!(
        decode_as(items, &bytes).unwrap(),
        Some(json!({"values": [1, -2]}))
    );
}

#[test]
fn unknown_fields_are_skipped() {
    let mut meta = Vec::new();
    len_field(1, b"c1", &mut meta);
    let mut raw = Vec::new();
    len_field(1, &meta, &mut raw);
    len_field(999, b"future", &mut raw);
    int_field(998, 7, &mut raw);
    let decoded = decode(&envelope("v1", "ConfigMap", &raw)).unwrap();
    assert_eq!(
        decoded,
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c1"}})
    );
}

#[test]
fn delete_options_resolve_in_any_group() {
    let mut raw = Vec::new();
    len_field(
        number(&format!("{META}.DeleteOptions"), "propagationPolicy"),
        b"Foreground",
        &mut raw,
    );
    let decoded = decode(&envelope("apps/v1", "DeleteOptions", &raw)).unwrap();
    assert_eq!(decoded["propagationPolicy"], json!("Foreground"));
}

// ---- malformed input -----------------------------------------------------------------------

fn error(body: &[u8]) -> ApiError {
    decode(body).expect_err("decoding should fail")
}

#[test]
fn malformed_bodies_are_bad_requests() {
    assert_eq!(error(b"{\"kind\":\"Pod\"}").code, 400, "bad magic");
    assert_eq!(error(b"k8s").code, 400, "short magic");
    assert!(error(b"k8s\0").message.contains("no apiVersion or kind"));

    let (pb, _) = fixture("deployment");
    // Truncated varint: a key with the continuation bit and nothing after it.
    let mut body = pb.clone();
    body.push(0x80);
    let e = error(&body);
    assert_eq!(e.code, 400);
    assert!(e.message.contains("truncated varint"), "{}", e.message);

    // Wrong wire type: ObjectMeta.name (1) as a varint.
    let mut raw = Vec::new();
    let mut meta = Vec::new();
    int_field(1, 5, &mut meta);
    len_field(1, &meta, &mut raw);
    let e = error(&envelope("v1", "ConfigMap", &raw));
    assert_eq!(e.code, 400);
    assert!(
        e.message.contains("field name with the wrong wire type"),
        "{}",
        e.message
    );

    // A length far beyond the body, and one beyond u64 range.
    let mut raw = Vec::new();
    varint(1 << 3 | 2, &mut raw);
    varint(u64::MAX, &mut raw);
    let e = error(&envelope("v1", "ConfigMap", &raw));
    assert!(
        e.message.contains("a length of 18446744073709551615 bytes"),
        "{}",
        e.message
    );
    let mut body = MAGIC.to_vec();
    body.extend_from_slice(&[
        0x0a, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f,
    ]);
    assert!(
        error(&body)
            .message
            .contains("a varint longer than 64 bits")
    );
    let mut body = MAGIC.to_vec();
    body.extend_from_slice(&[
        0x0a, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01,
    ]);
    assert!(
        error(&body)
            .message
            .contains("a varint longer than 10 bytes")
    );

    // Wire types 3 and 4 (groups) and field number 0.
    assert!(
        error(&envelope("v1", "ConfigMap", &[0x0b]))
            .message
            .contains("unsupported wire type 3")
    );
    assert!(
        error(&envelope("v1", "ConfigMap", &[0x02, 0x00]))
            .message
            .contains("invalid field number 0")
    );

    // Invalid UTF-8 in a string, invalid embedded JSON.
    let mut meta = Vec::new();
    len_field(1, &[0xff, 0xfe], &mut meta);
    let mut raw = Vec::new();
    len_field(1, &meta, &mut raw);
    assert!(
        error(&envelope("v1", "ConfigMap", &raw))
            .message
            .contains("not UTF-8")
    );
    let mut extension = Vec::new();
    len_field(1, b"{not json", &mut extension);
    let mut revision = Vec::new();
    len_field(
        number("k8s.io.api.apps.v1.ControllerRevision", "data"),
        &extension,
        &mut revision,
    );
    assert!(
        error(&envelope("apps/v1", "ControllerRevision", &revision))
            .message
            .contains("embedded JSON")
    );
}

#[test]
fn every_truncation_and_bit_flip_fails_cleanly() {
    for name in FIXTURES {
        let (pb, _) = fixture(name);
        for end in 0..pb.len() {
            // Any prefix either decodes (a message may end at a field boundary) or is a 400.
            if let Err(e) = decode(&pb[..end]) {
                assert_eq!(e.code, 400, "{name} cut at {end}: {}", e.message);
            }
        }
        for i in 0..pb.len() * 8 {
            let mut flipped = pb.clone();
            flipped[i / 8] ^= 1 << (i % 8);
            if let Err(e) = decode(&flipped) {
                assert!(matches!(e.code, 400 | 415), "{name} bit {i}: {}", e.message);
            }
        }
    }
}

#[test]
fn nesting_is_bounded() {
    // JSONSchemaProps.not is a JSONSchemaProps: nest it past the limit.
    let props = "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1.JSONSchemaProps";
    let not = number(props, "not");
    let mut bytes = Vec::new();
    for _ in 0..=MAX_DEPTH {
        let mut outer = Vec::new();
        len_field(not, &bytes, &mut outer);
        bytes = outer;
    }
    let e = decode_as(props, &bytes).unwrap_err();
    assert_eq!(e.code, 400);
    assert!(
        e.message
            .contains(&format!("nested deeper than {MAX_DEPTH}")),
        "{}",
        e.message
    );

    // RawExtensions holding protobuf objects count too.
    let mut body = envelope("v1", "ConfigMap", &[]);
    for _ in 0..=MAX_DEPTH {
        let mut extension = Vec::new();
        len_field(1, &body, &mut extension);
        let mut revision = Vec::new();
        len_field(
            number("k8s.io.api.apps.v1.ControllerRevision", "data"),
            &extension,
            &mut revision,
        );
        body = envelope("apps/v1", "ControllerRevision", &revision);
    }
    assert!(error(&body).message.contains("nested deeper"));
}

#[test]
fn kinds_outside_the_table_are_unsupported_media_types() {
    assert_eq!(error(&envelope("example.com/v1", "Widget", &[])).code, 415);
    assert_eq!(
        error(&envelope("apps.example.com/v1", "Deployment", &[])).code,
        415,
        "a CRD group is not apps"
    );
    assert_eq!(error(&envelope("v1", "NoSuchKind", &[])).code, 415);
    let mut body = envelope("v1", "ConfigMap", &[]);
    len_field(3, b"gzip", &mut body);
    assert_eq!(error(&body).code, 415);
}

#[test]
fn content_types_are_recognised() {
    assert!(is_protobuf("application/vnd.kubernetes.protobuf"));
    assert!(is_protobuf(
        "application/vnd.kubernetes.protobuf; charset=binary"
    ));
    assert!(!is_protobuf("application/json"));
    assert!(is_protobuf(
        "application/vnd.kubernetes.protobuf;stream=watch"
    ));
    assert!(!is_protobuf("application/vnd.kubernetes.protobufx"));
}

#[test]
fn the_table_is_sorted_and_consistent() {
    let messages = table::MESSAGES;
    assert!(
        messages.windows(2).all(|w| w[0].0 < w[1].0),
        "sorted by name for binary search"
    );
    for Message(name, _, fields) in messages {
        for Field(number, json_name, ty, card) in *fields {
            if let Ty::Message(index) = ty {
                assert!(schema::message(*index).is_some(), "{name}.{json_name}");
            }
            assert!(*number > 0);
            assert_eq!(
                json_name.is_empty(),
                *card == Card::Inline,
                "{name}.{number}"
            );
        }
    }
    for kind in [
        "core.v1.Namespace",
        "core.v1.Pod",
        "apps.v1.Deployment",
        "batch.v1.CronJob",
        "rbac.v1.ClusterRoleBinding",
        "networking.v1.Ingress",
        "networking.v1.NetworkPolicy",
        "policy.v1.PodDisruptionBudget",
        "scheduling.v1.PriorityClass",
        "coordination.v1.Lease",
        "events.v1.Event",
        "autoscaling.v2.HorizontalPodAutoscaler",
        "core.v1.PersistentVolumeClaim",
    ] {
        assert!(
            schema::find(&format!("k8s.io.api.{kind}")).is_some(),
            "{kind}"
        );
    }
    let external_ips = number("k8s.io.api.core.v1.ServiceSpec", "externalIPs");
    assert_eq!(external_ips, 5);
}
