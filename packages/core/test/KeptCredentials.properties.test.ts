/**
 * AUTH-PERM-2 on a store that keeps API users between requests, over random sequences: whatever was kept, and
 * however stale, every request is answered as the API user stands when it runs. The store here keeps the memory
 * store's API users the way Storage.KeptCredentials asks of a store: each unit of a request whose kept credential is
 * pending compares the row as it is now with the kept stamp first, confirming it or failing with CredentialChanged
 * before the unit runs. What is kept is chosen by the sequence: the row as it was at any earlier step.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Option, Redacted } from "effect"
import * as fc from "fast-check"
import { Administration, type ApiUser, Authentication, type Permission, Principal, Storage } from "@custody-relay/core"
import { layer, newClient } from "./TestWorld.js"

const VIEW: Permission.Permission = "View custody account"
const CREATE: Permission.Permission = "Initiate new custody account"

type Step =
  | { readonly kind: "permissions"; readonly view: boolean; readonly create: boolean }
  | { readonly kind: "revoke" }
  | { readonly kind: "keep"; readonly version: number }
  | { readonly kind: "request"; readonly needs: "view" | "create"; readonly unitFirst: boolean }

const step: fc.Arbitrary<Step> = fc.oneof(
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("permissions" as const), view: fc.boolean(), create: fc.boolean() }) },
  { weight: 1, arbitrary: fc.constant({ kind: "revoke" as const }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("keep" as const), version: fc.nat(20) }) },
  { weight: 5, arbitrary: fc.record({ kind: fc.constant("request" as const), needs: fc.constantFrom("view" as const, "create" as const), unitFirst: fc.boolean() }) }
)

const stampOf = (user: ApiUser.ApiUser): string => JSON.stringify(user)

/** The memory store, keeping `kept` and confirming a pending credential in each unit as a keeping store must. */
const keeping = (kept: Map<string, Storage.KeptApiUser>) => (memory: Storage.Storage["Service"]): Storage.Storage["Service"] => ({
  keptCredentials: { get: (keyId) => kept.get(keyId) },
  transaction: (mode, work) =>
    Effect.withFiber((fiber) => {
      const pending = fiber.getRef(Storage.CurrentCredential)
      if (pending === undefined || pending.confirmed) return memory.transaction(mode, work)
      return Effect.flatMap(memory.transaction("lookup", (unit) => unit.findApiUserByKeyId(pending.keyId)), (row) => {
        if (Option.isSome(row) && stampOf(row.value) === pending.stamp) {
          pending.confirmed = true
          return memory.transaction(mode, work)
        }
        return Effect.fail(new Storage.StorageError({ reason: new Storage.CredentialChanged({ message: "changed" }) }))
      })
    })
})

describe("Authentication on kept API users (properties)", () => {
  it("AUTH-PERM-2 AUTH-401-1: every request is answered as the API user stands when it runs, whatever was kept", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 30 }), async (steps) => {
        const kept = new Map<string, Storage.KeptApiUser>()
        const program = Effect.gen(function*() {
          const clientId = yield* newClient
          const issued = yield* Administration.createApiUser({ clientId, permissions: [VIEW] })
          const secret = Redacted.value(issued.secret)
          const current = Effect.map(Storage.run("lookup", (unit) => unit.findApiUserByKeyId(issued.keyId)), Option.getOrThrow)
          // Every version of the row so far, for `keep` to choose from.
          const versions: Array<ApiUser.ApiUser> = [yield* current]
          const model = { view: true, create: false, revoked: false }
          for (const s of steps) {
            if (s.kind === "permissions" && !model.revoked) {
              const permissions: Array<Permission.Permission> = [...(s.view ? [VIEW] : []), ...(s.create ? [CREATE] : [])]
              yield* Administration.setPermissions(issued.apiUserId, permissions)
              Object.assign(model, { view: s.view, create: s.create })
              versions.push(yield* current)
            } else if (s.kind === "revoke" && !model.revoked) {
              yield* Administration.revokeApiUser(issued.apiUserId)
              model.revoked = true
              versions.push(yield* current)
            } else if (s.kind === "keep") {
              const user = versions[s.version % versions.length]!
              kept.set(issued.keyId, { user, stamp: stampOf(user) })
            } else if (s.kind === "request") {
              // A request that reads storage before its permission check, or is refused before any unit.
              const operation = s.needs === "view" ? "accounts.get" : "accounts.create"
              const read = Effect.asVoid(Storage.run("lookup", (unit) => unit.getClient(clientId)))
              const exit = yield* Effect.exit(Authentication.authenticated(issued.keyId, secret, (principal) =>
                s.unitFirst
                  ? Effect.andThen(read, Effect.asVoid(Principal.authorize(principal, operation)))
                  : Effect.andThen(Principal.authorize(principal, operation), read)))
              const expected = model.revoked ? "Unauthenticated" : model[s.needs] ? "Success" : "PermissionDenied"
              const got = Exit.isSuccess(exit) ? "Success" : exit.cause.reasons[0]?._tag === "Fail" ? (exit.cause.reasons[0] as { error: { _tag: string } }).error._tag : "defect"
              assert.strictEqual(got, expected, JSON.stringify({ step: s, model }))
            }
          }
        })
        await Effect.runPromise(program.pipe(Effect.updateService(Storage.Storage, keeping(kept)), Effect.provide(layer())))
      }),
      { numRuns: 150 }
    )
  })
})
