"""Independent bucket client for the capstan-source bucket tests.

S3 through boto3 (shipped with moto), Azure Blob through the REST API with Shared Key
signing from the standard library. One JSON request on stdin; JSON result on stdout.
"""

import base64
import datetime
import hashlib
import hmac
import json
import sys
import urllib.parse
import urllib.request


def s3_client(req, access_key, secret_key, service="s3"):
    import boto3

    return boto3.client(
        service,
        endpoint_url=req["endpoint"],
        region_name="us-east-1",
        aws_access_key_id=access_key,
        aws_secret_access_key=secret_key,
    )


def s3_setup(req):
    # moto counts these first requests as unauthenticated (INITIAL_NO_AUTH_ACTION_COUNT).
    iam = s3_client(req, "bootstrap", "bootstrap", "iam")
    iam.create_user(UserName="capstan")
    key = iam.create_access_key(UserName="capstan")["AccessKey"]
    iam.put_user_policy(
        UserName="capstan",
        PolicyName="all",
        PolicyDocument=json.dumps(
            {
                "Version": "2012-10-17",
                "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}],
            }
        ),
    )
    s3 = s3_client(req, key["AccessKeyId"], key["SecretAccessKey"])
    s3.create_bucket(Bucket=req["bucket"])
    return {"access_key": key["AccessKeyId"], "secret_key": key["SecretAccessKey"]}


def s3_put(req):
    s3 = s3_client(req, req["access_key"], req["secret_key"])
    etags = {}
    for key, content in req["objects"].items():
        response = s3.put_object(Bucket=req["bucket"], Key=key, Body=content.encode())
        etags[key] = response["ETag"].strip('"')
    return etags


def s3_delete(req):
    s3 = s3_client(req, req["access_key"], req["secret_key"])
    for key in req["keys"]:
        s3.delete_object(Bucket=req["bucket"], Key=key)
    return {}


def azure_request(req, method, path, query, body=b"", headers=None):
    account = req["account"]
    headers = dict(headers or {})
    headers["x-ms-date"] = datetime.datetime.now(datetime.timezone.utc).strftime(
        "%a, %d %b %Y %H:%M:%S GMT"
    )
    headers["x-ms-version"] = "2021-08-06"
    length = str(len(body)) if body else ""
    url_path = "/" + account + path
    canonical_headers = "".join(
        f"{k}:{v}\n" for k, v in sorted(headers.items()) if k.startswith("x-ms-")
    )
    canonical_resource = "/" + account + urllib.parse.quote(url_path)
    for k in sorted(query):
        canonical_resource += f"\n{k}:{query[k]}"
    content_type = headers.get("Content-Type", "")
    to_sign = "\n".join(
        [method, "", "", length, "", content_type, "", "", "", "", "", ""]
    ) + "\n" + canonical_headers + canonical_resource
    key = base64.b64decode(req["key"])
    signature = base64.b64encode(
        hmac.new(key, to_sign.encode(), hashlib.sha256).digest()
    ).decode()
    headers["Authorization"] = f"SharedKey {account}:{signature}"
    url = req["endpoint"] + urllib.parse.quote(url_path)
    if query:
        url += "?" + urllib.parse.urlencode(query)
    request = urllib.request.Request(url, data=body or None, method=method, headers=headers)
    with urllib.request.urlopen(request) as response:
        return response.status


def azure_create(req):
    azure_request(req, "PUT", "/" + req["container"], {"restype": "container"})
    return {}


def azure_put(req):
    for key, content in req["objects"].items():
        azure_request(
            req,
            "PUT",
            "/" + req["container"] + "/" + key,
            {},
            content.encode(),
            {"x-ms-blob-type": "BlockBlob", "Content-Type": "application/octet-stream"},
        )
    return {}


def azure_sas(req):
    # An account SAS (read + list on blob objects and containers), valid for an hour.
    expiry = (
        datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=1)
    ).strftime("%Y-%m-%dT%H:%M:%SZ")
    fields = {"sv": "2021-08-06", "ss": "b", "srt": "co", "sp": "rl", "se": expiry, "spr": "http,https"}
    to_sign = "\n".join(
        [req["account"], fields["sp"], fields["ss"], fields["srt"], "", fields["se"], "",
         fields["spr"], fields["sv"], "", ""]
    )
    key = base64.b64decode(req["key"])
    fields["sig"] = base64.b64encode(
        hmac.new(key, to_sign.encode(), hashlib.sha256).digest()
    ).decode()
    return {"sas": urllib.parse.urlencode(fields)}


OPS = {
    "azure-sas": azure_sas,
    "s3-setup": s3_setup,
    "s3-put": s3_put,
    "s3-delete": s3_delete,
    "azure-create": azure_create,
    "azure-put": azure_put,
}

if __name__ == "__main__":
    request = json.load(sys.stdin)
    print(json.dumps(OPS[request["op"]](request)))
