/**
 * Settings an operator changes at run time and every node must see alike, kept with the data: a small named
 * store joined in a unit of work like every store. The one setting today is the request budget new API users
 * get (`Administration.setRateLimitForNewApiUsers`).
 */
import type { Effect, Option } from "effect"
import type { StorageError } from "./Storage.js"

type Op<A> = Effect.Effect<A, StorageError>

export interface SettingsStore {
  /** The setting's value as stored (JSON text), if it was ever set. */
  readonly getSetting: (name: string) => Op<Option.Option<string>>
  readonly putSetting: (name: string, value: string) => Op<void>
}

/** The request budget API users created from now on get; unset: the deployment's policy. */
export const RATE_LIMIT_FOR_NEW_API_USERS = "rate-limit-for-new-api-users"
