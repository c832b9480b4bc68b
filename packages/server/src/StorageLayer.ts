/**
 * Which storage a `database` setting names: a `postgres://` (or `postgresql://`) URL is PostgreSQL, anything else
 * a SQLite file path, with ":memory:" a private in-memory SQLite database. Each layer migrates its database when
 * it is built and closes it when released.
 */
import type { RateLimiter, Storage } from "@custody-relay/core"
import { layerPostgres, layerSqlite } from "@custody-relay/storage-sql"
import type { Layer } from "effect"

export type Engine = "sqlite" | "postgres"

export const engineOf = (database: string): Engine => (/^postgres(?:ql)?:\/\//i.test(database) ? "postgres" : "sqlite")

export const fromDatabase = (
  database: string
): Layer.Layer<Storage.Storage | RateLimiter.RateLimiter, Storage.StorageError> =>
  engineOf(database) === "postgres" ? layerPostgres({ connectionString: database }) : layerSqlite({ filename: database })
