// A real OpenID Provider for the tests (panva's certified oidc-provider): discovery, JWKS, the
// authorization code flow with PKCE, and users in groups read from a JSON file at each sign-in (a
// test moves a user between groups and signs in again). Its dev interactions (a login form taking
// the user's name and any password, then a consent page) are what a browser fills in.
//
//   node provider.js --port P --issuer http://127.0.0.1:P --users users.json \
//        --client-id fleet --client-secret S --redirect-uri http://127.0.0.1:Q/oidc/callback/
import fs from "node:fs";
import Provider from "oidc-provider";

const args = Object.fromEntries(
  process.argv.slice(2).reduce((pairs, value, i, all) => (i % 2 === 0 ? [...pairs, [value.replace(/^--/, ""), all[i + 1]]] : pairs), []),
);

function users() {
  return JSON.parse(fs.readFileSync(args.users, "utf8"));
}

const provider = new Provider(args.issuer, {
  clients: [
    {
      client_id: args["client-id"],
      client_secret: args["client-secret"],
      redirect_uris: [args["redirect-uri"]],
      grant_types: ["authorization_code"],
      response_types: ["code"],
      token_endpoint_auth_method: "client_secret_basic",
    },
  ],
  pkce: { required: () => true },
  claims: { openid: ["sub"], email: ["email"], profile: ["preferred_username", "name"], groups: ["groups"] },
  scopes: ["openid", "email", "profile", "groups"],
  conformIdTokenClaims: false, // the claims asked for go into the ID token, where the relying party reads them
  features: { devInteractions: { enabled: true } },
  cookies: { keys: ["test-cookie-key-not-secret"] },
  ttl: { Session: 600, Interaction: 600, Grant: 600, AccessToken: 600, IdToken: 600, AuthorizationCode: 60 },
  async findAccount(ctx, id) {
    const user = users()[id];
    if (!user) return undefined;
    return {
      accountId: id,
      async claims() {
        const now = users()[id] || {};
        return { sub: id, preferred_username: id, name: id, email: `${id}@example.com`, groups: now.groups || [] };
      },
    };
  },
});
provider.proxy = false;
provider.listen(Number(args.port), "127.0.0.1", () => {
  process.stdout.write(`listening ${args.issuer}\n`);
});
