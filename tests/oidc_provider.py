"""A real OpenID provider for the tests: pyop (IdentityPython's provider library, the one SATOSA
runs on) behind a WSGI server of its own on a local port, with a login form a browser fills in.

It issues what a provider issues — discovery, JWKS, codes, signed ID tokens, userinfo — and a
test can make it misbehave as a hostile or broken provider would (`provider.mischief`):

- `"signature"`: the ID token signed by a key the provider does not publish (same `kid`);
- `"audience"`: the ID token issued for another client;
- `"expired"`: the ID token already expired when issued (`exp` five minutes ago);
- `"nonce"`: the ID token answering another sign-in (its nonce another).
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import ssl
import tempfile
import threading
import time
from html import escape
from pathlib import Path
from urllib.parse import parse_qs, urlencode
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import jwt
from Cryptodome.PublicKey import RSA
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from jwkest.jwk import RSAKey
from pyop.authz_state import AuthorizationState
from pyop.exceptions import InvalidAuthenticationRequest, OAuthError
from pyop.provider import Provider
from pyop.subject_identifier import HashBasedSubjectIdentifierFactory
from pyop.userinfo import Userinfo

CLIENT_ID = "memory-portal"
CLIENT_SECRET = "test-client-secret-1234567890"
KID = "test-key-1"


class _Quiet(WSGIRequestHandler):
    def log_message(self, *args):  # no request lines in the test output
        pass


class _ThreadedServer(WSGIServer):
    daemon_threads = True

    def process_request(self, request, client_address):
        threading.Thread(target=self._handle, args=(request, client_address), daemon=True).start()

    def _handle(self, request, client_address):
        try:
            self.finish_request(request, client_address)
        except Exception:
            self.handle_error(request, client_address)
        finally:
            self.shutdown_request(request)


def _certificates(directory: Path) -> tuple[Path, Path, Path]:
    """A certificate authority of the test's own and a certificate for 127.0.0.1 it signed:
    (the authority's PEM, the server's certificate, the server's key). OpenID Connect wants
    its issuer on https; the server trusts this authority as it would a company's own."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ca_name = x509.Name([x509.NameAttribute(x509.NameOID.COMMON_NAME, "Test IdP authority")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False),
            critical=True,
        )
        .sign(ca_key, hashes.SHA256())
    )
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    leaf = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(x509.NameOID.COMMON_NAME, "127.0.0.1")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    paths = directory / "ca.pem", directory / "server.pem", directory / "server.key"
    paths[0].write_bytes(ca.public_bytes(pem))
    paths[1].write_bytes(leaf.public_bytes(pem))
    paths[2].write_bytes(
        key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return paths


class OpenIDProvider:
    """Users are `{login: claims}`; `redirect_uris` the client's registered callbacks. It
    serves https with a certificate of its own authority, `ca_bundle` (point
    REQUESTS_CA_BUNDLE at it)."""

    def __init__(self, users: dict[str, dict], redirect_uris: list[str]):
        self.users = users
        self.redirect_uris = redirect_uris
        self.mischief: str | None = None
        self.tokens_issued = 0
        self._server = make_server(
            "127.0.0.1", 0, self._app, server_class=_ThreadedServer, handler_class=_Quiet
        )
        self._dir = tempfile.TemporaryDirectory(prefix="test-idp-")
        ca_bundle, cert, key_file = _certificates(Path(self._dir.name))
        self.ca_bundle = str(ca_bundle)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key_file)
        self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
        self.issuer = f"https://127.0.0.1:{self._server.server_port}"
        self._private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        pem = self._private.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        signing_key = RSAKey(key=RSA.import_key(pem), alg="RS256", kid=KID, use="sig")
        configuration = {
            "issuer": self.issuer,
            "authorization_endpoint": f"{self.issuer}/authorize",
            "token_endpoint": f"{self.issuer}/token",
            "userinfo_endpoint": f"{self.issuer}/userinfo",
            "jwks_uri": f"{self.issuer}/jwks",
            "response_types_supported": ["code"],
            "response_modes_supported": ["query"],
            "grant_types_supported": ["authorization_code"],
            "subject_types_supported": ["public"],
            "scopes_supported": ["openid", "email", "profile"],
            "token_endpoint_auth_methods_supported": ["client_secret_post", "client_secret_basic"],
            "id_token_signing_alg_values_supported": ["RS256"],
            "code_challenge_methods_supported": ["S256"],
            "claims_parameter_supported": True,
        }
        clients = {
            CLIENT_ID: {
                "client_secret": CLIENT_SECRET,
                "redirect_uris": list(redirect_uris),
                "response_types": ["code"],
                "token_endpoint_auth_method": "client_secret_post",
            }
        }
        self.provider = Provider(
            signing_key,
            configuration,
            AuthorizationState(HashBasedSubjectIdentifierFactory("test-salt")),
            clients,
            Userinfo(users),
            extra_scopes={"groups": ["groups"]},
        )
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    # --- running --------------------------------------------------------------------------------

    def start(self) -> OpenIDProvider:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._dir.cleanup()

    def settings(self) -> dict:
        """The Django settings that point the server at this provider."""
        return {
            "OIDC_ISSUER": self.issuer,
            "SSO_ENABLED": True,
            "OIDC_PROVIDER_NAME": "Test IdP",
            "OIDC_RP_CLIENT_ID": CLIENT_ID,
            "OIDC_RP_CLIENT_SECRET": CLIENT_SECRET,
            "OIDC_RP_SCOPES": "openid email profile groups",
            "OIDC_GROUPS_CLAIM": "groups",
        }

    # --- the WSGI application -------------------------------------------------------------------

    def _app(self, environ, start_response):
        path = environ["PATH_INFO"]
        method = environ["REQUEST_METHOD"]
        query = environ.get("QUERY_STRING", "")
        body = ""
        if method == "POST":
            length = int(environ.get("CONTENT_LENGTH") or 0)
            body = environ["wsgi.input"].read(length).decode()
        headers = {
            key[5:].replace("_", "-").title(): value
            for key, value in environ.items()
            if key.startswith("HTTP_")
        }
        try:
            if path == "/.well-known/openid-configuration":
                return _json(start_response, self.provider.provider_configuration.to_dict())
            if path == "/jwks":
                return _json(start_response, self.provider.jwks)
            if path == "/authorize" and method == "GET":
                return self._login_form(start_response, query)
            if path == "/authorize" and method == "POST":
                return self._authorize(start_response, body)
            if path == "/token" and method == "POST":
                return self._token(start_response, body, headers)
            if path == "/userinfo":
                answer = self.provider.handle_userinfo_request(body or query, headers)
                return _json(start_response, answer.to_dict())
        except InvalidAuthenticationRequest as exc:
            return _page(start_response, "400 Bad Request", f"Bad request: {exc}")
        except OAuthError as exc:
            return _json(
                start_response,
                {"error": exc.oauth_error, "error_description": str(exc)},
                status="400 Bad Request",
            )
        return _page(start_response, "404 Not Found", "Not found")

    def _login_form(self, start_response, query: str):
        self.provider.parse_authentication_request(query)  # refuses a bad request first
        form = (
            '<main><h1>Test IdP</h1><form method="post" action="/authorize">'
            f'<input type="hidden" name="request" value="{escape(query)}">'
            '<label for="login">Login</label><input id="login" name="login">'
            '<button type="submit">Sign in</button></form></main>'
        )
        return _page(start_response, "200 OK", form)

    def _authorize(self, start_response, body: str):
        form = {k: v[0] for k, v in parse_qs(body).items()}
        request = self.provider.parse_authentication_request(form.get("request", ""))
        login = form.get("login", "")
        if login not in self.users:
            return _page(start_response, "403 Forbidden", "Unknown login")
        answer = self.provider.authorize(request, login)
        location = answer.request(request["redirect_uri"], False)
        start_response("302 Found", [("Location", location)])
        return [b""]

    def _token(self, start_response, body: str, headers: dict):
        answer = self.provider.handle_token_request(body, headers).to_dict()
        self.tokens_issued += 1
        if self.mischief and "id_token" in answer:
            answer["id_token"] = self._misbehave(answer["id_token"])
        return _json(start_response, answer)

    def _misbehave(self, id_token: str) -> str:
        claims = jwt.decode(id_token, options={"verify_signature": False})
        key = self._private
        if self.mischief == "signature":
            key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        elif self.mischief == "audience":
            claims["aud"] = "another-application"
        elif self.mischief == "nonce":
            claims["nonce"] = "a-nonce-of-another-sign-in"
        elif self.mischief == "expired":
            claims["iat"] = int(time.time()) - 3900
            claims["exp"] = int(time.time()) - 300
        return jwt.encode(claims, key, algorithm="RS256", headers={"kid": KID})

    # --- a sign-in without a browser ------------------------------------------------------------

    def sign_in(self, authorize_url: str, login: str) -> str:
        """What a browser does at the provider: open the authorization URL, submit the login
        form. Returns the callback URL the provider redirects to."""
        import requests

        page = requests.get(authorize_url, timeout=10, verify=self.ca_bundle)
        page.raise_for_status()
        query = authorize_url.split("?", 1)[1]
        answer = requests.post(
            f"{self.issuer}/authorize",
            data=urlencode({"request": query, "login": login}),
            headers={"Content-Type": "application/x-www-form-urlencoded"},
            allow_redirects=False,
            timeout=10,
            verify=self.ca_bundle,
        )
        assert answer.status_code == 302, answer.text
        return answer.headers["Location"]


def _json(start_response, payload, status: str = "200 OK"):
    start_response(status, [("Content-Type", "application/json")])
    return [json.dumps(payload).encode()]


def _page(start_response, status: str, html: str):
    start_response(status, [("Content-Type", "text/html; charset=utf-8")])
    head = '<!doctype html><html lang="en"><title>Test IdP</title><link rel="icon" href="data:,">'
    return [f"{head}{html}".encode()]
