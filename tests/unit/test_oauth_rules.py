"""Resource-server mode's rules that need no provider: settings that refuse to start, the scope
table (every tool guarded, with or without a name prefix), claims to principals, keys to algorithms."""

from __future__ import annotations

import json

import pytest
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

from adapter.config import ConfigError, load_settings
from adapter.domain.identity import Principal
from adapter.entrypoints.mcp.tools import build_tools
from adapter.entrypoints.oauth import check_oauth_settings
from adapter.entrypoints.oauth.callers import ClaimRules, claim
from adapter.entrypoints.oauth.keys import UnknownKey, key_for, metadata_urls
from adapter.entrypoints.oauth.scopes import ScopePolicy
from adapter.entrypoints.oauth.verify import TokenRefused, VerifiedToken
from adapter.entrypoints.oauth.wiring import CheckedTokens

ISSUER = "https://idp.example.com"


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"oauth_issuer": "http://idp.example.com"}, "must be an https:// URL"),
        ({"oauth_issuer": ISSUER, "oauth_algorithms": "RS256,none"}, "'none' is not allowed"),
        ({"oauth_issuer": ISSUER, "oauth_algorithms": "HS256"}, "'HS256' is not allowed"),
        ({"oauth_issuer": ISSUER, "oauth_scope_commit": "imports commit"}, "ADAPTER_OAUTH_SCOPE_COMMIT"),
        ({"oauth_issuer": ISSUER, "oauth_scope_read": 'a"b'}, "ADAPTER_OAUTH_SCOPE_READ"),
        (
            {"oauth_audience": "https://mcp.example.com/mcp"},
            "ADAPTER_OAUTH_AUDIENCE: needs ADAPTER_OAUTH_ISSUER",
        ),
        ({"oauth_issuer": ISSUER, "tokens": "/tmp/tokens.json"}, "exclude each other"),
        (
            {"oauth_issuer": ISSUER, "oauth_introspection_url": ISSUER + "/introspect"},
            "ADAPTER_OAUTH_CLIENT_ID",
        ),
    ],
)
def test_settings_that_do_not_fit_stop_start_up_with_one_line(settings: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        check_oauth_settings(load_settings(**settings))


def test_resource_server_mode_is_not_local_mode() -> None:
    assert load_settings(tokens=None).local_mode
    oauth = load_settings(tokens=None, oauth_issuer=ISSUER)
    assert oauth.resource_server and not oauth.local_mode


@pytest.mark.parametrize("prefix", ["", "erp_"])
def test_every_published_tool_needs_its_scope(prefix: str) -> None:
    settings = load_settings(tool_prefix=prefix, oauth_scope_commit="erp:commit")
    policy = ScopePolicy.from_settings(settings, [prefix + tool.name for tool in build_tools(3600)])
    needed = {name.removeprefix(prefix): policy.needed("tools/call", name) for name in policy.tools}
    assert needed == {
        "begin_import": "imports:write",
        "add_record": "imports:write",
        "add_records": "imports:write",
        "replace_records": "imports:write",
        "commit_import": "erp:commit",
        "abort_import": "imports:abort",
        "get_import_status": "imports:read",
        "get_operation_status": "imports:read",
    }
    assert policy.needed("tools/call", "begin_import" if prefix else "no_such_tool") is None  # "Unknown tool"
    assert policy.needed("resources/read", None) == "imports:read"
    assert policy.needed("subscriptions/listen", None) == "imports:read"
    assert policy.needed("tasks/get", None) == "erp:commit"  # a task follows its commit
    assert policy.needed("server/discover", None) is None
    assert policy.supported == ["imports:read", "imports:write", "erp:commit", "imports:abort"]


def test_a_tool_without_a_scope_stops_start_up() -> None:
    with pytest.raises(RuntimeError, match="'export_everything' has no scope"):
        ScopePolicy.from_settings(load_settings(), ["begin_import", "export_everything"])


def verified(**claims: object) -> VerifiedToken:
    return VerifiedToken("t", claims, ("imports:read",), "client-1", None)


def test_claims_name_the_principal_and_tenant_by_name_path_or_url() -> None:
    rules = ClaimRules(ISSUER, "sub", "tenant", "scope", "adapter:operator", "adapter:viewer")
    assert rules.caller(verified(sub="alice", tenant="acme")).principal == Principal("alice", "acme")
    nested = {"realm_access": {"roles": ["a"]}, "https://example.com/tenant": "acme"}
    assert claim(nested, "realm_access.roles") == ["a"]
    assert claim(nested, "https://example.com/tenant") == "acme"
    assert claim(nested, "realm_access.missing") is None
    by_url = ClaimRules(ISSUER, "sub", "https://example.com/tenant", "scope", "o", "v")
    assert by_url.caller(verified(sub="bob", **nested)).principal == Principal("bob", "acme")
    single = ClaimRules(ISSUER, "sub", "iss", "scope", "o", "v")  # one tenant: the issuer
    assert single.caller(verified(sub="bob", iss=ISSUER)).principal.tenant == ISSUER
    for bad in (verified(tenant="acme"), verified(sub="a", tenant=""), verified(sub="a\x00", tenant="t")):
        with pytest.raises(TokenRefused):
            rules.caller(bad)


def test_roles_from_scopes_or_from_a_claim() -> None:
    rules = ClaimRules(ISSUER, "sub", "tenant", "scope", "adapter:operator", "adapter:viewer")
    assert rules.role(VerifiedToken("t", {"sub": "op"}, ("adapter:operator",), "c", None)) == (
        "operator",
        "op",
    )
    assert rules.role(VerifiedToken("t", {"sub": "v"}, ("adapter:viewer",), "c", None)) == ("viewer", "v")
    assert rules.role(verified(sub="x")) is None
    groups = ClaimRules(ISSUER, "sub", "tenant", "groups", "ops", "readers")
    assert groups.role(verified(sub="x", groups=["readers", "ops"])) == ("operator", "x")
    assert groups.role(verified(sub="x", groups="readers")) == ("viewer", "x")


def test_the_metadata_is_looked_for_where_oidc_and_rfc_8414_put_it() -> None:
    assert metadata_urls("https://idp.example.com") == [
        "https://idp.example.com/.well-known/openid-configuration",
        "https://idp.example.com/.well-known/oauth-authorization-server",
    ]
    assert metadata_urls("https://idp.example.com/realms/acme/") == [
        "https://idp.example.com/realms/acme/.well-known/openid-configuration",
        "https://idp.example.com/.well-known/oauth-authorization-server/realms/acme",
    ]


def test_a_key_verifies_only_the_algorithms_it_fits() -> None:
    rsa_jwk = json.loads(
        RSAAlgorithm.to_jwk(rsa.generate_private_key(public_exponent=65537, key_size=2048).public_key())
    )
    ec_jwk = json.loads(ECAlgorithm.to_jwk(ec.generate_private_key(ec.SECP256R1()).public_key()))
    assert key_for({**rsa_jwk, "kid": "r"}, "PS256").algorithm_name == "PS256"
    assert key_for({**ec_jwk, "kid": "e"}, "ES256").algorithm_name == "ES256"
    for jwk, alg in [
        ({**rsa_jwk, "kid": "r1", "alg": "RS256"}, "PS256"),  # the key says which one it is for
        ({**rsa_jwk, "kid": "r2"}, "ES256"),
        ({**ec_jwk, "kid": "e1"}, "ES384"),  # a P-256 key is not for ES384
        ({**ec_jwk, "kid": "e2"}, "RS256"),
    ]:
        with pytest.raises(UnknownKey):
            key_for(jwk, alg)


def test_a_checked_token_is_believed_until_it_expires_and_never_longer_than_the_lifetime() -> None:
    now = [1000.0]
    checked = CheckedTokens(leeway=5, lifetime=60, size=2, clock=lambda: now[0])
    caller = ClaimRules(ISSUER, "sub", "tenant", "scope", "o", "v").caller(
        VerifiedToken("t", {"sub": "a", "tenant": "t"}, (), "c", 1010)
    )
    checked.put("short", caller)  # exp 1010, leeway 5: until 1015
    checked.put("long", caller.model_copy(update={"expires_at": 5000}))  # the lifetime: until 1060
    now[0] = 1014.9
    assert checked.get("short") is caller and checked.get("long") is not None
    now[0] = 1015.0
    assert checked.get("short") is None
    now[0] = 1060.0
    assert checked.get("long") is None
    lasting = caller.model_copy(update={"expires_at": None})
    for name in ("a", "b", "c"):
        checked.put(name, lasting)
    assert checked.get("a") is None and checked.get("c") is lasting  # at most two kept: the oldest went
