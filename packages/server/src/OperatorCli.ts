/**
 * The `custody-relay` command: `serve` (the default), `migrate`, and `admin` for what an operator of a deployment
 * needs and the interface does not offer: clients, API users with their permissions, revocation and secret
 * rotation. Each admin command opens the same database the server uses (RELAY_DATABASE, or --database), runs one
 * core administration operation, and closes it; a running server sees the change on its next request
 * (AUTH-PERM-2), since permissions and credentials are read on every request.
 *
 * A secret is printed exactly once, when it is created or rotated (AUTH-SEC-1). Exit codes: 0 done, 1 refused
 * (an unknown id, a permission name that does not exist, a revoked user), 2 a usage error. `--json` prints one
 * JSON document on stdout for scripts.
 */
import { parseArgs } from "node:util"
import { Administration, Permission, type RateLimiter, Relay, Webhooks } from "@custody-relay/core"
import { Cause, Effect, Exit, ManagedRuntime, Option, Redacted } from "effect"
import { nodeSecretDigest } from "./NodeSecretDigest.js"
import { resolveDatabase, serve } from "./Serve.js"
import { configFromEnv } from "./ServerConfig.js"
import * as StorageLayer from "./StorageLayer.js"

export interface CliIo {
  readonly stdout: (text: string) => void
  readonly stderr: (text: string) => void
}

const processIo: CliIo = { stdout: (text) => process.stdout.write(text), stderr: (text) => process.stderr.write(text) }

/** A wrong invocation: printed with the command's usage, exit 2. */
class UsageError extends Error {}

const helps: Readonly<Record<string, string>> = {
  main: `custody-relay [command]

Commands:
  serve                 run the relay (the default): configuration from the environment, see docs/server.md
  migrate               bring the database to the latest schema and exit
  admin <resource> ...  manage clients and API users of a deployment (custody-relay admin --help)

Options:
  --help                this text; every command has its own
`,
  serve: `custody-relay serve

Runs the relay on node:http. Configuration from the environment (PORT, HOST, RELAY_DATABASE, RELAY_RATE_LIMIT, ...);
see docs/server.md. SIGTERM or SIGINT finishes the requests in flight, then stops.
`,
  migrate: `custody-relay migrate [--database URL|PATH] [--json]

Brings the database (RELAY_DATABASE, or --database: a SQLite path or a postgres:// URL) to the latest schema and
exits. The server migrates at start too; run this first when several nodes start at once or the schema must be
ready before traffic.
`,
  admin: `custody-relay admin <resource> <action> [options]

  admin clients create [--name NAME]
  admin clients list
  admin api-users create --client CLIENT_ID --permission NAME [--permission NAME ...] [--all-permissions] [--name NAME]
                        [--limit N --window SECONDS]
  admin api-users list [--client CLIENT_ID]
  admin api-users show KEY_ID|API_USER_ID
  admin api-users permissions KEY_ID|API_USER_ID (--set NAME [--set NAME ...] | --add NAME [--add NAME ...] | --remove NAME [--remove NAME ...])
  admin api-users rate-limit KEY_ID|API_USER_ID (--limit N --window SECONDS | --default)
  admin api-users revoke KEY_ID|API_USER_ID
  admin api-users rotate-secret KEY_ID|API_USER_ID
  admin webhooks list --client CLIENT_ID
  admin webhooks disable|enable SUBSCRIPTION_ID

Every admin command takes:
  --database URL|PATH   the database (default: RELAY_DATABASE, else ./data/relay.db)
  --json                one JSON document on stdout, for scripts
  --help                this text

A secret is printed once, by create and rotate-secret: hand it to its owner, it cannot be shown again.
Permission names are the interface's, quoted: --permission "View custody account". --limit and --window give an
API user a request budget of its own (at most N requests in each window of SECONDS, 1 to 86400); without them it
gets the one set for new API users, else the deployment's (RELAY_RATE_LIMIT). rate-limit changes it, or with
--default takes it away; the running server counts the user's next request against the new one. Exit codes: 0 done,
1 refused (unknown id, unknown permission name, revoked user, a budget out of bounds), 2 usage error.
`
}

const commonOptions = {
  database: { type: "string" },
  json: { type: "boolean" },
  help: { type: "boolean" }
} as const

