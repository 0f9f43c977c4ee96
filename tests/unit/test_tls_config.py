"""The `tls {}` block, `allow_non_tls`, `https_port` and the `--tls*` flags read as
nats-server reads them; what Brook does not serve is refused with the key and its line;
the certificate helpers of server/tls.py against `cryptography`'s reading."""

from __future__ import annotations

import re
import ssl
from pathlib import Path

import pytest

from brook.config.conf import parse_conf, settings_from_conf
from brook.config.flags import parse_serve_args
from brook.config.settings import ConfigError, Settings, TLSSettings
from brook.server.tls import CertificateNames, public_key_pin, server_context
from tests.support.certs import make_certs, spki_pin

PIN = "a" * 64


def conf(text: str) -> Settings:
    return settings_from_conf(parse_conf(text))


def test_tls_block_keys() -> None:
    s = conf(
        "tls {\n cert_file: c.pem\n key_file: k.pem\n ca_file: ca.pem\n verify_and_map: true\n"
        f" timeout: '500ms'\n handshake_first: true\n min_version: '1.3'\n"
        f" pinned_certs: [{PIN.upper()}]\n}}\nallow_non_tls: true\nhttps_port: 8443"
    )
    assert s.tls == TLSSettings(
        cert_file="c.pem",
        key_file="k.pem",
        ca_file="ca.pem",
        verify=True,  # verify_and_map implies it, as in nats-server
        verify_and_map=True,
        timeout_s=0.5,
        handshake_first=True,
        min_version="1.3",
        pinned_certs=frozenset({PIN}),
    )
    assert s.allow_non_tls is True
    assert s.https_port == 8443
    assert conf("tls { cert_file: c, key_file: k, timeout: 3 }").tls.timeout_s == 3.0  # type: ignore[union-attr]


