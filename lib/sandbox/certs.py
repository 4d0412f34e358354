"""TLS certificates for a Docker host Ash reaches over the network (`ash sandbox certs`).

dockerd with `--tlsverify` accepts only clients whose certificate its CA signed, and the docker
SDK (DOCKER_TLS_VERIFY=1, DOCKER_CERT_PATH) accepts only a server its CA signed for the host name
it dialled. One CA signs both; its key is needed only to sign, so it stays with whoever runs this
command and never goes to either machine. Made with `cryptography` (ECDSA P-256).
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALID_DAYS = 825


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _builder(subject: str, issuer: x509.Name, public_key, days: int) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
    )


def _san(names: list[str]) -> x509.SubjectAlternativeName:
    entries: list[x509.GeneralName] = []
    for name in names:
        try:
            entries.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            entries.append(x509.DNSName(name))
    return x509.SubjectAlternativeName(entries)


def _write(path: Path, data: bytes, private: bool) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = 0o600 if private else 0o644
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    os.chmod(path, mode)  # an existing file keeps its old mode through O_CREAT


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    encoding, pkcs8 = serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8
    return key.private_bytes(encoding, pkcs8, serialization.NoEncryption())


def _pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def make_certificates(out: Path, app: str, extra_names: list[str] | None = None, days: int = VALID_DAYS) -> dict:
    """Write `ca/` (ca.pem, ca-key.pem: keep it off both machines), `server/` (ca.pem,
    server-cert.pem, server-key.pem for dockerd on `<app>.internal`) and `client/` (ca.pem,
    cert.pem, key.pem: Ash's DOCKER_CERT_PATH) under `out`; returns the folders."""
    server_names = [f"{app}.internal", *(extra_names or [])]
    ca_key = _key()
    ca_name = _name(f"{app} sandbox CA")
    ca = (
        _builder(f"{app} sandbox CA", ca_name, ca_key.public_key(), days)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    server_key, client_key = _key(), _key()
    server = (
        _builder(server_names[0], ca_name, server_key.public_key(), days)
        .add_extension(_san(server_names), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    client = (
        _builder("ash", ca_name, client_key.public_key(), days)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    folders = {"ca": out / "ca", "server": out / "server", "client": out / "client"}
    _write(folders["ca"] / "ca.pem", _pem(ca), private=False)
    _write(folders["ca"] / "ca-key.pem", _pem_key(ca_key), private=True)
    for side, cert, key, names in (
        ("server", server, server_key, ("server-cert.pem", "server-key.pem")),
        ("client", client, client_key, ("cert.pem", "key.pem")),
    ):
        _write(folders[side] / "ca.pem", _pem(ca), private=False)
        _write(folders[side] / names[0], _pem(cert), private=False)
        _write(folders[side] / names[1], _pem_key(key), private=True)
    return folders
