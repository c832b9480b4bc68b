/**
 * Authentication and permissions: the header pair (AUTH-HDR-1), 401 for every bad credential (AUTH-401-1), the
 * key prefix (AUTH-KEY-1), secrets never exposed (AUTH-SEC-1), the permission matrix with its exact 403 body
 * (AUTH-PERM-1), permission changes (AUTH-PERM-2), non-client-scoped credentials (AUTH-SCOPE-1) and the order of
 * checks (AUTH-ORDER-1).
 */
import { defineCheck, type CheckContext } from "../Check.js"
import { hexOf, sha256 } from "../Digest.js"
import { allPermissions, endpointPath, endpoints, permissions, type Endpoint } from "../Endpoints.js"
import type { Tenant } from "../Fixtures.js"
import { RelayClient } from "../RelayClient.js"
import { isRecord } from "../Shape.js"
import type { HttpResult } from "../Transport.js"
import { randomUuid } from "./records.js"

/** A plausible body per POST endpoint, so that only the credential or permission decides the answer. */
const plausibleBody = (e: Endpoint, context: CheckContext, ids: { account?: string; other?: string }): Record<string, unknown> | undefined => {
  const asset = context.fixtures.asset()
  switch (e.key) {
    case "createAccount":
      return { name: context.fixtures.uniqueName(), workspace: "custody", assetId: asset.assetId }
    case "approveAccount":
    case "rejectAccount":
      return { accountId: ids.account ?? randomUuid() }
    case "calculateFee":
    case "initiateTransaction":
      return { sourceAccountId: ids.account ?? randomUuid(), destinationId: ids.other ?? randomUuid(), destinationType: "internal", amount: "1", assetType: asset.assetId }
    case "createWhitelist":
      return { name: context.fixtures.uniqueName("wl"), address: asset.sampleAddresses.valid[0] ?? "", assetType: asset.assetId }
    default:
      return undefined
  }
}

const call = (client: RelayClient, e: Endpoint, context: CheckContext, ids: { account?: string; other?: string } = {}): Promise<HttpResult> =>
  client.raw(e.method, endpointPath(e, ids.account ?? randomUuid()), plausibleBody(e, context, ids))

export const headerPair = defineCheck({
  id: "auth.headers.required",
  title: "Both x-api-key and x-api-secret are required; nothing else authenticates",
  requirements: ["AUTH-HDR-1", "AUTH-401-1"],
  tags: ["auth"],
  needs: [],
  async run(context) {
    const tenant = await context.fixtures.tenant()
    const both = await tenant.client.listAccounts()
    context.expectStatus(both, 200, "AUTH-HDR-1", "GET /accounts with both headers")
    const variants: ReadonlyArray<[string, Record<string, string>]> = [
      ["only x-api-key", { "x-api-key": tenant.credential.keyId }],
      ["only x-api-secret", { "x-api-secret": tenant.credential.secret }],
      ["a bearer token", { authorization: `Bearer ${tenant.credential.secret}` }],
      ["basic auth", { authorization: `Basic ${btoa(`${tenant.credential.keyId}:${tenant.credential.secret}`)}` }],
      // Not the real secret in the key header: key ids may be logged, and auth.secret.not-logged scans the logs.
      ["swapped headers", { "x-api-key": `${tenant.credential.secret.slice(0, -1)}#`, "x-api-secret": tenant.credential.keyId }]
    ]
    for (const [what, headers] of variants) {
      const result = await context.transport.send("GET", "/relay/v1/accounts", { headers })
      context.expectStatus(result, 401, ["AUTH-HDR-1", "AUTH-401-1"], `GET /accounts with ${what}`)
    }
  }
})

export const invalidCredentials = defineCheck({
  id: "auth.credentials.invalid",
  title: "Missing, malformed, unknown or wrong credentials get 401 on every endpoint",
  requirements: ["AUTH-401-1", "ERR-CODE-1"],
  tags: ["auth", "matrix"],
  needs: [],
  async run(context) {
    const tenant = await context.fixtures.tenant()
    const credentials: ReadonlyArray<[string, RelayClient]> = [
      ["no credentials", tenant.client.withCredential(undefined)],
      ["a wrong secret", tenant.client.withCredential({ keyId: tenant.credential.keyId, secret: tenant.credential.secret + "x" })],
      ["an empty secret", tenant.client.withCredential({ keyId: tenant.credential.keyId, secret: "" })],
      ["an unknown key", tenant.client.withCredential({ keyId: tenant.credential.keyId + "unknown", secret: tenant.credential.secret })],
      ["a malformed key", tenant.client.withCredential({ keyId: "%%%' OR 1=1", secret: "x" })],
      ["an oversized key", tenant.client.withCredential({ keyId: "k".repeat(4096), secret: "s".repeat(4096) })]
    ]
    for (const e of endpoints) {
      for (const [what, client] of credentials) {
        const result = await call(client, e, context)
        context.expectStatus(result, 401, "AUTH-401-1", `${e.method} ${e.path} with ${what}`)
      }
    }
  }
})