const adminOptions = {
  ...commonOptions,
  name: { type: "string" },
  client: { type: "string" },
  permission: { type: "string", multiple: true },
  "all-permissions": { type: "boolean" },
  set: { type: "string", multiple: true },
  add: { type: "string", multiple: true },
  remove: { type: "string", multiple: true },
  limit: { type: "string" },
  window: { type: "string" },
  default: { type: "boolean" }
} as const

const permissionsOf = (names: ReadonlyArray<string> | undefined): Array<Permission.Permission> => {
  const refusal = Permission.refusalOf(names ?? [])
  if (refusal !== undefined) throw new RelayRefusal(refusal)
  return (names ?? []) as Array<Permission.Permission>
}

/**
 * The budget --limit and --window give, or undefined when neither is given. Their numbers are the core's to check
 * (Administration.requireRateLimit: whole, within bounds); text that is not a number reaches it as NaN and is refused
 * there with the same message.
 */
const budgetOf = (values: { readonly limit?: string | undefined; readonly window?: string | undefined }) => {
  if (values.limit === undefined && values.window === undefined) return undefined
  if (values.limit === undefined || values.window === undefined) throw new UsageError("give --limit N and --window SECONDS together")
  const number = (text: string) => (text.trim() === "" ? Number.NaN : Number(text))
  return { limit: number(values.limit), windowSeconds: number(values.window) }
}

const budgetText = (rateLimit: RateLimiter.RateLimitPolicy | undefined) =>
  rateLimit === undefined ? "the default" : `${rateLimit.limit} a ${rateLimit.windowSeconds} s window`

/** A refusal the CLI itself makes before reaching the core (exit 1, like the core's refusals). */
class RelayRefusal extends Error {}

type Runtime = ManagedRuntime.ManagedRuntime<Relay.RelayServices, unknown>

const openDatabase = (database: string): Runtime =>
  ManagedRuntime.make(Relay.layer(StorageLayer.fromDatabase(resolveDatabase(database), "memory"), { secretDigest: nodeSecretDigest })) as Runtime

/** Runs one core operation; a refusal (a tagged relay error) becomes a RelayRefusal with its message. */
const run = async <A>(runtime: Runtime, effect: Effect.Effect<A, unknown, Relay.RelayServices>): Promise<A> => {
  const exit = await runtime.runPromiseExit(effect)
  if (Exit.isSuccess(exit)) return exit.value
  // The error channel holds the domain's refusals and StorageError; the latter (and any defect) is not a refusal.
  const failure = Option.getOrUndefined(Cause.findErrorOption(exit.cause))
  const tag = typeof failure === "object" && failure !== null && "_tag" in failure ? String(failure._tag) : undefined
  if (tag !== undefined && tag !== "StorageError") throw new RelayRefusal(describeRefusal(failure))
  throw new Error(Cause.pretty(exit.cause))
}

const describeRefusal = (refusal: unknown): string => {
  const tagged = refusal as { readonly _tag: string; readonly message?: string; readonly resource?: string; readonly id?: string }
  if (tagged._tag === "NotFound") return `no ${tagged.resource ?? "record"} ${tagged.id ?? ""}`.trim()
  return tagged.message !== undefined && tagged.message !== "" ? tagged.message : tagged._tag
}

const table = (rows: ReadonlyArray<ReadonlyArray<string>>): string => {
  const widths = rows[0]?.map((_, column) => Math.max(...rows.map((row) => (row[column] ?? "").length))) ?? []
  return rows.map((row) => row.map((cell, column) => (column === row.length - 1 ? cell : cell.padEnd(widths[column] ?? 0))).join("  ")).join("\n") + "\n"
}