def test_https_address_as_nats_server() -> None:
    """`https: "host:port"`, as `http:` for plain monitoring (opts.go's "https" case)."""
    s = conf('tls { cert_file: c, key_file: k }\nhttps: "127.0.0.2:8443"')
    assert (s.http_host, s.https_port, s.http_port) == ("127.0.0.2", 8443, 0)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        # keys nats-server knows and Brook does not serve: the key and its line
        (
            "tls {\n cert_file: c\n key_file: k\n cipher_suites: [x]\n}",
            "tls.cipher_suites (line 4): not supported by Brook",
        ),
        (
            "tls {\n cert_file: c\n key_file: k\n\n ocsp_peer: true }",
            "tls.ocsp_peer (line 5): not supported by Brook",
        ),
        (
            "tls {\n cert_file: c\n key_file: k\n bogus: 1 }",
            "unknown configuration key 'tls.bogus' (line 4)",
        ),
        (
            "tls { cert_file: c, key_file: k, handshake_first: '300' }",
            "tls.handshake_first (line 1): field 'handshake_first''s value '300' is invalid",
        ),
        # nats-server's own texts
        (
            "tls { cert_file: 1, key_file: k }",
            "error parsing tls config, expected 'cert_file' to be filename",
        ),
        (
            "tls { cert_file: c, key_file: k, verify: 'yes' }",
            "error parsing tls config, expected 'verify' to be a boolean",
        ),
        (
            "tls { cert_file: c, key_file: k, timeout: 'soon' }",
            "error parsing tls config, 'timeout' ",
        ),
        (
            "tls { cert_file: c, key_file: k, timeout: [1] }",
            "error parsing tls config, 'timeout' wrong type",
        ),
        (
            "tls { cert_file: c, key_file: k, handshake_first: 'maybe' }",
            "field 'handshake_first''s value 'maybe' is invalid",
        ),
        (
            "tls { cert_file: c, key_file: k, min_version: '1.1' }",
            "error parsing tls config: unsupported TLS version: TLS 1.1",
        ),
        (
            "tls { cert_file: c, key_file: k, min_version: '2.0' }",
            "error parsing tls config: unknown version: 2.0",
        ),
        (
            "tls { cert_file: c, key_file: k, pinned_certs: [abc] }",
            "'pinned_certs' key abc does not look like hex-encoded sha256",
        ),
        ("tls { key_file: k }", "tls: missing 'cert_file' in TLS configuration"),
        ("tls { cert_file: c }", "tls: missing 'key_file' in TLS configuration"),
        ("https_port: 8443", "https_port: TLS cert and key required for HTTPS"),
        (
            "http_port: 8222\nhttps_port: 8443\ntls { cert_file: c, key_file: k }",
            "can't specify both HTTP (8222) and HTTPs (8443) ports",
        ),
    ],
)
def test_tls_errors(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        conf(text)


def test_a_certificate_only_user_needs_verify_and_map() -> None:
    s = conf(
        "tls { cert_file: c, key_file: k, verify_and_map: true }\n"
        'authorization { users: [{user: "CN=a"}] }'
    )
    assert s.auth.users[0].password == ""


def test_tls_flags_as_nats_server() -> None:
    s = parse_serve_args(
        ["--tls", "--tlscert", "c.pem", "--tlskey", "k.pem", "--tlscacert", "ca.pem", "--tlsverify"]
    )
    assert s.tls == TLSSettings(cert_file="c.pem", key_file="k.pem", ca_file="ca.pem", verify=True)
    # any -tls* flag turns TLS on; without a certificate that is nats-server's error
    with pytest.raises(ConfigError, match="TLS Server certificate must be present and valid"):
        parse_serve_args(["--tlsverify"])
    with pytest.raises(ConfigError, match="TLS Server private key must be present and valid"):
        parse_serve_args(["--tlscert", "c.pem"])


def test_https_port_flag() -> None:
    argv = ["--tls", "--tlscert", "c", "--tlskey", "k"]
    assert parse_serve_args([*argv, "-ms", "8443"]).https_port == 8443
    assert parse_serve_args([*argv, "--https_port=-1"]).https_port == -1


def test_tls_flags_override_the_file_and_tls_false_disables(tmp_path: Path) -> None:
    path = tmp_path / "s.conf"
    path.write_text("tls { cert_file: a, key_file: b, ca_file: c, verify: true, timeout: 5 }")
    s = parse_serve_args(["-c", str(path), "--tlscert", "x", "--tlskey", "y"])
    assert s.tls == TLSSettings(cert_file="x", key_file="y", timeout_s=5.0)
    assert parse_serve_args(["-c", str(path), "-tls=false", "--tlscert", "x"]).tls is None


def test_context_errors_name_the_problem(tmp_path: Path) -> None:
    certs = make_certs(tmp_path)
    with pytest.raises(ConfigError, match="error parsing X509 certificate/key pair"):
        server_context(TLSSettings(cert_file=str(certs.cert_file), key_file=str(certs.ca_file)))
    bad_ca = tmp_path / "bad-ca.pem"
    bad_ca.write_text("not a certificate")
    with pytest.raises(ConfigError, match="failed to parse root ca certificate"):
        server_context(
            TLSSettings(
                cert_file=str(certs.cert_file), key_file=str(certs.key_file), ca_file=str(bad_ca)
            )
        )
    context = server_context(
        TLSSettings(
            cert_file=str(certs.cert_file),
            key_file=str(certs.key_file),
            verify=True,
            min_version="1.3",
        )
    )
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert context.minimum_version == ssl.TLSVersion.TLSv1_3


def test_public_key_pin_is_the_spki_sha256(tmp_path: Path) -> None:
    certs = make_certs(tmp_path)
    for path in (certs.cert_file, certs.client("someone").cert_file):
        der = ssl.PEM_cert_to_DER_cert(path.read_text())
        assert public_key_pin(der) == spki_pin(path)


def test_certificate_names_in_nats_servers_order_and_dn_forms() -> None:
    cert = {
        "subject": (
            (("countryName", "US"),),
            (("organizationName", "Synadia, Inc"),),
            (("commonName", "app"),),
        ),
        "subjectAltName": (
            ("DNS", "app.example"),
            ("email", "app@example.com"),
            ("URI", "spiffe://x/app"),
        ),
    }
    names = CertificateNames.of(cert)
    assert names.distinguished_name == "CN=app,O=Synadia\\, Inc,C=US"
    assert names.candidates() == [
        "app@example.com",
        "app.example",
        "spiffe://x/app",
        names.distinguished_name,
    ]
    assert names.matches_dn(
        "C=US, o=Synadia\\, Inc, CN=app"
    )  # another order, spaces, case of types
    assert not names.matches_dn("CN=app,O=Other,C=US")
    assert not names.matches_dn("not a dn")


def test_the_commented_tls_example_loads() -> None:
    """docs/examples/brook.conf shows the TLS keys commented out (they need real files):
    uncommented, they are what this test reads."""
    sample = Path(__file__).resolve().parents[2] / "docs" / "examples" / "brook.conf"
    lines = sample.read_text().splitlines()
    start = lines.index("# tls {")
    end = next(i for i, line in enumerate(lines) if line.startswith("# https_port"))
    s = conf("\n".join(line.removeprefix("# ") for line in lines[start : end + 1]))
    assert s.tls is not None
    assert (s.tls.verify, s.tls.timeout_s, s.https_port) == (True, 2.0, 8443)


@pytest.mark.parametrize(
    ("value", "first", "fallback_s"),
    [("auto", True, 0.05), ("AUTO_FALLBACK", True, 0.05), ("'300ms'", True, 0.3),
     ("'0s'", True, 0.0), ("'-1s'", True, 0.0), ("on", True, 0.0), ("false", False, 0.0)],
)  # fmt: skip
def test_handshake_first_fallback_delays_as_nats_server_reads_them(
    value: str, first: bool, fallback_s: float
) -> None:
    """`auto` is nats-server's 50 ms; a Go duration (a unit required) is the delay; a
    zero or negative one means no fallback."""
    tls = settings_from_conf(
        parse_conf(f"tls {{ cert_file: c, key_file: k, handshake_first: {value} }}")
    ).tls
    assert tls is not None
    assert (tls.handshake_first, tls.handshake_first_fallback_s) == (first, fallback_s)
