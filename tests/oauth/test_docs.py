"""The documentation's examples of the two modes, checked against the code: the README's token file
and its resource-server settings, and the Keycloak settings of docs/operations.md, with a token
shaped as Keycloak issues them."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from adapter.config import load_settings
from adapter.domain.identity import Principal
from adapter.entrypoints.mcp.identity import load_token_file
from adapter.entrypoints.mcp.tools import build_tools
from adapter.entrypoints.oauth import ResourceServer
from adapter.entrypoints.oauth.verify import VerifiedToken

ROOT = Path(__file__).resolve().parents[2]


def assignments(text: str) -> dict[str, str]:
    """``ADAPTER_X=value`` pairs of shell lines (``export A=a B=b``, ``A=a \\`` continuations)."""
    found: dict[str, str] = {}
    for word in shlex.split(text.replace("\\\n", " "), comments=True):
        name, eq, value = word.partition("=")
        if eq and name.startswith("ADAPTER_"):
            found[name.removeprefix("ADAPTER_").lower()] = value
    return found


def test_the_readme_token_file_is_a_valid_token_file(tmp_path: Path) -> None:
    readme = (ROOT / "README.md").read_text()
    [content] = re.findall(r"^echo '(.*)' > tokens\.json$", readme, re.M)
    path = tmp_path / "tokens.json"
    path.write_text(content)
    assert load_token_file(str(path)) == {"alice-token-at-least-16-chars": Principal("alice", "acme")}


def test_the_readme_resource_server_settings_start_a_resource_server() -> None:
    readme = (ROOT / "README.md").read_text()
    block = readme.split("# the company's identity provider", 1)[1].split("```", 1)[0]
    settings = load_settings(**assignments(block))
    server = ResourceServer(
        settings, audience=str(settings.oauth_audience), published_tools=[t.name for t in build_tools(60)]
    )
    assert server.metadata_url == "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"
    assert str(server.metadata().authorization_servers[0]) == "https://sso.example.com/realms/acme"


def test_the_keycloak_example_reads_a_keycloak_token_as_documented() -> None:
    operations = (ROOT / "docs" / "operations.md").read_text()
    section = operations.split("**Worked example: Keycloak**", 1)[1]
    block = section.split("```bash", 1)[1].split("```", 1)[0]
    settings = load_settings(**assignments(block))
    server = ResourceServer(settings, audience=str(settings.oauth_audience), published_tools=[])
    keycloak_token = {  # the claims Keycloak puts into an access token with the mappers above
        "iss": "https://sso.example.com/realms/acme",
        "aud": ["https://mcp.example.com/mcp", "account"],
        "sub": "6f1c0d3e-1b7e-4b8e-9d4a-0c2f1e6a9b11",
        "preferred_username": "alice",
        "azp": "mcp-hosts",
        "scope": "imports:read imports:write",
        "tenant": "acme",
        "realm_access": {"roles": ["adapter-operator", "offline_access"]},
    }
    verified = VerifiedToken("t", keycloak_token, ("imports:read", "imports:write"), "mcp-hosts", None)
    caller = server.rules.caller(verified)
    assert caller.principal == Principal("alice", "acme") and caller.client_id == "mcp-hosts"
    assert server.rules.role(verified) == ("operator", keycloak_token["sub"])