const admin = async (args: ReadonlyArray<string>, io: CliIo): Promise<number> => {
  const { values, positionals } = parseArgs({ args: [...args], options: adminOptions, allowPositionals: true, strict: true })
  if (values.help === true || positionals.length === 0) {
    io.stdout(helps["admin"] ?? "")
    return values.help === true ? 0 : 2
  }
  const [resource, action, target, ...extra] = positionals
  if (extra.length > 0) throw new UsageError(`unexpected arguments: ${extra.join(" ")}`)
  const json = values.json === true
  const print = (value: unknown, text: string) => io.stdout(json ? JSON.stringify(value, null, 2) + "\n" : text)
  const needTarget = (): string => {
    if (target === undefined) throw new UsageError(`admin ${resource} ${action} needs a key id or API user id`)
    return target
  }
  const runtime = openDatabase(values.database ?? configFromEnv().database)
  try {
    switch (`${resource} ${action}`) {
      case "clients create": {
        const client = await run(runtime, Administration.createClient(values.name))
        print(client, `client ${client.id} (${client.name}) created\n`)
        return 0
      }
      case "clients list": {
        const clients = await run(runtime, Administration.listClients())
        print(clients, table([["ID", "NAME", "CREATED"], ...clients.map((client) => [client.id, client.name, client.createdAt])]))
        return 0
      }
      case "api-users create": {
        if (values.client === undefined) throw new UsageError("admin api-users create needs --client CLIENT_ID")
        const permissions = values["all-permissions"] === true ? [...Permission.permissionNames] : permissionsOf(values.permission)
        if (permissions.length === 0) throw new UsageError("give at least one --permission NAME, or --all-permissions")
        const rateLimit = budgetOf(values)
        const issued = await run(runtime, Administration.createApiUser({
          clientId: values.client,
          permissions,
          ...(values.name === undefined ? {} : { name: values.name }),
          ...(rateLimit === undefined ? {} : { rateLimit })
        }))
        const secret = Redacted.value(issued.secret)
        print(
          { apiUserId: issued.apiUserId, keyId: issued.keyId, secret, permissions },
          `API user ${issued.apiUserId} created\n  key id: ${issued.keyId}\n  secret: ${secret}\nThe secret is shown this once; hand it to its owner.\n`
        )
        return 0
      }
      case "api-users list": {
        const users = await run(runtime, Administration.listApiUsers(values.client))
        print(
          users,
          table([
            ["KEY ID", "API USER ID", "CLIENT", "NAME", "STATE", "RATE LIMIT", "PERMISSIONS"],
            ...users.map((user) => [user.keyId, user.id, user.clientId ?? "(none)", user.name, user.revokedAt === null ? "active" : "revoked", budgetText(user.rateLimit), user.permissions.join("; ")])
          ])
        )
        return 0
      }
      case "api-users show": {
        const user = await run(runtime, Administration.findApiUser(needTarget()))
        print(user, `${user.keyId}  ${user.id}\n  client: ${user.clientId ?? "(none)"}\n  name: ${user.name}\n  state: ${user.revokedAt === null ? "active" : `revoked at ${user.revokedAt}`}\n  rate limit: ${budgetText(user.rateLimit)}\n  permissions: ${user.permissions.join("; ") || "(none)"}\n`)
        return 0
      }
      case "api-users permissions": {
        const given = [values.set, values.add, values.remove].filter((list) => list !== undefined)
        if (given.length !== 1) throw new UsageError("give exactly one of --set, --add or --remove (each repeatable)")
        const user = await run(runtime, Administration.findApiUser(needTarget()))
        const next = values.set !== undefined
          ? permissionsOf(values.set)
          : values.add !== undefined
          ? [...new Set([...user.permissions, ...permissionsOf(values.add)])]
          : user.permissions.filter((permission) => !permissionsOf(values.remove).includes(permission))
        const updated = await run(runtime, Administration.setPermissions(user.id, next))
        print(Administration.apiUserView(updated), `${updated.keyId}: ${updated.permissions.join("; ") || "(no permission)"}\n`)
        return 0
      }
      case "api-users rate-limit": {
        const rateLimit = budgetOf(values)
        if ((rateLimit === undefined) === (values.default !== true)) throw new UsageError("give either --limit N --window SECONDS, or --default")
        const user = await run(runtime, Administration.findApiUser(needTarget()))
        const updated = await run(runtime, Administration.setRateLimit(user.id, rateLimit ?? null))
        print(Administration.apiUserView(updated), `${updated.keyId}: rate limit ${budgetText(updated.rateLimit)}, from its next request on\n`)
        return 0
      }
      case "api-users revoke": {
        const user = await run(runtime, Administration.findApiUser(needTarget()))
        const revoked = await run(runtime, Administration.revokeApiUser(user.id))
        print(Administration.apiUserView(revoked), `${revoked.keyId} revoked: refused from the next request on\n`)
        return 0
      }
      case "api-users rotate-secret": {
        const user = await run(runtime, Administration.findApiUser(needTarget()))
        const issued = await run(runtime, Administration.rotateSecret(user.id))
        const secret = Redacted.value(issued.secret)
        print(
          { apiUserId: issued.apiUserId, keyId: issued.keyId, secret },
          `${issued.keyId}: new secret\n  secret: ${secret}\nThe old secret is refused from the next request on; this one is shown this once.\n`
        )
        return 0
      }
      case "webhooks list": {
        if (values.client === undefined) throw new UsageError("admin webhooks list needs --client CLIENT_ID")
        const subscriptions = await run(runtime, Webhooks.listOfClient(values.client))
        print(subscriptions, table([["ID", "STATE", "URL", "EVENTS"], ...subscriptions.map((s) => [s.id, s.enabled ? "enabled" : `disabled${s.disabledReason === null ? "" : ` (${s.disabledReason})`}`, s.url, s.eventTypes.length === 0 ? "(all)" : s.eventTypes.join(", ")])]))
        return 0
      }
      case "webhooks disable":
      case "webhooks enable": {
        if (target === undefined) throw new UsageError(`admin webhooks ${action} needs a subscription id`)
        const updated = await run(runtime, Webhooks.setEnabledByOperator(target, action === "enable"))
        print(updated, `${updated.id} ${updated.enabled ? "enabled" : "disabled"}\n`)
        return 0
      }
      default:
        throw new UsageError(`unknown admin command: ${[resource, action].filter((word) => word !== undefined).join(" ")}`)
    }
  } finally {
    await runtime.dispose()
  }
}