export const revokedCredentials = defineCheck({
  id: "auth.credentials.revoked",
  title: "A revoked credential gets 401 from the next request on",
  requirements: ["AUTH-401-1"],
  tags: ["auth", "matrix"],
  needs: ["control", "api-users.revoke"],
  async run(context) {
    const tenant = await context.fixtures.tenant()
    const before = await tenant.client.listAccounts()
    context.expectStatus(before, 200, "AUTH-401-1", "GET /accounts before revocation")
    await context.control.revokeApiUser(tenant.apiUser?.apiUserId ?? "")
    for (const e of endpoints) {
      const result = await call(tenant.client, e, context)
      context.expectStatus(result, 401, "AUTH-401-1", `${e.method} ${e.path} with a revoked credential`)
    }
  }
})

export const keyPrefix = defineCheck({
  id: "auth.key.prefix",
  title: "Key ids share a fixed service prefix and do not authenticate alone",
  requirements: ["AUTH-KEY-1"],
  tags: ["auth"],
  needs: ["control"],
  async run(context) {
    const tenant = await context.fixtures.tenant()
    const users: Array<Tenant> = [tenant]
    for (let index = 0; index < 3; index += 1) users.push(await context.fixtures.user(tenant, allPermissions))
    const other = await context.fixtures.otherTenant()
    users.push(other)
    const keys = users.map((user) => user.credential.keyId)
    let prefix = keys[0] ?? ""
    for (const key of keys) while (!key.startsWith(prefix)) prefix = prefix.slice(0, -1)
    context.expect(prefix.length >= 2, "AUTH-KEY-1", `key ids share no fixed prefix: ${keys.join(", ")}`)
    context.expect(new Set(keys).size === keys.length, "AUTH-KEY-1", "two API users got the same key id")
    for (const user of users) context.expect(user.credential.keyId !== user.credential.secret, "AUTH-KEY-1", "a key id equals its secret")
    const keyAlone = await tenant.client.withCredential({ keyId: tenant.credential.keyId, secret: tenant.credential.keyId }).listAccounts()
    context.expectStatus(keyAlone, 401, "AUTH-KEY-1", "the key id used as its own secret")
  }
})

/** How much of a secret an answer may not carry: an echo of a mistyped secret is all of it but a character. */
const SECRET_FRAGMENT = 16

/** The secret's runs of SECRET_FRAGMENT characters (the whole secret when it is shorter). */
const fragmentsOf = (secret: string): ReadonlyArray<string> =>
  secret.length <= SECRET_FRAGMENT ? [secret] : Array.from({ length: secret.length - SECRET_FRAGMENT + 1 }, (_, start) => secret.slice(start, start + SECRET_FRAGMENT))

/**
 * What of a secret an answer may not carry: the secret's runs of SECRET_FRAGMENT characters, and its SHA-256 in hex
 * and in base64 (an unsalted digest of a credential is credential material: it names the secret to anyone who can
 * try candidates, and is what many implementations store).
 */
