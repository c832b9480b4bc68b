/**
 * `custody-relay serve` (and `custody-relay` alone, `pnpm start`): the relay on node:http. SQLite file
 * ./data/relay.db by default, on 127.0.0.1:8080; configuration from the environment (see docs/server.md). On a
 * first start it seeds demo data and prints the demo credentials once. SIGTERM or SIGINT stops accepting
 * connections, lets requests in flight finish, then closes the database.
 */
import { existsSync, mkdirSync } from "node:fs"
import { dirname, isAbsolute, resolve } from "node:path"
import { normalizeBasePath } from "@custody-relay/http"
import { serve as listen } from "@custody-relay/http/node"
import { createRelay } from "./createRelay.js"
import type { ServerConfig } from "./ServerConfig.js"
import { engineOf } from "./StorageLayer.js"
import { demoText, seedDemo } from "./seedDemo.js"

/**
 * A SQLite path as the operator meant it: `pnpm start` runs in packages/server, so a relative path is relative
 * to where the command was typed (pnpm and npm pass that directory as INIT_CWD) and ./data/relay.db lands in the
 * repository's ./data. URLs and ":memory:" are left as they are.
 */
export const resolveDatabase = (database: string): string =>
  engineOf(database) === "sqlite" && database !== ":memory:" && !isAbsolute(database) ? resolve(process.env["INIT_CWD"] ?? process.cwd(), database) : database

export const serve = async (settings: ServerConfig): Promise<void> => {
  const engine = engineOf(settings.database)
  const isFile = engine === "sqlite" && settings.database !== ":memory:"
  const config = { ...settings, database: resolveDatabase(settings.database) }
  const fresh = isFile ? !existsSync(config.database) : config.database === ":memory:"
  if (isFile) mkdirSync(dirname(config.database), { recursive: true })

  const relay = await createRelay({
    database: config.database,
    rateLimit: config.rateLimit,
    ...(config.rateLimitStore === undefined ? {} : { rateLimitStore: config.rateLimitStore }),
    defaultRequiredApprovals: config.defaultRequiredApprovals,
    logLevel: config.logLevel,
    slowReadMillis: config.logSlowReadMillis,
    provider: config.simulatedProvider === "manual" ? "manual" : {
      policyMillis: config.simulatedStepMillis,
      broadcastMillis: config.simulatedStepMillis,
      confirmationMillis: config.simulatedStepMillis,
      addressReviewMillis: config.simulatedStepMillis,
      failureShare: config.simulatedFailurePercent / 100
    },
    providerPollMillis: config.providerPollMillis,
    idempotencyKeyTtlSeconds: config.idempotencyKeyTtlSeconds,
    outboxEntryRetentionSeconds: config.outboxEntryRetentionSeconds,
    webhookDeliveryRetentionSeconds: config.webhookDeliveryRetentionSeconds,
    outbox: { concurrency: config.outboxConcurrency },
    webhooks: { allowPrivateTargets: config.webhooksAllowPrivateTargets },
    databaseSettings: {
      startupTimeoutMillis: config.databaseStartupTimeoutSeconds * 1000,
      ...(config.redisUrl === undefined ? {} : { redisUrl: config.redisUrl }),
      redis: { commandTimeoutMillis: config.redisTimeoutMillis, failOpen: config.redisFailOpen },
      rateLimitSyncMillis: config.rateLimitSyncMillis,
      rateLimitTimeoutMillis: config.rateLimitTimeoutMillis,
      maxConcurrentTrailCounts: config.postgres.trailCountsAtOnce,
      pool: {
        max: config.postgres.poolMax,
        readReserve: config.postgres.readReserve,
        connectionTimeoutMillis: config.postgres.connectionTimeoutMillis,
        lockTimeoutMillis: config.postgres.lockTimeoutMillis,
        statementTimeoutMillis: config.postgres.statementTimeoutMillis,
        replyTimeoutMillis: config.postgres.replyTimeoutMillis,
        idleInTransactionTimeoutMillis: config.postgres.idleInTransactionTimeoutMillis,
        preparedStatements: config.postgres.preparedStatements
      }
    },
    ...(config.controlToken === undefined ? {} : { controlToken: config.controlToken }),
    basePath: config.basePath,
    ...(config.corsOrigins === undefined ? {} : { cors: { origins: config.corsOrigins } })
  })
  const listening = await listen(relay.handler, { port: config.port, host: config.host, requestTimeoutMillis: config.requestTimeoutMillis })
  const where = engine === "postgres" ? "PostgreSQL" : config.database === ":memory:" ? "in-memory SQLite" : `SQLite ${config.database}`
  process.stdout.write(`custody-relay listening on ${listening.url} (${where})\n`)
  process.stdout.write("custody provider: the embedded simulation (no custody platform connected; transfers reach no chain)\n")
  if (config.controlToken !== undefined) {
    process.stdout.write(`test control protocol mounted at ${listening.url}${normalizeBasePath(config.basePath)}/__control (RELAY_TEST_CONTROL_TOKEN is set)\n`)
  }

  if (config.demo === "always" || (config.demo === "auto" && fresh)) {
    process.stdout.write(demoText(await relay.handler.runtime.runPromise(seedDemo), `${listening.url}${normalizeBasePath(config.basePath)}`))
  } else {
    // A restart shows no secret again (only their hashes are stored): say so, and how to get a fresh demo. A new
    // database left without the demo (RELAY_DEMO=never) holds nothing to keep.
    const fresher = isFile ? `remove ${config.database} and start again, or ` : ""
    const held = fresh
      ? "No demo data (RELAY_DEMO=never); create credentials with `custody-relay admin` (docs/server.md)."
      : `Existing data kept; API secrets are shown only when they are created. For new demo credentials: ${fresher}start with RELAY_DEMO=always.`
    process.stdout.write(
      `API reference: ${listening.url}${normalizeBasePath(config.basePath)}/docs (OpenAPI document: ${listening.url}${normalizeBasePath(config.basePath)}/relay/v1/openapi.json)\n${held}\n`
    )
  }

  let stopping = false
  const stop = (signal: string) => {
    if (stopping) return
    stopping = true
    process.stdout.write(`${signal}: finishing requests in flight, then closing the database\n`)
    void listening.close()
      .then(() => relay.close())
      .then(() => {
        process.stdout.write("custody-relay stopped\n")
        process.exit(0)
      })
  }
  process.once("SIGTERM", () => stop("SIGTERM"))
  process.once("SIGINT", () => stop("SIGINT"))
  // Only now: a supervisor may signal the moment it reads this line, and the stop must already be in place.
  process.stdout.write("custody-relay ready\n")
}

