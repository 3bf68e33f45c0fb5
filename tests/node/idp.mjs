// A real OpenID provider for the tests: `oidc-provider` (a certified OpenID Connect implementation,
// from the npm registry), configured by the Python tests through one JSON file. Started by
// tests/support/idp.py on a free port; prints one JSON line `{"ready": true, "issuer": ...}` on
// stdout once it listens.
//
//   node idp.mjs CONFIG.json
//
// CONFIG: {
//   "port": 4567,
//   "keys": [<private JWK>, ...],             the first signs; the rest are still published
//   "resources": [{"match": "<regular expression of resource URLs>", "scope": "a b", "ttl": 300}],
//   "clients": [<client metadata>, ...],      plus `tenant`, `roles`, `token_ttl`, `token_format`
//   "accounts": {"<login>": {"tenant": "...", "roles": [...]}}
// }
//
// Access tokens: for a resource `resources` matches, a JWT (RFC 9068) with `aud` = the resource,
// signed with the first key (or opaque, for a client with `token_format: "opaque"`, for RFC 7662
// introspection). The tenant and roles claims come from the client (client credentials) or the
// account (authorization code). GET /_test/stats counts the JWKS fetches (the key-rotation and
// rate-limit tests read it).

import { readFileSync } from "node:fs";

import Provider, { errors } from "oidc-provider";

const config = JSON.parse(readFileSync(process.argv[2], "utf8"));
const issuer = `http://127.0.0.1:${config.port}`;
const accounts = config.accounts ?? {};
const resources = (config.resources ?? []).map((r) => ({ ...r, pattern: new RegExp(r.match) }));
const stats = { jwks: 0 };

function identityClaims(source) {
  const claims = {};
  if (source?.tenant !== undefined) claims.tenant = source.tenant;
  if (source?.roles !== undefined) claims.roles = source.roles;
  return claims;
}

const provider = new Provider(issuer, {
  clients: config.clients,
  jwks: { keys: config.keys },
  cookies: { keys: ["test-cookie-key-not-a-secret"] },
  extraClientMetadata: { properties: ["tenant", "roles", "token_ttl", "token_format"] },
  // The resource servers' scopes too: a client's `scope` metadata may name only scopes listed here.
  scopes: [...new Set(["openid", "offline_access", ...resources.flatMap((r) => r.scope.split(" "))])],
  async findAccount(ctx, id) {
    return { accountId: id, claims: async () => ({ sub: id }) };
  },
  async extraTokenClaims(ctx, token) {
    if (token.accountId) return identityClaims(accounts[token.accountId]);
    const client = await provider.Client.find(token.clientId);
    return identityClaims(client);
  },
  features: {
    clientCredentials: { enabled: true },
    introspection: { enabled: true },
    revocation: { enabled: true },
    devInteractions: { enabled: true }, // the plain login and consent pages a headless test submits
    resourceIndicators: {
      enabled: true,
      defaultResource: (ctx, client, oneOf) => oneOf,
      useGrantedResource: () => true,
      getResourceServerInfo(ctx, indicator, client) {
        const resource = resources.find((r) => r.pattern.test(indicator));
        if (!resource) throw new errors.InvalidTarget();
        return {
          scope: resource.scope,
          audience: indicator,
          accessTokenTTL: client.token_ttl ?? resource.ttl ?? 300,
          accessTokenFormat: client.token_format ?? "jwt",
          jwt: { sign: { alg: config.keys[0].alg ?? "RS256" } },
        };
      },
    },
  },
});

provider.use(async (ctx, next) => {
  if (ctx.path === "/jwks") stats.jwks += 1;
  if (ctx.path === "/_test/stats") {
    ctx.body = stats;
    return;
  }
  await next();
});

provider.listen(config.port, "127.0.0.1", () => {
  process.stdout.write(JSON.stringify({ ready: true, issuer }) + "\n");
});