const revealingFormsOf = async (secret: string): Promise<ReadonlyArray<string>> => {
  const digest = await sha256(secret)
  const base64 = btoa(String.fromCharCode(...digest))
  return [...fragmentsOf(secret), hexOf(digest), base64, base64.replace(/\+/g, "-").replace(/\//g, "_").replace(/=/g, "")]
}

/** Whether the answer's body or a header carries one of `forms` (see revealingFormsOf), in any case. */
const containsSecret = (result: HttpResult, forms: ReadonlyArray<string>): boolean => {
  const texts = [result.text]
  result.headers.forEach((value) => texts.push(value))
  return forms.some((form) => texts.some((text) => text.includes(form) || (/^[0-9a-f]+$/.test(form) && text.toLowerCase().includes(form))))
}

export const secretNotExposed = defineCheck({
  id: "auth.secret.not-exposed",
  title: "No answer (success or error, body or header) carries a secret",
  requirements: ["AUTH-SEC-1"],
  tags: ["auth", "security"],
  needs: ["control"],
  async run(context) {
    const tenant = await context.fixtures.tenant()
    const account = await context.fixtures.pendingAccount(tenant)
    const secrets = [tenant.credential.secret]
    const results: Array<HttpResult> = []
    for (const e of endpoints) {
      results.push(await call(tenant.client, e, context, { account: account.id }))
      results.push(await tenant.client.raw(e.method, endpointPath(e, "not-a-uuid"), e.method === "POST" ? "{bad json" : undefined))
      results.push(await tenant.client.raw(e.method, endpointPath(e, account.id), e.method === "POST" ? { amount: "1e-8", name: "" } : undefined))
    }
    const wrong = tenant.client.withCredential({ keyId: tenant.credential.keyId, secret: tenant.credential.secret.slice(0, -1) + "#" })
    results.push(await wrong.listAccounts())
    const restricted = await context.fixtures.user(tenant, [])
    secrets.push(restricted.credential.secret)
    for (const e of endpoints) results.push(await call(restricted.client, e, context, { account: account.id }))
    // A revoked credential's refusals: the one 401 an implementation may be tempted to explain with what it was sent.
    const revoked = await context.fixtures.user(tenant, ["View custody account"])
    if (revoked.apiUser !== undefined) {
      secrets.push(revoked.credential.secret)
      await context.control.revokeApiUser(revoked.apiUser.apiUserId)
      results.push(await revoked.client.listAccounts(), await revoked.client.getAccount(account.id))
    }
    const forms = await Promise.all(secrets.filter((secret) => secret.length >= 6).map(revealingFormsOf))
    for (const result of results) {
      for (const revealing of forms) {
        context.expect(!containsSecret(result, revealing), "AUTH-SEC-1", `the answer to ${result.exchange.method} ${result.exchange.path} carries an API secret, part of one, or its SHA-256`, result)
      }
    }
  }
})

export const secretNotLogged = defineCheck({
  id: "auth.secret.not-logged",
  title: "No log line the implementation wrote during the run carries a secret (read through the control's logs call)",
  requirements: ["AUTH-SEC-1"],
  tags: ["auth", "security"],
  needs: ["control", "logs"],
  async run(context) {
    // This check runs last: the logs since the doctor's call hold the lines of the whole run, scanned for every
    // secret the run was handed, plus wrong secrets sent on purpose here.
    const tenant = await context.fixtures.tenant()
    const account = await context.fixtures.pendingAccount(tenant)
    const wrongSecret = tenant.credential.secret.slice(0, -2) + "zz"
    const wrong = tenant.client.withCredential({ keyId: tenant.credential.keyId, secret: wrongSecret })
    const restricted = await context.fixtures.user(tenant, [])
    for (const e of endpoints) {
      await call(tenant.client, e, context, { account: account.id })
      await tenant.client.raw(e.method, endpointPath(e, "not-a-uuid"), e.method === "POST" ? "{bad json" : undefined)
      await call(wrong, e, context, { account: account.id })
      await call(restricted.client, e, context, { account: account.id })
    }
    const lines = await context.control.logs()
    const secrets = [...new Set([...context.runSecrets, tenant.credential.secret, restricted.credential.secret, wrongSecret])].filter((secret) => secret.length >= 8)
    for (const line of lines) {
      const leaked = secrets.find((secret) => line.includes(secret))
      if (leaked !== undefined) context.fail("AUTH-SEC-1", `a log line carries an API secret: ${line.replaceAll(leaked, "<the secret>").slice(0, 300)}`)
    }
  }
})

const isPermissionRefusal = (result: HttpResult): boolean =>
  result.status === 403 && isRecord(result.json) && String(result.json["message"]).startsWith("Missing required API scope")

export const permissionMatrix = defineCheck({
  id: "auth.permission.matrix",
  title: "Every endpoint x every missing permission: 403 with the exact body for its own, never for another; with only its own: served",
  requirements: ["AUTH-PERM-1", "ERR-CODE-1"],
  tags: ["auth", "matrix"],
  needs: ["control"],
  async run(context) {
    const tenant = await context.fixtures.tenant()
    const account = await context.fixtures.pendingAccount(tenant)
    // One user per missing permission, and one per sole permission.
    const lacking = new Map<string, Tenant>()
    const only = new Map<string, Tenant>()
    for (const permission of allPermissions) {
      lacking.set(permission, await context.fixtures.user(tenant, allPermissions.filter((candidate) => candidate !== permission)))
      only.set(permission, await context.fixtures.user(tenant, [permission]))
    }
    for (const e of endpoints) {
      for (const permission of allPermissions) {
        const user = lacking.get(permission)
        if (user === undefined) continue
        const result = await call(user.client, e, context, { account: account.id })
        if (permission !== e.permission) {
          context.expect(!isPermissionRefusal(result) && result.status !== 401, "AUTH-PERM-1", `${e.method} ${e.path} was refused for lacking "${permission}", which it does not need`, result)
          continue
        }
        context.expectStatus(result, 403, "AUTH-PERM-1", `${e.method} ${e.path} without "${e.permission}"`)
        const expected = `Missing required API scope: ${e.permission}`
        context.expect(
          isRecord(result.json) && Object.keys(result.json).length === 1 && result.json["message"] === expected,
          "AUTH-PERM-1",
          `${e.method} ${e.path}: the 403 body should be exactly ${JSON.stringify({ message: expected })}`,
          result
        )
      }
      const sole = only.get(e.permission)
      if (sole === undefined) continue
      const allowed = await call(sole.client, e, context, { account: account.id })
      context.expect(!isPermissionRefusal(allowed) && allowed.status !== 401, "AUTH-PERM-1", `${e.method} ${e.path} with only "${e.permission}" was refused with ${allowed.status}`, allowed)
    }
  }
})

export const permissionChange = defineCheck({
  id: "auth.permission.change",
  title: "A permission change applies to the next request",
  requirements: ["AUTH-PERM-2", "AUTH-PERM-1"],
  tags: ["auth"],
  needs: ["control", "api-users.permissions"],
  async run(context) {
    const tenant = await context.fixtures.tenant()
    const apiUserId = tenant.apiUser?.apiUserId ?? ""
    context.expectStatus(await tenant.client.listAccounts(), 200, "AUTH-PERM-2", "GET /accounts with every permission")
    await context.control.setPermissions(apiUserId, allPermissions.filter((permission) => permission !== permissions.viewAccount))
    const denied = await tenant.client.listAccounts()
    context.expectStatus(denied, 403, "AUTH-PERM-2", "GET /accounts right after the permission was withdrawn")
    await context.control.setPermissions(apiUserId, allPermissions)
    context.expectStatus(await tenant.client.listAccounts(), 200, "AUTH-PERM-2", "GET /accounts right after the permission was granted again")
  }
})

export const unscopedCredential = defineCheck({
  id: "auth.scope.unscoped",
  title: "A credential that is not client-scoped gets 403 on every endpoint",
  requirements: ["AUTH-SCOPE-1", "ERR-CODE-1"],
  tags: ["auth", "matrix"],
  needs: ["control"],
  async run(context) {
    const user = await context.control.createApiUser(null, allPermissions)
    const client = new RelayClient(context.transport, { keyId: user.keyId, secret: user.secret })
    for (const e of endpoints) {
      const result = await call(client, e, context)
      context.expectStatus(result, 403, "AUTH-SCOPE-1", `${e.method} ${e.path} with a credential that is not client-scoped`)
    }
  }
})

export const checkOrder = defineCheck({
  id: "auth.order",
  title: "Authentication before permission before validation",
  requirements: ["AUTH-ORDER-1"],
  tags: ["auth"],
  needs: ["control"],
  async run(context) {
    const tenant = await context.fixtures.tenant()
    const bad = tenant.client.withCredential({ keyId: tenant.credential.keyId, secret: "wrong-secret" })
    for (const e of endpoints.filter((candidate) => candidate.method === "POST")) {
      const badCredential = await bad.raw("POST", endpointPath(e), "{broken")
      if (badCredential.status !== 401) context.note("AUTH-ORDER-1", `${e.path}: bad credentials and a bad body should be 401, got ${badCredential.status}`, badCredential)
      const lacking = await context.fixtures.user(tenant, allPermissions.filter((permission) => permission !== e.permission))
      const noPermission = await lacking.client.raw("POST", endpointPath(e), "{broken")
      if (noPermission.status !== 403) context.note("AUTH-ORDER-1", `${e.path}: a missing permission and a bad body should be 403, got ${noPermission.status}`, noPermission)
      const allowed = await tenant.client.raw("POST", endpointPath(e), "{broken")
      if (allowed.status !== 400) context.note("AUTH-ORDER-1", `${e.path}: with the permission, a bad body should be 400, got ${allowed.status}`, allowed)
    }
  }
})

export const authChecks = [headerPair, invalidCredentials, revokedCredentials, keyPrefix, secretNotExposed, permissionMatrix, permissionChange, unscopedCredential, checkOrder]
