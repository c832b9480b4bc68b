/**
 * The operator's command line against a running server (a process of its own) on the same database (a SQLite file,
 * and PostgreSQL): credentials created by `admin` answer 200; a permission change, a revocation and a rotated
 * secret apply to the server's next request (AUTH-PERM-2, AUTH-401-1); the secret is printed once and never
 * again (AUTH-SEC-1); `--json` for scripts; exit 1 for a refusal and 2 for a usage error.
 */
import { execFile } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { promisify } from "node:util"
import { afterAll, assert, describe, it } from "vitest"
import { runCommandLine } from "../src/OperatorCli.js"
import { sourceNodeArguments, startServer } from "./ServerProcess.js"
import { dropDatabases, hasPostgres, newPostgresDatabase, send } from "./Tenant.js"

const packageDir = fileURLToPath(new URL("..", import.meta.url))
const folder = mkdtempSync(join(tmpdir(), "relay-cli-"))
afterAll(async () => {
  rmSync(folder, { recursive: true, force: true })
  await dropDatabases()
})

interface Outcome {
  readonly code: number
  readonly stdout: string
  readonly stderr: string
}

/**
 * `custody-relay <args>` on the given database: in this process through the same entry the bin calls (each
 * command opens and closes the database as the bin does), while the server it talks past is a process of its own.
 * `asProcess` runs the bin itself (node on the sources) for what only a process shows: exit codes.
 */
const cli = async (database: string, ...args: ReadonlyArray<string>): Promise<Outcome> => {
  const out: Array<string> = []
  const err: Array<string> = []
  const withDatabase = args[0] === "admin" || args[0] === "migrate" ? [...args, "--database", database] : args
  const code = await runCommandLine(withDatabase, { stdout: (text) => void out.push(text), stderr: (text) => void err.push(text) })
  return { code, stdout: out.join(""), stderr: err.join("") }
}

const asProcess = (database: string, ...args: ReadonlyArray<string>): Promise<Outcome> =>
  promisify(execFile)(process.execPath, [...sourceNodeArguments, "src/main.ts", ...args], {
    cwd: packageDir,
    env: { ...process.env, RELAY_DATABASE: database, RELAY_LOG_LEVEL: "Warn" }
  }).then(
    ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
    (error: { code: number; stdout: string; stderr: string }) => ({ code: error.code, stdout: error.stdout, stderr: error.stderr })
  )

const json = <A>(outcome: Outcome): A => {
  assert.strictEqual(outcome.code, 0, outcome.stderr)
  return JSON.parse(outcome.stdout) as A
}

