/**
 * The one SQLite connection's turnstile: whoever holds it owns the connection, and so the transaction open on it.
 * Two kinds of holder share it: kysely's driver (migrations, the SQL rate limiter, tools), which waits for it in
 * `acquireConnection`, and the storage's direct sessions (SqliteSession), which take it synchronously when it is
 * free, the common case, and otherwise queue in order. Without it one holder's statements could run inside the
 * other's transaction.
 */
import { Effect } from "effect"

export class ConnectionGate {
  #held = false
  readonly #waiting: Array<() => void> = []

  /** Takes the gate if it is free; true when taken. */
  tryTake(): boolean {
    if (this.#held) return false
    this.#held = true
    return true
  }

  /** Waits for the gate (first come, first served). */
  take(): Promise<void> {
    if (this.tryTake()) return Promise.resolve()
    return new Promise((resolve) => this.#waiting.push(resolve))
  }

  /** The gate as an Effect: no suspension when it is free; an interrupted waiter leaves the queue. */
  readonly takeEffect: Effect.Effect<void> = Effect.suspend(() =>
    this.tryTake()
      ? Effect.void
      : Effect.callback<void>((resume) => {
        const wake = () => resume(Effect.void)
        this.#waiting.push(wake)
        return Effect.sync(() => {
          const index = this.#waiting.indexOf(wake)
          if (index >= 0) this.#waiting.splice(index, 1)
          // Handed over just as the waiter was interrupted: pass it on rather than hold it forever.
          else this.give()
        })
      })
  )

  /** Hands the gate to the next waiter, or frees it. */
  give(): void {
    const next = this.#waiting.shift()
    if (next === undefined) this.#held = false
    else next()
  }
}