const migrate = async (args: ReadonlyArray<string>, io: CliIo): Promise<number> => {
  const { values } = parseArgs({ args: [...args], options: commonOptions, strict: true })
  if (values.help === true) {
    io.stdout(helps["migrate"] ?? "")
    return 0
  }
  const database = values.database ?? configFromEnv().database
  const runtime = openDatabase(database)
  try {
    // Building the storage layer migrates the database to the latest schema (under an advisory lock on PostgreSQL).
    await runtime.runPromise(Effect.void)
  } finally {
    await runtime.dispose()
  }
  const where = StorageLayer.engineOf(database) === "postgres" ? "PostgreSQL" : resolveDatabase(database)
  io.stdout(values.json === true ? JSON.stringify({ migrated: true, engine: StorageLayer.engineOf(database) }) + "\n" : `${where}: migrated to the latest schema\n`)
  return 0
}

/** Runs the command line; resolves to the exit code (`serve` keeps running and resolves when it has started). */
export const runCommandLine = async (argv: ReadonlyArray<string>, io: CliIo = processIo): Promise<number> => {
  const [command, ...rest] = argv
  try {
    switch (command) {
      case undefined:
      case "serve": {
        if (rest.includes("--help")) {
          io.stdout(helps["serve"] ?? "")
          return 0
        }
        if (rest.length > 0) throw new UsageError(`serve takes no arguments (configuration is the environment): ${rest.join(" ")}`)
        try {
          await serve(configFromEnv())
        } catch (error) {
          io.stderr(`custody-relay failed to start: ${error instanceof Error ? error.message : String(error)}\n`)
          return 1
        }
        return 0
      }
      case "migrate":
        return await migrate(rest, io)
      case "admin":
        return await admin(rest, io)
      case "--help":
      case "-h":
      case "help":
        io.stdout(helps["main"] ?? "")
        return 0
      default:
        throw new UsageError(`unknown command: ${command}`)
    }
  } catch (error) {
    if (error instanceof UsageError || (error instanceof TypeError && "code" in error && String(error.code).startsWith("ERR_PARSE_ARGS"))) {
      io.stderr(`custody-relay: ${error.message}\n\n${helps[command === "admin" || command === "migrate" || command === "serve" ? command : "main"] ?? ""}`)
      return 2
    }
    if (error instanceof RelayRefusal) {
      io.stderr(`custody-relay: refused: ${error.message}\n`)
      return 1
    }
    throw error
  }
}
