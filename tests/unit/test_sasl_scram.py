"""SASL client mechanisms against the RFCs' published exchanges (no broker)."""

from __future__ import annotations

import pytest

from opskit.adapters.kafka.protocol.sasl import PlainLogin, ScramLogin


def test_plain_token_is_authzid_user_password() -> None:
    login = PlainLogin("monitor", "s3cret")
    assert login.first() == b"\0monitor\0s3cret"
    assert login.next(b"") is None


@pytest.mark.parametrize(("hash_name", "nonce", "server_first", "client_final", "server_final"), [
    # RFC 5802 section 5 (SHA-1: the same algorithm, only the hash differs)
    ("sha1", "fyko+d2lbbFgONRv9qkxdawL",
     "r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096",
     "c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts=",
     "v=rmF9pqV8S7suAoZWja4dJRkFsKQ="),
    # RFC 7677 section 3 (SCRAM-SHA-256)
    ("sha256", "rOprNGfwEbeRWgbNEkqO",
     "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
     ("c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
     "p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="),
     "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="),
])
def test_scram_matches_the_rfc_exchange(hash_name: str, nonce: str, server_first: str,
                                        client_final: str, server_final: str) -> None:
    login = ScramLogin("user", "pencil", hash_name, nonce=nonce)
    assert login.first() == f"n,,n=user,r={nonce}".encode()
    assert login.next(server_first.encode()) == client_final.encode()
    assert login.next(server_final.encode()) is None and login.verified


def test_scram_refuses_a_forged_server_signature_and_a_foreign_nonce() -> None:
    server_first = b"r=abcdefXYZ,s=QSXCR+Q6sek8bf92,i=4096"
    login = ScramLogin("user", "pencil", "sha256", nonce="abcdef")
    login.next(server_first)
    with pytest.raises(ValueError, match="signature"):
        login.next(b"v=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=")
    with pytest.raises(ValueError, match="nonce"):
        ScramLogin("user", "pencil", "sha256", nonce="abcdef").next(b"r=zzz,s=QQ==,i=4096")
    with pytest.raises(ValueError, match="iteration"):
        ScramLogin("user", "pencil", "sha256", nonce="ab").next(b"r=abX,s=QQ==,i=0")
    with pytest.raises(ValueError, match="error"):
        ScramLogin("user", "pencil", "sha256", nonce="ab").next(b"e=other-error")


def test_scram_escapes_the_username() -> None:
    assert ScramLogin("a=b,c", "p", "sha512", nonce="n").first() == b"n,,n=a=3Db=2Cc,r=n"
