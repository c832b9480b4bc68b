/**
 * Where a proof's shared store lives: a SQLite file in a fresh directory, or a fresh PostgreSQL database; both
 * removed when the test's scope ends. Filtered like every SQL test (see Dialects).
 */
import { join } from "node:path"
import { Effect, type Scope } from "effect"
import { isWanted, postgresSkipReason, temporaryDirectory, temporaryPostgresDatabase } from "./Dialects.js"
import type { ProofTarget } from "./proofs/ProofWorld.js"

export interface ProofEngine {
  readonly name: "sqlite-file" | "postgres"
  readonly skip: boolean
  readonly target: Effect.Effect<ProofTarget, never, Scope.Scope>
}

export const proofEngines: ReadonlyArray<ProofEngine> = [
  {
    name: "sqlite-file",
    skip: !isWanted("sqlite-file"),
    target: Effect.map(temporaryDirectory, (directory) => ({ engine: "sqlite" as const, filename: join(directory, "relay.db") }))
  },
  {
    name: "postgres",
    skip: !isWanted("postgres") || postgresSkipReason !== undefined,
    target: Effect.map(temporaryPostgresDatabase, ({ url }) => ({ engine: "postgres" as const, url }))
  }
]