const scenario = (name: string, database: () => Promise<string>) =>
  describe(`custody-relay admin on ${name}`, () => {
    it("AUTH-PERM-2 AUTH-401-1 AUTH-SEC-1: credentials made, changed, rotated and revoked from the command line, seen by the running server on its next request", async () => {
      const url = await database()
      assert.strictEqual((await cli(url, "migrate")).code, 0)
      const server = await startServer({ RELAY_DATABASE: url, RELAY_DEMO: "never" })
      try {
        const client = json<{ id: string }>(await cli(url, "admin", "clients", "create", "--name", "Acme", "--json"))
        const created = await cli(url, "admin", "api-users", "create", "--client", client.id, "--permission", "View custody account", "--permission", "Initiate new custody account", "--name", "ops")
        assert.strictEqual(created.code, 0, created.stderr)
        const keyId = /key id: (\S+)/.exec(created.stdout)?.[1] ?? ""
        const secret = /secret: (\S+)/.exec(created.stdout)?.[1] ?? ""
        assert.match(created.stdout, /shown this once/)
        const as = (key: string, value: string) => ({ "x-api-key": key, "x-api-secret": value })
        assert.strictEqual((await send(`${server.url}/relay/v1/accounts`, "GET", as(keyId, secret))).status, 200)

        // The secret never appears again: not in the list, not in show.
        const listed = await cli(url, "admin", "api-users", "list", "--client", client.id)
        assert.include(listed.stdout, keyId)
        assert.notInclude(listed.stdout + (await cli(url, "admin", "api-users", "show", keyId)).stdout, secret)
        const users = json<ReadonlyArray<{ keyId: string; permissions: ReadonlyArray<string>; secretHash?: string }>>(await cli(url, "admin", "api-users", "list", "--json"))
        assert.deepStrictEqual(users.find((user) => user.keyId === keyId)?.permissions, ["View custody account", "Initiate new custody account"])
        assert.isUndefined(users[0]?.secretHash)

        assert.strictEqual((await cli(url, "admin", "api-users", "permissions", keyId, "--remove", "View custody account")).code, 0)
        const denied = await send(`${server.url}/relay/v1/accounts`, "GET", as(keyId, secret))
        assert.deepStrictEqual([denied.status, JSON.parse(denied.text)], [403, { message: "Missing required API scope: View custody account" }])
        assert.strictEqual((await cli(url, "admin", "api-users", "permissions", keyId, "--add", "View custody account")).code, 0)
        assert.strictEqual((await send(`${server.url}/relay/v1/accounts`, "GET", as(keyId, secret))).status, 200)

        const rotated = json<{ keyId: string; secret: string }>(await cli(url, "admin", "api-users", "rotate-secret", keyId, "--json"))
        assert.strictEqual(rotated.keyId, keyId)
        assert.strictEqual((await send(`${server.url}/relay/v1/accounts`, "GET", as(keyId, secret))).status, 401)
        assert.strictEqual((await send(`${server.url}/relay/v1/accounts`, "GET", as(keyId, rotated.secret))).status, 200)

        // Webhook subscriptions of the client: listed (never with a secret) and switched off and on by the operator.
        const hooks = json<{ keyId: string; secret: string }>(await cli(url, "admin", "api-users", "create", "--client", client.id, "--permission", "Manage webhooks", "--json"))
        const subscribed = await send(`${server.url}/relay/v1/webhooks`, "POST", as(hooks.keyId, hooks.secret), { url: "https://hooks.example.com/relay" })
        assert.strictEqual(subscribed.status, 201, subscribed.text)
        const subscription = JSON.parse(subscribed.text) as { id: string; secret: string }
        const listedHooks = await cli(url, "admin", "webhooks", "list", "--client", client.id)
        assert.include(listedHooks.stdout, subscription.id)
        assert.notInclude(listedHooks.stdout, subscription.secret)
        assert.strictEqual((await cli(url, "admin", "webhooks", "disable", subscription.id)).code, 0)
        const read = (await send(`${server.url}/relay/v1/webhooks/${subscription.id}`, "GET", as(hooks.keyId, hooks.secret)))
        assert.strictEqual((JSON.parse(read.text) as { enabled: boolean }).enabled, false)
        assert.strictEqual(json<{ enabled: boolean }>(await cli(url, "admin", "webhooks", "enable", subscription.id, "--json")).enabled, true)

        assert.strictEqual((await cli(url, "admin", "api-users", "revoke", keyId)).code, 0)
        assert.strictEqual((await send(`${server.url}/relay/v1/accounts`, "GET", as(keyId, rotated.secret))).status, 401)
        const again = await cli(url, "admin", "api-users", "rotate-secret", keyId)
        assert.deepStrictEqual([again.code, again.stderr.trim()], [1, "custody-relay: refused: apiUserId: the API user is revoked; create a new one"])
        assert.notInclude(server.output(), secret)
        assert.notInclude(server.output(), rotated.secret)
      } finally {
        await server.stop()
      }
    }, 120_000)

    it("LIM-RATE-1 LIM-RATE-2: an API user's own budget given, changed and taken away from the command line, counted by the running server from the user's next request", async () => {
      const url = await database()
      assert.strictEqual((await cli(url, "migrate")).code, 0)
      const server = await startServer({ RELAY_DATABASE: url, RELAY_DEMO: "never", RELAY_RATE_LIMIT: "500", RELAY_RATE_WINDOW_SECONDS: "60" })
      try {
        const client = json<{ id: string }>(await cli(url, "admin", "clients", "create", "--json"))
        // A day's window: the test's requests all fall in one (unless it runs across midnight UTC).
        const user = json<{ keyId: string; secret: string }>(
          await cli(url, "admin", "api-users", "create", "--client", client.id, "--permission", "View custody account", "--limit", "1000", "--window", "86400", "--json")
        )
        const get = async () => {
          const response = await fetch(`${server.url}/relay/v1/accounts`, { headers: { "x-api-key": user.keyId, "x-api-secret": user.secret } })
          await response.text()
          return [response.status, response.headers.get("x-ratelimit-limit"), response.headers.get("x-ratelimit-remaining")]
        }
        assert.deepStrictEqual(await get(), [200, "1000", "999"])
        assert.include((await cli(url, "admin", "api-users", "show", user.keyId)).stdout, "rate limit: 1000 a 86400 s window")

        const lowered = await cli(url, "admin", "api-users", "rate-limit", user.keyId, "--limit", "4", "--window", "86400")
        assert.deepStrictEqual([lowered.code, lowered.stdout], [0, `${user.keyId}: rate limit 4 a 86400 s window, from its next request on\n`])
        // The window keeps its count: the next request is its second, two left, then 429. On PostgreSQL that request
        // runs twice, first on the API user as the server kept it, then on the changed one (Authentication.onKept),
        // and is still counted once.
        assert.deepStrictEqual(await get(), [200, "4", "2"])
        assert.deepStrictEqual(await get(), [200, "4", "1"])
        assert.deepStrictEqual(await get(), [200, "4", "0"])
        assert.deepStrictEqual(await get(), [429, "4", "0"])
        assert.include((await cli(url, "admin", "api-users", "list", "--client", client.id)).stdout, "4 a 86400 s window")

        // Refused, and the budget stands: out of bounds or not a number (exit 1), or an incomplete invocation (exit 2).
        for (const [args, code] of [[["--limit", "0", "--window", "60"], 1], [["--limit", "ten", "--window", "60"], 1], [["--limit", "5", "--window", "86401"], 1], [["--limit", "5"], 2], [[], 2], [["--default", "--limit", "5", "--window", "60"], 2]] as const) {
          const refused = await cli(url, "admin", "api-users", "rate-limit", user.keyId, ...args)
          assert.strictEqual(refused.code, code, `${args.join(" ")}: ${refused.stderr}`)
          if (code === 1) assert.include(refused.stderr, "rateLimit: limit must be a whole number from 1", args.join(" "))
        }
        assert.deepStrictEqual(await get(), [429, "4", "0"])

        const restored = json<{ rateLimit?: unknown }>(await cli(url, "admin", "api-users", "rate-limit", user.keyId, "--default", "--json"))
        assert.isUndefined(restored.rateLimit)
        assert.deepStrictEqual((await get()).slice(0, 2), [200, "500"])
        assert.include((await cli(url, "admin", "api-users", "show", user.keyId)).stdout, "rate limit: the default")
      } finally {
        await server.stop()
      }
    }, 120_000)
  })

