#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Service-account tokens for the tests, made as the API server makes them.

  sa_token.py keygen DIR [--ec]          the issuer's signing key (DIR/issuer.key)
                                         and its JWKS (DIR/jwks.json)
  sa_token.py mint DIR --node NAME [...]  a bound token of a pod on NAME, on stdout

The API server signs with RS256 (an RSA key) or ES256 (a P-256 key); its
key id is the base64url SHA-256 of the public key's DER SubjectPublicKeyInfo
(what /openid/v1/jwks lists as "kid"). A token projected into a pod carries
aud, exp, iat, nbf, iss, jti, sub "system:serviceaccount:<ns>:<name>" and
kubernetes.io {namespace, node {name, uid}, pod {name, uid},
serviceaccount {name, uid}}.
"""
import argparse
import base64
import hashlib
import json
import os
import sys
import time
import uuid

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa


def b64u(b):
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


def kid_of(pub):
    der = pub.public_bytes(serialization.Encoding.DER,
                           serialization.PublicFormat.SubjectPublicKeyInfo)
    return b64u(hashlib.sha256(der).digest())


def jwk_of(pub):
    kid = kid_of(pub)
    if isinstance(pub, rsa.RSAPublicKey):
        n = pub.public_numbers()
        return {"use": "sig", "kty": "RSA", "kid": kid, "alg": "RS256",
                "n": b64u(n.n.to_bytes((n.n.bit_length() + 7) // 8, "big")),
                "e": b64u(n.e.to_bytes((n.e.bit_length() + 7) // 8, "big"))}
    n = pub.public_numbers()
    return {"use": "sig", "kty": "EC", "kid": kid, "crv": "P-256", "alg": "ES256",
            "x": b64u(n.x.to_bytes(32, "big")), "y": b64u(n.y.to_bytes(32, "big"))}


def load_key(d):
    with open(os.path.join(d, "issuer.key"), "rb") as f:
        return serialization.load_pem_private_key(f.read(), password=None)


def keygen(a):
    os.makedirs(a.dir, exist_ok=True)
    key = ec.generate_private_key(ec.SECP256R1()) if a.ec else \
        rsa.generate_private_key(public_exponent=65537, key_size=2048)
    with open(os.path.join(a.dir, "issuer.key"), "wb") as f:
        f.write(key.private_bytes(serialization.Encoding.PEM,
                                  serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption()))
    keys = [jwk_of(key.public_key())]
    # the keys an issuer rotated out stay listed: --also adds another set's
    for other in a.also or []:
        with open(os.path.join(other, "jwks.json")) as f:
            keys += json.load(f)["keys"]
    tmp = os.path.join(a.dir, "jwks.json.tmp")
    with open(tmp, "w") as f:
        json.dump({"keys": keys}, f)
    os.rename(tmp, os.path.join(a.dir, "jwks.json"))


def mint(a):
    key = load_key(a.dir)
    now = int(time.time()) + a.skew
    alg = "ES256" if isinstance(key, ec.EllipticCurvePrivateKey) else "RS256"
    claims = {
        "aud": [a.aud], "exp": now + a.ttl, "iat": now, "nbf": now, "iss": a.iss,
        "jti": str(uuid.uuid4()),
        "kubernetes.io": {
            "namespace": a.namespace,
            "pod": {"name": a.pod or "tollgate-" + a.node, "uid": str(uuid.uuid4())},
            "serviceaccount": {"name": a.account, "uid": str(uuid.uuid4())},
        },
        "sub": "system:serviceaccount:%s:%s" % (a.namespace, a.account),
    }
    if a.node:
        claims["kubernetes.io"]["node"] = {"name": a.node, "uid": str(uuid.uuid4())}
    sys.stdout.write(jwt.encode(claims, key, algorithm=alg,
                                headers={"kid": a.kid or kid_of(key.public_key())}))


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    k = sub.add_parser("keygen")
    k.add_argument("dir")
    k.add_argument("--ec", action="store_true")
    k.add_argument("--also", action="append")
    m = sub.add_parser("mint")
    m.add_argument("dir")
    m.add_argument("--node", default="")
    m.add_argument("--namespace", default="kube-system")
    m.add_argument("--account", default="tollgate")
    m.add_argument("--pod")
    m.add_argument("--aud", default="tollgate-allocator")
    m.add_argument("--iss", default="https://kubernetes.default.svc.cluster.local")
    m.add_argument("--ttl", type=int, default=3600)
    m.add_argument("--skew", type=int, default=0, help="seconds added to now")
    m.add_argument("--kid")
    a = p.parse_args()
    keygen(a) if a.cmd == "keygen" else mint(a)


if __name__ == "__main__":
    main()