scenario("a SQLite file", async () => join(folder, "relay.db"))
if (!hasPostgres) console.log("OperatorCli on PostgreSQL: skipped, RELAY_TEST_PG_URL is not set")
if (hasPostgres) scenario("PostgreSQL", newPostgresDatabase)

describe("custody-relay: help, refusals and usage errors", () => {
  const database = join(folder, "other.db")

  it("the bin as a process: --help exit 0, a refusal exit 1, a usage error exit 2", async () => {
    assert.strictEqual((await asProcess(database, "--help")).code, 0)
    assert.strictEqual((await asProcess(database, "admin", "api-users", "revoke", "crk_00000000000000000000000000000000")).code, 1)
    assert.strictEqual((await asProcess(database, "frobnicate")).code, 2)
  })

  it("--help for the command and each subcommand, exit 0", async () => {
    for (const args of [["--help"], ["admin", "--help"], ["migrate", "--help"], ["serve", "--help"]]) {
      const outcome = await cli(database, ...args)
      assert.strictEqual(outcome.code, 0, args.join(" "))
      assert.match(outcome.stdout, /^custody-relay/)
    }
  })

  it("an unknown id, an unknown permission name and an unknown client are refused with exit 1 and a message", async () => {
    const unknownKey = await cli(database, "admin", "api-users", "revoke", "crk_00000000000000000000000000000000")
    assert.deepStrictEqual([unknownKey.code, unknownKey.stderr.trim()], [1, "custody-relay: refused: no api_user crk_00000000000000000000000000000000"])
    const client = json<{ id: string }>(await cli(database, "admin", "clients", "create", "--json"))
    const badPermission = await cli(database, "admin", "api-users", "create", "--client", client.id, "--permission", "View everything")
    assert.strictEqual(badPermission.code, 1)
    assert.match(badPermission.stderr, /unknown permission "View everything"; the permissions are: ".+", ".+"/)
    const noClient = await cli(database, "admin", "api-users", "create", "--client", "01a20bd4-2dbf-73c8-8dc7-7f0bc6e20973", "--all-permissions")
    assert.strictEqual(noClient.code, 1)
    assert.include(noClient.stderr, "refused: no client")
  })

  it("a wrong invocation is a usage error: exit 2 with the command's usage", async () => {
    for (const args of [["frobnicate"], ["admin", "clients", "delete"], ["admin", "api-users", "create"], ["admin", "api-users", "permissions", "crk_x"], ["admin", "clients", "list", "--colour"]]) {
      const outcome = await cli(database, ...args)
      assert.strictEqual(outcome.code, 2, `${args.join(" ")}: ${outcome.stderr}`)
      assert.match(outcome.stderr, /^custody-relay: .+\n\ncustody-relay/)
    }
  })
})
